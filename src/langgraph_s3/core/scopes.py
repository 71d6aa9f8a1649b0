"""A thread's key scope: its own data key, or its tenant's; started once, then kept.

A thread's partition says whose data key seals it (:mod:`langgraph_s3.core.datakeys`):
version 1 of its own key (``schema.key_sk(1)``) or a tenant reference
(``schema.TENANT_REF_SK``). A writer starting the thread creates one of the two,
and only if *neither* exists: one ``TransactWriteItems`` of the conditional put and
a ``ConditionCheck`` that the other item is absent (:func:`start`). A put alone
could not see the other kind of item: two writers that disagree on
``Encryption.tenant_of`` would store both, readers would follow the reference, and
what was sealed under the thread's own key would no longer open. With the check,
the writer that loses reads the key items again and does what a writer that found
them does: it takes the scope stored, or refuses it (:func:`check_scope`).

Re-encryption's later versions (2, 3, ...) and a tenant's own key items (in the
tenant's partition, which has no reference) stay plain conditional puts.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langgraph_s3.core import schema
from langgraph_s3.core.index import Item, Transact, absent_part, put_new_part
from langgraph_s3.errors import DataKeyError, KeyScopeError, S3SaverError
from langgraph_s3.operations import Flow, Sleep, perform

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: How often :func:`start` sends its transaction again while another transaction on
#: one of its two items is in progress (DynamoDB's ``TransactionConflict``).
RETRIES = 5


def start(core: SaverCore, item: Item, other_sk: str) -> Flow[bool]:
    """Put ``item`` (a thread's key version 1, or its tenant reference) only if neither
    it nor the item ``other_sk`` of its partition exists. Result: whether it was put;
    False when either exists (another writer started the thread first: read its key
    items again).

    Raises:
        S3SaverError: DynamoDB refused the transaction for another reason, or kept
            cancelling it for concurrent transactions on the same items.
    """
    pk, thread = str(item[schema.PK]["S"]), schema.text(item, schema.THREAD)
    txn = Transact((put_new_part(core.table, item), absent_part(core.table, pk, other_sk)))
    for attempt in range(RETRIES):
        cancelled = yield from perform(txn)
        if cancelled is None:
            return True
        if cancelled.failed_checks():
            return False
        if "TransactionConflict" not in cancelled.codes():
            raise S3SaverError(
                f"starting the data key of thread {thread!r} failed: {cancelled.codes()}"
            )
        # Two writers starting the thread at once, each transaction holding the
        # other's item: both may be cancelled. Retry apart (jitter), so one wins.
        yield Sleep(0.05 * (2**attempt) * (0.5 + random.random()))
    raise S3SaverError(
        f"starting the data key of thread {thread!r} kept colliding with concurrent "
        "transactions on its key items; retry"
    )


# ------------------------------------------------------- tenant references
def tenant_ref(core: SaverCore, thread_id: str, tenant: str) -> Item:
    """The item saying that thread ``thread_id``'s data key is tenant ``tenant``'s."""
    return {
        schema.PK: schema.s(core.layout.pk(thread_id)),
        schema.SK: schema.s(schema.TENANT_REF_SK),
        schema.THREAD: schema.s(thread_id),
        schema.TENANT: schema.s(tenant),
        schema.AT: schema.n(core.now_ms()),
    }


def referenced_tenant(item: Mapping[str, Any], thread_id: str) -> str:
    """The tenant a thread's tenant reference names.

    Raises:
        DataKeyError: It names none (it was altered).
    """
    tenant = item.get(schema.TENANT, {}).get("S")
    if not isinstance(tenant, str) or not tenant:
        raise DataKeyError(
            f"the tenant reference of thread {thread_id!r} names no tenant: it was altered "
            "after it was written; restore it from a backup",
            key_id=schema.TENANT_REF_SK,
        )
    return tenant


def check_scope(thread_id: str, wanted: str | None, stored: str | None) -> None:
    """Refuse to write a thread whose stored scope (its tenant, "" for its own key) is
    not the one ``tenant_of`` names (``wanted``)."""
    if stored == (wanted or ""):
        return
    said = f"tenant {wanted!r}" if wanted else "a key of its own"
    has = f"the key of tenant {stored!r}" if stored else "a key of its own"
    raise KeyScopeError(
        f"thread {thread_id!r} is sealed under {has}, but tenant_of says {said}; this "
        "saver does not write it under another scope. Fix tenant_of (every writer of a "
        "thread must agree on it), or copy the thread to a new id to move it to the scope "
        "tenant_of gives",
        key_id=thread_id,
    )
