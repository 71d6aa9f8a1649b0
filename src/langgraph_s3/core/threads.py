"""Operations on whole threads: delete, delete by run, copy, prune.

Each deletes index items before objects (once the items are gone nothing is
visible, and a crash leaves only garbage for ``gc``) and creates objects before
the index items that point to them (nothing in a copy is visible before what it
points to exists). Objects are touched only where ``Layout.owns_object`` says the
thread owns them, so one thread id never reaches another thread's objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langgraph_s3.core import schema
from langgraph_s3.core.config import thread_value
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.history import kept_chain
from langgraph_s3.core.incarnations import incarnation_in, incarnation_of_put, restarted
from langgraph_s3.core.index import DeleteHead, Item, Query, RunQuery, UnlinkParent
from langgraph_s3.core.objects import delete_objects, list_keys, object_key, read_envelopes
from langgraph_s3.core.paging import delete_items, put_items, read_all, thread_items
from langgraph_s3.core.reseal import copied_body, copied_item, copy_sealed
from langgraph_s3.core.schema import PK, Row, b, pk_of, s
from langgraph_s3.errors import InvalidConfigError, KeyVersionError, ThreadExistsError
from langgraph_s3.operations import Flow, S3Copy, perform, perform_all

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

_LOAD_BATCH = 16
_COPY_BATCH = 256


def delete_thread(core: SaverCore, thread_id: str) -> Flow[None]:
    """``BaseCheckpointSaver.delete_thread``: the thread's items, then its objects.

    With encryption the items include the thread's data key items: deleting them
    shreds whatever copies of its sealed data remain (docs/security.md). This saver
    forgets the key at once; another warm saver may use it for up to ``key_ttl``.
    """
    thread_id = thread_value(thread_id)
    items = yield from thread_items(core, thread_id, keys_only=True)
    yield from delete_items(core, schema.keys_of(items))
    prefix = core.layout.thread_prefix(thread_id)
    if core.encryption is not None:
        core.encryption.forget(prefix)
        core.encryption.ring.forget({"thread": thread_id})
    keys = yield from list_keys(core, prefix)
    yield from delete_objects(
        core, [k for k, _, _ in keys if core.layout.owns_object(thread_id, k)]
    )
    core.caches.forget_thread(thread_id, prefix)


def delete_for_runs(core: SaverCore, run_ids: Sequence[str]) -> Flow[None]:
    """``BaseCheckpointSaver.delete_for_runs``: checkpoints (and their writes) of runs."""
    if isinstance(run_ids, str):
        raise InvalidConfigError("run_ids must be a sequence of run ids, not a single string")
    for run_id in dict.fromkeys(run_ids):
        if not isinstance(run_id, str):
            raise InvalidConfigError(f"run id must be a string, got {run_id!r}")
        hits = yield from read_all(RunQuery(core.table, run_id))
        refs = [schema.checkpoint_ref(h) for h in hits if core.layout.owns_pk(pk_of(h))]
        if not refs:
            continue
        # The index projects only keys; read the items (and their writes).
        pages = yield from perform_all(
            [
                Query(core.table, pk, between=(sk, core.layout.writes_upper_of(sk)))
                for pk, sk in refs
            ]
        )
        items = [item for page in pages for item in page.items]
        rows = [schema.parse_row(i) for i in items if schema.is_checkpoint_item(i)]
        yield from drop_checkpoints(core, rows, items)


def drop_checkpoints(core: SaverCore, rows: Sequence[Row], all_items: Sequence[Item]) -> Flow[None]:
    """Delete checkpoint items, their writes and objects; remove heads that named them."""
    doomed = {schema.checkpoint_ref(r.item) for r in rows}
    keys = schema.keys_of(
        [
            item
            for item in all_items
            if (schema.is_checkpoint_item(item) or schema.is_writes_item(item))
            and schema.checkpoint_ref(item) in doomed
        ]
    )
    yield from delete_items(core, keys)
    yield from delete_objects(core, [object_key(core, r) for r in rows if r.body is None])
    heads: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        heads.setdefault((pk_of(r.item), r.ns), []).append(r.checkpoint_id)
    ops = [
        DeleteHead(core.table, pk, core.layout.head_sk(ns), tuple(cids[i : i + 100]))
        for (pk, ns), cids in heads.items()
        for i in range(0, len(cids), 100)
    ]
    if ops:
        yield ops


def copy_thread(core: SaverCore, source_thread_id: str, target_thread_id: str) -> Flow[None]:
    """``BaseCheckpointSaver.copy_thread``: a new thread with the same history."""
    src = thread_value(source_thread_id)
    dst = thread_value(target_thread_id)
    if src == dst:
        raise InvalidConfigError("copy_thread needs two different thread ids")
    # Checkpoint and writes items only: a copy that failed part way has left the
    # target's data key item (created before anything is sealed for it) and maybe
    # objects, but nothing visible; retrying it reuses that key and goes on.
    first = Query(
        core.table, core.layout.pk(dst), prefix=core.layout.checkpoints_sk_prefix(), limit=1
    )
    existing = yield from perform(replace(first, keys_only=True))
    if existing.items:
        raise ThreadExistsError(
            f"thread {dst!r} already has checkpoints; delete it first or copy to a new id"
        )
    # The target has no checkpoint: it may be a thread id another saver deleted since
    # this one loaded its key, which must not seal the copy.
    restarted(core, dst)
    items = yield from thread_items(core, src)
    if not items:
        return
    yield from incarnation_in(core, src, items)
    dst_pk = s(core.layout.pk(dst))
    # Heads (and the owner item); not the data key items: the source's key is bound
    # to the source thread, and the copy is sealed under a key of its own. Chunk
    # items are copied as blobs are, below.
    heads = [{**i, PK: dst_pk, schema.THREAD: s(dst)} for i in items if _is_head(i)]
    if core.encryption is not None:
        # Everything is bound to its thread: re-sealed for the target (core/reseal.py).
        try:
            new_items = yield from copy_sealed(core, src, dst, items)
        except KeyVersionError as exc:
            if not exc.newer:
                raise
            # The source was re-encrypted since this saver loaded its keys (they are
            # marked stale now): read it again, under its new key, as reads do.
            items = yield from thread_items(core, src)
            new_items = yield from copy_sealed(core, src, dst, items)
        yield from put_items(core, _incarnated(core, dst, new_items))
        yield from put_items(core, heads)
        return
    yield from _copy_plain(core, src, dst, items)
    yield from put_items(core, heads)


def _copy_plain(core: SaverCore, src: str, dst: str, items: Sequence[Item]) -> Flow[None]:
    """Copy a thread stored without encryption, all but its heads: blobs as they are,
    checkpoints re-written with the new thread id; then chunk items and writes items,
    and the checkpoint items."""
    dst_pk = s(core.layout.pk(dst))
    blob_keys = yield from list_keys(core, core.layout.blob_prefix(src))
    src_prefix, dst_prefix = core.layout.blob_prefix(src), core.layout.blob_prefix(dst)
    copies = [
        S3Copy(k, dst_prefix + k[len(src_prefix) :])
        for k, _, _ in blob_keys
        if core.layout.owns_object(src, k)
    ]
    for i in range(0, len(copies), _COPY_BATCH):
        yield copies[i : i + _COPY_BATCH]
    rows = [schema.parse_row(i) for i in items if schema.is_checkpoint_item(i)]
    new_items = yield from _rewrite_checkpoints(core, rows, dst)
    writes_items = [{**i, PK: dst_pk} for i in items if schema.is_writes_item(i)]
    if not core.ids_in_keys:  # what releases before 0.12.0 read
        writes_items = [schema.full_writes_ids(i) for i in writes_items]
    # Chunk items as they are too (named like blobs, the same in every thread), with
    # the writes items, which are not visible before the checkpoint items: nothing
    # names a chunk item of the target before it exists.
    yield from put_items(core, [*_copied_chunk_items(core, dst, items), *writes_items])
    yield from put_items(core, _incarnated(core, dst, new_items))


def _is_head(item: Item) -> bool:
    """A head or owner item: what is neither a checkpoint nor its writes, a data key
    or a chunk item."""
    return not (
        schema.is_checkpoint_item(item)
        or schema.is_writes_item(item)
        or schema.is_key_item(item)
        or schema.is_chunk_item(item)
    )


def _copied_chunk_items(core: SaverCore, dst: str, items: Sequence[Item]) -> list[Item]:
    """The source's chunk items for thread ``dst``, written now (as a copied blob's
    time is its copy's: ``gc``'s grace starts again)."""
    pk, now = core.layout.pk(dst), core.now_ms()
    return [
        schema.chunk_item(pk, schema.chunk_name(i), i[schema.VALUE]["B"], now)
        for i in items
        if schema.is_chunk_item(i)
    ]


def _incarnated(core: SaverCore, dst: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The copy's checkpoint items with an incarnation of their own: savers that knew
    a thread ``dst`` deleted since, or the source, must not take the copy for it."""
    # A new one: copy_thread made this saver forget what it knew of dst (restarted).
    mark = b(incarnation_of_put(core, dst))
    return [{**i, schema.INCARNATION: mark} if schema.is_checkpoint_item(i) else i for i in items]


