"""Flow tests of ``core.writes``: one index item per task, blobs for large values,
and the limits of DynamoDB items and update expressions."""

from __future__ import annotations

import os
from typing import Any

import pytest
from langchain_core.messages import AIMessage, RemoveMessage

from langgraph_s3 import codec
from langgraph_s3.core import groups, packs, schema, writes
from langgraph_s3.core.index import TXN_CANCELLED
from langgraph_s3.errors import (
    CorruptObjectError,
    InvalidConfigError,
    S3SaverError,
    ThreadOwnedElsewhereError,
)
from langgraph_s3.operations import IndexRequest, S3Put
from langgraph_s3.regions import CrossRegion
from tests.core.canned import checkpoint, config, make_core, store, store_writes
from tests.core.script import Script

AT_C1 = config(cid="c01")
ERROR, INTERRUPT = "__error__", "__interrupt__"  # special writes (WRITES_IDX_MAP)


def records(update: dict[str, Any]) -> dict[str, list[Any]]:
    """Attribute of each write -> unpacked record, of one update request (a group's
    writes under the attributes of their indices)."""
    out = {}
    for placeholder, value in update["ExpressionAttributeValues"].items():
        attr = schema.record_index(placeholder[1:])
        if attr is not None:
            for i, rec in groups.unpack(value["B"], attr, "test")[1]:
                out[schema.record_attr(i)] = rec.wire()
    return out


def stored_attrs(item: dict[str, Any]) -> set[str]:
    """The record attributes of a writes item."""
    return {k for k in item if schema.record_index(k) is not None}


def is_update(op: Any) -> bool:
    return isinstance(op, IndexRequest) and op.method == "update_item"


def test_a_tasks_writes_are_one_update_of_its_item() -> None:
    script = Script(writes.put_writes(make_core(), AT_C1, [("a", 1), ("b", "two")], "task-1", "~0"))
    update = script.expect(is_update, True)
    script.returns()
    assert update.params["Key"] == {
        schema.PK: schema.s("t1"),
        schema.SK: schema.s("c#~#c01#w#task-1"),
    }
    values = update.params["ExpressionAttributeValues"]
    # Layout 10: the sort key spells both ids; an empty tid still marks the item.
    assert (values[":tid"], values[":tp"]) == (schema.s(""), schema.s("~0"))
    assert ":cid" not in values and "cid" not in update.params["ExpressionAttributeNames"].values()
    assert records(update.params) == {
        "w0": ["a", ["i", "msgpack", b"\x01"]],
        "w1": ["b", ["i", "msgpack", b"\xa3two"]],
    }
    # A retried task resends the same values: a regular write is never overwritten.
    assert "w0 = if_not_exists(w0, :w0)" in update.params["UpdateExpression"]


@pytest.mark.parametrize(
    ("settings", "task_id", "held"),
    [
        ({}, "task-1", ("", None)),  # layout 10: the key spells both
        ({}, "t" * 200, ("t" * 200, None)),  # a task id the key holds hashed stays
        ({}, "", ("", None)),
        ({"trim_items": False}, "task-1", ("task-1", "c01")),  # what 0.11.x and older read
    ],
)
def test_a_writes_item_holds_the_ids_its_key_does_not_spell(
    settings: dict[str, Any], task_id: str, held: tuple[str, str | None]
) -> None:
    item = store_writes(AT_C1, [("a", 1)], task_id, core=make_core(**settings)).item
    assert (item[schema.TASK_ID]["S"], item.get(schema.CID, {}).get("S")) == held
    row = schema.parse_writes(item)
    assert (row.task_id, row.checkpoint_id, row.records[0][1].channel) == (task_id, "c01", "a")


def test_a_writes_item_whose_key_cannot_give_an_id_it_lacks_is_refused() -> None:
    item = store_writes(AT_C1, [("a", 1)], "t" * 200).item
    item[schema.TASK_ID] = schema.s("")
    with pytest.raises(CorruptObjectError, match="names no task or checkpoint id"):
        schema.parse_writes(item)


