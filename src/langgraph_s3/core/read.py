"""How a checkpoint tuple is read: find its index item, load its objects, assemble it.

A read of the latest checkpoint is usually one query (newest items first: the
latest checkpoint item and its writes) plus, when the body is not in the item, one
round trip for the object and its blobs together. With encryption, a thread whose
data key this saver has not loaded has its key items read in the same round trip as
its checkpoint items (:func:`keyed`). Everything loaded is verified
against the digests the index records (:mod:`langgraph_s3.core.objects`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, PendingWrite, writes_sort_key

from langgraph_s3 import guard
from langgraph_s3.core import lists, packs, schema, values
from langgraph_s3.core.config import checkpoint_id_of, thread_ns
from langgraph_s3.core.datakeys import thread_key, thread_keys
from langgraph_s3.core.entries import Blobs, ChunkRef, Entry, Envelope, Listed
from langgraph_s3.core.incarnations import incarnation, restarted
from langgraph_s3.core.index import Item, Query, TouchHead
from langgraph_s3.core.objects import fetch_chunks, object_key, open_envelope, read_envelopes
from langgraph_s3.core.paging import next_page, read_all
from langgraph_s3.core.schema import Row, WritesRow
from langgraph_s3.core.sealed import open_writes
from langgraph_s3.errors import KeyVersionError, SealedObjectError
from langgraph_s3.operations import Flow, S3Get, T, together

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

Found = tuple[Row, list[WritesRow]]
_QUERY_PAGE = 50


def get_tuple(core: SaverCore, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
    """``BaseCheckpointSaver.get_tuple``: the latest checkpoint, or the one named."""
    thread_id, ns = thread_ns(config)
    cid = checkpoint_id_of(config)
    if cid is None:
        found = yield from latest(core, thread_id, ns)
        if found is not None and core.touch_on_read:
            yield from _touch(core, found[0])
    else:
        found = yield from exact(core, thread_id, ns, cid)
    if found is None:
        return None
    tuples = yield from load(core, [found], config if cid is not None else None, remember=True)
    # The thread id in the answer tells this run's puts whether they continue the
    # head (a read of the latest) or fork (an exact read): see guard.py.
    got = tuples[0]
    conf = dict(got.config["configurable"])
    if cid is None:
        conf["thread_id"] = guard.read_latest(thread_id, ns, found[0].checkpoint_id)
    else:
        conf["thread_id"] = guard.read_exact(config["configurable"], thread_id, ns, cid)
    return got._replace(config={**got.config, "configurable": conf})


def keyed(core: SaverCore, thread_id: str, read: Flow[T]) -> Flow[T]:
    """``read``, a read of the thread's index items, with the thread's data key loaded
    beside it (:func:`~langgraph_s3.core.datakeys.thread_key`): a saver that has not
    loaded it (a cold container) sends the key items' query in the same round trip as
    the read's first, not after it. Costs nothing more when the key is loaded."""
    _, found = yield from together(thread_key(core, thread_id), read)
    return found


def latest(core: SaverCore, thread_id: str, ns: str) -> Flow[Found | None]:
    """The newest checkpoint item of ``(thread, ns)`` and its writes: one query,
    usually; the thread's data key is loaded beside it (:func:`keyed`)."""
    found = yield from keyed(core, thread_id, _latest(core, thread_id, ns))
    if found is None and ns == "":
        # No checkpoint: a new run may start on a thread id another saver deleted.
        # After the key load, which may have read the deleted thread's key.
        restarted(core, thread_id)
    return found


def _latest(core: SaverCore, thread_id: str, ns: str) -> Flow[Found | None]:
    query: Query | None = Query(
        core.table,
        core.layout.pk(thread_id),
        prefix=core.layout.ns_prefix_sk(ns),
        newest_first=True,
        # Usually the newest few items are the latest checkpoint and its writes;
        # DynamoDB bills every item a page reads, so start small.
        limit=8,
    )
    writes: list[Item] = []
    encrypted = core.encryption is not None
    while query is not None:
        page, query = yield from next_page(query)
        for item in page.items:
            if schema.is_checkpoint_item(item):
                row = schema.parse_row(item)
                mine = [schema.parse_writes(w, encrypted=encrypted) for w in writes]
                return row, [w for w in mine if w.checkpoint_id == row.checkpoint_id]
            if schema.is_writes_item(item):
                writes.append(item)
        if query is not None:
            query = replace(query, limit=_QUERY_PAGE)
    return None


