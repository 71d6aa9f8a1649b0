"""How a large value is cut into content-addressed blobs.

Values above :data:`CHUNK_THRESHOLD` bytes are cut with FastCDC (content-defined
chunking): cut points depend on the bytes around them, not on offsets, so
inserting, appending or editing a region changes only the chunks it touches and
every other chunk keeps its address and is not stored again. A message list that
grows by one message per turn re-uses all of its chunks but the last.

msgpack puts a container's length in front of it, so a list that grows changes
its first bytes on every append. That length header is kept out of the chunks
(stored inline in the entry as ``head``) so the first chunk stays stable too.

Appends get one more step (:func:`plan`). Content-defined chunking alone rewrites
the value's last chunk, on average 16 KiB, on every append, because it ends where
the data ends rather than at a content boundary. So a value is stored as *stable*
chunks (each ended by a content boundary, exactly the chunks FastCDC cuts) followed
by a few *pieces*: the unfinished end of the value, kept in the sizes in which it
was appended. A new version that starts with the previous version's bytes (checked
by hashing, never assumed) keeps every stable chunk and every piece and adds only
what was appended; once a content boundary appears in the pieces, the bytes before
it become a stable chunk. Each appended byte is written about twice instead of
being rewritten with the whole last chunk on every append.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from langgraph_s3.immutable import immutable

#: Serialized values larger than this are chunked; smaller ones are one blob.
CHUNK_THRESHOLD = 64 * 1024
#: FastCDC's average chunk size (min = avg/4, max = avg*4).
AVG_CHUNK = 16 * 1024
#: At most this many pieces follow the stable chunks; beyond it they are merged into
#: one, which bounds the references a checkpoint carries for a value appended to in
#: many tiny steps.
MAX_PIECES = 16

# msgpack type byte -> length of the header that carries a size:
# str8/16/32, bin8/16/32, array16/32, map16/32 (fixarray/fixmap/fixstr: 1 byte).
_HEADER_LEN = {
    0xD9: 2,
    0xDA: 3,
    0xDB: 5,  # str
    0xC4: 2,
    0xC5: 3,
    0xC6: 5,  # bin
    0xDC: 3,
    0xDD: 5,  # array
    0xDE: 3,
    0xDF: 5,  # map
}


def split_head(type_: str, data: bytes) -> tuple[bytes, bytes]:
    """Split the msgpack size header off a serialized value (nothing for other types)."""
    if type_ != "msgpack" or not data:
        return b"", data
    first = data[0]
    n = _HEADER_LEN.get(first)
    if n is None and (0x80 <= first <= 0x9F or 0xA0 <= first <= 0xBF):
        n = 1  # fixmap, fixarray, fixstr
    if n is None or n >= len(data):
        return b"", data
    return data[:n], data[n:]


def _cdc(data: bytes) -> list[bytes]:
    # Imported here: only processes that store large values pay for it.
    from pyfastcdc import FastCDC

    return [bytes(c.data) for c in FastCDC(AVG_CHUNK).cut_buf(data)]


@immutable
class Chunk:
    """One chunk of a value: its name (SHA-256 of its bytes, or keyed), its size, its
    bytes if new."""

    digest: bytes
    size: int
    #: ``None`` when the chunk is re-used from the previous version (already stored).
    data: bytes | None


@immutable
class Previous:
    """What the saver knows of the version a new value probably extends."""

    digests: Sequence[bytes]
    sizes: Sequence[int]
    #: How many leading chunks are stable (ended by a content boundary).
    stable: int


def sha256(data: bytes) -> bytes:
    """The default chunk name: SHA-256 of the chunk, 32 bytes."""
    return hashlib.sha256(data).digest()


def plan(
    data: bytes, previous: Previous | None = None, name: Callable[[bytes], bytes] = sha256
) -> tuple[list[Chunk], int]:
    """Cut ``data`` into chunks, re-using what it shares with ``previous``.

    Returns the chunks in order and how many leading ones are stable. Without a
    usable ``previous`` this is plain content-defined chunking (one chunk up to
    :data:`CHUNK_THRESHOLD`); the result never depends on ``previous`` being right,
    only its cost does, because every re-used chunk is verified against ``data``.
    ``name`` names a chunk (a keyed hash with encryption); ``previous`` must use it too.
    """

    def _new(chunk: bytes) -> Chunk:
        return Chunk(name(chunk), len(chunk), chunk)

    matched, offset = 0, 0
    if previous is not None:
        for d, size in zip(previous.digests, previous.sizes, strict=False):
            end = offset + size
            if end > len(data) or name(data[offset:end]) != d:
                break
            matched, offset = matched + 1, end
    if matched == 0:
        if len(data) <= CHUNK_THRESHOLD:
            return ([_new(data)] if data else []), 0
        cuts = _cdc(data)
        return [_new(c) for c in cuts], len(cuts) - 1
    assert previous is not None
    if offset == len(data) and matched == len(previous.digests):  # the same value again
        reused = [Chunk(d, n, None) for d, n in zip(previous.digests, previous.sizes, strict=True)]
        return reused, previous.stable
    # FastCDC decides a cut by the byte that follows it too, so a re-used chunk is
    # still a stable (content-ended) chunk only if the chunk after it matched as well.
    stable = min(matched - 1, previous.stable)
    if offset == len(data):  # truncated at a chunk boundary
        return [Chunk(previous.digests[i], previous.sizes[i], None) for i in range(matched)], stable
    out = [Chunk(previous.digests[i], previous.sizes[i], None) for i in range(stable)]
    start = sum(previous.sizes[:stable])
    # FastCDC's cut points depend only on the bytes since the previous cut, so
    # chunking from the last stable boundary gives the chunks a full pass would.
    cuts = _cdc(data[start:]) if len(data) > start else []
    for c in cuts[:-1]:
        out.append(_new(c))
    if len(cuts) > 1 or matched == stable:
        # A new boundary (or nothing to keep): the unfinished end is one new piece.
        rest = cuts[-1:] if len(cuts) > 1 else ([data[start:]] if len(data) > start else [])
        return out + [_new(c) for c in rest], len(out)
    pieces = [Chunk(previous.digests[i], previous.sizes[i], None) for i in range(stable, matched)]
    if len(data) > offset:
        pieces.append(_new(data[offset:]))
    if len(pieces) > MAX_PIECES:
        pieces = [_new(data[start:])]
    return out + pieces, stable