def test_special_writes_have_fixed_slots_and_are_replaced() -> None:
    item = store_writes(AT_C1, [(ERROR, "first"), ("a", 1), (ERROR, "second")], "t").item
    assert set(item) >= {"m1", "w1"} and "w0" not in item and "w2" not in item
    assert codec.unpack_record(item["m1"]["B"], key="k")[1][2] == b"\xa6second"
    update = Script(writes.put_writes(make_core(), AT_C1, [(INTERRUPT, "x")], "t"))
    assert "m3 = :m3" in update.expect(is_update, None).params["UpdateExpression"]


def test_a_large_value_is_uploaded_as_blobs_before_the_item_names_it() -> None:
    big = os.urandom(20_000).hex()  # 40 KB: above the 32 KiB write threshold
    script = Script(writes.put_writes(make_core(), AT_C1, [("doc", big)], "t"))
    batch = script.expect(lambda ops: isinstance(ops, list), [None] * len(script.pending))
    assert batch and all(isinstance(op, S3Put) and "/b/" in op.key for op in batch)
    update = script.expect(is_update, None)
    script.returns()
    entry = records(update.params)["w0"][1]
    assert entry[0] == "r"
    assert sorted(make_core().layout.blob_key("t1", d.hex()) for d in entry[2]) == sorted(
        op.key for op in batch
    )


def test_a_record_larger_than_the_index_limit_goes_to_a_blob_the_checkpoint_re_uses() -> None:
    """Such a value would not stay inline in the next checkpoint body either: stored as
    a blob by the write, it is uploaded once and the checkpoint names the same blob,
    instead of the writes item paying a write unit per KB for it first."""
    core = make_core(chunk_items=False)  # index limit 4 KiB
    big, small = os.urandom(5_000).hex(), os.urandom(1_000).hex()  # ~5 KB, ~1 KB records
    script = Script(writes.put_writes(core, AT_C1, [("big", big), ("small", small)], "t"))
    [put] = script.expect([S3Put], [None])
    update = script.expect(is_update, True)
    script.returns()
    recs = records(update.params)
    assert recs["w0"][1][0] == "r" and recs["w1"][1][0] == "i"
    assert put.key == core.layout.blob_key("t1", recs["w0"][1][2][0].hex())
    # The checkpoint that takes the value uploads nothing: it names the write's blob.
    stored = store(AT_C1, checkpoint("c02", {"big": big, "small": small}), core=core)
    assert stored.objects == {}
    assert schema.parse_row(stored.item).body is not None
    # With every body in S3 (limit 0) values stay inline in bodies, so in records too.
    script = Script(writes.put_writes(make_core(index_inline_limit=0), AT_C1, [("big", big)], "t"))
    assert records(script.expect(is_update, None).params)["w0"][1][0] == "i"


def test_writes_too_large_together_for_one_item_move_to_blobs_largest_first() -> None:
    """Each value is below the inline threshold, together they exceed the item budget:
    the largest move to blobs until the item fits. (With no body in the index, so
    that records over the index limit are not moved for that reason.)"""
    values = [os.urandom(30_000 + i) for i in range(12)]  # incompressible, ~360 KB in all
    writes_ = [(f"c{i}", v) for i, v in enumerate(values)]
    script = Script(writes.put_writes(make_core(index_inline_limit=0), AT_C1, writes_, "t"))
    puts = script.expect(
        lambda ops: all(isinstance(op, S3Put) for op in ops), [None] * len(script.pending)
    )
    update = script.expect(is_update, True)
    script.returns()
    recs = records(update.params)
    moved = sorted(int(attr[1:]) for attr, (_, entry) in recs.items() if entry[0] in "rp")
    # the moved values' chunks go up together, as one pack, from PACK_MIN chunks on
    packed = len(moved) >= packs.PACK_MIN
    assert len(puts) == (1 if packed else len(moved))
    assert all(op.key.endswith(".pack") == packed for op in puts)
    assert moved and moved == list(range(12 - len(moved), 12))  # the largest ones
    packed = update.params["ExpressionAttributeValues"]
    assert sum(len(v["B"]) for k, v in packed.items() if k[1:] in recs) <= writes.ITEM_BUDGET


