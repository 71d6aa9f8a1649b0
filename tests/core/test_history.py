"""Flow tests of ``core.history``: listing, and the parent-chain walk shared by delta
channel history and prune. Items come from real puts (``canned.store``)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from langgraph_s3 import Encryption
from langgraph_s3.core import history, lists, schema
from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.operations import IndexRequest, S3Get
from tests.core.canned import (
    Stored,
    checkpoint,
    config,
    from_bucket,
    is_query,
    make_core,
    page,
    store,
    store_writes,
)
from tests.core.script import Script
from tests.core.test_read import RING, checkpoint_query, key_query

BIG = os.urandom(12_000).hex()


def newest_first(*stored: Stored) -> list[dict[str, Any]]:
    """Items as a descending query returns them (a checkpoint's writes before it)."""
    return sorted((s.item for s in stored), key=lambda i: i[schema.SK]["S"], reverse=True)


def cp(cid: str, parent: str | None, md: dict[str, Any] | None = None, **kw: Any) -> Stored:
    """A stored checkpoint ``cid`` with one channel ``x`` and metadata ``md``."""
    values = kw.pop("values", {"x": cid})
    return store(
        config(cid=parent, thread_id=kw.pop("thread_id", "t1")),
        checkpoint(cid, values, kw.pop("versions", None)),
        md or {"step": int(cid[1:])},
        **kw,
    )


# --------------------------------------------------------------------------- list
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": -1}, "limit"),
        ({"limit": "3"}, "limit"),
        ({"filter": [("a", 1)]}, "filter"),
        ({"before": config(cid="bad id")}, "checkpoint_id"),
    ],
)
def test_bad_list_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    flow = history.list_checkpoints(make_core(), config(), **kwargs)
    assert message in str(Script(flow).raises(InvalidConfigError))


def test_a_limit_of_zero_reads_nothing() -> None:
    Script(history.list_checkpoints(make_core(), config(), limit=0)).returns()


def test_a_thread_is_listed_newest_first_with_pending_writes_up_to_the_limit() -> None:
    c1, c2, c3 = cp("c1", None), cp("c2", "c1"), cp("c3", "c2")
    w2 = store_writes(config(cid="c2"), [("x", "pending")], "task")
    script = Script(history.list_checkpoints(make_core(), config(), limit=2))
    query = script.expect(is_query, page(newest_first(c1, c2, c3, w2)))
    assert query.params["KeyConditionExpression"] == "pk = :pk AND begins_with(sk, :pre)"
    first, second = script.emits(), script.emits()
    script.returns()
    assert [first.checkpoint["id"], second.checkpoint["id"]] == ["c3", "c2"]
    assert second.pending_writes == [("task", "x", "pending")]
    assert second.parent_config == config(cid="c1")


def test_a_filter_is_applied_by_the_index_where_it_can_and_on_the_metadata_otherwise() -> None:
    a = cp("c1", None, {"step": 1, "tags": {"k": "a"}})
    b = cp("c2", "c1", {"step": 1, "tags": {"k": "b"}})
    script = Script(
        history.list_checkpoints(make_core(), config(), filter={"step": 1, "tags": {"k": "a"}})
    )
    query = script.expect(is_query, page(newest_first(a, b)))
    # Only the indexable value is in the filter expression; the dict is checked after loading.
    assert query.params["ExpressionAttributeValues"][":f0"] == schema.s("n:1")
    assert ":f1" not in query.params["ExpressionAttributeValues"]
    assert "#md.#f0 = :f0" in query.params["FilterExpression"]
    assert script.emits().checkpoint["id"] == "c1"
    script.returns()


def test_before_bounds_the_query_of_a_namespace_by_key() -> None:
    script = Script(history.list_checkpoints(make_core(), config(), before=config(cid="c3")))
    query = script.expect(is_query, page([]))
    script.returns()
    values = query.params["ExpressionAttributeValues"]
    assert query.params["KeyConditionExpression"] == "pk = :pk AND sk BETWEEN :lo AND :hi"
    assert (values[":lo"], values[":hi"], values[":before"]) == (
        schema.s("c#~#"),
        schema.s("c#~#c3"),
        schema.s("c3"),
    )
    assert "#cid < :before" in query.params["FilterExpression"]


