"""How a large value is cut into content-addressed blobs.

Values above :data:`CHUNK_THRESHOLD` bytes are cut with FastCDC (content-defined
chunking): cut points depend on the bytes around them, not on offsets, so
inserting, appending or editing a region changes only the chunks it touches and
every other chunk keeps its address and is not stored again. A message list that
grows by one message per turn re-uses all of its chunks but the last.

msgpack puts a container's length in front of it, so a list that grows changes
its first bytes on every append. That length header is kept out of the chunks
(stored inline in the entry as ``head``) so the first chunk stays stable too.
"""

from __future__ import annotations

from collections.abc import Iterator

#: Serialized values larger than this are chunked; smaller ones are one blob.
CHUNK_THRESHOLD = 64 * 1024
#: FastCDC's average chunk size (min = avg/4, max = avg*4).
AVG_CHUNK = 16 * 1024

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


def chunks(data: bytes) -> Iterator[bytes]:
    """Content-defined chunks of ``data`` (one chunk when it is small)."""
    if len(data) <= CHUNK_THRESHOLD:
        yield data
        return
    # Imported here: only processes that store large values pay for it.
    from pyfastcdc import FastCDC

    for chunk in FastCDC(AVG_CHUNK).cut_buf(data):
        yield bytes(chunk.data)
