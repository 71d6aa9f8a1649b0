"""Flow tests of ``core.read``: finding a checkpoint's items, loading its objects in
one round trip, and assembling the tuple. Items and objects come from real puts."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple

from langgraph_s3 import Encryption, guard
from langgraph_s3.core import commit, read, schema
from langgraph_s3.core.datakeys import KeyScope
from langgraph_s3.core.entries import Inline
from langgraph_s3.core.index import Query, Transact
from langgraph_s3.operations import IndexRequest, S3Get
from langgraph_s3.sealing import StaticKeyRing
from tests.core.canned import (
    checkpoint,
    config,
    created_key,
    from_bucket,
    is_query,
    make_core,
    page,
    starts_key,
    store,
    store_writes,
)
from tests.core.script import Script

BIG = os.urandom(12_000).hex()


def found(script: Script[CheckpointTuple | None]) -> CheckpointTuple:
    """The tuple a read returned (not None)."""
    tup = script.returns()
    assert tup is not None
    return tup


def test_the_latest_checkpoint_is_one_query_and_nothing_else() -> None:
    """A saver's first read is no different from its later ones: no bucket check rides
    along (a wrong bucket shows at the first S3 request instead)."""
    stored = store(config(cid="c01"), checkpoint("c02", {"x": 1, "y": [1, 2]}))
    w = store_writes(config(cid="c02"), [("x", 5)], "task-a", "~1")
    core = make_core()
    script = Script(read.get_tuple(core, config()))
    query = script.expect(is_query, page([w.item, stored.item]))
    assert query.params["Limit"] == 8 and query.params["ScanIndexForward"] is False
    assert query.params["ExpressionAttributeValues"][":pre"] == schema.s("c#~#")
    tup = found(script)
    assert tup.checkpoint["channel_values"] == {"x": 1, "y": [1, 2]}
    assert tup.pending_writes == [("task-a", "x", 5)]
    assert tup.parent_config == config(cid="c01")
    conf = tup.config["configurable"]
    assert conf["checkpoint_id"] == "c02"
    # The run that read the latest continues the head: its puts are guarded.
    assert isinstance(conf["thread_id"], guard.HeadRead) and conf["thread_id"].head == "c02"


def test_the_latest_read_pages_on_with_larger_pages_until_a_checkpoint_item() -> None:
    """Writes saved for a checkpoint that is not committed (yet) come first in a
    newest-first query; they belong to no checkpoint that is read."""
    core = make_core()
    orphan = [store_writes(config(cid="c03"), [("x", i)], f"task{i}").item for i in range(8)]
    stored = store(config(), checkpoint("c02", {"x": 1}))
    mine = store_writes(config(cid="c02"), [("x", 9)], "task-b").item
    script = Script(read.get_tuple(core, config()))
    first = script.expect(is_query, page(orphan, last={"pk": "t1", "sk": orphan[-1]["sk"]}))
    second = script.expect(is_query, page([mine, stored.item]))
    tup = found(script)
    assert (first.params["Limit"], second.params["Limit"]) == (8, 50)
    assert second.params["ExclusiveStartKey"] == {"pk": "t1", "sk": orphan[-1]["sk"]}
    assert tup.pending_writes == [("task-b", "x", 9)]


def test_latest_is_the_checkpoint_row_and_its_writes_across_pages() -> None:
    stored = store(config(), checkpoint("c02", {"x": 1}))
    w = store_writes(config(cid="c02"), [("x", 9)], "task-b").item
    script = Script(read.latest(make_core(), "t1", ""))
    script.expect(is_query, page([w], last={"pk": "t1"}))
    nxt = script.expect(is_query, page([stored.item]))
    assert nxt.params["Limit"] == 50 and nxt.params["ExclusiveStartKey"] == {"pk": "t1"}
    latest = script.returns()
    assert latest is not None
    row, writes = latest
    assert row.checkpoint_id == "c02" and [x.task_id for x in writes] == ["task-b"]


def test_an_empty_thread_has_no_latest_checkpoint() -> None:
    script = Script(read.get_tuple(make_core(), config()))
    script.expect(is_query, page([]))
    assert script.returns() is None


def test_touch_on_read_records_the_read_on_the_head() -> None:
    stored = store(config(), checkpoint("c02", {"x": 1}))
    core = make_core(touch_on_read=True)
    script = Script(read.get_tuple(core, config()))
    script.expect(is_query, page([stored.item]))
    touch = script.expect(
        lambda op: isinstance(op, IndexRequest) and op.method == "update_item", True
    )
    assert touch.params["Key"] == {schema.PK: schema.s("t1"), schema.SK: schema.s("h#~")}
    assert "ConditionalCheckFailedException" in touch.expect  # a deleted head is no error
    assert found(script).checkpoint["id"] == "c02"


def test_an_exact_read_answers_with_the_requested_config_and_a_plain_thread_id() -> None:
    stored = store(config(cid="c01"), checkpoint("c02", {"x": 1}))
    w1 = store_writes(config(cid="c02"), [("x", 1), ("y", 2)], "task-z", "~2").item
    w2 = store_writes(config(cid="c02"), [("x", 3)], "task-a", "~1").item
    requested = config(cid="c02")
    requested["configurable"]["thread_id"] = guard.read_latest("t1", "", "c09")
    script = Script(read.get_tuple(make_core(), requested))
    query = script.expect(is_query, page([stored.item, w1, w2]))
    assert query.params["KeyConditionExpression"] == "pk = :pk AND sk BETWEEN :lo AND :hi"
    assert query.params["ExpressionAttributeValues"][":lo"] == schema.s("c#~#c02")
    tup = found(script)
    # A fork: the HeadRead of an earlier read of the latest is cleared.
    assert type(tup.config["configurable"]["thread_id"]) is str
    assert tup.config["configurable"]["checkpoint_id"] == "c02"
    # Pending writes in LangGraph's order: task path, then task id, then index.
    assert tup.pending_writes == [("task-a", "x", 3), ("task-z", "x", 1), ("task-z", "y", 2)]


def test_an_exact_read_of_an_unknown_checkpoint_is_none() -> None:
    w = store_writes(config(cid="c02"), [("x", 1)], "t").item
    script = Script(read.get_tuple(make_core(), config(cid="c02")))
    script.expect(is_query, page([w]))
    assert script.returns() is None


def test_a_body_in_s3_and_its_blobs_are_read_in_one_round_trip() -> None:
    writer = make_core(index_inline_limit=0)
    stored = store(config(), checkpoint("c01", {"big": BIG, "x": 1}), core=writer)
    big_write = os.urandom(20_000).hex()
    w = store_writes(config(cid="c01"), [("doc", big_write)], "t", core=writer)
    objects = {**stored.objects, **w.objects}
    core = make_core()
    script = Script(read.get_tuple(core, config(cid="c01")))
    script.expect(is_query, page([stored.item, w.item]))
    gets = script.expect(
        lambda ops: all(isinstance(op, S3Get) for op in ops),
        [objects[op.key][op.start : op.end] for op in script.pending],
    )
    assert sorted(op.key for op in gets) == sorted(objects)
    tup = found(script)
    assert tup.checkpoint["channel_values"] == {"big": BIG, "x": 1}
    assert tup.pending_writes == [("t", "doc", big_write)]
    # A reader about to continue chunks its next put against what it read.
    assert core.caches.latest.get(("t1", "", "big")) is not None

    # Warm: the object and blobs are cached, verified, and read no more.
    again = Script(read.get_tuple(core, config(cid="c01")))
    again.expect(is_query, page([stored.item, w.item]))
    assert found(again).checkpoint["channel_values"]["big"] == BIG


def test_value_blobs_not_named_by_the_index_are_read_after_the_object() -> None:
    """An item written without a prefetch list (too many blobs, or an older writer):
    the object first, then its value blobs."""
    writer = make_core(index_inline_limit=0)
    stored = store(config(), checkpoint("c01", {"big": BIG}), core=writer)
    del stored.item[schema.PREFETCH]
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    answer = from_bucket(stored.objects)
    [obj] = script.expect([S3Get], [answer(script.pending[0])])
    assert "/c/" in obj.key
    blobs = script.expect(lambda ops: True, [answer(op) for op in script.pending])
    assert blobs and all("/b/" in op.key for op in blobs)
    assert found(script).checkpoint["channel_values"] == {"big": BIG}


def test_load_of_nothing_reads_nothing() -> None:
    assert Script(read.load(make_core(), [], None)).returns() == []


def test_sorted_writes_keeps_only_the_channels_asked_for() -> None:
    w = schema.parse_writes(store_writes(config(cid="c1"), [("a", 1), ("b", 2)], "t").item)
    assert [(c, type(e)) for _, c, e, _ in read.sorted_writes([w], {"b"})] == [("b", Inline)]


# ------------------------------------------------------------------ with encryption
RING = StaticKeyRing({"r1": bytes(range(32))}, current="r1")


def key_query(op: Any) -> bool:
    """The query that loads a thread's (or tenant's) data key: its ``k#`` items."""
    return isinstance(op, Query) and op.prefix == schema.KEY_SK_PREFIX


