"""Bytes on the wire: object framing, compression, hashing and record packing.

Every object the saver writes starts with a 6-byte header::

    b"LGS3"  format-version (1 byte)  kind (1 byte: b"C" checkpoint, b"B" blob)

followed by one zstd frame, or, for kind ``b"S"`` (a sealed object, client-side
encryption, layout 4), a 4-byte big-endian length and that many bytes sealed by
:mod:`langgraph_s3.sealing` (which hold a whole ``C`` or ``B`` frame, encrypted). The
header lets a reader refuse an object written by a newer format
(:class:`UnsupportedFormatError`) instead of misreading it, and lets the layout evolve
by migration rather than by breakage. A checkpoint body's version is the oldest layout
that can read it: 7 once it holds a compact checkpoint record, 6 for a body without
its ids, 5 once a value in it names a chunk item, 3 a chunk list, 2 chunks in packs, 1
otherwise. A pack is blob
frames one after the other (sealed ones carry their length, so a whole pack can still be
cut into its frames).
"""

from __future__ import annotations

import hashlib
from typing import Any

import ormsgpack
import zstandard

from langgraph_s3.errors import CorruptObjectError, SealedObjectError, UnsupportedFormatError

MAGIC = b"LGS3"
#: The newest frame version this library reads (and writes where it is needed).
FORMAT_VERSION = 8
#: Layout 1: checkpoint bodies, loose blobs, records.
LAYOUT_1 = 1
#: Layout 2: value entries may name chunks inside packs (``["p", ...]``).
LAYOUT_PACKS = 2
#: Layout 3: a value with many chunks may name its chunk list (``["l", ...]``).
LAYOUT_LISTS = 3
#: Layout 4: sealed objects and records (client-side encryption, ``encryption=``).
LAYOUT_SEALED = 4
#: Layout 5: value entries may name chunk items, chunks stored in the index (``["x", ...]``).
LAYOUT_ITEMS = 5
#: Layout 6: a checkpoint body kept in its index item may leave out the ids its item
#: holds (thread, namespace, checkpoint and parent id); the item's ``h`` then binds
#: the body to the first three (``schema.place_digest``).
LAYOUT_BARE = 6
#: Layout 7: the checkpoint without its values may be a compact record
#: (``core/records.py``) instead of the serializer's bytes.
LAYOUT_RECORDS = 7
#: Layout 8: a chunk list stored after its chunks in one pack may say how many bytes
#: before it hold them (``["l", ..., lead]``), so one ranged GET reads both.
LAYOUT_LEADS = 8
#: (Layout 9 changes index items only, ``schema.id_attrs``: no frame carries it.)
KIND_CHECKPOINT = b"C"
KIND_BLOB = b"B"
KIND_SEALED = b"S"
_HEADER_LEN = len(MAGIC) + 2
_SEALED_HEADER = MAGIC + bytes([LAYOUT_SEALED]) + KIND_SEALED
_LENGTH_LEN = 4

# Small records (pending writes kept in DynamoDB) are stored uncompressed: a zstd
# frame costs ~10 bytes of overhead and saves nothing on a few dozen bytes.
# Records carry a checksum of their packed bytes (tags 3 and 4); tags 1 and 2, without
# one, are what releases before it wrote, and are still read.
_RAW = b"\x01"
_ZSTD = b"\x02"
_RAW_SUMMED = b"\x03"
_ZSTD_SUMMED = b"\x04"
#: A sealed record: the tag, then a record of tag 3 or 4 sealed to its write slot.
SEALED_RECORD = b"\x05"
#: A group of records (``core/groups.py``): the tag, then a record of tag 3 or 4
#: holding several writes, compressed together. Releases before it refuse the tag.
GROUP_RECORD = b"\x06"
_SUM_LEN = 8
_RECORD_COMPRESS_MIN = 256


def digest(data: bytes) -> str:
    """The content address of ``data``: SHA-256, hex."""
    return hashlib.sha256(data).hexdigest()


def digest_bytes(data: bytes) -> bytes:
    """SHA-256 of ``data`` as 32 raw bytes (half the size of hex inside envelopes)."""
    return hashlib.sha256(data).digest()


def compress(data: bytes, level: int) -> bytes:
    # A compressor object is not thread-safe; one per call costs microseconds.
    return zstandard.ZstdCompressor(level=level).compress(data)


