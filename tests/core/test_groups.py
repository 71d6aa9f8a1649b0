"""Grouped records (``core/groups.py``): a ``put_writes`` call's small regular writes
stored as one record, and how readers merge groups and single records."""

from __future__ import annotations

import os
from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import groups, schema, writes
from langgraph_s3.core.entries import Inline, Record
from langgraph_s3.core.index import WritesUpdate
from langgraph_s3.errors import CorruptObjectError
from tests.core.canned import applied, config, make_core, store_writes
from tests.core.script import Script

AT_C1 = config(cid="c01")
TOPIC = "a topic the plan task sends to every worker, the same each time " * 6
SENDS = [("__pregel_tasks", {"topic": TOPIC, "n": i}) for i in range(10)]


def rec(channel: str, data: bytes = b"\x01") -> Record:
    return Record(channel, Inline("msgpack", data))


def attrs(item: dict[str, Any]) -> set[str]:
    return {k for k in item if schema.record_index(k) is not None}


def pending(item: dict[str, Any]) -> list[tuple[int, str]]:
    return [(i, r.channel) for i, r in schema.parse_writes(item).records]


def test_a_group_round_trips_and_is_refused_where_it_does_not_belong() -> None:
    members = [(2, rec("a")), (3, rec("b", b"\x02"))]
    data = groups.pack(members, 3)
    assert data[:1] == codec.GROUP_RECORD
    assert groups.unpack(data, 2, "k") == (2, members, True)
    assert groups.unpack(data, 1, "k")[1] == members  # a copy may keep fewer members
    # Not below its attribute, never a special write's attribute.
    for attr in (3, -1):
        with pytest.raises(CorruptObjectError, match="not a group of pending writes"):
            groups.unpack(data, attr, "k")
    # Checksummed like any record.
    with pytest.raises(CorruptObjectError, match="checksum"):
        groups.unpack(data[:-1] + bytes([data[-1] ^ 1]), 2, "k")
    single = codec.pack_record(rec("c").wire(), 3)
    assert groups.unpack(single, 4, "k") == (4, [(4, rec("c"))], False)
    # What releases before groups do with one: unpack_record refuses the tag.
    with pytest.raises(CorruptObjectError, match="unknown encoding tag"):
        codec.unpack_record(data, key="k")


@pytest.mark.parametrize(
    "wire",
    [
        [[1, 0], [rec("a").wire(), rec("b").wire()]],  # not in order
        [[0, 0], [rec("a").wire(), rec("b").wire()]],  # twice the same index
        [[0, 1], [rec("a").wire()]],  # one record short
        [[], []],
        [[0, True], [rec("a").wire(), rec("b").wire()]],
        {"0": rec("a").wire()},
    ],
)
def test_a_malformed_group_is_corrupt(wire: Any) -> None:
    with pytest.raises(CorruptObjectError, match="not a group"):
        groups.unpack(codec.pack_group(wire, 3), 0, "k")


def test_the_lowest_attribute_holding_an_index_gives_its_write() -> None:
    """Where two records hold an index, the one in the lower attribute was stored first
    (a group is stored only where its span is free): it is the pending write."""
    first = [(0, rec("a")), (1, rec("b")), (2, rec("c"))]
    stored: list[groups.Stored] = [
        (2, [(2, rec("c-single"))], False),  # a later call's single record
        (1, [(1, rec("b-late")), (3, rec("d"))], True),  # a later group, starting above
        (0, first, True),
        (-1, [(-1, rec("__error__"))], False),
    ]
    records, grouped = groups.merge(stored)
    assert [(i, r.channel) for i, r in records] == [
        (-1, "__error__"), (0, "a"), (1, "b"), (2, "c"), (3, "d"),
    ]  # fmt: skip
    assert grouped == {0: (0, 1, 2), 1: (3,)}
    assert groups.merge([(5, [(5, rec("e"))], True), (5, [], True)])[1] == {5: (5,)}


def test_groups_span_at_most_group_span_attributes_and_hold_two_writes_or_more() -> None:
    assert groups.plan_members([]) == []
    assert groups.plan_members([4]) == []
    assert groups.plan_members([0, 1, 3]) == [(0, 1, 3)]
    assert groups.plan_members([*range(groups.GROUP_SPAN), 100, 250]) == [
        tuple(range(groups.GROUP_SPAN)),
    ]
    assert groups.plan_members([0, 99, 100, 101]) == [(0, 99), (100, 101)]


