"""Threads the collector cannot open: why (it protects them), or what a shred left.

With encryption the collector opens a thread's bodies, records and chunk lists with
the thread's key to find what they reference (:mod:`langgraph_s3.core.collect`). A
thread whose key does not load is protected, with the reason (:func:`reason`): a key
KMS refuses, a damaged key item, a tenant reference whose tenant's key is gone, data
stored without encryption. One case is garbage instead (:func:`settle`):

A writer loads or creates a thread's data key item (or its tenant reference) before
it seals anything for the thread (:func:`~langgraph_s3.core.datakeys.thread_key` with
``create=True`` runs before a put or ``put_writes`` seals), and a thread is shredded by
deleting its key items with its other items (``delete_thread``, idle-thread expiry).
So a partition that holds sealed data but **no key item at all** lost its key after
that data was written: a warm saver, which keeps a loaded key for ``key_ttl``, went on
writing after another saver deleted the thread, or the items came back from a backup
or replica that did not hold the key. No reader opens them (a reader never creates a
key, and a new writer creates a new one, or for a tenant's thread a new reference,
under which they would reappear in a thread that was deleted), so they are garbage
once two collection runs ``grace`` apart have found them so, and they are older than
the grace period.

Nothing here decides that a thread which still has a key item is garbage, whatever
it holds; nor one whose data is stored without encryption, or says nothing either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from langgraph_s3 import codec
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.index import DeleteUnchanged, Query
from langgraph_s3.core.objects import object_key
from langgraph_s3.core.schema import (
    AT,
    KEK,
    KEY_SK_PREFIX,
    PK,
    SK,
    VALUE,
    is_checkpoint_item,
    is_chunk_item,
    is_key_item,
    is_writes_item,
    parse_row,
    parse_writes,
)
from langgraph_s3.errors import AccessDeniedError, DataKeyError
from langgraph_s3.operations import Flow, S3Get, perform, perform_all

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: Requests sent at once (objects read, items deleted).
_BATCH = 32


def reason(core: SaverCore, thread_id: str, items: Sequence[Mapping[str, Any]]) -> Flow[str | None]:
    """Why a collection run on ``core`` cannot open a thread's data (None: it can, or
    it is not sealed); :data:`UNSEALED` for a thread without a data key item, which
    :func:`settle` may find to be a shred's leftovers."""
    if core.encryption is None:
        # Its key items are in the index: its data is sealed, and reading it would
        # fail object by object. Nothing to try.
        keks = [i[KEK]["S"] for i in items if is_key_item(i) and KEK in i]
        if keks:
            return (
                f"its data is sealed (client-side encryption; its data key was wrapped "
                f"under {keks[-1]}) and this run has no encryption=: configure the key "
                "ring that wrote it to collect inside it"
            )
        return None
    try:
        key = yield from thread_key(core, thread_id)
    except DataKeyError as exc:
        return f"{type(exc).__name__}: {exc}"
    except AccessDeniedError as exc:
        # KMS may refuse one thread's key (a key policy, a grant, an encryption
        # context condition): that protects the thread only. Denied S3 or DynamoDB
        # access concerns the whole run, which stops.
        if not exc.action.startswith("kms:"):
            raise
        return f"{type(exc).__name__}: {exc}"
    if key is None and any(is_checkpoint_item(i) or is_writes_item(i) for i in items):
        # Writers create a thread's key before its first object: a thread without
        # one was written without encryption (reading it would fail object by object),
        # or shredded after it was written (settle tells).
        return UNSEALED
    return None


#: The reason given for a thread without a data key item.
UNSEALED = (
    "it has no data key item: it was stored without encryption, and this run has "
    "encryption=, so it reads sealed data only; collect inside it with a run without "
    "encryption="
)


