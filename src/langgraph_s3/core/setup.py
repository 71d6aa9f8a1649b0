"""``setup()``: create the bucket and the table (development; production deploys
``infra/storage.yaml``, which declares the same table)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langgraph_s3.core import schema
from langgraph_s3.operations import CreateBucket, Ddb, DdbFailure, Flow, Sleep, perform, response

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore


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
    for _ in range(120):
        desc = response((yield Ddb("describe_table", {"TableName": core.table})))
        if desc["Table"]["TableStatus"] == "ACTIVE":
            break
        yield Sleep(1.0)
    if not isinstance(created, DdbFailure):
        yield Ddb(
            "update_time_to_live",
            {
                "TableName": core.table,
                "TimeToLiveSpecification": {"Enabled": True, "AttributeName": schema.EXPIRES_AT},
            },
        )