def test_listing_every_namespace_of_a_thread_or_one_checkpoint() -> None:
    every: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    script = Script(history.list_checkpoints(make_core(), every, before=config(cid="c3")))
    query = script.expect(is_query, page([]))
    assert query.params["ExpressionAttributeValues"][":pre"] == schema.s("c#")

    script = Script(history.list_checkpoints(make_core(), config(cid="c2")))
    c2 = cp("c2", "c1")
    query = script.expect(is_query, page([c2.item]))
    assert script.emits().checkpoint["id"] == "c2"
    script.returns()
    assert query.params["ExpressionAttributeValues"][":cid"] == schema.s("c2")
    assert "#cid = :cid" in query.params["FilterExpression"]


def test_listing_every_thread_scans_this_prefix_only_newest_first() -> None:
    core = make_core(prefix="app")
    a = cp("c1", None, thread_id="ta", core=make_core(prefix="app"))
    b = cp("c2", None, thread_id="tb", core=make_core(prefix="app"))
    nested = cp("c3", None, thread_id="tc", core=make_core(prefix="app/inner"))
    script = Script(history.list_checkpoints(core, None))
    scan = script.expect(IndexRequest, page([a.item, nested.item, b.item]))
    assert scan.method == "scan" and scan.params["ExpressionAttributeValues"][":prefix"] == (
        schema.s("app/")
    )
    assert [script.emits().checkpoint["id"], script.emits().checkpoint["id"]] == ["c2", "c1"]
    script.returns()
    plain = Script(history.list_checkpoints(make_core(), None))
    assert "ExpressionAttributeValues" not in plain.expect(IndexRequest, page([])).params


def test_checkpoints_are_loaded_sixteen_at_a_time() -> None:
    writer = make_core(index_inline_limit=0)
    chain = [cp(f"c{i:02}", f"c{i - 1:02}" if i else None, core=writer) for i in range(18)]
    bucket = {k: v for s in chain for k, v in s.objects.items()}
    script = Script(history.list_checkpoints(make_core(), config()))
    script.expect(is_query, page(newest_first(*chain)))
    answer = from_bucket(bucket)
    first = script.expect(lambda ops: len(ops) == 16, [answer(op) for op in script.pending])
    ids = [script.emits().checkpoint["id"] for _ in range(16)]
    second = script.expect(lambda ops: len(ops) == 2, [answer(op) for op in script.pending])
    ids += [script.emits().checkpoint["id"] for _ in range(2)]
    script.returns()
    assert ids == [f"c{i:02}" for i in reversed(range(18))]
    assert all(isinstance(op, S3Get) for op in first + second)


def test_a_cold_encrypted_list_reads_the_key_items_beside_its_first_page() -> None:
    writer = make_core(encryption=Encryption(RING))
    c1, c2 = cp("c1", None, core=writer), cp("c2", "c1", core=writer)
    reader = make_core(encryption=Encryption(RING))
    script = Script(history.list_checkpoints(reader, config()))
    more = {schema.PK: c2.item[schema.PK], schema.SK: c2.item[schema.SK]}
    script.expect([key_query, checkpoint_query], [page(c1.key_items), page([c2.item], more)])
    assert script.emits().checkpoint["id"] == "c2"
    script.expect(checkpoint_query, page([c1.item]))  # the key is loaded: alone
    assert script.emits().checkpoint["id"] == "c1"
    script.returns()


# --------------------------------------------------------------------------- chain walk
def test_delta_channels_are_named_by_the_metadata() -> None:
    assert schema.delta_channels({"delta_writes_versioned": True}, {"a", "b"}) == {"a", "b"}
    counters = {"counters_since_delta_snapshot": {"a": (1, 1), "z": (2, 2)}}
    assert schema.delta_channels(counters, {"a", "b"}) == {"a"}
    assert schema.delta_channels({"step": 3}, {"a", "b"}) == set()


