"""How a value with many chunks is stored: its chunk list once, as a blob.

A value's entry names each chunk (digest, size and, for a packed one, where it is):
about 46 bytes a chunk, 14 KB for a 5 MB document cut into ~300 chunks. Written into
every pending-write record and checkpoint body that carries the value, such an entry
made the record a 15 KB DynamoDB write and the body too large for the index (a PUT
per step). So an entry of more than ``LIST_MIN`` chunks is stored once, as a blob of
its own, the *chunk list*, uploaded with the call's new chunks (in the same pack when
there is one, so it costs no request), and records and bodies name it with a
:class:`~langgraph_s3.core.entries.Listed` entry of about 80 bytes. A reader fetches
the list first, then the chunks it names.

A list inside a pack names the chunks of that same pack with an empty pack digest:
the pack's digest depends on the list's own bytes. See docs/layout.md ("Chunk lists").

Layout 8: a list stored right after every chunk it names, in one pack, is named with
its *lead* (how many bytes before it hold them), so a reader fetches list and chunks
with one ranged GET and the round trip a list cost is gone. That makes a list worth it
for a new value of ``SHORT_MIN`` chunks or more too: ~90 bytes in every record and body
instead of ~40 a chunk. See docs/layout.md ("Chunk lists with a lead").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from langgraph_s3 import codec
from langgraph_s3.core.entries import (
    PENDING,
    Blobs,
    ChunkRef,
    Entry,
    Envelope,
    Listed,
    ListIdentity,
    Span,
    entry_from_wire,
)
from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.keys import Layout
from langgraph_s3.operations import S3Get

if TYPE_CHECKING:
    from langgraph_s3.core.schema import WritesRow
    from langgraph_s3.core.state import SaverCore

#: An entry naming more chunks than this is stored as a chunk list. A list costs a
#: reader without it one more round trip (the list, then its chunks), so only entries
#: too large for a body in the index (~3 KB at 64 chunks) are listed: a 200-turn chat
#: (35 chunks and pieces, benchmark (e)) is not, a multi-megabyte document is.
LIST_MIN = 64
#: A value of at least this many chunks, all new (packed together, ``packs.PACK_MIN``),
#: is stored through a chunk list too when the list can go right after them in their
#: pack (layout 8): one ranged GET brings the list and the chunks, as it brought the
#: chunks, and every record and body naming the value holds ~90 bytes, not ~40 a chunk.
SHORT_MIN = 3
#: The pack digest a chunk list gives the pack it is stored in.
SELF = b""
#: What a chunk list stands for until its call's chunks are placed (``packs.seal``).
_PENDING_DIGEST = b"\0" * 32

#: (thread id, chunk list digest) -> the entry the list holds
Found = dict[tuple[str, bytes], Blobs]


def spill(entry: Entry, short: bool = False) -> Entry:
    """``entry`` as a pending chunk list if it names more than ``LIST_MIN`` chunks, or,
    with ``short`` (layout 8), at least ``SHORT_MIN`` chunks all new in this call."""
    if not isinstance(entry, Blobs):
        return entry
    if is_long(entry) or (short and _all_new(entry)):
        return Listed(_PENDING_DIGEST, 0, None, blobs=entry)
    return entry


def is_long(entry: Blobs) -> bool:
    """Whether an entry is stored as a chunk list in every layout since 3."""
    return len(entry.digests) > LIST_MIN


def _all_new(entry: Blobs) -> bool:
    spans = entry.spans
    if len(entry.digests) < SHORT_MIN or spans is None:
        return False
    return all(s is PENDING for s in spans)


def pending(entries: Iterable[Entry]) -> list[Blobs]:
    """The entries of ``entries`` still to be stored as chunk lists."""
    return [e.resolved() for e in entries if isinstance(e, Listed) and is_pending(e)]


def is_pending(entry: Listed) -> bool:
    """Whether ``entry`` is a chunk list its call has not placed yet."""
    return entry.digest == _PENDING_DIGEST and entry.size == 0


def content(blobs: Blobs) -> bytes:
    """The bytes of a chunk list (chunks in the list's own pack name it ``SELF``)."""
    return codec.pack(blobs.wire())


def identity(folder: str, blobs: Blobs) -> ListIdentity:
    """What makes two chunk lists the same list: the thread folder they are stored in
    (a list names packs of its own folder) and the chunks, not where they are."""
    return folder, codec.digest_bytes(codec.pack(replace(blobs, spans=None).wire()))


def ref(core: SaverCore, thread_id: str, entry: Listed) -> ChunkRef:
    """Where a chunk list is read from."""
    return ref_in(core.layout.thread_prefix(thread_id), entry)


def ref_in(folder: str, entry: Listed) -> ChunkRef:
    """``ref`` for the thread whose folder is ``folder``."""
    key = Layout.blob_key_in(folder, entry.digest.hex())
    if entry.span is None:
        return ChunkRef(key)
    return ChunkRef(key, entry.span, Layout.pack_key_in(folder, entry.span.pack.hex()))


def unread(pairs: Iterable[tuple[str, Entry]]) -> list[tuple[str, Listed]]:
    """The chunk lists among (thread id, entry) pairs whose content is not known."""
    return list(
        dict.fromkeys((t, e) for t, e in pairs if isinstance(e, Listed) and e.blobs is None)
    )


def refs(core: SaverCore, pairs: Iterable[tuple[str, Entry]]) -> list[ChunkRef]:
    """The chunk lists to fetch before the chunks of these entries can be named."""
    return [ref(core, t, e) for t, e in unread(pairs)]


def reads(
    core: SaverCore, pairs: Iterable[tuple[str, Entry]]
) -> tuple[list[ChunkRef], list[S3Get]]:
    """``refs``, but a list named with its lead (layout 8) and not cached as a range of
    its pack that holds its chunks too: they are then cut from it (``objects``'
    prefetched ranges) and need no GET of their own."""
    out: list[ChunkRef] = []
    gets: list[S3Get] = []
    for thread_id, entry in unread(pairs):
        at = ref(core, thread_id, entry)
        reach = entry.reach() if entry.lead is not None else None
        if reach is None or at.pack is None or core.caches.objects.get(at.key) is not None:
            out.append(at)
        else:
            gets.append(S3Get(at.pack, start=reach.offset, end=reach.offset + reach.length))
    return out, gets


def decode(
    core: SaverCore, pairs: Iterable[tuple[str, Entry]], payloads: Mapping[str, bytes]
) -> Found:
    """The entries held by the chunk lists found in ``payloads`` (verified blobs, as
    ``objects.fetch_chunks`` returns them for ``refs``)."""
    found: Found = {}
    for thread_id, entry in unread(pairs):
        at = ref(core, thread_id, entry)
        if at.key in payloads:
            found[(thread_id, entry.digest)] = open_list(entry, payloads[at.key], at)
    return found


def expand(thread_id: str, entry: Entry, found: Found) -> Entry:
    """``entry`` with the content of its chunk list, if it has one and it was read."""
    if isinstance(entry, Listed) and entry.blobs is None:
        blobs = found.get((thread_id, entry.digest))
        if blobs is not None:
            return replace(entry, blobs=blobs)
    return entry


def expand_envelope(env: Envelope, thread_id: str, found: Found) -> None:
    """Give the chunk lists of ``env``'s channels their content (in place)."""
    for name, entry in env.channels.items():
        env.channels[name] = expand(thread_id, entry, found)


def expand_writes(writes: Iterable[WritesRow], thread_id: str, found: Found) -> None:
    """Give the chunk lists of pending-write records their content (in place)."""
    for w in writes:
        w.records[:] = [
            (idx, replace(rec, entry=expand(thread_id, rec.entry, found))) for idx, rec in w.records
        ]


def open_list(entry: Listed, payload: bytes, at: ChunkRef) -> Blobs:
    """The entry a chunk list holds (``payload``: the verified blob ``at``); damage
    names the object to repair or delete (the pack, for a packed list)."""
    key = at.pack or at.key
    where = at.key if at.pack is None else f"{at.key} in pack {at.pack}"
    if len(payload) != entry.size:
        raise CorruptObjectError(f"chunk list {where!r} has the wrong size", key=key)
    inner = entry_from_wire(codec.unpack(payload, key=key), "chunk list", key)
    if not isinstance(inner, Blobs):
        raise CorruptObjectError(f"chunk list {where!r} does not list chunks", key=key)
    if not _within_lead(entry, inner):
        raise CorruptObjectError(f"chunk list {where!r} names chunks outside its lead", key=key)
    if inner.spans is None or all(not isinstance(s, Span) or s.pack != SELF for s in inner.spans):
        return inner
    if entry.span is None:
        raise CorruptObjectError(
            f"chunk list {where!r} names its own pack but is a loose blob", key=key
        )
    own = entry.span.pack
    spans = tuple(
        Span(own, s.offset, s.length) if isinstance(s, Span) and s.pack == SELF else s
        for s in inner.spans
    )
    return replace(inner, spans=spans)


def _within_lead(entry: Listed, inner: Blobs) -> bool:
    """Whether a list named with a lead (layout 8) names only chunks in the lead bytes
    before it, as its writer promised: the collector keeps its pack and reads no more."""
    reach = entry.reach()
    if entry.lead is None or reach is None:
        return True
    return inner.spans is not None and all(
        isinstance(s, Span)
        and s.pack == SELF
        and reach.offset <= s.offset
        and s.offset + s.length <= reach.offset + entry.lead
        for s in inner.spans
    )
