"""How the chunks one call uploads are stored: as one pack, so a step costs one PUT.

A ``put`` or ``put_writes`` that has at least ``PACK_MIN`` (3) new chunks to upload
writes them as one object, ``{thread}/b/{sha256}.pack``: their blob frames one after the other.
Each value entry then says, per chunk, which pack holds it and where (a
:class:`~langgraph_s3.core.entries.Span`); a reader fetches the chunks of one pack
with one ranged GET and checks each against its digest, as it does a loose blob.
A call with fewer new chunks keeps them loose blobs (``b/{sha256}``), as layout 1
did: a pack would save a PUT or two but cost every later entry that names its
chunks the pack's digest, and older releases can still read loose blobs. Or, when
they are small, chunk items in the index (layout 5, :mod:`langgraph_s3.core.chunkitems`).

Chunks are still named by their digest, so deduplication works across packs and
loose blobs alike: a chunk already stored (in a pack or loose) is referenced where
it is, never uploaded again while the saver knows it exists. The collector keeps
a pack while any entry references any chunk in it (docs/retention.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from langgraph_s3 import codec
from langgraph_s3.core import chunkitems, lists
from langgraph_s3.core.entries import (
    IN_INDEX,
    PENDING,
    Blobs,
    ChunkRef,
    Entry,
    Listed,
    ListIdentity,
    Location,
    Span,
)
from langgraph_s3.core.sealed import blob_frame, namer
from langgraph_s3.core.uploads import Placement, Shares
from langgraph_s3.keys import Layout
from langgraph_s3.operations import S3Get

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore


@dataclass
class Sealed:
    """Where a call's new chunks went, and what it uploads or waits for (``Shares``)."""

    shares: Shares
    #: chunk digest -> where it is (None: a loose blob)
    placed: dict[bytes, Location] = field(default_factory=dict)
    #: the chunk lists this call stored, by the id of the pending entry they hold
    lists: dict[int, Listed] = field(default_factory=dict)

    def resolve(self, entry: Entry) -> Entry:
        """``entry`` with its pending chunks and chunk list placed (unchanged if it
        has none)."""
        if isinstance(entry, Listed) and lists.is_pending(entry):
            listed = self.lists[id(entry.resolved())]
            if listed.lead is None and not lists.is_long(listed.resolved()):
                # a short list only pays with a lead (its chunks came apart: stored
                # already, or several packs): name the chunks, as before layout 8
                return listed.resolved()
            return listed
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
#: cheaper; an edited document uploads several. Chunk lists count as chunks, and
#: with one, two objects are packed already: the entries naming its chunks are in the
#: list (in S3), not in the index.
PACK_MIN = 3
PACK_MIN_WITH_LIST = 2
#: A pack holds at most this many bytes (a large value makes several, uploaded and
#: read in parallel, as S3 serves large objects fastest in parts of 8-16 MB).
PACK_MAX = 8 << 20


def seal(
    core: SaverCore, thread_id: str, uploads: Mapping[str, bytes], todo: Sequence[Blobs] = ()
) -> Sealed:
    """Place a call's new chunks (blob key -> framed chunk) and chunk lists (``todo``,
    the entries to store as lists, :func:`lists.pending`).

    A chunk another flow is uploading is referenced where that flow put it (the
    upload waits for it); one known to exist, where it is; the rest go into packs of
    up to ``PACK_MAX`` bytes, in order, the chunk lists at the end of the last, or
    stay loose blobs if there are fewer than ``PACK_MIN`` (``PACK_MIN_WITH_LIST``
    with a chunk list), or one would be alone in its pack.
    """
    folder = core.layout.thread_prefix(thread_id)
    idents = {id(blobs): lists.identity(folder, blobs) for blobs in todo}
    by_ident = {idents[id(blobs)]: blobs for blobs in todo}

    def place(
        fresh: dict[str, bytes], where: dict[str, Location], wanted: list[ListIdentity]
    ) -> tuple[Placement, dict[ListIdentity, tuple[str, Listed]]]:
        placing = _Placing(core, thread_id, [(i, by_ident[i]) for i in wanted], where)
        return placing.place(fresh), placing.made

    shares = core.uploads.share(
        uploads, core.caches.known_blobs.get, place, by_ident, core.caches.known_lists.get
    )
    placed = {bytes.fromhex(k.rsplit("/", 1)[1]): span for k, span in shares.where.items()}
    return Sealed(shares, placed, {i: shares.lists[ident] for i, ident in idents.items()})