def delta_thread(core: Any = None) -> dict[str, Stored]:
    """c1 stores ``d``; c2..c4 version it without a value (a delta channel); c3f forks
    from c3 (its id sorts below c4's). Every checkpoint's writes to ``d`` are stored with it."""
    md = {"counters_since_delta_snapshot": {"d": (1, 1)}}
    kw: dict[str, Any] = {"core": core} if core else {}
    no_d = {"x": "1", "d": "2"}
    out = {
        "c1": cp("c1", None, md, values={"x": 1, "d": ["seed"]}, **kw),
        "c2": cp("c2", "c1", md, values={"x": 2}, versions=no_d, **kw),
        "c3": cp("c3", "c2", md, values={"x": 3}, versions=no_d, **kw),
        "c4": cp("c4", "c3", md, values={"x": 4}, versions=no_d, **kw),
        "c3f": cp("c3f", "c3", md, values={"x": 5}, versions=no_d, **kw),
    }
    for cid in ("c1", "c2", "c3", "c4", "c3f"):
        out[f"w{cid}"] = store_writes(
            config(cid=cid), [("d", f"{cid}-b"), ("x", 0)], "task-b", "~1", **kw
        )
        out[f"v{cid}"] = store_writes(config(cid=cid), [("d", f"{cid}-a")], "task-a", "~0", **kw)
    return out


def rows_of(thread: dict[str, Stored]) -> dict[str, schema.Row]:
    return {k: s.row for k, s in thread.items() if not k.startswith(("w", "v"))}


def test_prune_keeps_the_latest_and_the_ancestors_its_delta_channels_need() -> None:
    writer = make_core(index_inline_limit=0)
    thread = delta_thread(writer)
    rows = rows_of(thread)
    del rows["c3f"]
    rows["c0"] = cp("c0", None, core=writer).row
    rows["c1"].parent_id = "c0"
    bucket = {k: v for s in thread.values() for k, v in s.objects.items()}
    script = Script(history.kept_chain(make_core(), rows))
    [newest] = script.expect([S3Get], [from_bucket(bucket)(script.pending[0])])
    [seed] = script.expect([S3Get], [from_bucket(bucket)(script.pending[0])])
    assert script.returns() == {"c4", "c3", "c2", "c1"}
    # Only the newest (for its metadata) and the one storing ``d`` are read.
    assert "/c4." in newest.key and "/c1." in seed.key


def test_prune_keeps_only_the_latest_when_it_stores_every_channel() -> None:
    rows = {"c1": cp("c1", None).row, "c2": cp("c2", "c1").row}
    assert Script(history.kept_chain(make_core(), rows)).returns() == {"c2"}


# --------------------------------------------------------------------------- delta history
def expected(*cids: str, seed: Any = ("seed",)) -> dict[str, Any]:
    writes = [w for c in cids for w in (("task-a", "d", f"{c}-a"), ("task-b", "d", f"{c}-b"))]
    out: dict[str, Any] = {"writes": writes}
    if seed is not None:
        out["seed"] = list(seed)
    return out


def test_delta_history_collects_writes_back_to_the_nearest_stored_value() -> None:
    t = delta_thread()
    script = Script(history.delta_history(make_core(), config(cid="c4"), ["d"]))
    query = script.expect(
        is_query,
        page(
            newest_first(
                *(
                    t[k]
                    for k in (
                        "c4",
                        "c3f",
                        "wc3f",
                        "vc3f",
                        "wc3",
                        "vc3",
                        "c3",
                        "wc2",
                        "vc2",
                        "c2",
                        "wc1",
                        "vc1",
                        "c1",
                    )
                )
            )
        ),
    )
    assert query.params["ExpressionAttributeValues"][":hi"] == schema.s("c#~#c4")
    assert query.params["Limit"] == 200
    # Writes at the target are pending for its next step; the fork's are off the path.
    assert script.returns() == {"d": expected("c1", "c2", "c3")}


def test_delta_history_reads_further_pages_as_the_walk_needs_them() -> None:
    t = delta_thread()
    script = Script(history.delta_history(make_core(), config(cid="c4"), ["d", "x"]))
    script.expect(
        is_query, page(newest_first(t["c4"], t["wc3"], t["vc3"], t["c3"]), last={"pk": "t1"})
    )
    second = script.expect(
        is_query, page(newest_first(t["wc2"], t["vc2"], t["c2"], t["wc1"], t["vc1"], t["c1"]))
    )
    assert second.params["ExclusiveStartKey"] == {"pk": "t1"}
    result = script.returns()
    assert result["d"] == expected("c1", "c2", "c3")
    # ``x`` is stored at the parent itself: its seed, and the writes made there.
    assert result["x"] == {"writes": [("task-b", "x", 0)], "seed": 3}


