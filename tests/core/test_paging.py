"""Flow tests of ``core.paging``: pages of queries and scans, and batch writes."""

from __future__ import annotations

from typing import Any

from langgraph_s3.core import paging, schema
from langgraph_s3.core.index import BatchWrite, Page, Query, ScanSegment
from langgraph_s3.errors import StorageAccessError
from langgraph_s3.operations import Sleep
from tests.core.canned import make_core, page
from tests.core.script import Script

QUERY = Query("t", "t1")


def key(i: int) -> dict[str, Any]:
    return {schema.PK: schema.s("t1"), schema.SK: schema.s(f"c#~#{i:03}")}


def test_next_page_returns_the_page_and_the_request_for_the_next_one() -> None:
    script = Script(paging.next_page(QUERY))
    assert script.expect(QUERY, page([key(1)], last=key(1))).method == "query"
    assert script.returns() == (Page([key(1)], key(1)), Query("t", "t1", start=key(1)))
    scan = Script(paging.next_page(ScanSegment("t", "", 0, 4)))
    assert scan.expect(ScanSegment, page([])).method == "scan"
    assert scan.returns() == (Page([], None), None)


def test_read_all_follows_last_evaluated_keys_to_the_end() -> None:
    script = Script(paging.read_all(QUERY))
    first = script.expect(Query, page([key(1), key(2)], last=key(2)))
    second = script.expect(Query, page([key(3)], last=key(3)))
    third = script.expect(Query, page([]))
    assert script.returns() == [key(1), key(2), key(3)]
    assert "ExclusiveStartKey" not in first.params
    assert second.params["ExclusiveStartKey"] == key(2)
    assert third.params["ExclusiveStartKey"] == key(3)
    assert second.params == {**first.params, "ExclusiveStartKey": key(2)}


def test_thread_items_reads_the_whole_partition_consistently() -> None:
    script = Script(paging.thread_items(make_core(prefix="app"), "t1", keys_only=True))
    query = script.expect(Query, page([key(1)]))
    assert script.returns() == [key(1)]
    assert query.params["KeyConditionExpression"] == "pk = :pk"
    assert query.params["ExpressionAttributeValues"] == {":pk": schema.s("app/t1")}
    assert query.params["ConsistentRead"] is True
    assert query.params["ProjectionExpression"] == "pk, sk"
    full = Script(paging.thread_items(make_core(), "t1"))
    assert "ProjectionExpression" not in full.expect(Query, page([])).params


def test_batch_writes_go_25_a_request_at_once_and_deferred_ones_are_retried() -> None:
    keys = [key(i) for i in range(60)]
    script = Script(paging.delete_items(make_core(), keys))
    deferred = [{"DeleteRequest": {"Key": keys[3]}}, {"DeleteRequest": {"Key": keys[40]}}]
    batch = script.expect([BatchWrite] * 3, [deferred[:1], deferred[1:], []])
    assert [op.method for op in batch] == ["batch_write_item"] * 3
    sent = [r["DeleteRequest"]["Key"] for op in batch for r in op.params["RequestItems"]["t"]]
    assert sent == keys and [len(op.params["RequestItems"]["t"]) for op in batch] == [25, 25, 10]
    script.expect(Sleep(0.1))
    [retry] = script.expect([BatchWrite], [deferred[1:]])
    assert retry.params["RequestItems"]["t"] == deferred
    script.expect(Sleep(0.2))  # backing off further
    script.expect([BatchWrite], [[]])
    script.returns()


def test_a_batch_write_deferred_round_after_round_fails_instead_of_waiting_on() -> None:
    script = Script(paging.put_items(make_core(), [key(1), key(2)]))
    deferred = [{"PutRequest": {"Item": key(2)}}]
    script.expect([BatchWrite], [deferred])
    pauses = []
    for _ in range(paging.UNPROCESSED_ROUNDS):
        pause = script.expect(Sleep)
        pauses.append(pause.seconds)
        script.expect([BatchWrite], [deferred])
    err = script.raises(StorageAccessError)
    assert pauses[:3] == [0.1, 0.2, 0.4] and max(pauses) == 2.0 and sum(pauses) < 15
    assert "1 entries of a BatchWriteItem on table 't'" in str(err) and "throttled" in str(err)


def test_put_items_writes_whole_items_and_nothing_is_no_request() -> None:
    script = Script(paging.put_items(make_core(), [key(1)]))
    [op] = script.expect([BatchWrite], [[]])
    assert op.params == {"RequestItems": {"t": [{"PutRequest": {"Item": key(1)}}]}}
    script.returns()
    Script(paging.put_items(make_core(), [])).returns()
