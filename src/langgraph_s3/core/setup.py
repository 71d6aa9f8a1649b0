"""``setup()``: create the bucket and the table (development; production deploys
``infra/storage.yaml``, which declares the same table)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langgraph_s3.core.index import CreateTable, EnableTtl, TableStatus
from langgraph_s3.errors import S3SaverError
from langgraph_s3.operations import CreateBucket, Flow, Sleep, perform

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: Seconds setup() waits for a new table to become ACTIVE.
_ACTIVE_WAIT = 120


def setup(core: SaverCore, *, region: str | None) -> Flow[None]:
    """Create the bucket in ``region`` and the table, wait for it, enable its TTL."""
    yield CreateBucket(region)
    created = yield from perform(CreateTable(core.table))
    for _ in range(_ACTIVE_WAIT):
        status = yield from perform(TableStatus(core.table))
        if status == "ACTIVE":
            break
        yield Sleep(1.0)
    else:
        raise S3SaverError(
            f"DynamoDB table {core.table!r} is still {status} after {_ACTIVE_WAIT} s; "
            "run setup() again once it is ACTIVE (aws dynamodb describe-table)"
        )
    if created:
        yield EnableTtl(core.table)
