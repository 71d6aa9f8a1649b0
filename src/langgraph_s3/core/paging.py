"""Reading and writing index items in bulk: pages of queries and scans, batch writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph_s3.core.index import (
    BatchWrite,
    Item,
    Key,
    Page,
    Paged,
    Query,
    delete_requests,
    put_requests,
)
from langgraph_s3.errors import StorageAccessError
from langgraph_s3.operations import Flow, Sleep, perform, perform_all

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

_BATCH_WRITE = 25
#: Rounds of asking again what a BatchWriteItem or BatchGetItem left unprocessed
#: (DynamoDB does so when the table is throttled): about 13 s of backoff in all, as
#: AWS's SDKs allow DynamoDB's own retries, then the call fails instead of waiting on.
UNPROCESSED_ROUNDS = 10
P = TypeVar("P", bound=Paged)


def next_page(request: P) -> Flow[tuple[Page, P | None]]:
    """One page of a query or scan, and the request for the next page (None after
    the last)."""
    page = yield from perform(request)
    return page, request.following(page)


def read_all(request: Paged) -> Flow[list[Item]]:
    """Every item of a query or scan, page after page."""
    items: list[Item] = []
    following: Paged | None = request
    while following is not None:
        page, following = yield from next_page(following)
        items.extend(page.items)
    return items


def thread_items(core: SaverCore, thread_id: str, keys_only: bool = False) -> Flow[list[Item]]:
    """Every index item of a thread (with ``keys_only``, just their keys)."""
    query = Query(core.table, core.layout.pk(thread_id), keys_only=keys_only)
    items = yield from read_all(query)
    return items


def delete_items(core: SaverCore, keys: Sequence[Key]) -> Flow[None]:
    """Delete items by primary key."""
    yield from batch_write(core, delete_requests(keys))


def put_items(core: SaverCore, items: Sequence[Item]) -> Flow[None]:
    """Write whole items (overwriting)."""
    yield from batch_write(core, put_requests(items))


def batch_write(core: SaverCore, requests: Sequence[Mapping[str, Any]]) -> Flow[None]:
    """BatchWriteItem, 25 requests at a time, concurrently, retrying what DynamoDB defers."""
    pending = list(requests)
    attempt = 0
    while pending:
        batches = [pending[i : i + _BATCH_WRITE] for i in range(0, len(pending), _BATCH_WRITE)]
        deferred = yield from perform_all([BatchWrite(core.table, tuple(b)) for b in batches])
        pending = [r for d in deferred for r in d]
        if pending:
            attempt += 1
            yield from unprocessed_backoff(core, attempt, len(pending), "BatchWriteItem")


def unprocessed_backoff(core: SaverCore, attempt: int, left: int, request: str) -> Flow[None]:
    """The pause before round ``attempt`` of asking again for the ``left`` entries a
    ``request`` left unprocessed; after ``UNPROCESSED_ROUNDS`` rounds,
    :class:`StorageAccessError` (nothing was committed on their account)."""
    if attempt > UNPROCESSED_ROUNDS:
        raise StorageAccessError(
            f"DynamoDB left {left} entries of a {request} on table {core.table!r} "
            f"unprocessed {UNPROCESSED_ROUNDS} times: the table is throttled (its "
            "provisioned capacity, or a hot partition, is exhausted). Nothing that needed "
            "them was committed; retry later, or raise the table's capacity (on-demand "
            "tables absorb bursts after a while)"
        )
    yield from perform(Sleep(min(0.05 * 2**attempt, 2.0)))
