"""Sealing (``langgraph_s3.sealing``): values bound to their place, keyed names, a key ring.

Every way a sealed value can be misused (moved to another thread, namespace,
checkpoint or write slot, swapped with its parent's body, a bit flipped anywhere,
truncated, opened with another data key) must end in our typed error naming the
object the caller said it read; a wrapped data key must unwrap only for its own
context. The canonical place encoding is checked to be injective by parsing it back.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import example, given, settings
from hypothesis import strategies as st

from langgraph_s3 import codec
from langgraph_s3.errors import (
    CorruptObjectError,
    DataKeyError,
    InvalidConfigError,
    KeyUnwrapError,
    MissingDependencyError,
    SealedObjectError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from langgraph_s3.sealing import (
    MAGIC,
    BlobPlace,
    BodyPlace,
    DataKey,
    Place,
    StaticKeyRing,
    WritePlace,
    check_name,
    cipher,
    encode_context,
    name,
    open_sealed,
    overhead,
    seal,
    sealed_key_id,
)

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None)

SECRET = bytes(range(32))
KEY = DataKey("1", SECRET)
SAME_ID_OTHER_SECRET = DataKey("1", bytes(range(100, 132)))
NEXT_KEY = DataKey("2", bytes(range(200, 232)))
WHERE = "prod/thread-a/c/~/1f0-c2.0123456789abcdef0123456789abcdef"
PLAINTEXT = b"refund 1200 EUR to Jane Doe, IBAN DE00 1234"

BODY = BodyPlace("prod/", "thread-a", "", "1f0-c2")
PARENT = BodyPlace("prod/", "thread-a", "", "1f0-c1")
WRITE = WritePlace("prod/", "thread-a", "", "1f0-c2", "task-1", 0)
BLOB = BlobPlace("prod/", "thread-a", name(KEY, b"chunk"))
PLACES: list[Place] = [BODY, WRITE, BLOB, WritePlace("", "t", "child:1", "c", "task", -3)]


def flips(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Every one-bit change of ``data``: (position, changed bytes)."""
    for pos in range(len(data)):
        for bit in range(8):
            changed = bytearray(data)
            changed[pos] ^= 1 << bit
            yield pos, bytes(changed)


def refused(sealed: bytes, place: Place, key: DataKey = KEY) -> SealedObjectError:
    """The error opening ``sealed`` at ``place`` raises; it must name ``WHERE``."""
    with pytest.raises(SealedObjectError) as caught:
        open_sealed(key, sealed, place, where=WHERE)
    assert caught.value.key == WHERE
    assert WHERE in str(caught.value)
    return caught.value


# --- round trips ---------------------------------------------------------------------


@pytest.mark.parametrize("place", PLACES, ids=lambda p: type(p).__name__)
@pytest.mark.parametrize("plaintext", [b"", PLAINTEXT, os.urandom(70_000)], ids=len)
def test_round_trip_for_each_kind_of_place(place: Place, plaintext: bytes) -> None:
    sealed = seal(KEY, plaintext, place)
    assert sealed.startswith(MAGIC)
    assert len(sealed) == len(plaintext) + overhead(KEY)
    assert sealed_key_id(sealed, where=WHERE) == "1"
    assert open_sealed(KEY, sealed, place, where=WHERE) == plaintext


def test_sealing_hides_the_plaintext_and_never_repeats() -> None:
    first, second = seal(KEY, PLAINTEXT, BODY), seal(KEY, PLAINTEXT, BODY)
    assert first != second  # fresh salt and nonce each time
    for sealed in (first, second):
        assert b"Jane Doe" not in sealed
        assert open_sealed(KEY, sealed, BODY, where=WHERE) == PLAINTEXT