def test_delta_history_stops_reading_once_every_channel_has_its_seed() -> None:
    t = delta_thread()
    script = Script(history.delta_history(make_core(), config(cid="c3"), ["x"]))
    # ``x`` is stored at c2: no further page is read, though there is one.
    script.expect(
        is_query, page(newest_first(t["c3"], t["wc2"], t["vc2"], t["c2"]), last={"pk": "t1"})
    )
    assert script.returns() == {"x": {"writes": [("task-b", "x", 0)], "seed": 2}}


def test_delta_history_of_the_latest_checkpoint_finds_it_first() -> None:
    t = delta_thread()
    core = make_core()
    script = Script(history.delta_history(core, config(), ["d"]))
    script.expect(is_query, page([t["c4"].item]))  # the latest: c4
    query = script.expect(
        is_query,
        page(
            newest_first(
                *(t[k] for k in ("c4", "c3", "wc3", "vc3", "c2", "wc2", "vc2", "c1", "wc1", "vc1"))
            )
        ),
    )
    assert query.params["ExpressionAttributeValues"][":hi"] == schema.s("c#~#c4")
    assert script.returns() == {"d": expected("c1", "c2", "c3")}


def test_delta_history_of_an_empty_thread_or_unknown_checkpoint_is_empty() -> None:
    assert Script(history.delta_history(make_core(), config(), [])).returns() == {}
    core = make_core()
    script = Script(history.delta_history(core, config(), ["d"]))
    script.expect(is_query, page([]))
    assert script.returns() == {"d": {"writes": []}}

    t = delta_thread()
    script = Script(history.delta_history(make_core(), config(cid="c9"), ["d"]))
    script.expect(is_query, page([t["c4"].item], last={"pk": "t1"}))
    script.expect(is_query, page([t["c3"].item]))
    assert script.returns() == {"d": {"writes": []}}


def test_delta_history_stops_where_the_chain_was_pruned() -> None:
    t = delta_thread()
    script = Script(history.delta_history(make_core(), config(cid="c4"), ["d"]))
    script.expect(is_query, page(newest_first(t["c4"], t["c3"], t["wc3"], t["vc3"])))
    assert script.returns() == {"d": expected("c3", seed=None)}


def test_delta_history_reads_blobs_of_large_writes_and_seeds() -> None:
    writer = make_core(index_inline_limit=0)
    root = cp("c1", None, values={"d": BIG}, core=writer)
    child = cp("c2", "c1", values={}, versions={"d": "2"}, core=writer)
    big_write = os.urandom(20_000).hex()
    w = store_writes(config(cid="c1"), [("d", big_write)], "t", core=writer)
    bucket = {**root.objects, **child.objects, **w.objects}
    script = Script(history.delta_history(make_core(), config(cid="c2"), ["d"]))
    script.expect(is_query, page(newest_first(child, w, root)))
    answer = from_bucket(bucket)
    [body] = script.expect([S3Get], [answer(script.pending[0])])
    assert "/c1." in body.key
    blobs = script.expect(lambda ops: True, [answer(op) for op in script.pending])
    assert blobs and all("/b/" in op.key for op in blobs)
    assert script.returns() == {"d": {"writes": [("t", "d", big_write)], "seed": BIG}}


def test_delta_history_reads_chunk_lists_of_writes_and_seeds_then_their_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A seed and a write stored through chunk lists without leads (before layout 8):
    the walk reads the seed's body, then both lists, then the chunks they name."""
    monkeypatch.setattr(lists, "LIST_MIN", 8)
    writer = make_core(index_inline_limit=0, list_leads=False)
    seed, big_write = os.urandom(200_000).hex(), os.urandom(150_000).hex()
    root = cp("c1", None, values={"d": seed}, core=writer)
    child = cp("c2", "c1", values={}, versions={"d": "2"}, core=writer)
    w = store_writes(config(cid="c1"), [("d", big_write)], "t", core=make_core(list_leads=False))
    answer = from_bucket({**root.objects, **child.objects, **w.objects})
    script = Script(history.delta_history(make_core(), config(cid="c2"), ["d"]))
    script.expect(is_query, page(newest_first(child, w, root)))
    script.expect([S3Get], [answer(script.pending[0])])  # c1's body
    script.expect(lambda ops: len(ops) == 2, [answer(op) for op in script.pending])  # lists
    script.expect(lambda ops: True, [answer(op) for op in script.pending])  # chunks
    assert script.returns() == {"d": {"writes": [("t", "d", big_write)], "seed": seed}}


