"""How the chunks one call uploads are stored: as one pack, so a step costs one PUT.

A ``put`` or ``put_writes`` that has at least ``PACK_MIN`` (3) new chunks to upload
writes them as one object, ``{thread}/b/{sha256}.pack``: their blob frames one after the other.
Each value entry then says, per chunk, which pack holds it and where (a
:class:`~langgraph_s3.core.entries.Span`); a reader fetches the chunks of one pack
with one ranged GET and checks each against its digest, as it does a loose blob.
A call with fewer new chunks keeps them loose blobs (``b/{sha256}``), as layout 1
did: a pack would save a PUT or two but cost every later entry that names its
chunks the pack's digest, and older releases can still read loose blobs.

Chunks are still named by their digest, so deduplication works across packs and
loose blobs alike: a chunk already stored (in a pack or loose) is referenced where
it is, never uploaded again while the saver knows it exists. The collector keeps
a pack while any entry references any chunk in it (docs/retention.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple

from langgraph_s3 import codec
from langgraph_s3.core.entries import PENDING, Blobs, Entry, Span
from langgraph_s3.core.uploads import Placement, Shares
from langgraph_s3.keys import Layout

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore


class ChunkRef(NamedTuple):
    """One chunk to read: its own (loose blob) key, which names it in caches and
    payloads, and where it is packed (``span`` and the pack's key), if it is."""

    key: str
    span: Span | None = None
    pack: str | None = None


@dataclass
class Sealed:
    """Where a call's new chunks went, and what it uploads or waits for (``Shares``)."""

    shares: Shares
    #: chunk digest -> where it is (None: a loose blob)
    placed: dict[bytes, Span | None] = field(default_factory=dict)

    def resolve(self, entry: Entry) -> Entry:
        """``entry`` with its pending chunks placed (unchanged if it has none)."""
        if not isinstance(entry, Blobs) or entry.spans is None or PENDING not in entry.spans:
            return entry
        # Every pending chunk was placed by seal (a missing one is a bug, not a
        # loose blob: naming a blob that was never uploaded would lose the value).
        spans = tuple(
            self.placed[d] if s is PENDING else s
            for d, s in zip(entry.digests, entry.spans, strict=True)
        )
        return replace(entry, spans=spans if any(s is not None for s in spans) else None)


#: Fewer new chunks than this stay loose blobs: a pack saves PUTs (one instead of
#: one per chunk) but costs every later entry naming its chunks ~32 bytes for the
#: pack and ~6 per chunk, kept in the index with the checkpoints that carry them.
#: A growing message list uploads one or two chunks a step, where loose blobs are
#: cheaper; an edited document uploads several.
PACK_MIN = 3
#: A pack holds at most this many bytes (a large value makes several, uploaded and
#: read in parallel, as S3 serves large objects fastest in parts of 8-16 MB).
PACK_MAX = 8 << 20


def seal(core: SaverCore, thread_id: str, uploads: Mapping[str, bytes]) -> Sealed:
    """Place a call's new chunks (blob key -> framed chunk).

    A chunk another flow is uploading is referenced where that flow put it (the
    upload waits for it); one known to exist, where it is; the rest go into packs of
    up to ``PACK_MAX`` bytes, in order, or stay loose blobs if there are fewer than
    ``PACK_MIN`` (or one would be alone in its pack).
    """
    shares = core.uploads.share(
        uploads, core.caches.known_blobs.get, lambda fresh: _place(core, thread_id, fresh)
    )
    placed = {bytes.fromhex(k.rsplit("/", 1)[1]): span for k, span in shares.where.items()}
    return Sealed(shares, placed)


def _place(core: SaverCore, thread_id: str, fresh: dict[str, bytes]) -> Placement:
    out: Placement = {}
    if len(fresh) < PACK_MIN:
        return {key: (frame, {key: None}) for key, frame in fresh.items()}
    group: dict[str, bytes] = {}
    size = 0
    for key, frame in fresh.items():
        if group and size + len(frame) > PACK_MAX:
            out.update(_pack(core, thread_id, group))
            group, size = {}, 0
        group[key] = frame
        size += len(frame)
    out.update(_pack(core, thread_id, group))
    return out


def _pack(core: SaverCore, thread_id: str, group: dict[str, bytes]) -> Placement:
    if len(group) == 1:
        ((key, frame),) = group.items()
        return {key: (frame, {key: None})}
    body = b"".join(group.values())
    pack = codec.digest_bytes(body)
    spans: dict[str, Span | None] = {}
    offset = 0
    for key, frame in group.items():
        spans[key] = Span(pack, offset, len(frame))
        offset += len(frame)
    return {core.layout.pack_key(thread_id, pack.hex()): (body, spans)}


def layout_of(entries: Iterable[Entry]) -> int:
    """The oldest layout that can read these entries."""
    packed = any(isinstance(e, Blobs) and e.packed() for e in entries)
    return codec.LAYOUT_PACKS if packed else codec.LAYOUT_1


def chunk_refs(core: SaverCore, thread_id: str, entry: Entry) -> list[ChunkRef]:
    """The chunks a value entry reads, in order."""
    return chunk_refs_in(core.layout.thread_prefix(thread_id), entry)


def chunk_refs_in(folder: str, entry: Entry) -> list[ChunkRef]:
    """``chunk_refs`` for the thread whose folder is ``folder``."""
    if not isinstance(entry, Blobs):
        return []
    refs = []
    for i, digest in enumerate(entry.digests):
        span = entry.span(i)
        pack = None if span is None else Layout.pack_key_in(folder, span.pack.hex())
        refs.append(ChunkRef(Layout.blob_key_in(folder, digest.hex()), span, pack))
    return refs


def objects_in(folder: str, entry: Entry) -> list[str]:
    """The objects a value entry needs to exist: its loose blobs and its packs."""
    return list(dict.fromkeys(r.pack or r.key for r in chunk_refs_in(folder, entry)))
