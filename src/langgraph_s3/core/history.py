"""History: listing checkpoints, and walking a checkpoint's parent chain.

``list`` reads index items (a query per thread, a scan across threads) and loads
them in batches. The parent-chain walk (:func:`walk_chain`) serves both delta
channel history (LangGraph rebuilds a ``DeltaChannel`` from the writes since the
nearest ancestor that stored its value) and ``prune`` (which must keep exactly
those ancestors): one walk, so the two can never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
)

from langgraph_s3.core import lists, packs, schema, values
from langgraph_s3.core.config import checkpoint_id_of, ns_value, thread_ns
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.entries import Entry, Envelope
from langgraph_s3.core.index import Item, ListFilter, Query, ScanCheckpoints
from langgraph_s3.core.objects import fetch_chunks, open_envelope, read_envelope, read_lists
from langgraph_s3.core.paging import next_page, read_all
from langgraph_s3.core.read import keyed, latest, load, sorted_writes
from langgraph_s3.core.schema import Row, WritesRow
from langgraph_s3.core.sealed import open_writes
from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.keys import check_checkpoint_id
from langgraph_s3.operations import Emit, Flow

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

_LOAD_BATCH = 16
#: Items the first page of a limited ``list`` reads per checkpoint asked for, and the
#: items of each page after it.
_ITEMS_PER_CHECKPOINT = 4
_LIST_PAGE = 200
_CHAIN_PAGE = 200


def list_checkpoints(
    core: SaverCore,
    config: RunnableConfig | None,
    *,
    filter: dict[str, Any] | None = None,
    before: RunnableConfig | None = None,
    limit: int | None = None,
) -> Generator[Any, Any, None]:
    """``BaseCheckpointSaver.list``: yields I/O operations and, interleaved,
    :class:`Emit` results in order (newest first)."""
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise InvalidConfigError(f"limit must be a non-negative int or None, got {limit!r}")
    if filter is not None and not isinstance(filter, Mapping):
        raise InvalidConfigError("filter must be a dict of metadata key -> value")
    if limit == 0:
        return
    before_id = None
    if before is not None:
        before_id = get_checkpoint_id(before)
        if before_id is not None:
            check_checkpoint_id(before_id)
    filter = dict(filter or {})
    where = _server_filter(filter if core.encryption is None else {}, before_id)
    if config is None:
        items = yield from _scan_all(core, where)
        writes: dict[tuple[str, str], list[WritesRow]] = {}
        rows = _pair(core, items, writes, where)
        rows.sort(key=lambda r: r.checkpoint_id, reverse=True)
        yield from _emit(core, rows, writes, filter, limit)
        return
    # A thread is read a page at a time, newest first, and the reading stops once
    # `limit` checkpoints are out: what a list reads is bounded by what it returns.
    # The thread's data key is read beside the first page (a cold saver's list costs
    # no round trip more for it).
    thread_id, _ = thread_ns(config)
    first = _thread_query(core, config, where, limit)
    page, query = yield from keyed(core, thread_id, next_page(first))
    writes = {}
    remaining = limit
    while True:
        rows = _pair(core, page.items, writes, first.where or where)
        remaining = yield from _emit(core, rows, writes, filter, remaining)
        if query is None or remaining == 0:
            return
        if query.limit is not None:
            query = replace(query, limit=_LIST_PAGE)
        page, query = yield from next_page(query)


def _pair(
    core: SaverCore,
    items: list[Item],
    writes: dict[tuple[str, str], list[WritesRow]],
    where: ListFilter,
) -> list[Row]:
    """The checkpoint rows among ``items`` that ``where`` admits, in order; writes
    items go to ``writes``.

    Newest first, a checkpoint's writes items (their sort keys extend its own) come
    before it, so a checkpoint's writes are all in ``writes`` once it is reached.
    """
    rows: list[Row] = []
    for item in items:
        if schema.is_writes_item(item):
            w = schema.parse_writes(item, encrypted=core.encryption is not None)
            writes.setdefault(schema.checkpoint_ref(item), []).append(w)
        elif schema.is_checkpoint_item(item):
            row = schema.parse_row(item)
            if where.admits(row.checkpoint_id):
                rows.append(row)
    return rows


def _may_match(core: SaverCore, row: Row, filter: Mapping[str, Any]) -> bool:
    """Whether checkpoint ``row`` may match ``filter``: False only for a body in the
    item, with no metadata index (layout 9), whose metadata does not. Checked before
    its values are read, as the index checks the metadata it holds."""
    if not filter or schema.METADATA in row.item:
        return True
    metadata = item_metadata(core, row)
    return metadata is None or all(metadata.get(k) == v for k, v in filter.items())


def item_metadata(core: SaverCore, row: Row) -> dict[str, Any] | None:
    """The metadata of checkpoint ``row`` if its item holds its body unsealed (checked
    against ``h``), else None: it is read with the checkpoint."""
    if row.body is None or core.encryption is not None:
        return None
    env = open_envelope(core, row, row.body)
    metadata = values.deserialize(core, *env.metadata, "metadata", env.key)
    return metadata if isinstance(metadata, dict) else None


def _emit(
    core: SaverCore,
    rows: list[Row],
    writes: Mapping[tuple[str, str], list[WritesRow]],
    filter: Mapping[str, Any],
    remaining: int | None,
) -> Generator[Any, Any, int | None]:
    """Load ``rows`` in batches and emit those the filter keeps, at most ``remaining``;
    how many may still be emitted (None: no limit)."""
    for start in range(0, len(rows), _LOAD_BATCH):
        if remaining == 0:
            break
        batch = [r for r in rows[start : start + _LOAD_BATCH] if _may_match(core, r, filter)]
        if remaining is not None:
            batch = batch[:remaining] if not filter else batch
        found = [(r, writes.get(schema.checkpoint_ref(r.item), [])) for r in batch]
        tuples = yield from load(core, found, None)
        for tup in tuples:
            if filter and not all(tup.metadata.get(k) == v for k, v in filter.items()):
                continue
            yield Emit(tup)
            if remaining is not None:
                remaining -= 1
                if remaining == 0:
                    break
    return remaining


def _server_filter(filter: Mapping[str, Any], before_id: str | None) -> ListFilter:
    """The part of a list filter the index checks: metadata equality on values it
    can hold (others are checked on the loaded metadata) and the ``before`` bound.

    ``None`` is checked on the metadata only: as in ``InMemorySaver``, it matches a
    checkpoint whose metadata has no such key, which the index cannot express. With
    encryption the index holds no metadata (``md``), so everything is checked on the
    loaded metadata.
    """
    indexed = (
        (slot, k, schema.metadata_index_value(v))
        for slot, (k, v) in enumerate(filter.items())
        if isinstance(k, str) and k and v is not None
    )
    return ListFilter(tuple((i, k, v) for i, k, v in indexed if v is not None), before_id)


def _scan_all(core: SaverCore, query: ListFilter) -> Flow[list[Item]]:
    items = yield from read_all(ScanCheckpoints(core.table, core.layout.prefix, query))
    return [i for i in items if core.layout.owns_pk(schema.pk_of(i))]


def _thread_query(
    core: SaverCore, config: RunnableConfig, where: ListFilter, limit: int | None
) -> Query:
    """The first page of a thread's checkpoint and writes items for ``list``, newest
    first: a namespace's (or every namespace's), one checkpoint's, or those before one."""
    thread_id, _ = thread_ns(config)
    raw_ns = config["configurable"].get("checkpoint_ns")
    ns = None if raw_ns is None else ns_value(raw_ns)
    cid = checkpoint_id_of(config)
    between = prefix = None
    if ns is not None and cid is not None:
        between = (core.layout.checkpoint_sk(ns, cid), core.layout.writes_upper_sk(ns, cid))
    elif ns is not None and where.before_id is not None:
        between = (core.layout.ns_prefix_sk(ns), core.layout.checkpoint_sk(ns, where.before_id))
    elif ns is not None:
        prefix = core.layout.ns_prefix_sk(ns)
    else:
        prefix = core.layout.checkpoints_sk_prefix()
    return Query(
        core.table,
        core.layout.pk(thread_id),
        prefix=prefix,
        between=between,
        newest_first=True,
        consistent=False,
        # A checkpoint usually comes with a few writes items; a filter may skip some.
        limit=None if limit is None else min(limit * _ITEMS_PER_CHECKPOINT, _LIST_PAGE),
        where=replace(where, cid=cid),
    )


