"""Properties of the bytes on the wire (``codec.py``): round trips and damage detection.

Records (pending writes in DynamoDB) carry a BLAKE2b checksum, so any changed bit and any
truncation must be a ``CorruptObjectError``. Blobs carry no checksum of their own: a
reader unframes them and compares the SHA-256 of the payload with the key
(``core.objects.check_blob``), and that combination must never hand back wrong bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from langgraph_s3 import codec
from langgraph_s3.core import SaverCore
from langgraph_s3.core.objects import check_blob
from langgraph_s3.errors import CorruptObjectError, UnsupportedFormatError
from langgraph_s3.keys import Layout

SETTINGS = settings(max_examples=100, deadline=None, derandomize=True, database=None)

KINDS = st.sampled_from([codec.KIND_CHECKPOINT, codec.KIND_BLOB])
LEVELS = st.sampled_from([1, 3, 9])
HEADER = len(codec.MAGIC) + 2

# What the saver's own envelopes hold: msgpack scalars, str-keyed maps and lists.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
)
envelopes = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(), inner)),
    max_leaves=20,
)


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    """Bytes of every compressibility: hypothesis' own, repeated text, random noise."""
    kind = draw(st.sampled_from(["plain", "repeated", "noise"]))
    if kind == "plain":
        return draw(st.binary(max_size=2000))
    if kind == "repeated":
        return draw(st.binary(min_size=1, max_size=50)) * draw(st.integers(1, 200))
    return random.Random(draw(st.integers(0, 2**32))).randbytes(draw(st.integers(0, 3000)))


records = st.one_of(
    envelopes,
    # A pending write as the saver packs it: [channel, value entry].
    st.tuples(st.text(max_size=20), payloads()).map(lambda t: [t[0], ["i", "bytes", t[1]]]),
)


def flips(data: bytes, positions: list[int]) -> Iterator[tuple[int, int, bytes]]:
    """Every one-bit change of ``data`` at ``positions``: (position, bit, changed bytes)."""
    for pos in positions:
        for bit in range(8):
            changed = bytearray(data)
            changed[pos] ^= 1 << bit
            yield pos, bit, bytes(changed)


def positions_to_try(data: bytes, extra: list[int]) -> list[int]:
    """All positions of a short object; for a long one its first 40 and last 16 bytes (tag,
    checksum, headers, frame end) and a few hypothesis picks in between."""
    if len(data) <= 96:
        return list(range(len(data)))
    return sorted({*range(40), *range(len(data) - 16, len(data)), *(p % len(data) for p in extra)})


def normalised(value: Any) -> Any:
    """What msgpack gives back: tuples become lists."""
    if isinstance(value, list | tuple):
        return [normalised(v) for v in value]
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items()}
    return value


# --- round trips ---------------------------------------------------------------------


@SETTINGS
@given(KINDS, payloads(), LEVELS)
def test_frame_round_trip(kind: bytes, payload: bytes, level: int) -> None:
    framed = codec.frame(kind, payload, level)
    assert framed[:HEADER] == codec.MAGIC + bytes([codec.LAYOUT_1]) + kind
    assert codec.unframe(framed, key="k", kind=kind) == payload
    other = codec.KIND_BLOB if kind == codec.KIND_CHECKPOINT else codec.KIND_CHECKPOINT
    with pytest.raises(CorruptObjectError):
        codec.unframe(framed, key="k", kind=other)


@SETTINGS
@given(envelopes)
def test_pack_round_trip(envelope: Any) -> None:
    assert codec.unpack(codec.pack(envelope), key="k") == envelope


@SETTINGS
@given(st.binary(max_size=200))
def test_unpack_of_any_bytes_returns_or_raises_corrupt(data: bytes) -> None:
    """Garbage never escapes as another exception type."""
    try:
        codec.unpack(data, key="k")
    except CorruptObjectError as exc:
        assert exc.key == "k"


@SETTINGS
@given(records, LEVELS)
def test_record_round_trip(record: Any, level: int) -> None:
    packed = codec.pack_record(record, level)
    raw = codec.pack(record)
    assert packed[:1] in (b"\x03", b"\x04")
    assert packed[1:9] == codec.record_sum(raw)
    if packed[:1] == b"\x03":
        assert packed[9:] == raw
    else:  # compressed only when it pays
        assert len(raw) >= 256 and len(packed) - 9 + 1 < len(raw)
    assert codec.unpack_record(packed, key="k") == normalised(record)


