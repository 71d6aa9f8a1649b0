"""How a put is committed: values and body uploaded first, then one index transaction.

A checkpoint becomes visible at one moment: the DynamoDB transaction that writes
its index item and moves its namespace's head (plus, across regions, checks that
this region owns the thread). Everything the item points to is uploaded before, so
a reader never sees a half-written checkpoint; a crash before the commit leaves
only unreferenced objects for garbage collection. The rules for continuations,
forks and conflicts are in docs/concurrency.md; the guard that tells them apart
is :mod:`langgraph_s3.guard`.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from langgraph_s3 import codec, guard
from langgraph_s3.core import lists, packs, schema, values
from langgraph_s3.core.config import checkpoint_id_of, thread_ns, thread_value
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.entries import IN_INDEX, Blobs, Entry, Envelope, Listed, Location, Span
from langgraph_s3.core.incarnations import incarnation_of_put, restarted
from langgraph_s3.core.index import (
    IDEMPOTENT_MISMATCH,
    TXN_CANCELLED,
    Cancelled,
    ClaimOwner,
    Part,
    Query,
    Transact,
    head_part,
    owner_part,
    put_part,
)
from langgraph_s3.core.objects import store_chunks
from langgraph_s3.core.schema import b, n, pk_of, s
from langgraph_s3.errors import (
    CheckpointConflictError,
    ClockSkewError,
    CorruptObjectError,
    InvalidConfigError,
    S3SaverError,
    ThreadOwnedElsewhereError,
)
from langgraph_s3.keys import check_checkpoint_id
from langgraph_s3.logs import log
from langgraph_s3.operations import Flow, S3Put, Sleep, perform

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: A checkpoint item whose object is in S3 names up to this many value blobs (32 bytes
#: each), so get_tuple fetches them in the same round trip as the object.
PREFETCH_MAX = 64
_TXN_RETRIES = 5


def put(
    core: SaverCore,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Flow[RunnableConfig]:
    """``BaseCheckpointSaver.put``: store a checkpoint after the one ``config`` names."""
    thread_id, ns = thread_ns(config)
    parent_id = checkpoint_id_of(config)
    cid = check_checkpoint_id(checkpoint.get("id"))
    guarded = guard.is_continuation(config, ns, parent_id)
    if guarded and parent_id is not None and cid <= parent_id:
        raise clock_skew(thread_id, ns, parent_id, cid)
    if parent_id is None and ns == "":
        # A thread's first checkpoint: its id may be one another saver deleted since
        # this one loaded its key.
        restarted(core, thread_id)
    yield from thread_key(core, thread_id, create=True)
    body_cp: dict[str, Any] = dict(checkpoint)
    channel_values: dict[str, Any] = body_cp.pop("channel_values", {}) or {}
    versions: ChannelVersions = body_cp.get("channel_versions", {})
    entries, uploads, fresh = _encode_channels(
        core, thread_id, ns, channel_values, versions, new_versions
    )

    md = get_checkpoint_metadata(config, metadata)
    envelope = Envelope(
        codec.LAYOUT_1,
        thread_id,
        ns,
        cid,
        parent_id,
        values.serialize_checkpoint(core, body_cp, cid),
        values.serialize_metadata(core, md),
        entries,
    )
    body = values.frame_body(core, envelope)
    if not values.in_index(core, body):
        body = values.fit_in_index(core, thread_id, ns, envelope, body, uploads, fresh)
    body = yield from _upload_values(core, envelope, body, uploads, fresh)
    entries = envelope.channels

    # ``e`` only spares the delta-channel walk opening a body. A consumed ``__start__``
    # or ``branch:to:`` channel is never rebuilt from ancestors, so naming it costs ~20
    # bytes an item for nothing; a channel left out only costs that walk one body read.
    unstored = sorted(schema.delta_channels(md, {ch for ch in versions if ch not in entries}))
    item = _checkpoint_item(core, (thread_id, ns, cid, parent_id), body, entries, unstored, md)
    item[schema.INCARNATION] = b(incarnation_of_put(core, thread_id))
    yield from commit(core, item, parent_id, guarded)
    for name, entry in fresh.items():
        values.cache_entry(core, thread_id, ns, name, versions[name], entry)
        values.remember_latest(core, thread_id, ns, name, entry)
    values.remember_appends(core, thread_id, ns, entries)
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}


def _upload_values(
    core: SaverCore,
    envelope: Envelope,
    body: bytes,
    uploads: dict[str, bytes],
    fresh: dict[str, Entry],
) -> Flow[bytes]:
    """Upload the new chunks and, if it is too large for the index, the checkpoint
    object; return the body to commit.

    Both go up together: neither is reachable until the index item exists, so their
    order does not matter. Once the chunks are placed their entries name where they
    are, and the body's version becomes the oldest layout that can read them
    (``envelope`` and ``fresh`` are updated).
    """
    pending, pending_fresh = dict(envelope.channels), list(fresh)
    out = [body]

    def with_object(sealed: packs.Sealed) -> list[Any]:
        layout = packs.layout_of(pending.values())
        if sealed.placed or sealed.lists or layout != envelope.format:
            # Also when nothing was uploaded: an unchanged value may name packed chunks.
            envelope.channels = {name: sealed.resolve(e) for name, e in pending.items()}
            fresh.update({name: envelope.channels[name] for name in pending_fresh})
            envelope.format = packs.layout_of(envelope.channels.values())
            out[0] = values.frame_body(core, envelope)
        if values.in_index(core, out[0]):
            return []
        key = core.layout.checkpoint_key(
            envelope.thread_id, envelope.ns, envelope.checkpoint_id, codec.digest(out[0])
        )
        return [S3Put(key, out[0])]

    todo = lists.pending(pending.values())
    yield from store_chunks(core, envelope.thread_id, uploads, with_object, todo)
    # Stored now, committed or not: a write racing this put finds the value here.
    for entry in fresh.values():
        values.remember_value(core, envelope.thread_id, entry)
    return out[0]


def _encode_channels(
    core: SaverCore,
    thread_id: str,
    ns: str,
    channel_values: Mapping[str, Any],
    versions: ChannelVersions,
    new_versions: ChannelVersions,
) -> tuple[dict[str, Entry], dict[str, bytes], dict[str, Entry]]:
    """Value entries by channel, the blobs to upload, and the entries made now.

    A channel whose version did not move re-uses the entry cached for its version.
    """
    entries: dict[str, Entry] = {}
    uploads: dict[str, bytes] = {}
    fresh: dict[str, Entry] = {}
    # Only the input's channel asks: another dict of messages is not written to its
    # list by a task, so its chunk would be named by it alone.
    appends = core.caches.appends.get((thread_id, ns)) or frozenset()
    for name, value in channel_values.items():
        if name not in versions:
            continue  # like InMemorySaver: only versioned channels are stored
        entry = (
            None
            if name in new_versions
            else values.cached_entry(core, thread_id, ns, name, versions[name])
        )
        if entry is None:
            entry, blobs = values.encode_value(
                core,
                thread_id,
                value,
                f"channel {name!r}",
                core.inline_threshold,
                core.caches.latest.get((thread_id, ns, name)),
                appends if name == values.INPUT_CHANNEL else frozenset(),
            )
            uploads.update(blobs)
            entry = lists.spill(entry, core.list_leads)
            fresh[name] = entry
        entries[name] = entry
    return entries, uploads, fresh


def _checkpoint_item(
    core: SaverCore,
    ids: tuple[str, str, str, str | None],
    body: bytes,
    entries: Mapping[str, Entry],
    unstored: list[str],
    md: Mapping[str, Any],
) -> dict[str, Any]:
    """The index item of a checkpoint (see docs/layout.md, "The index").

    ``ids``: thread id, namespace, checkpoint id, parent id.
    """
    thread_id, ns, cid, parent_id = ids
    item: dict[str, Any] = {
        schema.PK: s(core.layout.pk(thread_id)),
        schema.SK: s(core.layout.checkpoint_sk(ns, cid)),
        **schema.id_attrs(thread_id, ns, cid, all_ids=not core.ids_in_keys),
        **values.body_attrs(core, (thread_id, ns, cid), body),
        schema.AT: n(core.now_ms()),
    }
    if schema.BODY not in item:
        item.update(prefetch_hints(entries))
    if parent_id is not None:
        item[schema.PARENT] = s(parent_id)
    if isinstance(md.get("run_id"), str) and md["run_id"]:
        item[schema.RUN] = s(md["run_id"])
    if unstored:
        item[schema.UNSTORED] = {"SS": unstored}
    # With encryption, metadata stays sealed in the body. Layout 9 indexes it only
    # beside a body in S3: one in the item is filtered where it lies (history.py).
    if core.encryption is None and not (core.ids_in_keys and schema.BODY in item):
        item.update(schema.metadata_attr(md))
    return item


def prefetch_hints(entries: Mapping[str, Entry]) -> dict[str, Any]:
    """What a checkpoint item whose body is in S3 names for a reader to fetch beside
    the object: loose blobs and chunk lists (``pf``), pack ranges (``pp``) and chunk
    items (``pi``)."""
    out: dict[str, Any] = {}

    def chunks(where: Callable[[Location], bool]) -> list[bytes]:
        return list(
            dict.fromkeys(
                d
                for e in entries.values()
                if isinstance(e, Blobs)
                for i, d in enumerate(e.digests)
                if where(e.location(i))
            )
        )

    # Loose blobs: a packed chunk is read by a range of its pack (``pp``).
    refs = chunks(lambda at: at is None)
    # A value stored through a chunk list: the list comes with the object.
    refs += [e.digest for e in entries.values() if isinstance(e, Listed) and e.span is None]
    if refs and len(refs) <= PREFETCH_MAX:
        out[schema.PREFETCH] = b(b"".join(refs))
    ranges = _pack_ranges(entries)
    if ranges and len(ranges) <= PREFETCH_MAX // 4:
        out[schema.PACK_PREFETCH] = b(schema.pack_ranges_attr(ranges))
    items = chunks(lambda at: at is IN_INDEX)
    if items and len(items) <= PREFETCH_MAX:
        out[schema.ITEM_PREFETCH] = b(b"".join(items))
    return out


def _pack_ranges(entries: Mapping[str, Entry]) -> list[tuple[bytes, int, int]]:
    """Per pack the values use, the byte range holding their chunks."""
    ranges: dict[bytes, tuple[int, int]] = {}
    for entry in entries.values():
        spans = entry.spans if isinstance(entry, Blobs) else None
        if isinstance(entry, Listed):
            spans = (entry.reach(),)  # the list, and its chunks before it in its pack
        for span in spans or ():
            if isinstance(span, Span):
                start, end = ranges.get(span.pack, (span.offset, span.offset + span.length))
                ranges[span.pack] = (min(start, span.offset), max(end, span.offset + span.length))
    return [(pack, start, end) for pack, (start, end) in ranges.items()]


def commit(
    core: SaverCore, item: dict[str, Any], parent_id: str | None, guarded: bool
) -> Flow[None]:
    """Write the index item and move the head in one transaction: the commit point.

    The head always names the greatest checkpoint id of the namespace, the one a
    read of the latest finds. A guarded continuation moves it from its parent; a
    fork moves it only forward, and a fork whose id sorts below the head (made
    on a clock behind the head's) is committed beside it without moving it, as
    ``InMemorySaver`` would not make it the latest either.
    """
    thread_id, ns, cid = schema.checkpoint_ids(item)
    txn = Transact(
        (
            put_part(core.table, item),
            head_part(core.table, item, (thread_id, ns, cid), parent_id, guarded),
            *ownership_parts(core, pk_of(item)),
        ),
        # botocore would fill in a random uuid4: one derived from the checkpoint lets
        # DynamoDB recognise a commit resent after a lost response (for 10 minutes).
        commit_token(item),
        expect=frozenset({TXN_CANCELLED, IDEMPOTENT_MISMATCH}),
    )
    for attempt in range(_TXN_RETRIES):
        cancelled = yield from perform(txn)
        if cancelled is None:
            return
        if cancelled.code == IDEMPOTENT_MISMATCH:
            # The same checkpoint (same id and digest) was sent within 10 minutes by
            # an earlier put() that differed only in its timestamp: committed or not?
            yield from _confirm_committed(core, item)
            return
        check_owner(core, thread_id, cancelled)
        failed = cancelled.failed_checks()
        if "head" in failed:
            actual = head_cid(core, failed["head"].get("Item", {}), pk_of(item), ns)
            if actual == cid:
                return  # the same checkpoint was committed before: a retried put
            if guarded:
                raise conflict(thread_id, ns, parent_id, actual)
            # A fork older than the head: commit it where it sorts, head unmoved.
            txn = txn.without("head", commit_token(item, "below-head"))
            continue
        if "TransactionConflict" in cancelled.codes():
            log.warning(
                "commit of checkpoint %s collided with a concurrent transaction; "
                "retrying (attempt %d)", cid, attempt + 1,
            )  # fmt: skip
            yield Sleep(0.05 * (2**attempt))
            continue
        raise S3SaverError(f"committing checkpoint {cid!r} failed: {cancelled.codes()}")
    raise S3SaverError(f"committing checkpoint {cid!r} kept colliding with concurrent transactions")


def head_cid(core: SaverCore, head: Mapping[str, Any], pk: str, ns: str) -> str | None:
    """The checkpoint id a head item names; a damaged one is a CorruptObjectError
    naming the item (it used to escape as a KeyError)."""
    attr = head.get(schema.CID)
    if attr is None:
        return None
    if not isinstance(attr, Mapping) or not isinstance(attr.get("S"), str):
        key = f"{pk}|{core.layout.head_sk(ns)}|{schema.CID}"
        raise CorruptObjectError(
            f"head item {key!r} does not hold a checkpoint id ({attr!r}); set it to the "
            "namespace's latest checkpoint id to repair it",
            key=key,
        )
    return str(attr["S"])


def _confirm_committed(core: SaverCore, item: Mapping[str, Any]) -> Flow[None]:
    pk, sk = schema.checkpoint_ref(item)
    # A consistent Query of exactly that key, not a GetItem: the runtime policy of
    # infra/storage.yaml grants the saver Query and no GetItem.
    page = yield from perform(Query(core.table, pk, between=(sk, sk)))
    found = page.items[0] if page.items else {}
    if schema.text(found, schema.DIGEST) != item[schema.DIGEST]["S"]:
        raise S3SaverError(
            f"checkpoint {schema.checkpoint_ids(item)[2]!r} was sent twice within 10 minutes with "
            "different timestamps and is not committed; retry the put()"
        )


# ----------------------------------------------------------------- regions
def ownership_parts(core: SaverCore, pk: str) -> tuple[Part, ...]:
    """The ``owner`` part of a write's transaction (cross-region setups only)."""
    if core.cross_region is None:
        return ()
    home = core.region_name == core.cross_region.home_region
    return (owner_part(core.table, pk, str(core.region_name), home=home),)


def check_owner(core: SaverCore, thread_id: str, cancelled: Cancelled) -> None:
    """Raise ThreadOwnedElsewhereError if a write was refused for its ``owner`` part."""
    reason = cancelled.failed_checks().get("owner")
    if reason is not None:
        raise not_owner(core, thread_id, reason)


def not_owner(
    core: SaverCore, thread_id: str, reason: Mapping[str, Any]
) -> ThreadOwnedElsewhereError:
    """The error for a write refused because another region owns the thread."""
    assert core.cross_region is not None
    owner = schema.text(reason.get("Item", {}), schema.REGION) or core.cross_region.home_region
    return ThreadOwnedElsewhereError(
        f"thread {thread_id!r} is owned by region {owner!r}; this saver runs in "
        f"{core.region_name!r} and may not write it. Hand it over with "
        "saver.claim_thread(thread_id) once the owner has stopped writing it",
        thread_id=thread_id,
        owner=owner,
    )


def claim_thread(core: SaverCore, thread_id: str) -> Flow[str]:
    """Make this saver's region the owner of a thread; returns the previous owner."""
    if core.cross_region is None:
        raise InvalidConfigError("claim_thread needs a cross_region configuration")
    thread_id = thread_value(thread_id)
    claim = ClaimOwner(
        core.table, core.layout.pk(thread_id), thread_id, str(core.region_name), core.now_ms()
    )
    previous = yield from perform(claim)
    return previous or core.cross_region.home_region


# ------------------------------------------------------------------ errors
def commit_token(item: Mapping[str, Any], variant: str = "") -> str:
    """The idempotency token of a checkpoint's commit: thread, namespace, id, digest."""
    ident = "\x00".join(
        (item[schema.PK]["S"], item[schema.SK]["S"], item[schema.DIGEST]["S"], variant)
    )
    return hashlib.sha256(ident.encode()).hexdigest()[:36]


def clock_skew(thread_id: str, ns: str, parent: str, cid: str) -> ClockSkewError:
    """The error for a continuation whose id does not sort after its parent's."""
    behind = _id_seconds(parent, cid)
    wait = f"retry in {behind + 0.001:.3f} s" if behind is not None else "retry later"
    log.warning("clock skew: checkpoint %s sorts before its parent %s; %s", cid, parent, wait)
    return ClockSkewError(
        f"thread {thread_id!r} (namespace {ns!r}): the new checkpoint {cid!r} does not sort "
        f"after the checkpoint it continues, {parent!r}: this machine's clock is behind "
        f"the one that wrote it. Nothing was written; {wait} (the run then re-reads the "
        "thread) and keep clocks synchronised (NTP, Amazon Time Sync).",
        thread_id=thread_id,
        checkpoint_ns=ns,
        parent=parent,
        checkpoint_id=cid,
        retry_after=behind,
    )


def _id_seconds(later: str, earlier: str) -> float | None:
    """How many seconds the clock in uuid6 id ``later`` is ahead of ``earlier``'s."""
    try:
        a, b_ = uuid.UUID(later), uuid.UUID(earlier)
    except ValueError:
        return None
    if a.version != 6 or b_.version != 6:
        return None
    return max(0.0, (_uuid6_ticks(a.int) - _uuid6_ticks(b_.int)) / 1e7)


def _uuid6_ticks(value: int) -> int:
    # 48 high bits of the 100 ns timestamp, the version nibble, then its 12 low bits
    return ((value >> 80) << 12) | ((value >> 64) & 0x0FFF)


def conflict(
    thread_id: str, ns: str, expected: str | None, actual: str | None
) -> CheckpointConflictError:
    """The error for a continuation whose parent is no longer the latest checkpoint."""
    where = f"thread {thread_id!r}" + (f" namespace {ns!r}" if ns else "")
    log.warning("conflict: %s moved on from %s to %s; nothing committed", where, expected, actual)
    return CheckpointConflictError(
        f"{where} moved on while this run was working: it resumed from checkpoint "
        f"{expected!r} but the latest checkpoint is now {actual!r} (another run committed "
        "first). Nothing was committed by this run; reload the thread and decide whether "
        "to continue from the new state",
        thread_id=thread_id,
        checkpoint_ns=ns,
        expected=expected,
        actual=actual,
    )
