"""Every request the saver sends to the DynamoDB index, typed, with its answers decoded.

Theory of operation. Flows never build a DynamoDB request: they yield one of the
small frozen requests of ``reads``, ``writes`` and ``table`` and are sent its typed
result (a :class:`Page`, a :class:`Cancelled` or ``None`` for a transaction, a
region, ...). Each request
knows the low-level call that performs it (:meth:`IndexRequest.call`), how to read
DynamoDB's answer (``result``) and, for the error codes it expects, how to read the
refusal (``refused``); :mod:`langgraph_s3.transport` only calls those, as it maps
``S3Get`` to ``get_object``.

Everything that spells the index's wire format lives here or in
:mod:`langgraph_s3.core.schema` (attribute names, items): key conditions, filter and
update expressions, transaction parts and cancellation reasons. A new request is a
new class in one of those modules; a new item attribute is a constant in ``schema`` (and a line in
``docs/layout.md``).
"""

from langgraph_s3.core.index.items import Item, Key, key
from langgraph_s3.core.index.pending import WritesUpdate, writes_updates
from langgraph_s3.core.index.reads import (
    BatchGet,
    Got,
    KeyPrefixScan,
    ListFilter,
    Page,
    Paged,
    Query,
    RunQuery,
    ScanCheckpoints,
    ScanKeyItems,
    ScanSegment,
)
from langgraph_s3.core.index.table import CreateTable, EnableTtl, TableStatus
from langgraph_s3.core.index.writes import (
    IDEMPOTENT_MISMATCH,
    TXN_CANCELLED,
    BatchWrite,
    Cancelled,
    ClaimOwner,
    DeleteHead,
    DeleteUnchanged,
    Part,
    PutNew,
    Replace,
    RewrapKey,
    TouchHead,
    Transact,
    UnlinkParent,
    absent_part,
    delete_requests,
    head_part,
    owner_part,
    put_new_part,
    put_part,
    put_requests,
)

__all__ = [
    "IDEMPOTENT_MISMATCH",
    "TXN_CANCELLED",
    "BatchGet",
    "BatchWrite",
    "Cancelled",
    "ClaimOwner",
    "CreateTable",
    "DeleteHead",
    "DeleteUnchanged",
    "EnableTtl",
    "Got",
    "Item",
    "Key",
    "KeyPrefixScan",
    "ListFilter",
    "Page",
    "Paged",
    "Part",
    "PutNew",
    "Query",
    "Replace",
    "RewrapKey",
    "RunQuery",
    "ScanCheckpoints",
    "ScanKeyItems",
    "ScanSegment",
    "TableStatus",
    "TouchHead",
    "Transact",
    "UnlinkParent",
    "WritesUpdate",
    "absent_part",
    "delete_requests",
    "head_part",
    "key",
    "owner_part",
    "put_new_part",
    "put_part",
    "put_requests",
    "writes_updates",
]
