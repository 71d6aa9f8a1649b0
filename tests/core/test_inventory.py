"""Flow tests of ``core.inventory``: the parallel scan, and what it tells per thread."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langgraph_s3 import chunking, codec
from langgraph_s3.core import history, inventory, schema
from langgraph_s3.core.scratch import Scratch
from langgraph_s3.keys import Layout
from langgraph_s3.operations import IndexRequest, ListPage, S3Get, S3List
from tests.core.canned import T0, checkpoint, config, make_core, page, store, store_writes
from tests.core.script import Script

CID1 = "1f000000-0000-6000-8000-000000000001"
CID2 = "1f000000-0000-6000-8000-000000000002"
LAYOUT = Layout("")


def thread_items(thread: str, *, interrupted: bool = False) -> list[dict[str, Any]]:
    """The index items two real puts (and optionally an interrupt write) leave."""
    first = store(config(thread), checkpoint(CID1, {"a": 1}), {"source": "input", "step": -1})
    second = store(config(thread, CID1), checkpoint(CID2, {"a": 2}), {"source": "loop", "step": 0})
    items = [first.item, second.item, second.head]
    if interrupted:
        items.append(store_writes(config(thread, CID2), [("__interrupt__", ["ask"])], "task").item)
    return items


def test_the_scan_reads_four_segments_at_once_until_each_is_done(tmp_path: Path) -> None:
    scratch = Scratch(tmp_path)
    script = Script(inventory.take_inventory(make_core(prefix="app/"), scratch, False))
    batch = script.expect(
        [IndexRequest] * inventory.SEGMENTS,
        [page([]) for _ in range(3)] + [page([], {"pk": {"S": "x"}})],
    )
    assert [op.params["Segment"] for op in batch] == [0, 1, 2, 3]
    assert all(op.params["TotalSegments"] == 4 for op in batch)
    assert batch[0].params["ExpressionAttributeValues"] == {":p": {"S": "app/"}}
    (again,) = script.expect([IndexRequest], [page([])])  # only the segment that had more
    assert again.params["Segment"] == 3 and again.params["ExclusiveStartKey"] == {"pk": {"S": "x"}}
    assert script.returns() == 0
    scratch.close()


def test_threads_are_grouped_and_other_prefixes_left_out(tmp_path: Path) -> None:
    core = make_core()
    mine = thread_items("t1")
    nested = [{**i, "pk": {"S": "other/t9"}} for i in thread_items("t9")]
    with Scratch(tmp_path) as scratch:
        script = Script(inventory.take_inventory(core, scratch, with_objects=False))
        script.expect([IndexRequest] * 4, [page(mine[:2]), page(nested), page(mine[2:]), page([])])
        assert script.returns() == 1
        [items] = list(scratch.threads())
    assert sorted(i["sk"]["S"] for i in items) == sorted(i["sk"]["S"] for i in mine)


def test_a_summary_says_activity_step_interrupt_and_sizes() -> None:
    items = thread_items("t1", interrupted=True)
    # Layout 9 items hold their metadata only in the body: the step comes from there.
    assert all(schema.METADATA not in i for i in items if schema.is_checkpoint_item(i))
    core = make_core()
    summary = inventory.summarize(LAYOUT, items, lambda r: history.item_metadata(core, r))
    assert summary.thread_id == "t1" and summary.checkpoints == 2
    assert summary.latest_checkpoint_id == CID2 and summary.step == 0
    assert inventory.summarize(LAYOUT, items).step is None  # not read: unknown
    assert summary.interrupted and summary.namespaces == [""]
    assert summary.last_activity_ms == int(T0 * 1000)
    assert summary.index_bytes == sum(len(i["b"]["B"]) for i in items if "b" in i)
    assert not inventory.summarize(LAYOUT, thread_items("t2")).interrupted


def test_a_thread_with_only_writes_is_named_from_its_partition_key() -> None:
    core = make_core(prefix="app")
    writes = store_writes(config("user@x", CID1), [("a", 1)], "task", core=core).item
    assert inventory.thread_id_of(core.layout, [writes]) == "user@x"


def test_activity_without_a_head_comes_from_the_newest_item() -> None:
    items = [i for i in thread_items("t1") if not i["sk"]["S"].startswith("h#")]
    items[0] = {**items[0], "at": {"N": "5"}}
    assert inventory.last_activity_ms(items) == int(T0 * 1000)
    assert inventory.waiting_on_interrupt([]) is False


def test_summaries_add_object_sizes_per_thread(tmp_path: Path) -> None:
    core = make_core()
    old = [{**i, "at": {"N": "1"}} if "at" in i else i for i in thread_items("old")]
    with Scratch(tmp_path) as scratch:
        script = Script(inventory.take_inventory(core, scratch))
        script.expect(
            [IndexRequest] * 4, [page(thread_items("new")), page(old), page([]), page([])]
        )
        first = ListPage([("new/b/aa", 0.0, 10), ("new/c/~/x.y", 0.0, 5)], "more")
        script.expect(S3List(""), first)
        script.expect(S3List("", "more"), ListPage([(".gc/state", 0.0, 3)], None))
        assert script.returns() == 2
        found = {t.thread_id: t for t in inventory.summaries(core, scratch)}
    assert (found["new"].objects, found["new"].object_bytes) == (2, 15)
    assert (found["old"].objects, found["old"].object_bytes) == (0, 0)
    assert found["new"].last_activity_ms > found["old"].last_activity_ms


def test_thread_figures_read_every_object_and_body_once() -> None:
    core = make_core(index_inline_limit=0)  # bodies in S3
    # 140 KB: more than two chunks of at most 64 KiB (AVG_CHUNK * 4) hold, so three or
    # more, which go up as one pack (packs.PACK_MIN). At 80 KB one value in a hundred
    # was cut in two, and two chunks stay loose blobs.
    big = os.urandom(70_000).hex()
    assert len(big) > 2 * 4 * chunking.AVG_CHUNK
    first = store(config("t1"), checkpoint(CID1, {"a": big}), core=core)
    small = make_core()  # a second checkpoint whose body stays in the index
    second = store(config("t1", CID1), checkpoint(CID2, {"a": 1}), core=small)
    objects = first.objects
    script = Script(inventory.thread_figures(core, "t1"))
    listing = [(k, 0.0, len(v)) for k, v in sorted(objects.items())] + [("t1/x", 0.0, 1)]
    script.expect(S3List("t1/"), ListPage(listing, None))
    script.expect(IndexRequest, page([first.item, second.item, second.head]))
    script.expect([S3Get] * len(objects), [objects[k] for k in sorted(objects)])
    figures = script.returns()
    # the value's chunks are uploaded by one put: one pack, counted by chunk
    (pack,) = [k for k in objects if "/b/" in k]
    chunks = codec.frames(objects[pack], key=pack)
    assert pack.endswith(".pack") and len(chunks) > 1
    assert figures["checkpoints"] == 2 and figures["checkpoint_bodies_in_index"] == 1
    assert figures["s3_objects"] == len(objects) and figures["index_items"] == 3
    assert figures["blobs"] == len(chunks) and figures["blob_references"] == len(chunks)
    assert figures["bytes_stored"] == sum(map(len, objects.values())) + len(second.item["b"]["B"])
    assert figures["compression_ratio"] > 1


def test_a_step_that_is_not_a_number_is_unknown() -> None:
    item = thread_items("t1")[1]
    item = {**item, schema.METADATA: {"M": {"step": {"S": "s:two"}}}}
    assert inventory._step(schema.parse_row(item), inventory.no_md) is None
    row = schema.parse_row(thread_items("t1")[1])
    assert inventory._step(row, lambda _: {"step": "two"}) is None
    assert inventory._step(row, lambda _: {"step": True}) is None
    assert inventory._step(row, lambda _: {"step": 7}) == 7


def test_chunk_items_are_counted_in_summaries_and_thread_figures() -> None:
    """Chunk items (layout 5) are blobs kept in the index: counted with their bytes."""
    core = make_core()
    first = store(config("t1"), checkpoint(CID1, {"a": os.urandom(5000).hex()}), core=core)
    (item,) = first.chunk_items.values()
    items = [first.item, first.head, item]
    summary = inventory.summarize(LAYOUT, items)
    frame = item[schema.VALUE]["B"]
    assert (summary.chunk_items, summary.chunk_item_bytes) == (1, len(frame))
    assert summary.checkpoints == 1 and summary.index_bytes == len(first.item["b"]["B"])

    script = Script(inventory.thread_figures(core, "t1"))
    script.expect(S3List("t1/"), ListPage([], None))
    script.expect(IndexRequest, page(items))
    figures = script.returns()
    assert figures["blobs"] == 1 and figures["chunk_items"] == 1 and figures["s3_objects"] == 0
    assert figures["blob_references"] == 1
    assert figures["bytes_stored"] == len(frame) + len(first.item["b"]["B"])
    assert figures["bytes_uncompressed"] > 10_000
