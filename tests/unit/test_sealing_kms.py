"""The KMS key ring (``sealing/kms.py``): what it asks KMS, and what it answers itself.

Flows are driven by hand (``Script``): each test states which KMS request the ring
yields and what KMS answers, so the cache is checked by the absence of a request.
What KMS itself does with these requests is tested on moto in
``tests/storage/test_kms_keys.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3.errors import InvalidConfigError, KeyUnwrapError, UnknownKeyError
from langgraph_s3.operations import GeneratedKey, KmsDecrypt, KmsGenerateDataKey
from langgraph_s3.sealing import StaticKeyRing
from langgraph_s3.sealing.kms import KmsKeyRing, check_kms_key, same_key
from tests.core.script import Script

UUID = "1234abcd-12ab-34cd-56ef-1234567890ab"
ARN = f"arn:aws:kms:eu-west-1:111122223333:key/{UUID}"
OLD = "arn:aws:kms:eu-west-1:111122223333:key/0000abcd-12ab-34cd-56ef-1234567890ab"
MRK = "mrk-1234abcd12ab34cd56ef1234567890ab"
MRK_HERE = f"arn:aws:kms:eu-west-1:111122223333:key/{MRK}"
MRK_THERE = f"arn:aws:kms:us-east-1:111122223333:key/{MRK}"
CONTEXT = {"thread": "t-42", "key-version": "1"}
SENT = (("key-version", "1"), ("thread", "t-42"))
SECRET = bytes(range(32))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def ring(key_id: Any = ARN, **kwargs: Any) -> KmsKeyRing:
    return KmsKeyRing(key_id, **kwargs)


def unwrapped(r: KmsKeyRing, wrapped: bytes = b"w1", context: dict[str, str] = CONTEXT) -> Script:
    return Script(r.unwrap(wrapped, context, key_id="1"))


@pytest.mark.parametrize(
    "key", [ARN, UUID, MRK, MRK_THERE, f"arn:aws-cn:kms:cn-north-1:{12 * '1'}:key/{UUID}"]
)
def test_key_arns_and_key_ids_are_accepted(key: str) -> None:
    assert check_kms_key(key) == key


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("alias/agents", "is a KMS alias: pass the key ARN"),
        ("arn:aws:kms:eu-west-1:111122223333:alias/agents", "is a KMS alias"),
        ("", "must be the ARN of a symmetric KMS key"),
        (None, "must be the ARN of a symmetric KMS key"),
        ("arn:aws:kms:eu-west-1:1111:key/" + UUID, "is not a KMS key ARN or key id"),
        ("my-key", "is not a KMS key ARN or key id"),
    ],
)
def test_a_key_that_is_not_a_kms_key_arn_is_refused_saying_what_to_pass(
    key: object, words: str
) -> None:
    with pytest.raises(InvalidConfigError, match=words):
        ring(key)


def test_previous_keys_and_cache_bounds_are_checked_too() -> None:
    with pytest.raises(InvalidConfigError, match="a previous key 'alias/old'"):
        ring(previous=["alias/old"])
    with pytest.raises(InvalidConfigError, match="cache_entries must be a positive int"):
        ring(cache_entries=0)
    with pytest.raises(InvalidConfigError, match="cache_ttl must be a positive number"):
        ring(cache_ttl=0)
    assert repr(ring(previous=[OLD])) == f"KmsKeyRing(key_id={ARN!r}, previous=[{OLD!r}])"


def test_generate_asks_kms_for_a_key_under_the_configured_key_for_the_context() -> None:
    r = ring()
    script = Script(r.generate(CONTEXT, key_id="1"))
    script.expect(KmsGenerateDataKey(ARN, SENT, "1"), GeneratedKey(SECRET, b"w1", ARN))
    key, wrapped = script.returns()
    assert (key.key_id, key.secret, wrapped) == ("1", SECRET, b"w1")
    assert r.wrapping_key == ARN
    # The new key is cached: unwrapping what was just stored asks KMS nothing.
    assert unwrapped(r).returns() == key


def test_unwrap_asks_kms_once_then_answers_from_the_cache_until_it_expires() -> None:
    clock = Clock()
    r = ring(cache_ttl=60, clock=clock)
    first = unwrapped(r)
    first.expect(KmsDecrypt(b"w1", ARN, SENT, "1"), SECRET)
    key = first.returns()
    assert key.secret == SECRET
    clock.now = 60.0
    assert unwrapped(r).returns() == key  # no request: still fresh
    clock.now = 60.5
    again = unwrapped(r)
    again.expect(KmsDecrypt, SECRET)  # expired: KMS is asked again
    assert again.returns() == key


def test_the_cache_keys_on_the_context_and_the_wrapped_bytes() -> None:
    r = ring()
    unwrapped(r).expect(KmsDecrypt, SECRET)
    other_thread = unwrapped(r, context={"thread": "t-43", "key-version": "1"})
    assert other_thread.expect(KmsDecrypt, SECRET).context == (
        ("key-version", "1"),
        ("thread", "t-43"),
    )
    # A key item recreated after a shred (same context, new wrapped key) is not
    # answered with the old key.
    unwrapped(r, wrapped=b"w2").expect(KmsDecrypt(b"w2", ARN, SENT, "1"), bytes(32))


def test_forget_drops_the_keys_of_a_scope_only() -> None:
    r = ring()
    unwrapped(r).expect(KmsDecrypt, SECRET)
    unwrapped(r, context={"thread": "t-43", "key-version": "1"}).expect(KmsDecrypt, SECRET)
    r.forget({"thread": "t-42"})
    unwrapped(r).expect(KmsDecrypt, SECRET)
    assert unwrapped(r, context={"thread": "t-43", "key-version": "1"}).returns().secret == SECRET


def test_a_stored_kms_key_the_ring_is_not_configured_with_is_refused_before_any_request() -> None:
    r = ring(previous=[OLD])
    stranger = "arn:aws:kms:eu-west-1:999999999999:key/" + UUID
    script = Script(r.unwrap(b"w1", CONTEXT, key_id="1", kek=stranger))
    error = script.raises(UnknownKeyError)
    assert error.key_id == stranger
    assert "thread='t-42'" in str(error) and "previous=" in str(error)
    # A previous key unwraps what it wrapped, named as KeyId.
    old = Script(r.unwrap(b"w0", CONTEXT, key_id="1", kek=OLD))
    assert old.expect(KmsDecrypt, SECRET).kms_key == OLD


def test_a_multi_region_key_unwraps_with_the_replica_configured_in_this_region() -> None:
    r = ring(MRK_HERE)
    script = Script(r.unwrap(b"w1", CONTEXT, key_id="1", kek=MRK_THERE))
    assert script.expect(KmsDecrypt, SECRET).kms_key == MRK_HERE


def test_same_key() -> None:
    assert same_key(ARN, ARN) and same_key(UUID, ARN) and same_key(ARN, UUID)
    assert same_key(MRK_HERE, MRK_THERE) and same_key(MRK, MRK_THERE)
    assert not same_key(ARN, OLD)
    # A single-region key id in another region or account is another key.
    assert not same_key(ARN, ARN.replace("eu-west-1", "us-east-1"))


def test_the_static_ring_offers_the_same_names() -> None:
    static = StaticKeyRing({"r1": bytes(32), "r2": bytes(range(32))}, current="r2")
    key, wrapped = static.generate(CONTEXT, key_id="1")
    assert static.wrapping_key == "r2"
    assert static.unwrap(wrapped, CONTEXT, key_id="1", kek="r2") == key
    static.forget({"thread": "t-42"})  # nothing cached: nothing to do
    with pytest.raises(KeyUnwrapError, match="names ring key 'r2', but its item says 'r1'"):
        static.unwrap(wrapped, CONTEXT, key_id="1", kek="r1")
