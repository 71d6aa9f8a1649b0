"""How pending writes are stored: one index item per task, one record per write.

A task's writes land in the item ``c#{ns}#{checkpoint}#w#{task}`` as checksummed
records (``codec.pack_record``, sealed to their slot with encryption); values above
``WRITE_INLINE_THRESHOLD``, and those whose record would be larger than
``index_inline_limit``, go to blobs first, and so do messages appended to a channel
held as blobs, stored as the piece the next checkpoint names
(``values.appended_piece``). Regular writes are never overwritten (a
retried task resends the same values), special ones (``__error__``, ``__interrupt__``,
...) are replaced, as in ``InMemorySaver``. See docs/layout.md ("Index (DynamoDB)").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP

from langgraph_s3 import codec
from langgraph_s3.core import groups, lists
from langgraph_s3.core.commit import check_owner, ownership_parts
from langgraph_s3.core.config import WRITE_INLINE_THRESHOLD, checkpoint_id_of, thread_ns
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.entries import Inline, Record
from langgraph_s3.core.index import Transact, WritesUpdate, writes_updates
from langgraph_s3.core.objects import store_chunks
from langgraph_s3.core.schema import record_attr
from langgraph_s3.core.sealed import seal_record
from langgraph_s3.core.values import appended_piece, encode_value, remember_value, writes_value
from langgraph_s3.errors import InvalidConfigError, S3SaverError
from langgraph_s3.operations import Flow, perform

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: DynamoDB items are limited to 400 KB; stay well clear of it.
ITEM_BUDGET = 300 * 1024
#: DynamoDB caps an update expression at 4 KB.
EXPR_BUDGET = 3800


def put_writes(
    core: SaverCore,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
) -> Flow[None]:
    """``BaseCheckpointSaver.put_writes``: store a task's writes for a checkpoint."""
    thread_id, ns = thread_ns(config)
    cid = checkpoint_id_of(config)
    if cid is None:
        raise InvalidConfigError(
            "put_writes needs config['configurable']['checkpoint_id'] (the checkpoint "
            "the writes belong to)"
        )
    if not isinstance(task_id, str):
        raise InvalidConfigError(f"task_id must be a string, got {type(task_id).__name__}")
    if not writes:
        return
    yield from thread_key(core, thread_id, create=True)
    slot = (thread_id, ns, cid, task_id)
    records, uploads = _encode_writes(core, thread_id, ns, writes, task_id)
    packed = _pack_within_budget(core, slot, writes, records, uploads)
    todo = lists.pending(r.entry for r in records.values())
    sealed = yield from store_chunks(core, thread_id, uploads, todo=todo)
    for i, record in records.items():
        entry = sealed.resolve(record.entry)
        # Stored now: the next checkpoint, racing this update, finds the value here.
        remember_value(core, thread_id, entry)
        if entry is not record.entry:  # its chunks are placed now
            packed[i] = _packed(core, slot, i, Record(record.channel, entry))

    pk = core.layout.pk(thread_id)
    sk = core.layout.writes_sk(ns, cid, task_id)
    base = WritesUpdate(
        core.table, pk, sk, task_id, task_path, cid, core.now_ms(), (),
        all_ids=not core.ids_in_keys,
    )  # fmt: skip
    stored, grouped = _grouped(core, slot, records, packed)
    spans = {lo: members[-1] for lo, members in grouped.items()}
    for update in writes_updates(base, stored, EXPR_BUDGET, spans):
        if (yield from _store(core, thread_id, update)):
            continue
        # A group's span holds a record already (a retry, or an earlier call of the
        # task): its writes one by one instead, each kept where one is stored.
        again = {m: packed[m] for i, _ in update.records for m in grouped.get(i, (i,))}
        for single in writes_updates(base, again, EXPR_BUDGET):
            yield from _store(core, thread_id, single)


def _store(core: SaverCore, thread_id: str, update: WritesUpdate) -> Flow[bool]:
    """Send ``update``; whether it was stored (False: a group's span was taken; an
    update without groups is always stored, or raises)."""
    owner = ownership_parts(core, update.pk)
    if not owner:
        stored = yield from perform(update)
        return stored or not update.guards
    # Cross-region: the write and the ownership check in one request.
    cancelled = yield from perform(Transact((update.part(), *owner)))
    if cancelled is None:
        return True
    check_owner(core, thread_id, cancelled)
    if update.guards and "writes" in cancelled.failed_checks():
        return False
    raise S3SaverError(f"storing writes of task {update.task_id!r} failed: {cancelled.codes()}")