def exact(core: SaverCore, thread_id: str, ns: str, cid: str) -> Flow[Found | None]:
    """The checkpoint item ``cid`` of ``(thread, ns)`` and its writes; the thread's
    data key is loaded beside them (:func:`keyed`)."""
    between = (core.layout.checkpoint_sk(ns, cid), core.layout.writes_upper_sk(ns, cid))
    query = Query(core.table, core.layout.pk(thread_id), between=between)
    items = yield from keyed(core, thread_id, read_all(query))
    row = next((schema.parse_row(i) for i in items if schema.is_checkpoint_item(i)), None)
    if row is None:
        return None
    encrypted = core.encryption is not None
    return row, [
        schema.parse_writes(i, encrypted=encrypted) for i in items if schema.is_writes_item(i)
    ]


def _touch(core: SaverCore, row: Row) -> Flow[None]:
    """Record a read on the head item, so retention counts it as activity."""
    pk = schema.checkpoint_ref(row.item)[0]
    yield TouchHead(core.table, pk, core.layout.head_sk(row.ns), core.now_ms())


def load(
    core: SaverCore,
    found: Sequence[Found],
    requested: RunnableConfig | None,
    remember: bool = False,
) -> Flow[list[CheckpointTuple]]:
    """Turn index items into CheckpointTuples: objects and write blobs, then value blobs.

    ``remember``: the caller is about to continue from this checkpoint, so its
    blob entries become the hints the next put() chunks against.
    """
    try:
        return (yield from _load(core, found, requested, remember))
    except (KeyVersionError, SealedObjectError) as exc:
        # Re-encrypted since this saver loaded the thread's keys (a newer version:
        # they are marked stale already), or maybe deleted and started again
        # elsewhere under a new key: this second pass loads them again.
        if not (isinstance(exc, KeyVersionError) and exc.newer):
            _stale_keys(core, found, exc)
        return (yield from _load(core, found, requested, remember))


def _stale_keys(core: SaverCore, found: Sequence[Found], exc: Exception) -> None:
    """Have the next pass read the keys of the threads ``found`` again, or re-raise
    ``exc``: an object that does not open with a key this saver loaded earlier may be
    the thread's under a new key (deleted and started again elsewhere, which the
    incarnation of items before 0.4.1 cannot tell). Damage fails the second pass too."""
    enc = core.encryption
    if enc is None:
        raise exc
    for row, _ in found:
        enc.stale(core.layout.thread_prefix(row.thread_id))


def _load(
    core: SaverCore, found: Sequence[Found], requested: RunnableConfig | None, remember: bool
) -> Flow[list[CheckpointTuple]]:
    if not found:
        return []
    for row, _ in found:
        # A thread started again elsewhere since this saver cached it: forget that
        # (and read its key again) before anything is opened or looked up.
        incarnation(core, row.thread_id, row.incarnation)
    yield from thread_keys(core, [row.thread_id for row, _ in found])
    for row, ws in found:
        open_writes(core, row.thread_id, row.ns, ws)
    # Bodies kept in the index are opened once, here: the chunk lists they name come
    # in the next round trip.
    opened = {
        i: open_envelope(core, row, row.body)
        for i, (row, _) in enumerate(found)
        if row.body is not None
    }
    write_refs, list_ranges = _first_chunks(core, found, opened)
    # Checkpoint objects, pending-write chunks and the value blobs the index names
    # go out in the same round trip.
    prefetch = [
        ChunkRef(core.layout.blob_key(row.thread_id, d.hex()), item=item)
        for row, _ in found
        for digests, item in ((row.prefetch, False), (row.item_prefetch, True))
        for d in digests
    ]
    # Only beside an object still to be read: a cached one's chunks are cached too.
    ranges = [
        S3Get(core.layout.pack_key(row.thread_id, d.hex()), start=start, end=end)
        for row, _ in found
        if core.caches.objects.get(object_key(core, row)) is None
        for d, start, end in row.pack_ranges
    ]
    ranges = packs.merge_ranges([*ranges, *list_ranges])
    fetched: dict[str, bytes] = {}
    got_ranges: dict[str, tuple[int, bytes]] = {}
    envs = yield from read_envelopes(
        core, [r for r, _ in found], write_refs, prefetch, fetched, ranges, got_ranges, opened
    )
    yield from _expand_lists(core, found, envs, fetched, got_ranges)
    value_refs = [
        ref
        for (row, ws), env in zip(found, envs, strict=True)
        for entry in [*env.channels.values(), *(rec.entry for w in ws for _, rec in w.records)]
        if isinstance(entry, Blobs | Listed)
        for ref in packs.chunk_refs(core, row.thread_id, entry)
    ]
    payloads = yield from fetch_chunks(core, value_refs, fetched, got_ranges)
    payloads.update(fetched)
    out = []
    for (row, ws), env in zip(found, envs, strict=True):
        out.append(assemble(core, row, ws, env, payloads, requested))
        if remember:
            for name, entry in env.channels.items():
                values.remember_latest(core, row.thread_id, row.ns, name, entry)
            values.remember_appends(core, row.thread_id, row.ns, env.channels)
    return out