@dataclass
class _Placing:
    core: SaverCore
    thread_id: str
    #: the chunk lists to build: (identity, entry)
    todo: Sequence[tuple[ListIdentity, Blobs]]
    #: chunk key -> where it is, for the chunks placed so far
    where: dict[str, Location]
    #: per list identity, its chunk key and entry
    made: dict[ListIdentity, tuple[str, Listed]] = field(default_factory=dict)

    def name(self, data: bytes) -> bytes:
        """The name of a chunk list (SHA-256, or keyed with encryption)."""
        return namer(self.core, self.thread_id)(data)

    def place(self, fresh: dict[str, bytes]) -> Placement:
        going = [self._all_fresh(b, fresh) for _, b in self.todo]
        unused = [t for t, go in zip(self.todo, going, strict=True) if not go]
        self.todo = [t for t, go in zip(self.todo, going, strict=True) if go]
        out = self._place(fresh)
        for ident, blobs in unused:
            # Not stored: ``Sealed.resolve`` names the chunks where they are instead.
            self.made[ident] = ("", Listed(b"", 0, None, self._resolve(blobs, self.where)))
        return out

    def _all_fresh(self, blobs: Blobs, fresh: Mapping[str, bytes]) -> bool:
        """Whether a chunk list goes up: a long one always; a short one (layout 8) only
        with every chunk it names new here, so they are packed before it (its lead)."""
        if lists.is_long(blobs):
            return True
        keys = (self.core.layout.blob_key(self.thread_id, d.hex()) for d in blobs.digests)
        return all(k in fresh for k in keys)

    def _place(self, fresh: dict[str, bytes]) -> Placement:
        if len(fresh) + len(self.todo) < (PACK_MIN_WITH_LIST if self.todo else PACK_MIN):
            if not self.todo and self.core.chunk_items and chunkitems.pays(fresh):
                # each an "object" of its own, under its chunk key (uploads.Placement)
                self.where.update({key: IN_INDEX for key in fresh})
                return {key: (frame, {key: IN_INDEX}) for key, frame in fresh.items()}
            out: Placement = {key: (frame, {key: None}) for key, frame in fresh.items()}
            self.where.update({key: None for key in fresh})
            for ident, blobs in self.todo:
                out.update(self._loose_list(ident, blobs))
            return out
        groups: list[dict[str, bytes]] = [{}]
        size = 0
        for key, frame in fresh.items():
            if groups[-1] and size + len(frame) > PACK_MAX:
                groups.append({})
                size = 0
            groups[-1][key] = frame
            size += len(frame)
        out = {}
        for i, group in enumerate(groups):
            out.update(self._pack(group, with_lists=i == len(groups) - 1))
        return out

    def _pack(self, group: dict[str, bytes], with_lists: bool) -> Placement:
        todo = self.todo if with_lists else ()
        if len(group) == 1 and not todo:
            ((key, frame),) = group.items()
            self.where[key] = None
            return {key: (frame, {key: None})}
        frames = dict(group)
        offsets: dict[str, int] = {}
        offset = 0
        for key, frame in frames.items():
            offsets[key] = offset
            offset += len(frame)
        own = {k: Span(lists.SELF, offsets[k], len(f)) for k, f in frames.items()}
        listed: list[tuple[ListIdentity, str, bytes, bytes, Blobs]] = []
        for ident, blobs in todo:
            inner = self._resolve(blobs, {**self.where, **own})
            data = lists.content(inner)
            blob = self.name(data)
            key = self.core.layout.blob_key(self.thread_id, blob.hex())
            self.core.caches.objects.put(key, data, len(data))  # as its chunks are
            if key not in frames:
                frames[key] = blob_frame(self.core, self.thread_id, blob, data)
                offsets[key] = offset
                offset += len(frames[key])
            listed.append((ident, key, blob, data, inner))
        body = b"".join(frames.values())
        pack = codec.digest_bytes(body)
        spans = {k: Span(pack, offsets[k], len(f)) for k, f in frames.items()}
        self.where.update(spans)
        for ident, key, blob, data, inner in listed:
            entry = Listed(blob, len(data), spans[key], _with_pack(inner, pack))
            if self.core.list_leads:
                entry = replace(entry, lead=_lead(entry, inner))
            self.made[ident] = (key, entry)
        return {self.core.layout.pack_key(self.thread_id, pack.hex()): (body, dict(spans))}

    def _loose_list(self, ident: ListIdentity, blobs: Blobs) -> Placement:
        inner = self._resolve(blobs, self.where)
        data = lists.content(inner)
        digest = self.name(data)
        key = self.core.layout.blob_key(self.thread_id, digest.hex())
        self.core.caches.objects.put(key, data, len(data))  # as its chunks are
        known = self.core.caches.known_blobs.get(key)
        span = known if isinstance(known, Span) else None
        self.made[ident] = (key, Listed(digest, len(data), span, inner))
        if known is not None:
            return {}  # the same list is stored already
        self.where[key] = None
        frame = blob_frame(self.core, self.thread_id, digest, data)
        return {key: (frame, {key: None})}

    def _resolve(self, blobs: Blobs, where: Mapping[str, Location]) -> Blobs:
        """``blobs`` with its pending chunks where ``where`` puts them."""
        if blobs.spans is None or PENDING not in blobs.spans:
            return blobs
        spans = tuple(
            where[self.core.layout.blob_key(self.thread_id, d.hex())] if s is PENDING else s
            for d, s in zip(blobs.digests, blobs.spans, strict=True)
        )
        return replace(blobs, spans=spans if any(s is not None for s in spans) else None)