def _encode_writes(
    core: SaverCore, thread_id: str, ns: str, writes: Sequence[tuple[str, Any]], task_id: str
) -> tuple[dict[int, Record], dict[str, bytes]]:
    """Records by write index (``[channel, value entry]``) and the blobs they need."""
    records: dict[int, Record] = {}
    uploads: dict[str, bytes] = {}
    for idx, (channel, value) in enumerate(writes):
        if not isinstance(channel, str):
            raise InvalidConfigError(f"write channel must be a string, got {channel!r}")
        widx = WRITES_IDX_MAP.get(channel, idx)
        entry, blobs = encode_value(
            core,
            thread_id,
            value,
            f"write to channel {channel!r} of task {task_id!r}",
            WRITE_INLINE_THRESHOLD,
        )
        if isinstance(entry, Inline) and widx >= 0:  # special writes are never appended
            entry, blobs = appended_piece(core, thread_id, ns, channel, value, entry)
        uploads.update(blobs)
        # a later special write replaces an earlier one
        records[widx] = Record(channel, lists.spill(entry, core.list_leads))
    return records, uploads


def _grouped(
    core: SaverCore,
    slot: tuple[str, str, str, str],
    records: Mapping[int, Record],
    packed: Mapping[int, bytes],
) -> tuple[dict[int, bytes], dict[int, tuple[int, ...]]]:
    """The records to store (write index -> stored bytes), inline regular writes
    grouped where that makes the item smaller than their records apart (``packed``),
    and the groups (lowest index -> indices). See ``core/groups.py``."""
    if not core.group_writes:
        return dict(packed), {}
    inline = sorted(i for i, r in records.items() if i >= 0 and isinstance(r.entry, Inline))
    stored, grouped = dict(packed), {}
    for members in groups.plan_members(inline):
        group = groups.pack([(i, records[i]) for i in members], core.compression_level)
        # Sealed to the slot of its lowest index, whose attribute holds it.
        data = seal_record(core, slot, members[0], group)
        # An attribute's name counts towards the item's size too.
        apart = sum(len(packed[i]) + len(record_attr(i)) for i in members)
        if len(data) + len(record_attr(members[0])) < apart:
            for i in members[1:]:
                del stored[i]
            stored[members[0]] = data
            grouped[members[0]] = members
    return stored, grouped


def _packed(core: SaverCore, slot: tuple[str, str, str, str], index: int, record: Record) -> bytes:
    """A record as stored: packed, and sealed to its slot with encryption (``slot``:
    thread id, namespace, checkpoint id, task id)."""
    return seal_record(core, slot, index, codec.pack_record(record.wire(), core.compression_level))


def _pack_within_budget(
    core: SaverCore,
    slot: tuple[str, str, str, str],
    writes: Sequence[tuple[str, Any]],
    records: dict[int, Record],
    uploads: dict[str, bytes],
) -> dict[int, bytes]:
    """Packed records; an inline value whose record is over ``index_inline_limit``
    (when checkpoint bodies may live in the index) moves to a blob, and the largest
    others too until the item fits.

    A record over the limit would not stay inline in the next checkpoint body either
    (a body over the limit moves its largest values to blobs): stored as a blob now,
    the value is uploaded once, and the checkpoint names the same blob (``values``
    cache) instead of the writes item paying a write unit per KB for it first. See
    docs/layout.md ("Index (DynamoDB)").
    """
    thread_id = slot[0]
    packed = {i: _packed(core, slot, i, r) for i, r in records.items()}
    # With no checkpoint body in the index (limit 0) values stay inline in bodies too.
    limit = core.index_inline_limit or ITEM_BUDGET
    for i in sorted(packed, key=lambda i: -len(packed[i])):
        fits = sum(len(p) for p in packed.values()) <= ITEM_BUDGET
        if fits and len(packed[i]) <= limit:
            break
        if isinstance(records[i].entry, Inline):
            channel = records[i].channel
            entry, blobs = encode_value(
                core, thread_id, writes_value(writes, i, channel), f"write to {channel!r}", -1
            )
            uploads.update(blobs)
            records[i] = Record(channel, lists.spill(entry, core.list_leads))
            packed[i] = _packed(core, slot, i, records[i])
    return packed