# ------------------------------------------------------------- the chain walk
Seeds = dict[str, tuple[Entry, Envelope]]


def walk_chain(
    core: SaverCore,
    rows: Mapping[str, Row],
    cursor: str | None,
    remaining: set[str],
    visit: Callable[[Row], None],
) -> Flow[tuple[str | None, Seeds]]:
    """Follow parent links from ``cursor`` through ``rows`` until every channel in
    ``remaining`` has found the nearest ancestor that stores its value.

    ``visit`` sees each checkpoint passed (before its values are looked at). Found
    channels leave ``remaining``. Returns where the walk stopped (a checkpoint not
    in ``rows`` yet, or None at the root) and, per channel found, its value entry
    and that ancestor's envelope. Only checkpoints whose index item does not mark
    the channel as unstored are read.
    """
    seeds: Seeds = {}
    while remaining and cursor is not None and cursor in rows:
        row = rows[cursor]
        visit(row)
        candidates = remaining - row.unstored
        if candidates:
            env = yield from read_envelope(core, row)
            for ch in candidates:
                if ch in env.channels:
                    seeds[ch] = (env.channels[ch], env)
                    remaining.discard(ch)
        cursor = row.parent_id
    return cursor, seeds


def kept_chain(core: SaverCore, rows: Mapping[str, Row]) -> Flow[set[str]]:
    """The latest checkpoint plus the ancestors its delta channels are rebuilt from."""
    newest = rows[max(rows)]
    keep = {newest.checkpoint_id}
    remaining = set(newest.unstored)
    if remaining:
        env = yield from read_envelope(core, newest)
        md = values.deserialize(core, *env.metadata, "metadata", env.key)
        remaining = schema.delta_channels(md, remaining)
    yield from walk_chain(
        core, rows, newest.parent_id, remaining, lambda r: keep.add(r.checkpoint_id)
    )
    return keep


