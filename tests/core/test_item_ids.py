"""Layout 9: a checkpoint item leaves out the ids its keys spell (``th``, ``ns``,
``cid``) and, when it holds its body, the metadata index (``md``); readers take the
ids from the keys and check what the index could not. See docs/layout.md, "Ids in
the keys (layout 9)"."""

from __future__ import annotations

import os

import pytest

from langgraph_s3.core import history, schema, threads
from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.keys import Layout, spelled
from langgraph_s3.operations import ListPage, S3Get, S3List
from tests.core.canned import checkpoint, config, from_bucket, is_query, make_core, page, store
from tests.core.script import Script
from tests.core.test_threads import ddb

LONG = "t" * 200  # a thread id or namespace its key holds hashed
IDS = (schema.THREAD, schema.NS, schema.CID)


@pytest.mark.parametrize(
    ("value", "spelt"),
    [("t1", True), ("", True), ("user@x/a b#é~", True), (LONG, False), ("é" * 30, False)],
)
def test_a_key_spells_an_id_unless_it_holds_it_hashed(value: str, spelt: bool) -> None:
    assert spelled(value) is spelt
    pk, sk = Layout("app/").pk(value), Layout.checkpoint_sk(value, "c1")
    assert Layout.ids_of_keys(pk, sk) == (
        value if spelt else None,
        value if spelt else None,
        "c1",
    )


def test_keys_of_another_shape_spell_no_namespace_or_checkpoint() -> None:
    assert Layout.ids_of_keys("t1", "h#~") == ("t1", None, None)
    assert Layout.ids_of_keys("t1", "c#~#c1#w#task") == ("t1", None, None)
    assert Layout.ids_of_keys("a/", "c#~#c1") == (None, "", "c1")


@pytest.mark.parametrize(("thread", "ns"), [("t1", ""), ("user@x", "sub:1"), (LONG, LONG)])
def test_an_item_holds_only_the_ids_its_keys_cannot_spell(thread: str, ns: str) -> None:
    item = store(config(thread, ns=ns), checkpoint("c1", {"x": 1})).item
    kept = {name for name in IDS if name in item}
    assert kept == ({schema.THREAD, schema.NS} if thread == LONG else set())
    row = schema.parse_row(item)
    assert (row.thread_id, row.ns, row.checkpoint_id) == (thread, ns, "c1")


def test_trim_items_false_writes_every_id_and_the_metadata_index() -> None:
    core = make_core(trim_items=False)
    item = store(config("t1"), checkpoint("c1", {"x": 1}), {"step": 3}, core=core).item
    assert {name: item[name]["S"] for name in IDS} == {"th": "t1", "ns": "", "cid": "c1"}
    assert item[schema.METADATA] == {"M": {"step": schema.s("n:3")}}


def test_an_item_whose_keys_do_not_give_its_ids_is_refused_naming_it() -> None:
    item = store(config(LONG), checkpoint("c1", {"x": 1})).item
    del item[schema.THREAD]
    with pytest.raises(CorruptObjectError, match="names no thread") as caught:
        schema.parse_row(item)
    assert caught.value.key == f"{item[schema.PK]['S']}|{item[schema.SK]['S']}"


def test_the_reader_applies_before_and_an_id_the_index_could_not_check() -> None:
    """DynamoDB passes an item without ``cid`` through ``#cid < :before``; the reader
    drops it when it is not older (here: the page holds what a filter let through)."""
    chain = [store(config(cid=f"c{i - 1}" if i else None), checkpoint(f"c{i}", {"x": i}))
             for i in range(4)]  # fmt: skip
    items = sorted((s.item for s in chain), key=lambda i: i[schema.SK]["S"], reverse=True)
    every = {"configurable": {"thread_id": "t1"}}  # all namespaces: no key bound
    script = Script(history.list_checkpoints(make_core(), every, before=config(cid="c2")))
    query = script.expect(is_query, page(items))
    assert "(attribute_not_exists(#cid) OR #cid < :before)" in query.params["FilterExpression"]
    assert [script.emits().checkpoint["id"] for _ in range(2)] == ["c1", "c0"]
    script.returns()
    one = {"configurable": {"thread_id": "t1", "checkpoint_id": "c2"}}
    script = Script(history.list_checkpoints(make_core(), one))
    script.expect(is_query, page(items))
    assert script.emits().checkpoint["id"] == "c2"
    script.returns()


def test_a_filter_skips_a_body_in_the_item_before_its_values_are_read() -> None:
    """No ``md`` beside a body in the item: the reader checks the body's metadata and
    reads the values only of the checkpoints that match."""
    big = os.urandom(30_000).hex()  # its chunks go to S3
    a = store(config(), checkpoint("c1", {"x": big}), {"source": "input", "step": -1})
    b = store(config(cid="c1"), checkpoint("c2", {"x": big + "!"}), {"source": "loop", "step": 0})
    assert all(schema.BODY in s.item and schema.METADATA not in s.item for s in (a, b))
    bucket = {**a.objects, **b.objects}
    script = Script(history.list_checkpoints(make_core(), config(), filter={"source": "input"}))
    query = script.expect(is_query, page([b.item, a.item]))
    assert "attribute_not_exists(#md)" in query.params["FilterExpression"]
    gets = script.expect(
        lambda ops: all(isinstance(op, S3Get) for op in ops),
        [from_bucket(bucket)(op) for op in script.pending],
    )
    assert gets and all(op.key in a.objects for op in gets)  # none of c2's
    got = script.emits()
    assert got.checkpoint["id"] == "c1" and got.checkpoint["channel_values"]["x"] == big
    script.returns()


def test_a_copy_by_a_saver_without_trim_items_names_every_id_and_indexes_metadata() -> None:
    """What releases before 0.9.0 read: a copy of layout 9 items made with
    ``trim_items=False`` holds ``th``, ``ns``, ``cid`` and ``md`` again."""
    c1 = store(config(), checkpoint("c1", {"x": 1}), {"source": "input", "step": -1})
    copier = make_core(trim_items=False)
    script = Script(threads.copy_thread(copier, "t1", "t2"))
    script.expect(is_query, page([]))  # the target has no checkpoint
    script.expect(is_query, page([c1.item, c1.head]))
    script.expect(S3List("t1/b/"), ListPage([], None))
    (batch,) = script.expect([ddb("batch_write_item")], [[]])  # no writes or chunk items
    script.expect([ddb("batch_write_item")], [[]])  # the heads
    script.returns()
    (item,) = [r["PutRequest"]["Item"] for r in batch.params["RequestItems"]["t"]]
    assert {name: item[name]["S"] for name in IDS} == {"th": "t2", "ns": "", "cid": "c1"}
    assert item[schema.METADATA] == {"M": {"source": schema.s("s:input"), "step": schema.s("n:-1")}}
