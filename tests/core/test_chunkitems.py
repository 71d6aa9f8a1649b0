"""core.chunkitems: where a call's small new chunks go (the placement rule), and the
flows that write them with the commit's PUTs and read them beside the GETs."""

from __future__ import annotations

import os
from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import chunkitems, objects, packs, paging, read, schema
from langgraph_s3.core.chunkitems import PUT_WRITE_UNITS, item_key, item_size, pays
from langgraph_s3.core.entries import IN_INDEX
from langgraph_s3.core.index import BatchGet, BatchWrite, Got
from langgraph_s3.errors import (
    CorruptObjectError,
    MissingObjectError,
    NotYetReplicatedError,
    StorageAccessError,
)
from langgraph_s3.operations import S3Get, Sleep, WaitUpload
from langgraph_s3.regions import CrossRegion
from tests.core import canned
from tests.core.canned import checkpoint, config, from_bucket, is_query, make_core, page, store
from tests.core.script import Script

KB = chunkitems.WRITE_UNIT_BYTES


def chunk_key(n: int = 0, thread: str = "t1") -> str:
    return f"{thread}/b/{codec.digest(str(n).encode())}"


def frame_of(units: int, key: str) -> bytes:
    """A frame whose chunk item is exactly ``units`` write units (its last byte)."""
    return b"f" * (units * KB - item_size(key, b""))


def blob(core: Any, payload: bytes, thread_id: str = "t1") -> tuple[str, bytes]:
    key = core.layout.blob_key(thread_id, codec.digest(payload))
    return key, codec.frame(codec.KIND_BLOB, payload, 3)


# --------------------------------------------------------------------------- the rule
def test_an_items_size_counts_its_key_attribute_names_and_time() -> None:
    key = chunk_key()
    # pk "t1", sk "b#" + 64 hex, v, at (8 bytes for a 13-digit ms time)
    assert item_key(key) == {"pk": {"S": "t1"}, "sk": {"S": "b#" + key.rsplit("/", 1)[1]}}
    assert item_size(key, b"x" * 100) == (2 + 2) + (2 + 66) + (1 + 100) + (2 + 8)
    assert chunkitems.write_units(1) == 1 and chunkitems.write_units(KB) == 1
    assert chunkitems.write_units(KB + 1) == 2


def test_one_chunk_is_an_item_up_to_eight_write_units() -> None:
    key = chunk_key()
    assert pays({key: b"x" * 600})  # a message-list piece: 1 WRU instead of a PUT
    assert pays({key: frame_of(1, key)}) and pays({key: frame_of(1, key) + b"1"})  # 1, 2 WRU
    assert pays({key: frame_of(PUT_WRITE_UNITS, key)})  # ~8 KB: 8 WRU, as a PUT
    assert not pays({key: frame_of(PUT_WRITE_UNITS, key) + b"1"})  # 9 WRU
    assert not pays({})


def test_two_chunks_share_sixteen_write_units() -> None:
    a, b = chunk_key(1), chunk_key(2)
    assert pays({a: frame_of(12, a), b: frame_of(4, b)})  # one may be ~12 KB
    assert not pays({a: frame_of(12, a), b: frame_of(4, b) + b"1"})
    assert pays({a: b"x" * 700, b: b"y" * 500})


def test_small_chunks_are_placed_as_items_unless_turned_off() -> None:
    for enabled, where in ((True, IN_INDEX), (False, None)):
        core = make_core(chunk_items=enabled)
        key, body = blob(core, b"small")
        sealed = packs.seal(core, "t1", {key: body})
        assert sealed.shares.bodies == {key: body}
        assert sealed.placed == {bytes.fromhex(key.rsplit("/", 1)[1]): where}


def test_packs_chunk_lists_and_large_chunks_stay_in_s3() -> None:
    core = make_core()
    three = dict(blob(core, bytes([i]) * 50) for i in range(3))
    sealed = packs.seal(core, "t1", three)
    assert [k.endswith(".pack") for k in sealed.shares.bodies] == [True]
    key, body = blob(core, os.urandom(9 * KB))  # incompressible: 9 WRU
    assert packs.seal(core, "t1", {key: body}).placed == {bytes.fromhex(key[-64:]): None}


def test_a_chunk_list_keeps_its_calls_chunks_out_of_the_index() -> None:
    core = make_core(inline_threshold=0)
    many = [f"message {i} " * 40 for i in range(300)]  # enough chunks for a chunk list
    stored = store(config(), checkpoint("c01", {"m": many}), core=core)
    assert stored.chunk_items == {}
    assert any(k.endswith(".pack") for k in stored.objects)


