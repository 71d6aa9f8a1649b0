"""Unit tests of ``core.schema``: the index items (the requests that read and write
them are tested in ``test_index``)."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import schema
from tests.core.canned import checkpoint, config, make_core, store, store_writes


@pytest.mark.parametrize(
    ("value", "indexed"),
    [
        (True, "n:1"),
        (1, "n:1"),
        (1.0, "n:1"),
        (0.5, "n:0.5"),
        ("loop", "s:loop"),
        ("x" * 513, None),
        (None, "z"),
        ({"a": 1}, None),
        ([1], None),
    ],
)
def test_equal_metadata_values_get_equal_index_strings(value: Any, indexed: str | None) -> None:
    assert schema.metadata_index_value(value) == indexed


def test_a_checkpoint_item_parses_into_its_row() -> None:
    writer = make_core(index_inline_limit=0, chunk_items=False)
    big = "".join(f"{i:06d}" for i in range(5_000))
    stored = store(
        config(cid="c1"),
        checkpoint("c2", {"big": big}, versions={"big": "1", "delta": "2"}),
        {"counters_since_delta_snapshot": {"delta": (1, 1)}},
        core=writer,
    )
    row = schema.parse_row(stored.item)
    assert (row.thread_id, row.ns, row.checkpoint_id, row.parent_id) == ("t1", "", "c2", "c1")
    assert row.unstored == frozenset({"delta"}) and row.body is None
    assert row.prefetch and all(len(d) == 32 for d in row.prefetch)
    assert row.digest == codec.digest(next(v for k, v in stored.objects.items() if "/c/" in k))
    inline = schema.parse_row(store(config(), checkpoint("c1", {"x": 1})).item)
    assert inline.body is not None and inline.parent_id is None and inline.prefetch == ()


def test_a_malformed_prefetch_list_is_ignored() -> None:
    item = store(config(), checkpoint("c1", {"x": 1})).item
    assert schema.parse_row({**item, schema.PREFETCH: schema.b(b"x" * 33)}).prefetch == ()
    assert schema.parse_row({**item, schema.PREFETCH: schema.s("x")}).prefetch == ()


def test_a_writes_item_parses_into_its_records() -> None:
    item = store_writes(config(cid="c1"), [("a", 1), ("__error__", "boom")], "task", "~1").item
    row = schema.parse_writes(item)
    assert (row.task_id, row.task_path, row.checkpoint_id) == ("task", "~1", "c1")
    assert sorted(idx for idx, _ in row.records) == [-1, 0]
    assert schema.checkpoint_ref(item) == ("t1", "c#~#c1")
    assert schema.is_writes_item(item) and not schema.is_checkpoint_item(item)
    without_path = {k: v for k, v in item.items() if k != schema.TASK_PATH}
    assert schema.parse_writes(without_path).task_path == ""


def test_record_attributes_name_write_indexes_both_ways() -> None:
    assert [schema.record_attr(i) for i in (0, 12, -1, -4)] == ["w0", "w12", "m1", "m4"]
    for name in ("w0", "w12", "m1", "m4"):
        idx = schema.record_index(name)
        assert idx is not None and schema.record_attr(idx) == name
    assert [schema.record_index(n) for n in ("w", "wx", "pk", "x1", "tid")] == [None] * 5


def test_data_key_sort_keys_sort_by_version_after_the_checkpoints_and_heads() -> None:
    sks = [schema.key_sk(v) for v in (1, 2, 10, 9_999_999_999)]
    assert sks == sorted(sks) and sks[0] == "k#0000000001"
    assert all(sk.startswith(schema.KEY_SK_PREFIX) for sk in sks)
    assert "c#~#x" < "h#~" < sks[0] < schema.OWNER_SK


def test_values_and_keys() -> None:
    assert (schema.s("a"), schema.n(1.5), schema.b(b"x")) == ({"S": "a"}, {"N": "1.5"}, {"B": b"x"})
    assert schema.text({"a": {"S": "v"}}, "a") == "v" and schema.text({}, "a") is None
    items = [{schema.PK: 1, schema.SK: 2, "other": 3}]
    assert schema.keys_of(items) == [{schema.PK: 1, schema.SK: 2}]


def test_an_items_partition_key_and_write_time() -> None:
    item = store(config(thread_id="t9"), checkpoint("c1", {"x": 1})).item
    assert schema.pk_of(item) == "t9"
    assert schema.written_ms(item) == int(item[schema.AT]["N"]) > 0
    assert schema.written_ms({schema.PK: schema.s("t9")}) == 0


def test_a_chunk_item_is_keyed_by_its_chunks_name() -> None:
    name = bytes(range(32))
    item = schema.chunk_item("t1", name, b"LGS3\x01Bframe", 1234)
    assert item == {
        "pk": {"S": "t1"},
        "sk": {"S": "b#" + name.hex()},
        "v": {"B": b"LGS3\x01Bframe"},
        "at": {"N": "1234"},
    }
    assert schema.is_chunk_item(item) and schema.chunk_name(item) == name
    assert not schema.is_key_item(item) and not schema.is_checkpoint_item(item)
    assert not schema.is_chunk_item({"sk": {"S": "c#~#1"}})