def checkpoint_query(op: Any) -> bool:
    return is_query(op) and not key_query(op)


@pytest.mark.parametrize("cid", [None, "c02"], ids=["latest", "exact"])
def test_a_cold_read_asks_for_the_key_items_in_the_checkpoint_querys_round_trip(
    cid: str | None,
) -> None:
    stored = store(config(cid="c01"), checkpoint("c02", {"x": 1}), core=sealing_core())
    reader = sealing_core()
    script = Script(read.get_tuple(reader, config(cid=cid)))
    keys, _ = script.expect(
        [key_query, checkpoint_query], [page(stored.key_items), page([stored.item])]
    )
    assert keys.pk == "t1" and keys.consistent
    assert found(script).checkpoint["channel_values"] == {"x": 1}
    # Warm: the key is loaded; the checkpoint query goes alone.
    script = Script(read.get_tuple(reader, config(cid=cid)))
    script.expect(checkpoint_query, page([stored.item]))
    assert found(script).checkpoint["channel_values"] == {"x": 1}


def test_a_cold_read_of_a_tenant_thread_follows_the_reference_after_the_round_trip() -> None:
    writer = sealing_core(tenant_of=lambda _: "acme")
    stored = store(config(cid="c01"), checkpoint("c02", {"x": 1}), core=writer)
    ref = [i for i in stored.key_items if i[schema.PK] == schema.s("t1")]
    tenant = [i for i in stored.key_items if i[schema.PK] == schema.s("#tenant/acme")]
    assert len(ref) == len(tenant) == 1
    script = Script(read.get_tuple(sealing_core(), config()))
    script.expect([key_query, checkpoint_query], [page(ref), page([stored.item])])
    assert script.expect(key_query, page(tenant)).pk == "#tenant/acme"
    assert found(script).checkpoint["channel_values"] == {"x": 1}