# --------------------------------------------------------------------------- write
def test_a_put_with_one_small_new_chunk_writes_one_item_then_commits() -> None:
    core = make_core(inline_threshold=0)
    script = Script(
        read_put(core, {"m": ["hello"]}),
    )
    [write] = script.expect([BatchWrite], [[]])
    [request] = write.requests
    item = request["PutRequest"]["Item"]
    assert item["pk"] == {"S": "t1"} and item["sk"]["S"].startswith("b#")
    assert item["v"]["B"].startswith(b"LGS3\x01B") and item["at"] == {"N": "1700000000000"}
    txn = script.expect(lambda op: op.method == "transact_write_items", None)
    body = schema.parse_row(txn.params["TransactItems"][0]["Put"]["Item"]).body
    assert body is not None  # trimmed (layout 6), naming a chunk item (5)
    assert canned.body_versions(body) == (codec.LAYOUT_RECORDS, codec.LAYOUT_ITEMS)
    script.returns()
    key = f"t1/b/{item['sk']['S'][2:]}"
    assert core.caches.known_blobs.get(key) is IN_INDEX


def read_put(core: Any, values: dict[str, Any], cid: str = "c01", parent: str | None = None) -> Any:
    from langgraph_s3.core import commit

    versions = dict.fromkeys(values, cid)
    cp = checkpoint(cid, values, versions)
    return commit.put(core, config(cid=parent), cp, {"source": "loop", "step": 0}, versions)


def test_deferred_items_are_written_again_before_the_commit() -> None:
    core = make_core(inline_threshold=0)
    script = Script(read_put(core, {"a": "one", "b": "two"}))
    [write] = script.pending
    assert isinstance(write, BatchWrite) and len(write.requests) == 2  # one request, 2 items
    script.step([[write.requests[1]]])  # DynamoDB deferred the second
    script.expect(Sleep(0.05))
    [again] = script.expect([BatchWrite], [[]])
    assert again.requests == (write.requests[1],)
    script.expect(lambda op: op.method == "transact_write_items", None)
    script.returns()


def test_a_known_chunk_item_is_named_where_it_is_and_not_written_again() -> None:
    core = make_core(inline_threshold=0)
    first = store(config(), checkpoint("c01", {"m": "hello"}), core=core)
    assert len(first.chunk_items) == 1
    again = store(
        config(cid="c01"), checkpoint("c02", {"n": "hello"}), {"step": 1}, {"n": "2"}, core=core
    )
    assert again.chunk_items == {}  # referenced, not stored twice
    body = again.row.body
    assert body is not None  # trimmed (layout 6), naming a chunk item (5)
    assert canned.body_versions(body) == (codec.LAYOUT_RECORDS, codec.LAYOUT_ITEMS)


def test_a_second_flow_waits_for_the_item_another_flow_writes() -> None:
    core = make_core()
    key, body = blob(core, b"shared")
    first = Script(objects.store_chunks(core, "t1", {key: body}))
    [write] = first.pending
    assert isinstance(write, BatchWrite)
    second = Script(objects.store_chunks(core, "t1", {key: body}))
    [wait] = second.pending
    assert isinstance(wait, WaitUpload) and not wait.pending.done()
    first.step([[]])
    assert wait.pending.result() is True  # resolved by the core once stored
    second.step([True])
    assert second.returns().placed == {bytes.fromhex(key[-64:]): IN_INDEX}
    assert first.returns().shares.bodies == {key: body}


def test_a_failed_item_write_is_placed_again_by_the_flow_that_waited() -> None:
    core = make_core()
    key, body = blob(core, b"shared")
    other = Script(objects.store_chunks(core, "t1", {key: body}))
    waiting = Script(objects.store_chunks(core, "t1", {key: body}))
    other.throw(MissingObjectError("BatchWriteItem failed", key=key))
    other.raises(MissingObjectError)
    assert key not in core.caches.known_blobs
    waiting.step([False])
    [retry] = waiting.expect([BatchWrite], [[]])
    assert retry.requests[0]["PutRequest"]["Item"]["v"]["B"] == body
    waiting.returns()
    assert core.caches.known_blobs.get(key) is IN_INDEX


# --------------------------------------------------------------------------- read
def got(stored: Any, op: BatchGet) -> Got:
    """The answer to a BatchGet: the items ``stored`` holds of the keys asked."""
    items = [stored.chunk_items[k["pk"]["S"], k["sk"]["S"]] for k in op.keys]
    return Got([i for i in items if i is not None], [])


def test_a_cold_read_is_a_query_then_one_batch_get_beside_the_gets() -> None:
    writer = make_core(inline_threshold=0, chunk_items=False)
    big = os.urandom(12_000).hex()
    old = store(config(), checkpoint("c01", {"big": big}), core=writer)  # loose or packed
    writer.chunk_items = True
    values = {"m": "hello", "big": big}
    stored = store(
        config(cid="c01"),
        checkpoint("c02", values, {"m": "2", "big": "c01"}),
        {},
        {"m": "2"},
        core=writer,
    )
    # a history mixing S3 chunks (written without chunk items) and a chunk item
    assert len(stored.chunk_items) == 1 and old.chunk_items == {} and old.objects
    script = Script(read.get_tuple(make_core(), config()))
    script.expect(is_query, page([stored.item]))
    ops = script.pending
    gets = [op for op in ops if isinstance(op, S3Get)]
    [get] = [op for op in ops if isinstance(op, BatchGet)]
    assert len(gets) + 1 == len(ops) and {g.key for g in gets} == set(old.objects)
    assert get.params["RequestItems"]["t"]["ConsistentRead"] is True
    assert len(get.keys) == 1
    script.step(
        [from_bucket(old.objects)(op) if isinstance(op, S3Get) else got(stored, op) for op in ops]
    )
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == values