@SETTINGS
@given(st.integers(0, 2**32), st.integers(300, 5000), st.text(min_size=1, max_size=40))
def test_records_take_both_encodings(seed: int, size: int, word: str) -> None:
    """Random bytes are stored raw (tag 3), repetitive ones compressed (tag 4); both read."""
    noise = ["c", ["i", "bytes", random.Random(seed).randbytes(size)]]
    prose = ["c", ["i", "str", word * (size // len(word) + 1)]]
    for record, tag in ((noise, b"\x03"), (prose, b"\x04")):
        packed = codec.pack_record(record, 3)
        assert packed[:1] == tag
        assert codec.unpack_record(packed, key="k") == record


@SETTINGS
@given(records)
def test_records_of_the_previous_release_still_unpack(record: Any) -> None:
    """Tag 1 (raw msgpack) and tag 2 (zstd of it), no checksum."""
    raw = codec.pack(record)
    assert codec.unpack_record(b"\x01" + raw, key="k") == normalised(record)
    assert codec.unpack_record(b"\x02" + codec.compress(raw, 3), key="k") == normalised(record)


# --- damage ---------------------------------------------------------------------------


@SETTINGS
@given(records, LEVELS, st.lists(st.integers(0, 2**32), max_size=32))
@example(None, 3, [])
@example(0, 3, [])
@example(["", ["i", "bytes", b""]], 1, [])  # tag 3 -> 1 read the checksum as the record
def test_any_flipped_bit_of_a_record_is_corrupt(record: Any, level: int, extra: list[int]) -> None:
    """Every one-bit change raises ``CorruptObjectError``, except one that leaves the record
    exactly as it was: zstd ignores a few frame-header bits (the checksum covers the packed
    record, not its compressed form), so that can only happen inside a tag-4 body."""
    packed = codec.pack_record(record, level)
    for pos, bit, changed in flips(packed, positions_to_try(packed, extra)):
        try:
            got = codec.unpack_record(changed, key="k")
        except CorruptObjectError as exc:
            assert type(exc) is CorruptObjectError, (pos, bit)
            assert exc.key == "k"
        else:
            assert packed[:1] == b"\x04" and pos >= 9, (pos, bit, got)
            assert got == normalised(record), (pos, bit, got)


@SETTINGS
@given(records, LEVELS)
def test_any_truncation_of_a_record_is_corrupt(record: Any, level: int) -> None:
    packed = codec.pack_record(record, level)
    for cut in range(len(packed)):
        with pytest.raises(CorruptObjectError) as info:
            codec.unpack_record(packed[:cut], key="k")
        assert type(info.value) is CorruptObjectError, cut


def read_blob(core: SaverCore, key: str, body: bytes) -> bytes:
    """What a reader does with a blob body it fetched: unframe, compare with the key."""
    return check_blob(core, key, body)


@pytest.fixture(scope="module")
def core() -> SaverCore:
    return SaverCore(bucket="b", table="t")


@SETTINGS
@given(payloads(), LEVELS, st.lists(st.integers(0, 2**32), max_size=32))
@example(b"\x00" * 256, 1, [])  # byte 10 bit 7 declared 17.6 TB: MemoryError, not corrupt
@example(b"", 1, [])
def test_a_blob_reader_never_returns_wrong_bytes(
    core: SaverCore, payload: bytes, level: int, extra: list[int]
) -> None:
    """Any one-bit change of a stored blob either still yields exactly the payload (zstd
    ignores a few frame-header bits) or raises ``CorruptObjectError`` — or
    ``UnsupportedFormatError`` exactly when the version byte went up."""
    key = Layout().blob_key("t", codec.digest(payload))
    body = codec.frame(codec.KIND_BLOB, payload, level)
    assert read_blob(core, key, body) == payload
    for pos, bit, changed in flips(body, positions_to_try(body, extra)):
        try:
            got = read_blob(core, key, changed)
        except (CorruptObjectError, UnsupportedFormatError) as exc:
            version_up = pos == len(codec.MAGIC) and changed[pos] > codec.FORMAT_VERSION
            expected = UnsupportedFormatError if version_up else CorruptObjectError
            assert type(exc) is expected, (pos, bit, exc)
            assert exc.key == key
        else:
            assert pos >= HEADER, (pos, bit)
            assert got == payload, (pos, bit)


@SETTINGS
@given(payloads(), LEVELS)
def test_any_truncation_of_a_blob_is_corrupt(core: SaverCore, payload: bytes, level: int) -> None:
    key = Layout().blob_key("t", codec.digest(payload))
    body = codec.frame(codec.KIND_BLOB, payload, level)
    for cut in range(len(body)):
        with pytest.raises(CorruptObjectError) as info:
            read_blob(core, key, body[:cut])
        assert type(info.value) is CorruptObjectError, cut


@SETTINGS
@given(payloads(), payloads())
def test_a_blob_of_other_bytes_or_kind_is_corrupt(core: SaverCore, one: bytes, two: bytes) -> None:
    """A well-formed object under the wrong key, or a checkpoint object under a blob key."""
    key = Layout().blob_key("t", codec.digest(one))
    wrong_kind = codec.frame(codec.KIND_CHECKPOINT, one, 3)
    with pytest.raises(CorruptObjectError):
        read_blob(core, key, wrong_kind)
    if one != two:
        with pytest.raises(CorruptObjectError):
            read_blob(core, key, codec.frame(codec.KIND_BLOB, two, 3))