# ------------------------------------------------------------- delta history
def delta_history(
    core: SaverCore, config: RunnableConfig, channels: Sequence[str]
) -> Flow[Mapping[str, DeltaChannelHistory]]:
    """``get_delta_channel_history``: per channel, the nearest ancestor's stored value
    (the seed) and the writes since, oldest first.

    The chain is read in index pages (newest first), not one GET per ancestor: the
    walk advances as far as the pages read so far reach, then reads the next page.
    """
    if not channels:
        return {}
    thread_id, ns = thread_ns(config)
    cid = checkpoint_id_of(config)
    if cid is None:
        found = yield from latest(core, thread_id, ns)  # and the data key, beside it
        if found is None:
            return {ch: {"writes": []} for ch in channels}
        cid = found[0].checkpoint_id
    else:
        yield from thread_key(core, thread_id)
    query: Query | None = Query(
        core.table,
        core.layout.pk(thread_id),
        between=(core.layout.ns_prefix_sk(ns), core.layout.checkpoint_sk(ns, cid)),
        newest_first=True,
        limit=_CHAIN_PAGE,
    )
    rows: dict[str, Row] = {}
    writes: dict[str, list[WritesRow]] = {}
    remaining = set(channels)
    collected: list[list[tuple[str, str, Entry, str]]] = []  # newest checkpoint first
    seeds: Seeds = {}

    def visit(row: Row) -> None:
        collected.append(sorted_writes(writes.get(row.checkpoint_id, []), remaining))

    cursor: str | None = None
    started = False
    while remaining:
        if query is not None:
            page, query = yield from next_page(query)
            _add_page(core, (thread_id, ns), page.items, rows, writes)
        if not started:
            if cid not in rows:
                if query is None:
                    return {ch: {"writes": []} for ch in channels}
                continue
            started = True
            cursor = rows[cid].parent_id
        cursor, found_seeds = yield from walk_chain(core, rows, cursor, remaining, visit)
        seeds.update(found_seeds)
        if cursor is None or (query is None and cursor not in rows):
            break
    return (yield from _decode_history(core, thread_id, channels, collected, seeds))


def _add_page(
    core: SaverCore,
    where: tuple[str, str],
    items: list[dict[str, Any]],
    rows: dict[str, Row],
    writes: dict[str, list[WritesRow]],
) -> None:
    """Index items of one thread and namespace (``where``) into ``rows`` and ``writes``
    (records opened: the thread's key is loaded)."""
    for item in items:
        if schema.is_checkpoint_item(item):
            row = schema.parse_row(item)
            rows[row.checkpoint_id] = row
        elif schema.is_writes_item(item):
            w = schema.parse_writes(item, encrypted=core.encryption is not None)
            open_writes(core, *where, [w])
            writes.setdefault(w.checkpoint_id, []).append(w)


def _decode_history(
    core: SaverCore,
    thread_id: str,
    channels: Sequence[str],
    collected: list[list[tuple[str, str, Entry, str]]],
    seeds: Seeds,
) -> Flow[dict[str, DeltaChannelHistory]]:
    pairs = [(thread_id, e) for entries in collected for _, _, e, _ in entries]
    ranges: dict[str, tuple[int, bytes]] = {}  # lists with a lead bring their chunks
    found = yield from read_lists(
        core, [*pairs, *((thread_id, e) for e, _ in seeds.values())], ranges
    )
    if found:
        collected = [
            [(t, c, lists.expand(thread_id, e, found), sk) for t, c, e, sk in entries]
            for entries in collected
        ]
        seeds = {ch: (lists.expand(thread_id, e, found), env) for ch, (e, env) in seeds.items()}
    refs = [
        ref
        for entries in collected
        for _, _, e, _ in entries
        for ref in packs.chunk_refs(core, thread_id, e)
    ]
    refs += [ref for e, _ in seeds.values() for ref in packs.chunk_refs(core, thread_id, e)]
    payloads = yield from fetch_chunks(core, refs, None, ranges)
    result: dict[str, DeltaChannelHistory] = {}
    for ch in channels:
        ch_writes: list[PendingWrite] = [
            (tid, c, values.decode_value(core, thread_id, e, payloads, f"write to {c!r}", sk))
            for entries in reversed(collected)
            for tid, c, e, sk in entries
            if c == ch
        ]
        history: DeltaChannelHistory = {"writes": ch_writes}
        if ch in seeds:
            entry, env = seeds[ch]
            history["seed"] = values.decode_value(
                core, thread_id, entry, payloads, f"channel {ch!r}", env.key
            )
        result[ch] = history
    return result
