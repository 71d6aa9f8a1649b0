"""Flow tests of ``core.threads``: delete, delete by run, copy and prune. Items are
deleted before the objects they name, objects created before the items naming them."""

from __future__ import annotations

import os
from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import schema, threads
from langgraph_s3.errors import InvalidConfigError, ThreadExistsError
from langgraph_s3.operations import (
    IndexRequest,
    ListPage,
    S3Copy,
    S3Delete,
    S3Get,
    S3List,
    S3Put,
)
from tests.core.canned import (
    T0,
    Stored,
    checkpoint,
    config,
    from_bucket,
    make_core,
    page,
    store,
    store_writes,
)
from tests.core.script import Script

BIG = os.urandom(12_000).hex()


def ddb(name: str) -> Any:
    return lambda op: isinstance(op, IndexRequest) and op.method == name


def batch_writes(n: int) -> list[Any]:
    return [ddb("batch_write_item")] * n


def requests(batch: list[IndexRequest[Any]], kind: str) -> list[Any]:
    """The items (PutRequest) or keys (DeleteRequest) of a batch of batch writes."""
    field = "Item" if kind == "PutRequest" else "Key"
    return [r[kind][field] for op in batch for r in op.params["RequestItems"]["t"]]


def keys(*stored: Stored) -> list[dict[str, Any]]:
    return [{schema.PK: s.item[schema.PK], schema.SK: s.item[schema.SK]} for s in stored]


# --------------------------------------------------------------------------- delete
def test_delete_thread_removes_items_then_its_own_objects_and_forgets_it() -> None:
    core = make_core()
    c1 = store(config(), checkpoint("c1", {"x": 1}))
    w1 = store_writes(config(cid="c1"), [("x", 2)], "t")
    blob = core.layout.blob_key("t1", "ab" * 32)
    core.caches.known_blobs.put(blob, True)
    script = Script(threads.delete_thread(core, "t1"))
    query = script.expect(ddb("query"), page(keys(c1, w1)))
    assert query.params["ProjectionExpression"] == "pk, sk"
    [delete] = script.expect(batch_writes(1), [[]])
    assert requests([delete], "DeleteRequest") == keys(c1, w1)
    listed = [(blob, 1.0, 10), ("t1/nested/t9/b/" + "cd" * 32, 1.0, 10)]
    script.expect(S3List("t1/"), ListPage(listed, None))
    script.expect([S3Delete((blob,))], [None])  # not the nested prefix's object
    script.returns()
    assert blob not in core.caches.known_blobs


def test_delete_thread_of_an_empty_thread_deletes_nothing() -> None:
    script = Script(threads.delete_thread(make_core(), "t1"))
    script.expect(ddb("query"), page([]))
    script.expect(S3List("t1/"), ListPage([], None))
    script.returns()


@pytest.mark.parametrize("run_ids", ["r1", [2]])
def test_delete_for_runs_refuses_what_is_not_a_list_of_run_ids(run_ids: Any) -> None:
    Script(threads.delete_for_runs(make_core(), run_ids)).raises(InvalidConfigError)


def test_delete_for_runs_drops_the_runs_checkpoints_writes_objects_and_heads() -> None:
    writer = make_core(index_inline_limit=0)
    c1 = store(config(), checkpoint("c1", {"x": 1}), {"run_id": "r1"}, core=writer)
    c2 = store(config(cid="c1"), checkpoint("c2", {"x": 2}), {"run_id": "r1"})  # body in index
    w1 = store_writes(config(cid="c1"), [("x", 2)], "t")
    other = store(config(thread_id="t2"), checkpoint("c9", {"x": 1}), {"run_id": "r1"})
    core = make_core()
    script = Script(threads.delete_for_runs(core, ["r1", "r1", "r0"]))
    gsi = script.expect(ddb("query"), page(keys(c1, c2)))
    assert gsi.params["IndexName"] == schema.GSI_RUN
    assert gsi.params["ExpressionAttributeValues"] == {":r": schema.s("r1")}
    reads = script.expect([ddb("query"), ddb("query")], [page([c1.item, w1.item]), page([c2.item])])
    assert reads[0].params["ExpressionAttributeValues"][":hi"] == schema.s("c#~#c1#x")
    [delete] = script.expect(batch_writes(1), [[]])
    assert requests([delete], "DeleteRequest") == keys(c1, w1, c2)
    [objects] = script.expect([S3Delete], [None])
    assert objects.keys == tuple(c1.objects)  # c2's body was in its item
    [head] = script.expect([ddb("delete_item")], [True])
    assert head.params["Key"] == {schema.PK: schema.s("t1"), schema.SK: schema.s("h#~")}
    assert head.params["ConditionExpression"] == "#c IN (:c0, :c1)"
    assert "ConditionalCheckFailedException" in head.expect  # the head moved on: keep it
    # The next run id: its hits are all under another prefix's table rows or none.
    script.expect(ddb("query"), page([]))
    script.returns()
    assert other.item[schema.RUN] == schema.s("r1")