def one_item() -> tuple[Any, Any]:
    stored = store(config(), checkpoint("c01", {"m": "hello"}), core=make_core(inline_threshold=0))
    return stored, Script(read.get_tuple(make_core(), config()))


def test_unprocessed_keys_are_asked_again_after_a_pause() -> None:
    stored, script = one_item()
    script.expect(is_query, page([stored.item]))
    [first] = script.pending
    script.step([Got([], list(first.keys))])
    script.expect(Sleep(0.1))
    [again] = script.expect([BatchGet], [got(stored, first)])
    assert again.keys == first.keys
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == {"m": "hello"}


def test_keys_unprocessed_round_after_round_fail_the_read_instead_of_waiting_on() -> None:
    stored, script = one_item()
    script.expect(is_query, page([stored.item]))
    [first] = script.pending
    for _ in range(paging.UNPROCESSED_ROUNDS):
        script.step([Got([], list(first.keys))])
        script.expect(Sleep)
    script.step([Got([], list(first.keys))])
    err = script.raises(StorageAccessError)
    assert "1 entries of a BatchGetItem on table 't'" in str(err)


def test_a_missing_chunk_item_is_a_missing_object_naming_the_item() -> None:
    stored, script = one_item()
    script.expect(is_query, page([stored.item]))
    script.expect([BatchGet], [Got([], [])])
    err = script.raises(MissingObjectError)
    ((pk, sk),) = stored.chunk_items
    assert err.key == f"{pk}|{sk}" and "missing from table 't'" in str(err)


def test_a_damaged_chunk_item_is_refused() -> None:
    stored, script = one_item()
    script.expect(is_query, page([stored.item]))
    ((k, item),) = stored.chunk_items.items()
    frame = item["v"]["B"]
    damaged = {**item, "v": {"B": codec.frame(codec.KIND_BLOB, b"other", 3)}}
    assert damaged["v"]["B"] != frame
    script.expect([BatchGet], [Got([damaged], [])])
    err = script.raises(CorruptObjectError)
    assert err.key == f"{k[0]}|{k[1]}" and "content address" in str(err)


def test_more_than_a_hundred_items_are_asked_in_one_round_of_batches() -> None:
    keys = [chunk_key(i) for i in range(150)]
    script = Script(chunkitems.read(make_core(), keys))
    batches = script.expect([BatchGet, BatchGet], [Got([], []), Got([], [])])
    assert [len(b.keys) for b in batches] == [100, 50]
    assert script.returns() == dict.fromkeys(keys)


def test_a_replica_waits_for_a_chunk_item_to_replicate() -> None:
    cross = CrossRegion("us-east-1", read_policy="wait", max_wait=0.1)
    core = make_core(region_name="eu-west-1", cross_region=cross)
    key = chunk_key()
    item = {**item_key(key), "v": {"B": b"frame"}}
    script = Script(chunkitems.read(core, [key]))
    script.expect([BatchGet], [Got([], [])])
    script.expect(Sleep(0.05))
    script.expect([BatchGet], [Got([item], [])])
    assert script.returns() == {key: b"frame"}
    failing = Script(chunkitems.read(core, [key]))
    failing.expect([BatchGet], [Got([], [])])
    failing.expect(Sleep(0.05))
    failing.expect([BatchGet], [Got([], [])])
    failing.expect(Sleep(0.05))
    failing.expect([BatchGet], [Got([], [])])
    err = failing.raises(NotYetReplicatedError)
    assert err.keys == [key] and err.waited == pytest.approx(0.1)


def test_the_chunk_items_of_a_body_in_s3_come_with_the_object() -> None:
    """``pi`` names them, so a cold read stays at two round trips: Query, then the
    object's GET and one BatchGetItem."""
    writer = make_core(inline_threshold=0, index_inline_limit=0)
    stored = store(config(), checkpoint("c01", {"m": "hello"}), core=writer)
    [(_, sk)] = stored.chunk_items
    assert stored.row.body is None and stored.row.item_prefetch == (bytes.fromhex(sk[2:]),)
    assert stored.row.prefetch == ()  # pf names loose blobs only
    script = Script(read.get_tuple(make_core(), config()))
    script.expect(is_query, page([stored.item]))
    ops = script.pending
    assert [type(op) for op in ops] == [S3Get, BatchGet]
    script.step([from_bucket(stored.objects)(ops[0]), got(stored, ops[1])])
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == {"m": "hello"}