def test_format_matches_its_description(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rebuilt by hand from the package docstring with cryptography's own primitives: a
    change to the stored format (which would strand stored data) fails here."""
    fresh = bytes(range(50, 78))  # salt (16) then nonce (12)
    monkeypatch.setattr(os, "urandom", lambda n: fresh[:n])
    sealed = seal(KEY, PLAINTEXT, WRITE)
    monkeypatch.undo()
    root = HKDF(SHA256(), 32, None, b"langgraph-s3/v1/seal").derive(SECRET)
    per_object = HKDF(SHA256(), 32, fresh[:16], b"langgraph-s3/v1/object/W").derive(root)
    header = b"LGSE" + b"\x01" + b"\x01" + b"1" + fresh
    place = b"W" + b"".join(
        struct.pack(">I", len(f)) + f for f in (b"prod/", b"thread-a", b"", b"1f0-c2", b"task-1")
    )
    place += struct.pack(">q", 0)
    expected = header + AESGCM(per_object).encrypt(fresh[16:], PLAINTEXT, header + place)
    assert sealed == expected


def test_subkeys_follow_rfc_5869() -> None:
    """HKDF-SHA256 test case 1 of RFC 5869 (the first 32 bytes of its 42-byte OKM)."""
    okm = cipher.hkdf(bytes([0x0B] * 22), salt=bytes(range(13)), info=bytes(range(0xF0, 0xFA)))
    assert okm.hex() == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
    assert len({KEY.secret, KEY.seal_root, KEY.name_key}) == 3


# --- a value moved, swapped or altered -------------------------------------------------


def _moved(place: Place, **changes: object) -> Place:
    return replace(place, **changes)  # type: ignore[arg-type]


MOVES = [
    ("body to another thread", BODY, _moved(BODY, thread="thread-b")),
    ("body to another namespace", BODY, _moved(BODY, ns="child:1")),
    ("body to another checkpoint", BODY, _moved(BODY, checkpoint_id="1f0-c3")),
    ("body to another prefix", BODY, _moved(BODY, prefix="staging/")),
    ("write to another thread", WRITE, _moved(WRITE, thread="thread-b")),
    ("write to another checkpoint", WRITE, _moved(WRITE, checkpoint_id="1f0-c1")),
    ("write to another task", WRITE, _moved(WRITE, task_id="task-2")),
    ("write to another index", WRITE, _moved(WRITE, index=1)),
    ("write to a special slot", WRITE, _moved(WRITE, index=-1)),
    ("write to another namespace", WRITE, _moved(WRITE, ns="child:1")),
    ("write to another prefix", WRITE, _moved(WRITE, prefix="staging/")),
    ("blob to another thread", BLOB, _moved(BLOB, scope="thread-b")),
    ("blob to another prefix", BLOB, _moved(BLOB, prefix="staging/")),
    ("blob under another name", BLOB, _moved(BLOB, name=name(KEY, b"other chunk"))),
    (
        "body read as a write of the same checkpoint",
        BODY,
        WritePlace("prod/", "thread-a", "", "1f0-c2", "", 0),
    ),
    ("id split differently", BODY, BodyPlace("prod/", "thread-", "a", "1f0-c2")),
]


@pytest.mark.parametrize(
    ("sealed_at", "read_at"), [m[1:] for m in MOVES], ids=[m[0] for m in MOVES]
)
def test_a_value_moved_elsewhere_is_refused(sealed_at: Place, read_at: Place) -> None:
    sealed = seal(KEY, PLAINTEXT, sealed_at)
    assert open_sealed(KEY, sealed, sealed_at, where=WHERE) == PLAINTEXT
    exc = refused(sealed, read_at)
    assert exc.key_id == "1"
    assert isinstance(exc, CorruptObjectError)  # readers already treat it as damage


def test_a_body_swapped_with_its_parents_is_refused_both_ways() -> None:
    child, parent = seal(KEY, b"child body", BODY), seal(KEY, b"parent body", PARENT)
    refused(parent, BODY)
    refused(child, PARENT)
    assert open_sealed(KEY, parent, PARENT, where=WHERE) == b"parent body"


def test_every_flipped_bit_is_refused() -> None:
    sealed = seal(KEY, PLAINTEXT, WRITE)
    version_at = len(MAGIC)
    tried = 0
    for pos, changed in flips(sealed):
        tried += 1
        if pos == version_at and changed[pos] > 1:
            with pytest.raises(UnsupportedFormatError) as caught:
                open_sealed(KEY, changed, WRITE, where=WHERE)
            assert caught.value.key == WHERE
        else:
            refused(changed, WRITE)
    assert tried == 8 * len(sealed)


def test_clear_references_are_bound_but_not_stored() -> None:
    refs = b"\x00" * 32 + b"list"  # what a collector would read without keys
    sealed = seal(KEY, PLAINTEXT, BODY, clear=refs)
    assert refs not in sealed
    assert open_sealed(KEY, sealed, BODY, where=WHERE, clear=refs) == PLAINTEXT
    for other in (b"", refs[:-1], refs + b"\x00", b"\x01" + refs[1:]):
        with pytest.raises(SealedObjectError):
            open_sealed(KEY, sealed, BODY, where=WHERE, clear=other)
    with pytest.raises(SealedObjectError):  # sealed without, read as if with
        open_sealed(KEY, seal(KEY, PLAINTEXT, BODY), BODY, where=WHERE, clear=refs)


def test_every_truncation_and_an_extension_are_refused() -> None:
    sealed = seal(KEY, PLAINTEXT, BODY)
    for size in range(len(sealed)):
        refused(sealed[:size], BODY)
    refused(sealed + b"\x00", BODY)


def test_the_wrong_data_key_is_refused() -> None:
    sealed = seal(KEY, PLAINTEXT, BODY)
    refused(sealed, BODY, SAME_ID_OTHER_SECRET)
    exc = refused(sealed, BODY, NEXT_KEY)
    assert "'1'" in str(exc) and "'2'" in str(exc)  # which key it needs, which it got
    assert exc.key_id == "2"


def test_an_object_that_is_not_sealed_is_refused() -> None:
    plain = codec.frame(codec.KIND_CHECKPOINT, PLAINTEXT, 3)
    exc = refused(plain, BODY)
    assert "not sealed" in str(exc)
    with pytest.raises(SealedObjectError):
        sealed_key_id(plain, where=WHERE)


def test_a_newer_format_asks_for_an_upgrade() -> None:
    sealed = bytearray(seal(KEY, PLAINTEXT, BODY))
    sealed[len(MAGIC)] = 2
    with pytest.raises(UnsupportedFormatError, match="upgrade langgraph-s3") as caught:
        open_sealed(KEY, bytes(sealed), BODY, where=WHERE)
    assert caught.value.key == WHERE


def test_errors_and_reprs_never_show_plaintext_or_key_bytes() -> None:
    sealed = seal(KEY, PLAINTEXT, BODY)
    exc = refused(sealed, PARENT)
    ring = StaticKeyRing({"a": SECRET}, current="a")
    shown = [str(exc), repr(exc), repr(KEY), str(KEY), repr(ring)]
    secrets = [SECRET.hex(), repr(SECRET), SECRET.decode("latin-1"), "Jane Doe"]
    for text in shown:
        for secret in secrets:
            assert secret not in text
    assert repr(KEY) == "DataKey(key_id='1')"


@pytest.mark.parametrize(
    ("key_id", "secret"),
    [("1", bytes(31)), ("1", bytes(33)), ("", bytes(32)), ("x" * 256, bytes(32))],
    ids=["short key", "long key", "empty id", "long id"],
)
def test_unusable_data_keys_are_refused(key_id: str, secret: bytes) -> None:
    with pytest.raises(DataKeyError) as caught:
        DataKey(key_id, secret)
    assert caught.value.key_id == key_id


# --- keyed names -----------------------------------------------------------------------


def test_names_match_within_a_key_and_differ_across_keys() -> None:
    chunk = b"a chunk that two threads both store"
    assert name(KEY, chunk) == name(DataKey("other id", SECRET), chunk)  # same secret
    assert name(KEY, chunk) != name(SAME_ID_OTHER_SECRET, chunk)
    assert name(KEY, chunk) != name(KEY, chunk + b".")
    assert name(KEY, chunk) != hashlib.sha256(chunk).digest()  # not the public digest
    assert name(KEY, chunk) == hmac.new(KEY.name_key, chunk, hashlib.sha256).digest()
    assert len(name(KEY, chunk)) == 32


def test_check_name_accepts_the_content_and_refuses_anything_else() -> None:
    chunk = b"chunk bytes"
    check_name(KEY, chunk, name(KEY, chunk), where=WHERE)  # returns quietly
    for data, key in [(chunk + b"!", KEY), (chunk, SAME_ID_OTHER_SECRET)]:
        with pytest.raises(SealedObjectError) as caught:
            check_name(key, data, name(KEY, chunk), where=WHERE)
        assert caught.value.key == WHERE


# --- the static key ring ---------------------------------------------------------------

RING_A, RING_B = os.urandom(32), os.urandom(32)
CONTEXT = {"lgs3-pk": "prod/thread-a", "lgs3-scope": "thread"}


def test_ring_round_trip_opens_what_the_generated_key_sealed() -> None:
    ring = StaticKeyRing({"a": RING_A}, current="a")
    key, wrapped = ring.generate(CONTEXT, key_id="1")
    assert key.secret not in wrapped
    sealed = seal(key, PLAINTEXT, BODY)
    # A reader rebuilds the context in its own order and gets the same key back.
    again = ring.unwrap(wrapped, dict(reversed(CONTEXT.items())), key_id="1")
    assert again == key
    assert open_sealed(again, sealed, BODY, where=WHERE) == PLAINTEXT
    assert ring.generate(CONTEXT, key_id="1")[0] != key  # every data key is new


@pytest.mark.parametrize(
    "context",
    [
        {**CONTEXT, "lgs3-pk": "prod/thread-b"},
        {**CONTEXT, "lgs3-scope": "tenant"},
        {"lgs3-pk": "prod/thread-a"},
        {**CONTEXT, "extra": ""},
        {},
    ],
    ids=["other thread", "other scope", "missing pair", "extra pair", "empty"],
)
def test_ring_refuses_another_context(context: dict[str, str]) -> None:
    ring = StaticKeyRing({"a": RING_A}, current="a")
    _, wrapped = ring.generate(CONTEXT, key_id="1")
    with pytest.raises(KeyUnwrapError) as caught:
        ring.unwrap(wrapped, context, key_id="1")
    assert caught.value.key_id == "1"
    assert RING_A.hex() not in str(caught.value)


def test_ring_refuses_an_unknown_ring_key_and_unwraps_after_rotation() -> None:
    old = StaticKeyRing({"a": RING_A}, current="a")
    key, wrapped = old.generate(CONTEXT, key_id="1")
    with pytest.raises(UnknownKeyError) as caught:
        StaticKeyRing({"b": RING_B}, current="b").unwrap(wrapped, CONTEXT, key_id="1")
    assert caught.value.key_id == "a"
    # Rotation: "b" wraps new keys, "a" still unwraps what it wrapped.
    rotated = StaticKeyRing({"a": RING_A, "b": RING_B}, current="b")
    assert rotated.unwrap(wrapped, CONTEXT, key_id="1") == key
    rewrapped = rotated.wrap(key, CONTEXT)
    assert sealed_key_id(rewrapped, where="k") == "b"
    assert StaticKeyRing({"b": RING_B}, current="b").unwrap(rewrapped, CONTEXT, key_id="1") == key


def test_ring_refuses_every_altered_or_truncated_wrapped_key() -> None:
    ring = StaticKeyRing({"a": RING_A}, current="a")
    _, wrapped = ring.generate(CONTEXT, key_id="1")
    for pos, changed in flips(wrapped):
        expected: type[Exception] = KeyUnwrapError
        if pos == len(MAGIC) and changed[pos] > 1:
            expected = UnsupportedFormatError
        elif pos in (len(MAGIC) + 1, len(MAGIC) + 2):
            # the ring key id or its length: an id the ring does not hold
            # (UnknownKeyError) or no readable id at all (KeyUnwrapError)
            expected = DataKeyError
        with pytest.raises(expected):
            ring.unwrap(changed, CONTEXT, key_id="1")
    for size in range(len(wrapped)):
        with pytest.raises(KeyUnwrapError):
            ring.unwrap(wrapped[:size], CONTEXT, key_id="1")


def test_ring_configuration_is_checked() -> None:
    with pytest.raises(InvalidConfigError, match="'b'"):
        StaticKeyRing({"a": RING_A}, current="b")
    # A wrong ring key is a configuration error (exit 2 on the command line), not a
    # data key that cannot be used (exit 1).
    with pytest.raises(InvalidConfigError, match="ring key 'short' is not 32 bytes"):
        StaticKeyRing({"a": RING_A, "short": bytes(16)}, current="a")
    with pytest.raises(InvalidConfigError, match="ring key id ''"):
        StaticKeyRing({"a": RING_A, "": bytes(32)}, current="a")


# --- canonical encodings ---------------------------------------------------------------

# Few distinct values, so that equal and nearly equal fields (one id's tail moved into
# the next) are common; separator characters included.
_texts = st.one_of(st.sampled_from(["", "a", "ab", "b", "a\x00b", "\x00", "é", "a/b"]), st.text())
_indexes = st.one_of(st.sampled_from([0, 1, -1, -4]), st.integers(-(2**63), 2**63 - 1))
_names = st.one_of(st.sampled_from([b"", b"\x00", bytes(32)]), st.binary(max_size=40))
places = st.one_of(
    st.builds(BodyPlace, _texts, _texts, _texts, _texts),
    st.builds(WritePlace, _texts, _texts, _texts, _texts, _texts, _indexes),
    st.builds(BlobPlace, _texts, _texts, _names),
)


class _Reader:
    """Parses a place back from its encoding (the proof that the encoding is injective)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        out = self.data[self.at : self.at + size]
        assert len(out) == size
        self.at += size
        return out

    def raw(self) -> bytes:
        return self.take(struct.unpack(">I", self.take(4))[0])

    def text(self) -> str:
        return self.raw().decode("utf-8", "surrogatepass")


def parse_place(data: bytes) -> Place:
    reader = _Reader(data[1:])
    kind = data[:1]
    place: Place
    if kind == b"C":
        place = BodyPlace(reader.text(), reader.text(), reader.text(), reader.text())
    elif kind == b"W":
        prefix, thread, ns, checkpoint_id, task_id = (reader.text() for _ in range(5))
        index = struct.unpack(">q", reader.take(8))[0]
        place = WritePlace(prefix, thread, ns, checkpoint_id, task_id, index)
    else:
        assert kind == b"B"
        place = BlobPlace(reader.text(), reader.text(), reader.raw())
    assert reader.at == len(data) - 1  # nothing left over
    return place


@SETTINGS
@given(places, places)
@example(BodyPlace("", "a\x00b", "c", ""), BodyPlace("", "a", "b\x00c", ""))
@example(BodyPlace("p", "t", "n", "c"), WritePlace("p", "t", "n", "c", "", 0))
def test_place_encoding_is_injective(first: Place, second: Place) -> None:
    assert parse_place(first.encode()) == first
    assert (first.encode() == second.encode()) == (first == second)


@SETTINGS
@given(st.dictionaries(_texts, _texts, max_size=4), st.dictionaries(_texts, _texts, max_size=4))
@example({"a\x00b": "c"}, {"a": "b\x00c"})
@example({"ab": ""}, {"a": "b"})
def test_context_encoding_is_injective_and_ignores_order(
    first: dict[str, str], second: dict[str, str]
) -> None:
    assert encode_context(first) == encode_context(dict(reversed(first.items())))
    assert (encode_context(first) == encode_context(second)) == (first == second)


# --- the optional dependency -----------------------------------------------------------


def test_importing_the_package_and_naming_places_does_not_load_cryptography() -> None:
    src = Path(cipher.__file__).resolve().parents[2]
    code = (
        "import sys, langgraph_s3, langgraph_s3.sealing as s\n"
        "s.BodyPlace('', 't', '', 'c').encode(); s.DataKey('1', bytes(32))\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('cryptography'))\n"
        "assert not loaded, loaded\n"
        "s.seal(s.DataKey('1', bytes(32)), b'x', s.BodyPlace('', 't', '', 'c'))\n"
        "assert 'cryptography' in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_missing_cryptography_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    cipher.crypto.cache_clear()
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    try:
        with pytest.raises(MissingDependencyError, match=r"langgraph-s3\[encryption\]"):
            seal(DataKey("1", SECRET), PLAINTEXT, BODY)
        with pytest.raises(ImportError):  # what code catching ImportError expects
            open_sealed(KEY, b"LGSE\x01\x011" + bytes(44), BODY, where=WHERE)
    finally:
        cipher.crypto.cache_clear()