def test_delta_history_reads_lists_with_leads_and_their_chunks_in_one_round_trip() -> None:
    """Layout 8: each list comes with the chunks before it in its pack (one ranged GET
    per pack), so the walk reads the seed's body, then lists and chunks together."""
    writer = make_core(index_inline_limit=0)
    seed, big_write = os.urandom(200_000).hex(), os.urandom(150_000).hex()
    root = cp("c1", None, values={"d": seed}, core=writer)
    child = cp("c2", "c1", values={}, versions={"d": "2"}, core=writer)
    w = store_writes(config(cid="c1"), [("d", big_write)], "t", core=make_core())
    answer = from_bucket({**root.objects, **child.objects, **w.objects})
    script = Script(history.delta_history(make_core(), config(cid="c2"), ["d"]))
    script.expect(is_query, page(newest_first(child, w, root)))
    script.expect([S3Get], [answer(script.pending[0])])  # c1's body
    packs = script.expect(lambda ops: len(ops) == 2, [answer(op) for op in script.pending])
    assert all(op.key.endswith(".pack") and op.start is not None for op in packs)
    assert script.returns() == {"d": {"writes": [("t", "d", big_write)], "seed": seed}}


def test_a_none_in_the_filter_is_checked_on_the_metadata_where_a_missing_key_matches() -> None:
    a = cp("c1", None, {"step": 1})
    b = cp("c2", "c1", {"step": 1, "k": "set"})
    script = Script(history.list_checkpoints(make_core(), config(), filter={"k": None}))
    query = script.expect(is_query, page(newest_first(a, b)))
    assert "#md" not in query.params["ExpressionAttributeNames"]  # not asked of the index
    assert script.emits().checkpoint["id"] == "c1"  # c2's k is "set"
    script.returns()


def test_a_limited_list_reads_a_page_sized_by_the_limit_and_stops_when_enough_are_out() -> None:
    stored = [cp("c1", None), cp("c2", "c1"), cp("c3", "c2")]
    script = Script(history.list_checkpoints(make_core(), config(), limit=1))
    items = newest_first(*stored)
    query = script.expect(is_query, page(items[:4], last={"pk": "t1"}))
    assert query.params["Limit"] == 4  # 4 items per checkpoint asked for
    assert script.emits().checkpoint["id"] == "c3"
    script.returns()  # the next page is never read


def test_writes_on_an_earlier_page_stay_with_their_checkpoint() -> None:
    c1, c2 = cp("c1", None), cp("c2", "c1")
    w1 = store_writes(config(cid="c1"), [("x", "for c1")], "task")
    items = newest_first(c1, c2, w1)  # c2, then c1's writes, then c1
    script = Script(history.list_checkpoints(make_core(), config(), limit=5))
    first = script.expect(is_query, page(items[:2], last={"pk": "t1"}))
    assert first.params["Limit"] == 20
    assert script.emits().checkpoint["id"] == "c2"
    second = script.expect(is_query, page(items[2:]))
    assert second.params["Limit"] == 200 and second.params["ExclusiveStartKey"] == {"pk": "t1"}
    got = script.emits()
    assert got.checkpoint["id"] == "c1" and got.pending_writes == [("task", "x", "for c1")]
    script.returns()


def test_an_unlimited_list_reads_whole_pages() -> None:
    script = Script(history.list_checkpoints(make_core(), config()))
    query = script.expect(is_query, page(newest_first(cp("c1", None)), last={"pk": "t1"}))
    assert "Limit" not in query.params
    assert script.emits().checkpoint["id"] == "c1"
    assert "Limit" not in script.expect(is_query, page([])).params
    script.returns()