@pytest.mark.parametrize("grouped", [True, False])
def test_many_writes_split_into_updates_under_the_expression_limit(grouped: bool) -> None:
    many = [(f"channel_{i}", i) for i in range(300)]
    core = make_core(group_writes=grouped)
    script = Script(writes.put_writes(core, AT_C1, many, "t", "~path"))
    updates = []
    while script.pending is not None:
        updates.append(script.expect(is_update, None))
    script.returns()
    assert len(updates) > 1
    assert all(len(u.params["UpdateExpression"]) <= 4096 for u in updates)
    assert all(len(u.params.get("ConditionExpression", "")) <= 4096 for u in updates)
    got: dict[str, list[Any]] = {}
    for u in updates:
        got.update(records(u.params))
        assert u.params["Key"] == updates[0].params["Key"]
        assert u.params["ExpressionAttributeValues"][":tp"] == schema.s("~path")
    assert sorted(got) == sorted(f"w{i}" for i in range(300))
    item = store_writes(AT_C1, many, "t", core=make_core(group_writes=grouped)).item
    # Groups span at most GROUP_SPAN attributes: one per hundred writes.
    assert stored_attrs(item) == (
        {"w0", "w100", "w200"} if grouped else {f"w{i}" for i in range(300)}
    )
    assert [i for i, _ in schema.parse_writes(item).records] == list(range(300))


@pytest.mark.parametrize(
    ("cfg", "task_id", "writes_", "message"),
    [
        (config(), "t", [("a", 1)], "checkpoint_id"),
        (AT_C1, 7, [("a", 1)], "task_id"),
        (AT_C1, "t", [(3, 1)], "channel"),
    ],
)
def test_bad_input_is_refused_before_any_io(
    cfg: Any, task_id: Any, writes_: Any, message: str
) -> None:
    err = Script(writes.put_writes(make_core(), cfg, writes_, task_id)).raises(InvalidConfigError)
    assert message in str(err)


def test_no_writes_make_no_request() -> None:
    Script(writes.put_writes(make_core(), AT_C1, [], "t")).returns()


# --------------------------------------------------------------------------- regions
def replica() -> Any:
    return make_core(region_name="eu-west-1", cross_region=CrossRegion("us-east-1"))


def is_txn(op: Any) -> bool:
    return isinstance(op, IndexRequest) and op.method == "transact_write_items"


def test_across_regions_the_writes_and_the_ownership_check_are_one_transaction() -> None:
    script = Script(writes.put_writes(replica(), AT_C1, [("a", 1)], "t"))
    txn = script.expect(is_txn, None)
    script.returns()
    parts = txn.params["TransactItems"]
    assert [next(iter(p)) for p in parts] == ["Update", "ConditionCheck"]
    assert parts[1]["ConditionCheck"]["Key"][schema.SK] == schema.s(schema.OWNER_SK)


def test_writes_in_a_region_that_does_not_own_the_thread_are_refused() -> None:
    script = Script(writes.put_writes(replica(), AT_C1, [("a", 1)], "t"))
    owner = {"Code": "ConditionalCheckFailed", "Item": {schema.REGION: schema.s("ap-south-1")}}
    reasons = {"CancellationReasons": [{"Code": "None"}, owner]}
    script.expect(is_txn, script.pending.refused(TXN_CANCELLED, reasons))
    assert script.raises(ThreadOwnedElsewhereError).owner == "ap-south-1"