def _lead(entry: Listed, inner: Blobs) -> int | None:
    """How many bytes before a packed chunk list hold every chunk it names (layout 8:
    one ranged GET reads them all, and the collector needs only the pack); None if
    some are elsewhere (another pack, a loose blob, a chunk item)."""
    assert entry.span is not None
    spans = inner.spans or ()
    own = [s.offset for s in spans if isinstance(s, Span) and s.pack == lists.SELF]
    if not own or len(own) != len(inner.digests):
        return None
    return entry.span.offset - min(own)


def _with_pack(blobs: Blobs, pack: bytes) -> Blobs:
    """A chunk list's entry with its own pack's digest in place of ``lists.SELF``."""
    if blobs.spans is None:
        return blobs
    spans = tuple(
        Span(pack, s.offset, s.length) if isinstance(s, Span) and s.pack == lists.SELF else s
        for s in blobs.spans
    )
    return replace(blobs, spans=spans)


def layout_of(entries: Iterable[Entry]) -> int:
    """The oldest layout that can read these entries."""
    entries = list(entries)
    if any(isinstance(e, Listed) and e.lead is not None for e in entries):
        return codec.LAYOUT_LEADS
    if any(_names_items(e) for e in entries):
        return codec.LAYOUT_ITEMS
    if any(isinstance(e, Listed) for e in entries):
        return codec.LAYOUT_LISTS
    packed = any(isinstance(e, Blobs) and e.packed() for e in entries)
    return codec.LAYOUT_PACKS if packed else codec.LAYOUT_1


def _names_items(entry: Entry) -> bool:
    """Whether an entry, or the chunk list it names (once known), names a chunk item:
    an older release must refuse the body, not fail on the list it reads later."""
    if isinstance(entry, Listed):
        return entry.blobs is not None and entry.blobs.has_items()
    return isinstance(entry, Blobs) and entry.has_items()


def chunk_refs(core: SaverCore, thread_id: str, entry: Entry) -> list[ChunkRef]:
    """The chunks a value entry reads, in order."""
    return chunk_refs_in(core.layout.thread_prefix(thread_id), entry)


def chunk_refs_in(folder: str, entry: Entry) -> list[ChunkRef]:
    """``chunk_refs`` for the thread whose folder is ``folder`` (a chunk list must
    have been read: ``lists.expand``)."""
    if isinstance(entry, Listed):
        entry = entry.resolved()
    if not isinstance(entry, Blobs):
        return []
    refs = []
    for i, digest in enumerate(entry.digests):
        key = Layout.blob_key_in(folder, digest.hex())
        place = entry.location(i)
        if isinstance(place, Span):
            refs.append(ChunkRef(key, place, Layout.pack_key_in(folder, place.pack.hex())))
        else:
            refs.append(ChunkRef(key, item=place is IN_INDEX))
    return refs


def objects_in(folder: str, entry: Entry) -> list[str]:
    """The S3 objects a value entry needs to exist: its loose blobs and its packs, and
    its chunk list's (which must have been read: ``lists.expand``); not its chunk
    items, which are in the index (``ChunkRef.item``). A list with a lead (layout 8)
    needs only its pack, read or not: every chunk it names is there."""
    if isinstance(entry, Listed) and entry.lead is not None:
        pack = lists.ref_in(folder, entry).pack
        assert pack is not None  # a lead comes with a span
        return [pack]
    refs = chunk_refs_in(folder, entry)
    if isinstance(entry, Listed):
        refs.append(lists.ref_in(folder, entry))
    return list(dict.fromkeys(r.pack or r.key for r in refs if not r.item))


def merge_ranges(gets: Iterable[S3Get]) -> list[S3Get]:
    """One range per pack (from the first byte wanted to the last): prefetched ranges
    are kept by pack key, so two of one pack would leave one unused."""
    spans: dict[str, tuple[int, int]] = {}
    for get in gets:
        assert get.start is not None and get.end is not None
        start, end = spans.get(get.key, (get.start, get.end))
        spans[get.key] = (min(start, get.start), max(end, get.end))
    return [S3Get(key, start=start, end=end) for key, (start, end) in spans.items()]