def test_a_root_read_that_finds_no_checkpoint_marks_the_key_it_loaded_beside_it_stale() -> None:
    """A key found for a thread with no checkpoint (deleted meanwhile by another saver)
    is read again by the next put, not sealed under: marked stale once the load ends,
    here after the checkpoint query (a tenant's key takes a round trip more)."""
    writer = sealing_core(tenant_of=lambda _: "acme")
    keys = store(config(), checkpoint("c01"), core=writer).key_items
    ref = [i for i in keys if i[schema.PK] == schema.s("t1")]
    tenant = [i for i in keys if i not in ref]
    reader = sealing_core()
    script = Script(read.get_tuple(reader, config()))
    script.expect([key_query, checkpoint_query], [page(ref), page([])])
    script.expect(key_query, page(tenant))
    assert script.returns() is None
    assert reader.encryption is not None
    assert reader.encryption.fresh("t1/", time.monotonic()) is None  # stale
    assert reader.encryption.keys.get("t1/") is not None  # kept for flows under way


def test_a_read_of_a_new_thread_creates_no_key_and_spares_its_first_put_the_key_query() -> None:
    core = sealing_core()
    script = Script(read.get_tuple(core, config()))
    script.expect([key_query, checkpoint_query], [page([]), page([])])
    assert script.returns() is None  # no put: a read creates no key
    script = Script(commit.put(core, config(), checkpoint("c01", {"x": 1}), {}, {"x": "1"}))
    assert starts_key(script.pending)  # the new key's: no key query again
    # Another new thread, not read first: its put asks.
    script = Script(commit.put(core, config("t2"), checkpoint("c01"), {}, {}))
    script.expect(key_query, page([]))


def sealing_core(**settings: Any) -> Any:
    return make_core(encryption=Encryption(RING, **settings))


def test_a_key_query_answered_before_a_reencryption_is_asked_again_once() -> None:
    """The key Query and the checkpoint Query go together, so the key items may be
    older than the checkpoint: one sealed under a newer version than the items gave
    has the keys loaded again, once (``KeyVersionError(newer=True)``)."""
    v1, v2 = (created_key(KeyScope.thread("t1"), RING, n) for n in (1, 2))
    writer = sealing_core()
    put = Script(commit.put(writer, config(cid="c01"), checkpoint("c02", {"x": 1}), {}, {}))
    put.expect(key_query, page([v2, v1]))
    item = put.expect(Transact, None).parts[0][1]["Put"]["Item"]
    reader = sealing_core()
    script = Script(read.get_tuple(reader, config()))
    script.expect([key_query, checkpoint_query], [page([v1]), page([item])])
    script.expect(key_query, page([v2, v1]))  # the newer version, loaded again
    assert found(script).checkpoint["id"] == "c02"