def test_writes_cancelled_for_another_reason_are_an_error() -> None:
    script = Script(writes.put_writes(replica(), AT_C1, [("a", 1)], "t"))
    reasons = {"CancellationReasons": [{"Code": "ValidationError"}, {"Code": "None"}]}
    script.expect(is_txn, script.pending.refused(TXN_CANCELLED, reasons))
    assert "ValidationError" in str(script.raises(S3SaverError))


def test_across_regions_a_group_whose_span_is_taken_is_stored_one_by_one() -> None:
    pair = [("a", "topic " * 50), ("b", "topic " * 50)]
    script = Script(writes.put_writes(replica(), AT_C1, pair, "t"))
    taken = {"CancellationReasons": [{"Code": "ConditionalCheckFailed"}, {"Code": "None"}]}
    grouped = script.expect(is_txn, script.pending.refused(TXN_CANCELLED, taken))
    singles = script.expect(is_txn, None)
    script.returns()
    update = grouped.params["TransactItems"][0]["Update"]
    assert update["ConditionExpression"] == "attribute_not_exists(w0) AND attribute_not_exists(w1)"
    parts = singles.params["TransactItems"]
    assert "ConditionExpression" not in parts[0]["Update"] and "ConditionCheck" in parts[1]
    assert sorted(records(parts[0]["Update"])) == ["w0", "w1"]
    # The ownership check still wins over the group's condition.
    script = Script(writes.put_writes(replica(), AT_C1, pair, "t"))
    owner = {"Code": "ConditionalCheckFailed", "Item": {schema.REGION: schema.s("ap-south-1")}}
    both = {"CancellationReasons": [{"Code": "ConditionalCheckFailed"}, owner]}
    script.expect(is_txn, script.pending.refused(TXN_CANCELLED, both))
    assert script.raises(ThreadOwnedElsewhereError).owner == "ap-south-1"


def test_messages_appended_to_a_channel_held_as_blobs_are_the_next_checkpoints_piece() -> None:
    """Messages a task appends to a list the saver holds as blobs are stored once, as a
    chunk item their record names; the checkpoint that appends them names that chunk
    and stores nothing. Writes whose bytes the channel would not hold as they are
    (a message without an id, a tuple, a removal), to other channels, or special
    ones, stay inline."""
    core = make_core()
    history = [AIMessage(content=f"message {i} " * 40, id=f"m{i}") for i in range(50)]
    store(AT_C1, checkpoint("c01", {"log": history}), core=core)  # ~24 KB: as blobs
    reply = [AIMessage(content="a reply " * 40, id="r")]
    writes_ = [
        ("log", reply),
        ("other", reply),  # a channel the checkpoint does not hold as blobs
        ("log", [AIMessage(content="no id " * 40)]),  # add_messages gives it an id
        ("log", [("user", "a tuple " * 40)]),  # add_messages makes it a message
        ("log", [RemoveMessage(id="m3")]),
        (INTERRUPT, reply),
    ]
    wrote = store_writes(AT_C1, writes_, "t", core=core)
    entries = {i: r.entry for i, r in schema.parse_writes(wrote.item).records}
    assert [type(entries[i]).__name__ for i in (0, 1, 2, 3, 4, -3)] == ["Blobs"] + ["Inline"] * 5
    piece = entries[0]
    [(_, sk)] = wrote.chunk_items
    assert sk == f"b#{piece.digests[0].hex()}" and piece.head == b"\x91"

    stored = store(config(cid="c01"), checkpoint("c02", {"log": history + reply}), core=core)
    assert stored.chunk_items == {} and stored.objects == {}
    body = codec.unpack(
        codec.unframe(schema.parse_row(stored.item).body, key="", kind=b"C"), key=""
    )
    assert body["ch"]["log"][2][-1] == piece.digests[0]
    # A saver that holds nothing of the thread (a new container) writes it inline.
    fresh = store_writes(AT_C1, [("log", reply)], "t", core=make_core())
    assert [type(r.entry).__name__ for _, r in schema.parse_writes(fresh.item).records] == [
        "Inline"
    ]
