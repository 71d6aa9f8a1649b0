"""Data keys on moto's KMS and DynamoDB: the KMS key ring and the key item flows
(``sealing/kms.py``, ``core/datakeys.py``) run by both savers' drivers.

What moto's KMS does and does not do (moto 5): it generates and unwraps data keys,
refuses an unwrap under another encryption context and an altered wrapped key, and
knows which keys exist. It does not evaluate key policies, does not refuse disabled
keys or keys pending deletion, answers a KeyId mismatch with AccessDeniedException
(AWS: IncorrectKeyException), and cannot unwrap under a multi-region key (pinned
below by a strict xfail, so an upgrade that fixes it is noticed). Those cases are
covered against canned answers in ``tests/unit/test_transport.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest

from langgraph_s3.core import datakeys, schema
from langgraph_s3.core.datakeys import KeyScope
from langgraph_s3.errors import (
    AccessDeniedError,
    KeyUnwrapError,
    SealedObjectError,
    UnknownKeyError,
)
from langgraph_s3.sealing import BodyPlace, open_sealed, seal
from langgraph_s3.sealing.kms import KmsKeyRing
from tests.conftest import REGION, Backend, RequestLog

THREAD = KeyScope.thread("t-42")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def kms_client(backend: Backend, log: RequestLog | None = None) -> Any:
    client = boto3.client("kms", region_name=REGION, endpoint_url=backend.endpoint_url)
    return client if log is None else log.attach(client)


def kms_key(backend: Backend, **kwargs: Any) -> str:
    return str(kms_client(backend).create_key(**kwargs)["KeyMetadata"]["Arn"])


@pytest.fixture
def kms(inproc_backend: Backend, request_log: RequestLog) -> Iterator[tuple[Any, str]]:
    """An in-process saver whose KMS requests are counted, and a KMS key."""
    saver = inproc_backend.saver(kms_client=kms_client(inproc_backend, request_log))
    yield saver, kms_key(inproc_backend)
    saver.close()


def kms_calls(log: RequestLog) -> list[str]:
    return [name for service, name in log.calls if service == "kms"]


def test_a_key_generated_for_a_thread_unwraps_in_a_cold_container(
    kms: tuple[Any, str], request_log: RequestLog
) -> None:
    saver, arn = kms
    key = saver.run(datakeys.key_for(saver, KmsKeyRing(arn), THREAD))
    assert kms_calls(request_log) == ["GenerateDataKey"]
    stored = saver.run(datakeys.current(saver, THREAD))
    assert (stored.version, stored.kek) == (1, arn)
    # A new container (a new ring, nothing cached) reads the item and asks KMS once.
    again = saver.run(datakeys.key_for(saver, KmsKeyRing(arn), THREAD))
    assert again.secret == key.secret and again.key_id == "1"
    assert kms_calls(request_log) == ["GenerateDataKey", "Decrypt"]
    place = BodyPlace("", "t-42", "", "c1")
    assert open_sealed(again, seal(key, b"refund", place), place, where="x") == b"refund"


def test_a_warm_ring_answers_from_its_cache_until_the_key_expires(
    kms: tuple[Any, str], request_log: RequestLog
) -> None:
    saver, arn = kms
    saver.run(datakeys.key_for(saver, KmsKeyRing(arn), THREAD))
    clock = Clock()
    ring = KmsKeyRing(arn, cache_ttl=300, clock=clock)
    request_log.clear()
    for _ in range(3):  # three supersteps: one Decrypt
        saver.run(datakeys.key_for(saver, ring, THREAD))
    assert kms_calls(request_log) == ["Decrypt"]
    clock.now = 301.0
    saver.run(datakeys.key_for(saver, ring, THREAD))
    assert kms_calls(request_log) == ["Decrypt", "Decrypt"]


def test_a_key_item_moved_to_another_thread_is_refused_by_kms(kms: tuple[Any, str]) -> None:
    saver, arn = kms
    saver.run(datakeys.key_for(saver, KmsKeyRing(arn), KeyScope.thread("t-1")))
    moved = saver.run(datakeys.current(saver, KeyScope.thread("t-1")))
    with pytest.raises(KeyUnwrapError) as refused:
        saver.run(datakeys.unwrap(saver, KmsKeyRing(arn), THREAD, moved))
    assert "thread='t-42'" in str(refused.value)
    assert "InvalidCiphertextException" in str(refused.value)
    # Under another version of its own thread, too.
    with pytest.raises(KeyUnwrapError, match="key-version='2'"):
        saver.run(
            datakeys.unwrap(
                saver, KmsKeyRing(arn), KeyScope.thread("t-1"), replace(moved, version=2)
            )
        )


def test_an_altered_wrapped_key_is_refused(kms: tuple[Any, str]) -> None:
    saver, arn = kms
    saver.run(datakeys.key_for(saver, KmsKeyRing(arn), THREAD))
    stored = saver.run(datakeys.current(saver, THREAD))
    flipped = bytearray(stored.wrapped)
    flipped[-1] ^= 1
    with pytest.raises(KeyUnwrapError, match="thread='t-42'"):
        saver.run(
            datakeys.unwrap(saver, KmsKeyRing(arn), THREAD, replace(stored, wrapped=bytes(flipped)))
        )


def test_two_racing_creators_end_with_one_key(
    kms: tuple[Any, str], request_log: RequestLog
) -> None:
    saver, arn = kms
    creators = 6
    barrier = threading.Barrier(creators)
    keys: list[bytes] = []

    def create() -> None:
        barrier.wait()
        keys.append(saver.run(datakeys.create(saver, KmsKeyRing(arn), THREAD)).secret)

    threads = [threading.Thread(target=create) for _ in range(creators)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == creators and len(set(keys)) == 1
    calls = kms_calls(request_log)
    # Every creator generated a key; each loser unwrapped the winner's instead.
    assert calls.count("GenerateDataKey") == creators
    assert calls.count("Decrypt") == creators - 1
    items = saver.dynamodb_client.scan(TableName=saver.table)["Items"]
    assert [i[schema.SK]["S"] for i in items] == [schema.key_sk(1)]


def test_shredding_deletes_the_key_and_a_new_key_starts_over(kms: tuple[Any, str]) -> None:
    saver, arn = kms
    ring = KmsKeyRing(arn)
    old = saver.run(datakeys.key_for(saver, ring, THREAD))
    assert saver.run(datakeys.shred(saver, ring, THREAD)) == 1
    assert saver.run(datakeys.current(saver, THREAD)) is None
    new = saver.run(datakeys.key_for(saver, ring, THREAD))
    assert new.key_id == "1" and new.secret != old.secret
    place = BodyPlace("", "t-42", "", "c1")
    sealed = seal(old, b"refund", place)
    with pytest.raises(SealedObjectError, match="does not open"):
        open_sealed(new, sealed, place, where="x")


def test_a_kms_key_that_does_not_exist_is_named(kms: tuple[Any, str]) -> None:
    saver, arn = kms
    missing = arn[:-12] + "000000000000"
    with pytest.raises(UnknownKeyError, match="does not exist") as raised:
        saver.run(datakeys.key_for(saver, KmsKeyRing(missing), THREAD))
    assert raised.value.key_id == missing and "thread='t-42'" in str(raised.value)


@pytest.mark.xfail(
    strict=True, raises=AccessDeniedError, reason="moto 5 cannot Decrypt under a multi-region key"
)
def test_a_multi_region_key_round_trip(kms: tuple[Any, str]) -> None:
    saver, _ = kms
    mrk = kms_key_of(saver, MultiRegion=True)
    key = saver.run(datakeys.key_for(saver, KmsKeyRing(mrk), THREAD))
    assert saver.run(datakeys.key_for(saver, KmsKeyRing(mrk), THREAD)) == key


def kms_key_of(saver: Any, **kwargs: Any) -> str:
    return str(saver.kms_client.create_key(**kwargs)["KeyMetadata"]["Arn"])


async def test_the_async_saver_performs_kms_requests_and_reads_what_the_sync_one_wrote(
    server_backend: Backend,
) -> None:
    arn = kms_key(server_backend)
    sync = server_backend.saver(kms_client=kms_client(server_backend))
    async with server_backend.async_saver() as saver:
        key = await saver.run(datakeys.key_for(saver, KmsKeyRing(arn), THREAD))
        assert key.key_id == "1"
        other = KeyScope.thread("t-43")
        written = sync.run(datakeys.key_for(sync, KmsKeyRing(arn), other))
        read = await saver.run(datakeys.key_for(saver, KmsKeyRing(arn), other))
        assert read.secret == written.secret
        stored = await saver.run(datakeys.current(saver, THREAD))
        with pytest.raises(KeyUnwrapError, match="thread='t-43'"):
            await saver.run(datakeys.unwrap(saver, KmsKeyRing(arn), other, stored))
    assert sync.run(datakeys.key_for(sync, KmsKeyRing(arn), THREAD)).secret == key.secret
    sync.close()
