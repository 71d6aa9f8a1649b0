"""Reading and writing index items in bulk: pages of queries and scans, batch writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langgraph_s3.core.schema import PK, SK, s
from langgraph_s3.operations import Ddb, Flow, Request, Sleep, perform, perform_all, response

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

_BATCH_WRITE = 25


def next_page(
    request: dict[str, Any], alongside: Sequence[Request[Any]] = ()
) -> Flow[tuple[list[dict[str, Any]], dict[str, Any] | None]]:
    """One page of a query (a request with a key condition) or a scan: its items, and
    the request for the next page (None after the last). ``alongside`` requests are
    sent in the same round trip (their results are dropped; their errors are not)."""
    op = Ddb("query" if "KeyConditionExpression" in request else "scan", request)
    if alongside:
        page, *_ = yield [op, *alongside]
    else:
        page = yield from perform(op)
    last = response(page).get("LastEvaluatedKey")
    return page.get("Items", []), ({**request, "ExclusiveStartKey": last} if last else None)


def read_all(request: dict[str, Any]) -> Flow[list[dict[str, Any]]]:
    """Every item of a query or scan, page after page."""
    items: list[dict[str, Any]] = []
    following: dict[str, Any] | None = request
    while following is not None:
        page, following = yield from next_page(following)
        items.extend(page)
    return items


def thread_items(
    core: SaverCore, thread_id: str, keys_only: bool = False
) -> Flow[list[dict[str, Any]]]:
    """Every index item of a thread (with ``keys_only``, just their keys)."""
    request: dict[str, Any] = {
        "TableName": core.table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": s(core.layout.pk(thread_id))},
        "ConsistentRead": True,
    }
    if keys_only:
        request["ProjectionExpression"] = f"{PK}, {SK}"
    items = yield from read_all(request)
    return items


def delete_items(core: SaverCore, keys: Sequence[dict[str, Any]]) -> Flow[None]:
    """Delete items by primary key."""
    yield from batch_write(core, [{"DeleteRequest": {"Key": k}} for k in keys])


def put_items(core: SaverCore, items: Sequence[dict[str, Any]]) -> Flow[None]:
    """Write whole items (overwriting)."""
    yield from batch_write(core, [{"PutRequest": {"Item": i}} for i in items])


def batch_write(core: SaverCore, requests: list[dict[str, Any]]) -> Flow[None]:
    """BatchWriteItem, 25 requests at a time, concurrently, retrying what DynamoDB defers."""
    pending = requests
    attempt = 0
    while pending:
        batches = [pending[i : i + _BATCH_WRITE] for i in range(0, len(pending), _BATCH_WRITE)]
        results = yield from perform_all(
            [Ddb("batch_write_item", {"RequestItems": {core.table: batch}}) for batch in batches]
        )
        pending = [
            r
            for result in results
            for r in response(result).get("UnprocessedItems", {}).get(core.table, [])
        ]
        if pending:
            attempt += 1
            yield from perform(Sleep(min(0.05 * 2**attempt, 2.0)))
