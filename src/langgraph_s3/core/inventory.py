"""What is stored, thread by thread: the index scanned in parallel, objects listed.

Operators' questions (which threads exist, how active, paused on an interrupt, how
large; does every object the index names exist) are answered from the index items
and one listing of the bucket prefix, without loading any value. Scanning reads every
item under the prefix, so it needs the admin policy (``dynamodb:Scan``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph_s3.core import schema
from langgraph_s3.core.objects import list_keys
from langgraph_s3.core.schema import parse_row
from langgraph_s3.operations import Ddb, Flow, perform_all, response

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: Segments of the parallel table scan, read concurrently.
SEGMENTS = 4
#: Pending write index of ``__interrupt__`` (``WRITES_IDX_MAP``) as its attribute.
INTERRUPT_ATTR = schema.record_attr(-3)

Items = list[dict[str, Any]]


def scan_items(core: SaverCore, handle: Callable[[Items], None]) -> Flow[int]:
    """Every index item under the saver's prefix, page by page to ``handle``.

    A parallel scan: ``SEGMENTS`` segments read concurrently, page after page. The
    items of one page need not be a thread's complete set, nor come in any order.
    Returns how many items were handled.
    """
    base: dict[str, Any] = {"TableName": core.table, "TotalSegments": SEGMENTS}
    if core.layout.prefix:
        base["FilterExpression"] = "begins_with(pk, :p)"
        base["ExpressionAttributeValues"] = {":p": schema.s(core.layout.prefix)}
    pending = [{**base, "Segment": i} for i in range(SEGMENTS)]
    count = 0
    while pending:
        pages = yield from perform_all([Ddb("scan", request) for request in pending])
        pending, handled = _take_round(core, pending, pages, handle)
        count += handled
        del pages  # one round of pages in memory at a time
    return count


def _take_round(
    core: SaverCore,
    requests: list[dict[str, Any]],
    pages: list[Any],
    handle: Callable[[Items], None],
) -> tuple[list[dict[str, Any]], int]:
    """Hand one round of scan pages over; the requests for the next round."""
    following, count = [], 0
    for request, result in zip(requests, pages, strict=True):
        page = response(result)
        items = [i for i in page.get("Items", []) if core.layout.owns_pk(i[schema.PK]["S"])]
        count += len(items)
        handle(items)
        if page.get("LastEvaluatedKey"):
            following.append({**request, "ExclusiveStartKey": page["LastEvaluatedKey"]})
    return following, count


def scan_threads(core: SaverCore) -> Flow[dict[str, Items]]:
    """Every index item under the saver's prefix, grouped by thread (partition key),
    in memory (the collector keeps them on disk instead: ``langgraph_s3.gc_store``)."""
    threads: dict[str, Items] = {}

    def group(items: Items) -> None:
        for item in items:
            threads.setdefault(item[schema.PK]["S"], []).append(item)

    yield from scan_items(core, group)
    return threads


def thread_id_of(items: Items) -> str:
    """The raw thread id of a thread's items (the partition key if none says)."""
    return str(
        next((i[schema.THREAD]["S"] for i in items if schema.THREAD in i), items[0][schema.PK]["S"])
    )


def last_activity_ms(items: Items) -> int:
    """A thread's last write or (with touch_on_read) read, ms: from its heads, else
    from its newest item."""
    heads = [
        max(int(i.get(schema.AT, {}).get("N", 0)), int(i.get(schema.READ_AT, {}).get("N", 0)))
        for i in items
        if i[schema.SK]["S"].startswith("h#")
    ]
    if heads:
        return max(heads)
    return max((int(i[schema.AT]["N"]) for i in items if schema.AT in i), default=0)


def waiting_on_interrupt(items: Items) -> bool:
    """True if the root namespace's latest checkpoint has a pending ``__interrupt__``."""
    root = [parse_row(i) for i in items if schema.is_checkpoint_item(i) and i[schema.NS]["S"] == ""]
    if not root:
        return False
    latest = max(root, key=lambda r: r.checkpoint_id)
    prefix = latest.item[schema.SK]["S"] + schema.WRITES_MARK
    return any(i[schema.SK]["S"].startswith(prefix) and INTERRUPT_ATTR in i for i in items)


@dataclass
class ThreadSummary:
    """One thread, as ``langgraph-s3 threads`` lists it."""

    thread_id: str
    last_activity_ms: int
    checkpoints: int
    namespaces: list[str]
    latest_checkpoint_id: str | None
    step: int | None
    interrupted: bool
    index_bytes: int  # checkpoint bodies kept in the index
    object_bytes: int = 0  # objects in S3 (checkpoint bodies and value blobs)
    objects: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def summarize(items: Items) -> ThreadSummary:
    """A thread's summary from its index items."""
    rows = [parse_row(i) for i in items if schema.is_checkpoint_item(i)]
    root = [r for r in rows if r.ns == ""]
    latest = max(root or rows, key=lambda r: r.checkpoint_id) if rows else None
    return ThreadSummary(
        thread_id=thread_id_of(items),
        last_activity_ms=last_activity_ms(items),
        checkpoints=len(rows),
        namespaces=sorted({r.ns for r in rows}),
        latest_checkpoint_id=latest.checkpoint_id if latest else None,
        step=_step(latest.item) if latest else None,
        interrupted=waiting_on_interrupt(items),
        index_bytes=sum(len(r.body) for r in rows if r.body is not None),
    )


def _step(item: Mapping[str, Any]) -> int | None:
    indexed = item.get(schema.METADATA, {}).get("M", {}).get("step", {}).get("S", "")
    return (
        int(indexed[2:]) if indexed.startswith("n:") and indexed[2:].lstrip("-").isdigit() else None
    )


def thread_summaries(core: SaverCore, with_objects: bool = True) -> Flow[list[ThreadSummary]]:
    """Every thread under the prefix, most recently active first; with ``with_objects``
    the bucket prefix is listed once to add each thread's object count and bytes."""
    threads = yield from scan_threads(core)
    summaries = [summarize(items) for items in threads.values()]
    if with_objects and summaries:
        sizes = yield from object_sizes(core)
        for summary in summaries:
            folder = core.layout.thread_prefix(summary.thread_id)
            mine = sizes.get(folder, [])
            summary.objects, summary.object_bytes = len(mine), sum(mine)
    summaries.sort(key=lambda t: t.last_activity_ms, reverse=True)
    return summaries


def object_sizes(core: SaverCore) -> Flow[dict[str, list[int]]]:
    """Object sizes under the prefix by thread folder (``Layout.thread_prefix``)."""
    listing = yield from list_keys(core, core.layout.prefix)
    by_folder: dict[str, list[int]] = {}
    for key, _, size in listing:
        rest = key[len(core.layout.prefix) :]
        if "/" in rest and not rest.startswith("."):
            by_folder.setdefault(core.layout.prefix + rest.split("/", 1)[0] + "/", []).append(size)
    return by_folder
