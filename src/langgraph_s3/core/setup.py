"""``setup()``: create the bucket and the table (development; production deploys
``infra/storage.yaml``, which declares the same table)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langgraph_s3.core import schema
from langgraph_s3.errors import S3SaverError
from langgraph_s3.operations import CreateBucket, Ddb, DdbFailure, Flow, Sleep, perform, response

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: Seconds setup() waits for a new table to become ACTIVE.
_ACTIVE_WAIT = 120


def setup(core: SaverCore, *, region: str | None) -> Flow[None]:
    """Create the bucket in ``region`` and the table, wait for it, enable its TTL."""
    yield CreateBucket(region)
    created = yield from perform(
        Ddb(
            "create_table",
            schema.table_definition(core.table),
            expect=frozenset({"ResourceInUseException"}),
        )
    )
    for _ in range(_ACTIVE_WAIT):
        desc = response((yield Ddb("describe_table", {"TableName": core.table})))
        status = desc["Table"]["TableStatus"]
        if status == "ACTIVE":
            break
        yield Sleep(1.0)
    else:
        raise S3SaverError(
            f"DynamoDB table {core.table!r} is still {status} after {_ACTIVE_WAIT} s; "
            "run setup() again once it is ACTIVE (aws dynamodb describe-table)"
        )
    if not isinstance(created, DdbFailure):
        yield Ddb(
            "update_time_to_live",
            {
                "TableName": core.table,
                "TimeToLiveSpecification": {"Enabled": True, "AttributeName": schema.EXPIRES_AT},
            },
        )