def decompress(data: bytes, *, key: str) -> bytes:
    # Streamed, not one-shot: a one-shot decompress allocates the content size the frame
    # header declares, so one damaged bit there asked for terabytes (MemoryError). Memory
    # now follows the bytes really produced; zstd still checks them against that size.
    stream = zstandard.ZstdDecompressor().decompressobj()
    try:
        out = stream.decompress(data)
    except zstandard.ZstdError as exc:
        raise CorruptObjectError(
            f"object {key!r} is not a complete zstd frame ({exc}); it was truncated or "
            "altered after it was written",
            key=key,
        ) from exc
    if not stream.eof:
        raise CorruptObjectError(
            f"object {key!r} is not a complete zstd frame; it was truncated after it was written",
            key=key,
        )
    return out


def frame(kind: bytes, payload: bytes, level: int, version: int = LAYOUT_1) -> bytes:
    """Header + zstd(payload); ``version``: the oldest layout that can read it."""
    return MAGIC + bytes([version]) + kind + compress(payload, level)


def frames(data: bytes, *, key: str) -> list[bytes]:
    """The payloads of blob frames written one after the other (a pack); of a sealed
    frame, its sealed bytes (opening them needs the thread's key)."""
    out = []
    rest = data
    while rest:
        if len(rest) < _HEADER_LEN or not rest.startswith(MAGIC):
            raise CorruptObjectError(f"pack {key!r} holds something other than blobs", key=key)
        if rest.startswith(_SEALED_HEADER):
            size = int.from_bytes(rest[_HEADER_LEN : _HEADER_LEN + _LENGTH_LEN], "big")
            end = _HEADER_LEN + _LENGTH_LEN + size
            out.append(sealed_payload(rest[:end], key=key))
            rest = rest[end:]
            continue
        stream = zstandard.ZstdDecompressor().decompressobj()
        try:
            out.append(stream.decompress(rest[_HEADER_LEN:]))
        except zstandard.ZstdError as exc:
            raise CorruptObjectError(f"pack {key!r} is damaged ({exc})", key=key) from exc
        if not stream.eof:
            raise CorruptObjectError(f"pack {key!r} is truncated", key=key)
        rest = stream.unused_data
    return out


def seal_frame(sealed: bytes) -> bytes:
    """A sealed object (what ``sealing.seal`` made of a whole frame) as a stored object:
    the header of kind ``S`` (layout 4), its length, then the sealed bytes."""
    return _SEALED_HEADER + len(sealed).to_bytes(_LENGTH_LEN, "big") + sealed


def is_sealed(data: bytes) -> bool:
    """Whether ``data`` is a sealed object (header of kind ``S``), whole or damaged."""
    return data.startswith(_SEALED_HEADER)


def sealed_payload(data: bytes, *, key: str) -> bytes:
    """The sealed bytes of a sealed object read from ``key`` (length checked)."""
    if not is_sealed(data):
        raise CorruptObjectError(f"object {key!r} is not a sealed object", key=key)
    size = int.from_bytes(data[_HEADER_LEN : _HEADER_LEN + _LENGTH_LEN], "big")
    if len(data) != _HEADER_LEN + _LENGTH_LEN + size:
        raise CorruptObjectError(
            f"sealed object {key!r} is {len(data)} bytes, its header says "
            f"{_HEADER_LEN + _LENGTH_LEN + size}; it was truncated or altered",
            key=key,
        )
    return data[_HEADER_LEN + _LENGTH_LEN :]


def check_version(data: bytes, *, key: str) -> None:
    """Refuse an object whose header names a format version newer than this library
    reads (:class:`UnsupportedFormatError`); anything else passes."""
    if len(data) > len(MAGIC) and data.startswith(MAGIC) and data[len(MAGIC)] > FORMAT_VERSION:
        raise UnsupportedFormatError(
            f"object {key!r} uses format version {data[len(MAGIC)]}, this library reads "
            f"up to {FORMAT_VERSION}: upgrade langgraph-s3",
            key=key,
        )