def _first_chunks(
    core: SaverCore, found: Sequence[Found], opened: Mapping[int, Envelope]
) -> tuple[list[ChunkRef], list[S3Get]]:
    """What must come with the checkpoint objects: the pending writes' chunks, and the
    chunk lists named by pending writes and by the bodies ``opened`` already (those
    with a lead as ranges of their packs, which bring their chunks too)."""
    write_pairs = [
        (row.thread_id, rec.entry) for row, ws in found for w in ws for _, rec in w.records
    ]
    early = [
        (found[i][0].thread_id, entry)
        for i, env in opened.items()
        for entry in env.channels.values()
    ]
    refs = [
        ref
        for thread_id, entry in write_pairs
        if not isinstance(entry, Listed)
        for ref in packs.chunk_refs(core, thread_id, entry)
    ]
    listed, list_ranges = lists.reads(core, [*write_pairs, *early])
    return refs + listed, list_ranges


def _expand_lists(
    core: SaverCore,
    found: Sequence[Found],
    envs: Sequence[Envelope],
    fetched: dict[str, bytes],
    ranges: Mapping[str, tuple[int, bytes]],
) -> Flow[None]:
    """Give every chunk list the checkpoints and writes name its content: from
    ``fetched`` or the prefetched pack ``ranges``, else (a list the index did not
    name ahead of its body in S3) read now, one round trip."""
    pairs = [
        (row.thread_id, entry)
        for (row, ws), env in zip(found, envs, strict=True)
        for entry in [*env.channels.values(), *(rec.entry for w in ws for _, rec in w.records)]
    ]
    known = lists.decode(core, pairs, fetched)
    missing = [(t, e) for t, e in lists.unread(pairs) if (t, e.digest) not in known]
    if missing:
        more = yield from fetch_chunks(core, lists.refs(core, missing), fetched, ranges)
        known.update(lists.decode(core, missing, more))
    for (row, ws), env in zip(found, envs, strict=True):
        lists.expand_envelope(env, row.thread_id, known)
        lists.expand_writes(ws, row.thread_id, known)


def assemble(
    core: SaverCore,
    row: Row,
    writes: list[WritesRow],
    env: Envelope,
    payloads: Mapping[str, bytes],
    requested: RunnableConfig | None,
) -> CheckpointTuple:
    """A CheckpointTuple from an index row, its writes, its envelope and blob payloads."""
    key = env.key
    checkpoint = values.deserialize_checkpoint(core, env)
    channel_values = {}
    for name, entry in env.channels.items():
        channel_values[name] = values.decode_value(
            core, row.thread_id, entry, payloads, f"channel {name!r}", key
        )
        version = checkpoint["channel_versions"].get(name)
        values.cache_entry(core, row.thread_id, row.ns, name, version, entry)
        for ref in packs.chunk_refs(core, row.thread_id, entry):
            core.caches.known_blobs.put(ref.key, ref.known())
    checkpoint["channel_values"] = channel_values
    metadata = values.deserialize(core, *env.metadata, "metadata", key)
    ids = {"thread_id": row.thread_id, "checkpoint_ns": row.ns}
    return CheckpointTuple(
        config=(
            requested
            if requested is not None
            else {"configurable": {**ids, "checkpoint_id": row.checkpoint_id}}
        ),
        checkpoint=checkpoint,
        metadata=metadata,
        parent_config=(
            {"configurable": {**ids, "checkpoint_id": row.parent_id}} if row.parent_id else None
        ),
        pending_writes=pending_writes(core, row.thread_id, writes, payloads),
    )


def sorted_writes(
    writes: Iterable[WritesRow], channels: set[str] | None = None
) -> list[tuple[str, str, Entry, str]]:
    """Pending writes in LangGraph's order (``writes_sort_key``): (task id, channel,
    value entry, sort key of the item), only of ``channels`` if given."""
    flat = [
        (w.task_path, w.task_id, idx, rec, w.sk)
        for w in writes
        for idx, rec in w.records
        if channels is None or rec.channel in channels
    ]
    flat.sort(key=lambda x: writes_sort_key(x[0], x[1], x[2]))
    return [(task_id, rec.channel, rec.entry, sk) for _, task_id, _, rec, sk in flat]


def pending_writes(
    core: SaverCore, thread_id: str, writes: Iterable[WritesRow], payloads: Mapping[str, bytes]
) -> list[PendingWrite]:
    """A checkpoint's pending writes, decoded, in LangGraph's order."""
    return [
        (
            task_id,
            channel,
            values.decode_value(
                core, thread_id, entry, payloads, f"write to channel {channel!r}", sk
            ),
        )
        for task_id, channel, entry, sk in sorted_writes(writes)
    ]