def test_a_fan_out_is_one_group_smaller_than_its_records_apart() -> None:
    core = make_core()
    script = Script(writes.put_writes(core, AT_C1, SENDS, "plan"))
    update = script.expect(lambda op: isinstance(op, WritesUpdate), True)
    script.returns()
    assert update.guards == ((0, 9),)
    condition = " AND ".join(f"attribute_not_exists(w{i})" for i in range(10))
    assert update.params["ConditionExpression"] == condition
    [(attr, group)] = update.records
    apart = store_writes(AT_C1, SENDS, "plan", core=make_core(group_writes=False)).item
    assert attrs(apart) == {f"w{i}" for i in range(10)}
    assert attr == 0 and 4 * len(group) < sum(len(apart[a]["B"]) for a in attrs(apart))
    item = applied(update.update(), {})
    assert attrs(item) == {"w0"}
    assert pending(item) == [(i, "__pregel_tasks") for i in range(10)]
    assert schema.parse_writes(item).groups == {0: tuple(range(10))}


def test_only_inline_regular_writes_group() -> None:
    big = os.urandom(40_000).hex()  # a blob
    mixed = [("a", TOPIC), ("__error__", "boom"), ("doc", big), ("b", TOPIC), ("c", TOPIC)]
    item = store_writes(AT_C1, mixed, "t").item
    # the error (-1, "m1") and the blob-bound write stay single records
    assert attrs(item) == {"w0", "w2", "m1"}
    assert schema.parse_writes(item).groups == {0: (0, 3, 4)}
    assert pending(item) == [(-1, "__error__"), (0, "a"), (2, "doc"), (3, "b"), (4, "c")]
    # One write alone is a single record.
    assert attrs(store_writes(AT_C1, [("a", TOPIC)], "t").item) == {"w0"}


def test_a_retry_keeps_the_first_group_and_a_later_call_adds_its_new_writes() -> None:
    core = make_core()
    first = store_writes(AT_C1, SENDS[:3], "plan", core=core).item
    # The span w0..w2 is taken: the update is refused and the writes go one by one,
    # each kept where one is (the first group's records win where both hold one).
    again = [("__pregel_tasks", "other"), *SENDS[1:4]]
    script = Script(writes.put_writes(core, AT_C1, again, "plan"))
    grouped = script.expect(lambda op: isinstance(op, WritesUpdate), False)
    singles = script.expect(lambda op: isinstance(op, WritesUpdate), True)
    script.returns()
    assert grouped.guards and not singles.guards
    assert [i for i, _ in singles.records] == [0, 1, 2, 3]
    item = applied(singles.update(), first)
    assert attrs(item) == {"w0", "w1", "w2", "w3"}
    w = schema.parse_writes(item)
    assert [i for i, _ in w.records] == [0, 1, 2, 3]
    assert dict(w.records)[0] == dict(schema.parse_writes(first).records)[0]
    assert w.groups == {0: (0, 1, 2)}


def test_the_first_group_wins_over_a_later_one_starting_above_it() -> None:
    core = make_core()
    first = store_writes(AT_C1, [("x", TOPIC + "1"), ("y", TOPIC + "1")], "t", core=core).item
    # A later call whose write 0 is a special one: its group starts at w1.
    later = [("__interrupt__", "i"), ("y", TOPIC + "2"), ("z", TOPIC + "2")]
    script = Script(writes.put_writes(core, AT_C1, later, "t"))
    update = script.expect(lambda op: isinstance(op, WritesUpdate), True)
    script.returns()
    # its span (w1..w2) is free: stored, and it gives write 2 only
    assert update.guards == ((1, 2),)
    item = applied(update.update(), first)
    w = schema.parse_writes(item)
    assert dict(w.records)[1] == dict(schema.parse_writes(first).records)[1]
    assert dict(w.records)[1] != dict(groups.unpack(item["w1"]["B"], 1, "k")[1])[1]
    assert w.groups == {0: (0, 1), 1: (2,)}
    channels = [(-3, "__interrupt__"), (0, "x"), (1, "y"), (2, "z")]
    assert [(i, r.channel) for i, r in w.records] == channels


@pytest.mark.parametrize("switch", [{"group_writes": False}, {"chunk_items": False}])
def test_group_writes_false_writes_records_as_before(switch: dict[str, bool]) -> None:
    """Also with ``chunk_items=False``, which promises what 0.4.x reads."""
    item = store_writes(AT_C1, SENDS, "plan", core=make_core(**switch)).item
    assert attrs(item) == {f"w{i}" for i in range(10)}
    assert all(item[a]["B"][:1] != codec.GROUP_RECORD for a in attrs(item))


def test_a_flipped_bit_anywhere_in_a_group_is_corrupt() -> None:
    item = store_writes(AT_C1, SENDS, "plan").item
    data = item["w0"]["B"]
    for at in sorted({0, 1, 2, 5, 9, 10, len(data) // 2, len(data) - 1}):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[at] ^= 1 << bit
            with pytest.raises(CorruptObjectError):
                schema.parse_writes({**item, "w0": schema.b(bytes(damaged))})