def test_delete_for_runs_ignores_threads_of_a_nested_prefix() -> None:
    core = make_core(prefix="app")
    nested = store(
        config(), checkpoint("c1", {"x": 1}), {"run_id": "r1"}, core=make_core(prefix="app/x")
    )
    script = Script(threads.delete_for_runs(core, ["r1"]))
    script.expect(ddb("query"), page(keys(nested)))
    script.returns()


def test_heads_are_deleted_in_conditions_of_at_most_100_ids() -> None:
    rows = [store(config(), checkpoint(f"c{i:03}", {"x": i})).row for i in range(150)]
    script = Script(threads.drop_checkpoints(make_core(), rows, [r.item for r in rows]))
    script.expect(batch_writes(6), [[]] * 6)
    heads = script.expect([ddb("delete_item")] * 2, [True, False])
    assert [len(h.params["ExpressionAttributeValues"]) for h in heads] == [100, 50]
    script.returns()


# --------------------------------------------------------------------------- copy
def test_copy_thread_refuses_the_same_id_and_an_existing_target() -> None:
    Script(threads.copy_thread(make_core(), "t1", "t1")).raises(InvalidConfigError)
    script = Script(threads.copy_thread(make_core(), "t1", "t2"))
    probe = script.expect(ddb("query"), page([{"pk": schema.s("t2")}]))
    assert probe.params["Limit"] == 1
    assert "already has checkpoints" in str(script.raises(ThreadExistsError))


def test_copy_of_an_empty_thread_writes_nothing() -> None:
    script = Script(threads.copy_thread(make_core(), "t1", "t2"))
    script.expect(ddb("query"), page([]))
    script.expect(ddb("query"), page([]))
    script.returns()


def test_copy_thread_copies_blobs_rewrites_bodies_then_writes_items_and_heads() -> None:
    writer = make_core(index_inline_limit=0)
    mid = os.urandom(1500).hex()  # inline, and keeps the body above 1 KiB
    c1 = store(config(), checkpoint("c1", {"big": BIG, "mid": mid}), core=writer)
    c2 = store(config(cid="c1"), checkpoint("c2", {"x": 2}))  # body in its item
    w1 = store_writes(config(cid="c1"), [("x", 2)], "task")
    bucket = c1.objects
    core = make_core(index_inline_limit=1024)
    script = Script(threads.copy_thread(core, "t1", "t2"))
    script.expect(ddb("query"), page([]))  # the target is empty
    script.expect(ddb("query"), page([c1.item, w1.item, c2.item, c2.head]))
    src_blobs = sorted(k for k in bucket if "/b/" in k)
    listed = [(k, 1.0, 1) for k in src_blobs] + [(f"t1/b/{i:064x}", 1.0, 1) for i in range(300)]
    listed.append(("t1/b/nested/t9/b/" + "0" * 64, 1.0, 1))
    script.expect(S3List("t1/b/"), ListPage(listed, None))
    first = script.expect([S3Copy] * 256, [None] * 256)
    rest = script.expect(
        lambda ops: all(isinstance(op, S3Copy) for op in ops), [None] * len(script.pending)
    )
    copies = first + rest
    assert len(copies) == len(listed) - 1  # not the nested prefix's object
    assert all(op.target == "t2/" + op.source[len("t1/") :] for op in copies)
    [get] = script.expect([S3Get], [from_bucket(bucket)(script.pending[0])])
    assert "/c/" in get.key
    [put] = script.expect([S3Put], [None])
    writes_batch = script.expect(batch_writes(1), [[]])
    checkpoints_batch = script.expect(batch_writes(1), [[]])
    heads_batch = script.expect(batch_writes(1), [[]])
    script.returns()

    [w] = requests(writes_batch, "PutRequest")
    assert w[schema.PK] == schema.s("t2") and w[schema.SK] == w1.item[schema.SK]
    new1, new2 = requests(checkpoints_batch, "PutRequest")
    # Layout 9: the new key spells the thread; the item names it nowhere else.
    assert new1[schema.PK] == schema.s("t2") and schema.THREAD not in new1
    assert schema.parse_row(new1).thread_id == "t2"
    # The body is re-written with the new thread id: a new digest, a new key.
    assert new1[schema.DIGEST] != c1.item[schema.DIGEST] and schema.BODY not in new1
    assert put.key == core.layout.checkpoint_key("t2", "", "c1", new1[schema.DIGEST]["S"])
    env = codec.unpack(codec.unframe(put.body, key="k", kind=codec.KIND_CHECKPOINT), key="k")
    assert (env["th"], env["id"]) == ("t2", "c1")
    assert new1[schema.PREFETCH] == c1.item[schema.PREFETCH]  # blobs keep their names
    # A small body stays in its item.
    row2 = schema.parse_row(new2)
    ids = ("t2", row2.ns, row2.checkpoint_id)
    assert schema.BODY in new2 and row2.digest == schema.place_digest(ids, new2[schema.BODY]["B"])
    [head] = requests(heads_batch, "PutRequest")
    assert head == {**c2.head, schema.PK: schema.s("t2"), schema.THREAD: schema.s("t2")}