def unframe(data: bytes, *, key: str, kind: bytes) -> bytes:
    """Check the header of an object read from ``key`` and return its payload."""
    if len(data) < _HEADER_LEN or not data.startswith(MAGIC):
        raise CorruptObjectError(
            f"object {key!r} does not start with the langgraph-s3 header "
            f"({len(data)} bytes); it was not written by this library or was truncated",
            key=key,
        )
    check_version(data, key=key)
    version = data[len(MAGIC)]
    if version < 1:
        raise CorruptObjectError(f"object {key!r} has invalid format version 0", key=key)
    found = data[len(MAGIC) + 1 : _HEADER_LEN]
    if found == KIND_SEALED and version == LAYOUT_SEALED:
        raise SealedObjectError(
            f"object {key!r} is sealed (client-side encryption): read it with a saver "
            "configured with encryption= and the key ring that wrote it",
            key=key,
        )
    if found != kind:
        raise CorruptObjectError(
            f"object {key!r} is a {found!r} object where a {kind!r} object was expected",
            key=key,
        )
    if kind == KIND_BLOB and version != LAYOUT_1:
        # Every layout so far writes blob frames as version 1, and a blob's digest
        # covers its payload only: any other version this library reads is damage.
        raise CorruptObjectError(f"blob {key!r} has format version {version}", key=key)
    return decompress(data[_HEADER_LEN:], key=key)


def pack(obj: Any) -> bytes:
    """msgpack for the saver's own envelopes (never for user values)."""
    return ormsgpack.packb(obj)


def unpack(data: bytes, *, key: str) -> Any:
    try:
        return ormsgpack.unpackb(data)
    except (ormsgpack.MsgpackDecodeError, ValueError) as exc:
        raise CorruptObjectError(
            f"object {key!r} holds an unreadable envelope: {exc}", key=key
        ) from exc


def record_sum(raw: bytes) -> bytes:
    """The checksum a record carries: BLAKE2b of its packed bytes, 8 bytes."""
    return hashlib.blake2b(raw, digest_size=_SUM_LEN).digest()


def pack_record(obj: Any, level: int) -> bytes:
    """Pack a small record for a DynamoDB binary attribute: tag, checksum, body
    (compressed if it pays)."""
    raw = pack(obj)
    if len(raw) >= _RECORD_COMPRESS_MIN:
        packed = compress(raw, level)
        if len(packed) + 1 < len(raw):
            return _ZSTD_SUMMED + record_sum(raw) + packed
    return _RAW_SUMMED + record_sum(raw) + raw


def pack_group(obj: Any, level: int) -> bytes:
    """Pack a group of records (:data:`GROUP_RECORD`): a record with a tag of its own."""
    return GROUP_RECORD + pack_record(obj, level)


def unpack_group(data: bytes, *, key: str) -> Any:
    """Unpack a group of records read from ``key``, verifying its checksum."""
    inner = data[1:]
    if data[:1] != GROUP_RECORD or inner[:1] not in (_RAW_SUMMED, _ZSTD_SUMMED):
        raise CorruptObjectError(
            f"record {key!r} is not a group of records with a checksum; it was altered "
            "after it was written",
            key=key,
        )
    return unpack_record(inner, key=key)


def unpack_record(data: bytes, *, key: str) -> Any:
    """Unpack a record read from ``key``, verifying its checksum when it has one."""
    tag = data[:1]
    if tag == SEALED_RECORD:
        # Not SealedObjectError: one flipped bit turns tag 4 into this one.
        raise CorruptObjectError(
            f"record {key!r} is sealed (client-side encryption), or its tag was altered: "
            "read it with a saver configured with encryption= and the key ring that "
            "wrote it",
            key=key,
        )
    if tag in (_RAW, _ZSTD) and record_sum(data[1 + _SUM_LEN :]) == data[1 : 1 + _SUM_LEN]:
        # Tag 3 is one bit away from tags 1 and 2, and msgpack ignores trailing bytes: a
        # flipped tag would read the checksum as the (unchecked) record.
        raise CorruptObjectError(
            f"record {key!r} carries a checksum but a tag {tag!r} without one; it was "
            "altered after it was written",
            key=key,
        )
    if tag == _RAW:
        return unpack(data[1:], key=key)
    if tag == _ZSTD:
        return unpack(decompress(data[1:], key=key), key=key)
    if tag not in (_RAW_SUMMED, _ZSTD_SUMMED):
        raise CorruptObjectError(
            f"record {key!r} has an unknown encoding tag {tag!r}; it was altered after it "
            "was written",
            key=key,
        )
    expected, body = data[1 : 1 + _SUM_LEN], data[1 + _SUM_LEN :]
    raw = body if tag == _RAW_SUMMED else decompress(body, key=key)
    if len(expected) != _SUM_LEN or record_sum(raw) != expected:
        raise CorruptObjectError(
            f"record {key!r} does not match its checksum; it was altered or truncated "
            "after it was written",
            key=key,
        )
    return unpack(raw, key=key)