def keyless(core: SaverCore, thread_id: str) -> Flow[bool]:
    """Whether the thread's partition holds no key item at all: no version of a key
    of its own and no tenant reference (one consistent ``Query``, of one item).

    The collector's table scan may miss an item written a moment earlier; this read
    does not.
    """
    page = yield from perform(
        Query(
            core.table,
            core.layout.pk(thread_id),
            prefix=KEY_SK_PREFIX,
            newest_first=True,
            limit=1,
            keys_only=True,
        )
    )
    return not page.items


def sealed_only(core: SaverCore, items: Sequence[Mapping[str, Any]]) -> Flow[bool]:
    """Whether a thread's items hold sealed data, and nothing stored without it.

    Pending-write records, bodies kept in their checkpoint items and chunk items say
    so as they are; a body in S3 is read (the first alone, the others a batch at a time: a thread
    stored without encryption usually answers with its first). A body whose object is
    gone says nothing (a prune, or the delete itself, removed it).
    """
    found = False
    in_s3 = []
    for item in items:
        if is_writes_item(item):
            w = parse_writes(dict(item), encrypted=True)
            if w.plain:
                return False
            found = found or bool(w.sealed)
        elif is_checkpoint_item(item):
            row = parse_row(dict(item))
            if row.body is None:
                in_s3.append(object_key(core, row))
            elif not codec.is_sealed(row.body):
                return False
            else:
                found = True
        elif is_chunk_item(item):
            if not codec.is_sealed(item[VALUE]["B"]):
                return False
            found = True
    batches = [in_s3[:1]] + [in_s3[i : i + _BATCH] for i in range(1, len(in_s3), _BATCH)]
    for batch in batches:
        bodies = yield from perform_all([S3Get(k) for k in batch])
        for body in bodies:
            if body is not None and not codec.is_sealed(body):
                return False
            found = found or body is not None
    return found


def newest_ms(items: Sequence[Mapping[str, Any]]) -> int:
    """When the newest of the items was written (``at``), ms; 0 if none says."""
    return max((int(i[AT]["N"]) for i in items if AT in i), default=0)


def delete_unchanged(core: SaverCore, items: Sequence[Mapping[str, Any]]) -> Flow[int]:
    """Delete the items, each only if it was not written again since it was read
    (:class:`~langgraph_s3.core.index.DeleteUnchanged`). Returns how many stayed."""
    requests = [
        DeleteUnchanged(core.table, i[PK]["S"], i[SK]["S"], i[AT]["N"] if AT in i else None)
        for i in items
    ]
    stayed = 0
    for start in range(0, len(requests), _BATCH):
        done = yield from perform_all(requests[start : start + _BATCH])
        stayed += done.count(False)
    return stayed


def settle(
    core: SaverCore,
    thread_id: str,
    items: Sequence[Mapping[str, Any]],
    *,
    now: float,
    since: float,
    grace: float,
    dry_run: bool,
) -> Flow[Literal["deleted", "waiting"] | None]:
    """Delete a thread's items if they are what a shred left, were found so by a run
    at least ``grace`` seconds before ``now`` (``since``: the first run that did; the
    collector keeps it in its state, as it does for condemned objects), and the newest
    is older than ``grace`` too.

    Two observations ``grace`` apart, as for objects: a key item on its way has
    arrived by then, also one replicating from another region after data items that
    reached the collector's region first (a region catching up after an outage
    replicates old items, which the items' own ``at`` would call old at once).

    Returns:
        None: they are not a shred's leftovers (nothing done); ``"waiting"``: they
        are, but not yet observed for ``grace``, or young, or one was written again
        since it was read (it stays); ``"deleted"`` (with ``dry_run``: would be).
    """
    if not ((yield from keyless(core, thread_id)) and (yield from sealed_only(core, items))):
        return None
    if now - since < grace or now * 1000 - newest_ms(items) < grace * 1000:
        return "waiting"
    stayed = 0 if dry_run else (yield from delete_unchanged(core, items))
    return "waiting" if stayed else "deleted"
