"""Flow tests of ``core.inventory``: the parallel scan, and what it tells per thread."""

from __future__ import annotations

from typing import Any

from langgraph_s3.core import inventory, schema
from langgraph_s3.operations import Ddb, ListPage, S3List
from tests.core.canned import T0, checkpoint, config, make_core, page, store, store_writes
from tests.core.script import Script

CID1 = "1f000000-0000-6000-8000-000000000001"
CID2 = "1f000000-0000-6000-8000-000000000002"


def thread_items(thread: str, *, interrupted: bool = False) -> list[dict[str, Any]]:
    """The index items two real puts (and optionally an interrupt write) leave."""
    first = store(config(thread), checkpoint(CID1, {"a": 1}), {"source": "input", "step": -1})
    second = store(config(thread, CID1), checkpoint(CID2, {"a": 2}), {"source": "loop", "step": 0})
    items = [first.item, second.item, second.head]
    if interrupted:
        items.append(store_writes(config(thread, CID2), [("__interrupt__", ["ask"])], "task").item)
    return items


def test_the_scan_reads_four_segments_at_once_until_each_is_done() -> None:
    script = Script(inventory.scan_threads(make_core(prefix="app/")))
    batch = script.expect(
        [Ddb] * inventory.SEGMENTS, [page([]) for _ in range(3)] + [page([], {"pk": {"S": "x"}})]
    )
    assert [op.params["Segment"] for op in batch] == [0, 1, 2, 3]
    assert all(op.params["TotalSegments"] == 4 for op in batch)
    assert batch[0].params["ExpressionAttributeValues"] == {":p": {"S": "app/"}}
    (again,) = script.expect([Ddb], [page([])])  # only the segment that had more
    assert again.params["Segment"] == 3 and again.params["ExclusiveStartKey"] == {"pk": {"S": "x"}}
    assert script.returns() == {}


def test_threads_are_grouped_and_other_prefixes_left_out() -> None:
    core = make_core()
    mine = thread_items("t1")
    nested = [{**i, "pk": {"S": "other/t9"}} for i in thread_items("t9")]
    script = Script(inventory.scan_threads(core))
    script.expect([Ddb] * 4, [page(mine[:2]), page(nested), page(mine[2:]), page([])])
    assert script.returns() == {"t1": mine}


def test_a_summary_says_activity_step_interrupt_and_sizes() -> None:
    items = thread_items("t1", interrupted=True)
    summary = inventory.summarize(items)
    assert summary.thread_id == "t1" and summary.checkpoints == 2
    assert summary.latest_checkpoint_id == CID2 and summary.step == 0
    assert summary.interrupted and summary.namespaces == [""]
    assert summary.last_activity_ms == int(T0 * 1000)
    assert summary.index_bytes == sum(len(i["b"]["B"]) for i in items if "b" in i)
    assert not inventory.summarize(thread_items("t2")).interrupted


def test_activity_without_a_head_comes_from_the_newest_item() -> None:
    items = [i for i in thread_items("t1") if not i["sk"]["S"].startswith("h#")]
    items[0] = {**items[0], "at": {"N": "5"}}
    assert inventory.last_activity_ms(items) == int(T0 * 1000)
    assert inventory.waiting_on_interrupt([]) is False


def test_summaries_add_object_sizes_per_thread_and_sort_by_activity() -> None:
    core = make_core()
    old = [{**i, "at": {"N": "1"}} if "at" in i else i for i in thread_items("old")]
    script = Script(inventory.thread_summaries(core))
    script.expect([Ddb] * 4, [page(thread_items("new")), page(old), page([]), page([])])
    listing = ListPage(
        [("new/b/aa", 0.0, 10), ("new/c/~/x.y", 0.0, 5), (".gc/state", 0.0, 3)], None
    )
    script.expect(S3List(""), listing)
    found = script.returns()
    assert [t.thread_id for t in found] == ["new", "old"]
    assert (found[0].objects, found[0].object_bytes) == (2, 15)
    assert (found[1].objects, found[1].object_bytes) == (0, 0)


def test_a_step_that_is_not_a_number_is_unknown() -> None:
    item = thread_items("t1")[1]
    item = {**item, schema.METADATA: {"M": {"step": {"S": "s:two"}}}}
    assert inventory._step(item) is None