def test_copy_thread_writes_chunk_items_with_the_writes_items_before_the_checkpoints() -> None:
    """A chunk item is copied as it is (its name is its SHA-256, the same in every
    thread), written now, before the checkpoint items naming it; not as a head."""
    payload = os.urandom(600)
    frame = codec.frame(codec.KIND_BLOB, payload, 3)
    name = codec.digest_bytes(payload)
    chunk = schema.chunk_item("t1", name, frame, 5)
    c1 = store(config(), checkpoint("c1", {"x": 1}))
    w1 = store_writes(config(cid="c1"), [("x", 2)], "task")
    script = Script(threads.copy_thread(make_core(), "t1", "t2"))
    script.expect(ddb("query"), page([]))
    script.expect(ddb("query"), page([chunk, c1.item, w1.item, c1.head]))
    script.expect(S3List("t1/b/"), ListPage([], None))
    first = script.expect(batch_writes(1), [[]])
    checkpoints_batch = script.expect(batch_writes(1), [[]])
    heads_batch = script.expect(batch_writes(1), [[]])
    script.returns()

    copied, w = requests(first, "PutRequest")
    assert copied == schema.chunk_item("t2", name, frame, int(T0 * 1000))
    assert (w[schema.PK], w[schema.SK]) == (schema.s("t2"), w1.item[schema.SK])
    assert [i[schema.SK] for i in requests(checkpoints_batch, "PutRequest")] == [c1.item[schema.SK]]
    assert [i[schema.SK] for i in requests(heads_batch, "PutRequest")] == [c1.head[schema.SK]]


# --------------------------------------------------------------------------- prune
@pytest.mark.parametrize(("ids", "strategy"), [(["t1"], "keep_all"), ("t1", "delete")])
def test_prune_refuses_unknown_strategies_and_a_single_string(ids: Any, strategy: str) -> None:
    Script(threads.prune(make_core(), ids, strategy)).raises(InvalidConfigError)


def test_prune_delete_deletes_each_thread_once() -> None:
    script = Script(threads.prune(make_core(), ["t1", "t1"], "delete"))
    script.expect(ddb("query"), page([]))
    script.expect(S3List("t1/"), ListPage([], None))
    script.returns()


def test_prune_keep_latest_keeps_each_namespaces_latest_and_unlinks_its_parent() -> None:
    c1 = store(config(), checkpoint("c1", {"x": 1}))
    c2 = store(config(cid="c1"), checkpoint("c2", {"x": 2}))
    w1 = store_writes(config(cid="c1"), [("x", 2)], "task")
    s1 = store(config(ns="sub"), checkpoint("s1", {"y": 1}))
    script = Script(threads.prune(make_core(), ["t1"], "keep_latest"))
    script.expect(ddb("query"), page([c1.item, w1.item, c2.item, c2.head, s1.item]))
    [delete] = script.expect(batch_writes(1), [[]])
    assert requests([delete], "DeleteRequest") == keys(c1, w1)
    [head] = script.expect([ddb("delete_item")], [True])  # only if it still names c1
    assert head.params["ExpressionAttributeValues"] == {":c0": schema.s("c1")}
    [unlink] = script.expect([ddb("update_item")], [True])
    assert unlink.params["Key"] == {schema.PK: c2.item[schema.PK], schema.SK: c2.item[schema.SK]}
    assert unlink.params["UpdateExpression"] == "REMOVE #p"
    assert unlink.params["ExpressionAttributeValues"] == {":p": schema.s("c1")}
    script.returns()