def _rewrite_checkpoints(
    core: SaverCore, rows: Sequence[Row], dst: str
) -> Flow[list[dict[str, Any]]]:
    """Checkpoint bodies re-written for thread ``dst`` (uploaded when not kept in the
    index), and the index items that will name them."""
    new_items: list[dict[str, Any]] = []
    for start in range(0, len(rows), _LOAD_BATCH):
        batch = rows[start : start + _LOAD_BATCH]
        envs = yield from read_envelopes(core, batch)
        puts = []
        for row, env in zip(batch, envs, strict=True):
            body = copied_body(core, replace(env, thread_id=dst))
            new_item, put = copied_item(core, row, body, dst)
            new_items.append(new_item)
            puts += [] if put is None else [put]
        if puts:
            yield puts
    return new_items


def prune(core: SaverCore, thread_ids: Sequence[str], strategy: str) -> Flow[None]:
    """``BaseCheckpointSaver.prune``: delete threads, or keep only each namespace's
    latest checkpoint and the ancestors its delta channels need."""
    if strategy not in ("keep_latest", "delete"):
        raise InvalidConfigError(
            f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'"
        )
    if isinstance(thread_ids, str):
        raise InvalidConfigError("thread_ids must be a sequence of ids, not a single string")
    for thread_id in dict.fromkeys(thread_value(t) for t in thread_ids):
        if strategy == "delete":
            yield from delete_thread(core, thread_id)
            continue
        yield from thread_key(core, thread_id)  # the chain walk reads bodies
        items = yield from thread_items(core, thread_id)
        yield from incarnation_in(core, thread_id, items)
        by_ns: dict[str, dict[str, Row]] = {}
        for item in items:
            if schema.is_checkpoint_item(item):
                row = schema.parse_row(item)
                by_ns.setdefault(row.ns, {})[row.checkpoint_id] = row
        doomed: list[Row] = []
        orphans: list[Row] = []
        for rows in by_ns.values():
            keep = yield from kept_chain(core, rows)
            doomed.extend(r for cid, r in rows.items() if cid not in keep)
            orphans.extend(rows[cid] for cid in keep if rows[cid].parent_id not in (None, *keep))
        yield from drop_checkpoints(core, doomed, items)
        yield from _unlink_parents(core, orphans)


def _unlink_parents(core: SaverCore, rows: Sequence[Row]) -> Flow[None]:
    """Forget the parent of kept checkpoints whose parent was pruned.

    As PostgresSaver's prune does: ``parent_config`` then is ``None`` instead of
    naming a checkpoint that no longer loads. The body keeps its ``p``; readers
    take the parent from the index item.
    """
    ops = [
        UnlinkParent(core.table, *schema.checkpoint_ref(r.item), r.parent_id or "") for r in rows
    ]
    if ops:
        yield ops
