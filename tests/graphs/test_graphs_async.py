"""The graph scenarios of ``test_graphs`` run with ``ainvoke``/``astream`` on AsyncS3Saver.

Each step uses a brand-new AsyncS3Saver (new aiobotocore clients), and the summaries
are compared with the same scenario run synchronously on InMemorySaver.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, StateSnapshot

from langgraph_s3 import AsyncS3Saver
from langgraph_s3.keys import encode_segment
from tests.conftest import Backend
from tests.graphs.test_graphs import (
    Aliases,
    Calls,
    build_approval,
    build_failing,
    build_fanout,
    build_linear,
    build_nested,
    cfg,
    checkpoint_items,
    history_summary,
    norm,
    norm_metadata,
    scenario_failure,
    scenario_fanout,
    scenario_history_queries,
    scenario_interrupt_resume,
    scenario_invoke_stream,
    scenario_replay_fork,
    scenario_subgraph,
    scenario_update_state,
    shared,
    snapshot_summary,
    thread_objects,
)

Make = Callable[[], AsyncS3Saver]


@pytest.fixture
async def make(server_backend: Backend) -> AsyncIterator[Make]:
    """A factory of brand-new AsyncS3Savers (one per step), all closed at the end."""
    made: list[AsyncS3Saver] = []

    def new() -> AsyncS3Saver:
        saver: AsyncS3Saver = server_backend.async_saver()
        made.append(saver)
        return saver

    yield new
    for saver in made:
        await saver.aclose()


async def ahistory(graph: Any, config: RunnableConfig, **kw: Any) -> list[StateSnapshot]:
    return [s async for s in graph.aget_state_history(config, **kw)]


async def awrites_summary(saver: AsyncS3Saver, config: RunnableConfig) -> list[dict[str, Any]]:
    """Async twin of ``test_graphs.writes_summary`` (uses ``alist``)."""
    ids = Aliases()
    return [
        {
            "metadata": norm_metadata(tup.metadata),
            "writes": [(ids(t), ch, norm(v, ids)) for t, ch, v in tup.pending_writes or []],
            "channels": norm(tup.checkpoint["channel_values"], ids),
        }
        async for tup in saver.alist(config)
    ]


async def aancestry(graph: Any, config: RunnableConfig) -> list[str]:
    snaps = {s.config["configurable"]["checkpoint_id"]: s for s in await ahistory(graph, config)}
    cursor: str | None = (await graph.aget_state(config)).config["configurable"]["checkpoint_id"]
    chain = []
    while cursor is not None:
        chain.append(cursor)
        parent = snaps[cursor].parent_config
        cursor = parent["configurable"]["checkpoint_id"] if parent else None
    return chain


# --------------------------------------------------------------------------- scenarios
async def ascenario_invoke_stream(make: Make) -> dict[str, Any]:
    calls = Calls()
    out: dict[str, Any] = {}
    out["invoke"] = await build_linear(make(), calls).ainvoke({"n": 1}, cfg("inv"))
    out["stream"] = [
        chunk
        async for chunk in build_linear(make(), calls).astream(
            {"n": 5}, cfg("str"), stream_mode="updates"
        )
    ]
    reader = build_linear(make(), calls)
    out["state_inv"] = snapshot_summary(await reader.aget_state(cfg("inv")))
    out["state_str"] = snapshot_summary(await reader.aget_state(cfg("str")))
    out["history_inv"] = history_summary(await ahistory(reader, cfg("inv")))
    out["writes_str"] = await awrites_summary(make(), cfg("str"))
    out["calls"] = dict(calls.counts)
    return out


async def ascenario_interrupt_resume(make: Make) -> dict[str, Any]:
    calls = Calls()
    out: dict[str, Any] = {}
    first = await build_approval(make(), calls).ainvoke({"request": "#7"}, cfg("t"))
    out["first"] = norm(first, Aliases())
    out["paused"] = snapshot_summary(await build_approval(make(), calls).aget_state(cfg("t")))
    out["calls_paused"] = dict(calls.counts)
    out["final"] = await build_approval(make(), calls).ainvoke(Command(resume=True), cfg("t"))
    reader = build_approval(make(), calls)
    out["state"] = snapshot_summary(await reader.aget_state(cfg("t")))
    out["history"] = history_summary(await ahistory(reader, cfg("t")))
    out["writes"] = await awrites_summary(make(), cfg("t"))
    out["calls"] = dict(calls.counts)
    return out


async def ascenario_history_queries(make: Make) -> dict[str, Any]:
    calls = Calls()
    await build_linear(make(), calls).ainvoke({"n": 1}, cfg("h"))
    await build_linear(make(), calls).ainvoke({"n": 10}, cfg("h"))
    reader = build_linear(make(), calls)
    full = await ahistory(reader, cfg("h"))
    middle = full[len(full) // 2].config
    return {
        "full": history_summary(full),
        "limit": [snapshot_summary(s) for s in await ahistory(reader, cfg("h"), limit=3)],
        "before": [snapshot_summary(s) for s in await ahistory(reader, cfg("h"), before=middle)],
        "filter": [
            snapshot_summary(s)
            for s in await ahistory(reader, cfg("h"), filter={"source": "input"})
        ],
        "filter_step": [
            snapshot_summary(s) for s in await ahistory(reader, cfg("h"), filter={"step": 2})
        ],
        "filter_absent_none": [
            snapshot_summary(s)
            for s in await ahistory(reader, cfg("h"), filter={"absent": None, "step": 2})
        ],
        "filter_source_none": [
            snapshot_summary(s) for s in await ahistory(reader, cfg("h"), filter={"source": None})
        ],
    }


async def ascenario_update_state(make: Make) -> dict[str, Any]:
    calls = Calls()
    out: dict[str, Any] = {}
    await build_approval(make(), calls).ainvoke({"request": "#9"}, cfg("u"))
    updated = await build_approval(make(), calls).aupdate_state(
        cfg("u"), {"draft": "refund half of #9"}
    )
    out["updated_config_thread"] = updated["configurable"]["thread_id"]
    reader = build_approval(make(), calls)
    after = await reader.aget_state(cfg("u"))
    out["after_update"] = snapshot_summary(after)
    out["update_is_latest"] = (
        after.config["configurable"]["checkpoint_id"] == updated["configurable"]["checkpoint_id"]
    )
    out["final"] = await build_approval(make(), calls).ainvoke(Command(resume=True), cfg("u"))
    out["history"] = history_summary(await ahistory(build_approval(make(), calls), cfg("u")))
    out["calls"] = dict(calls.counts)
    return out


async def ascenario_replay_fork(make: Make) -> dict[str, Any]:
    calls = Calls()
    out: dict[str, Any] = {}
    out["first"] = await build_linear(make(), calls).ainvoke({"n": 1}, cfg("r"))
    history = await ahistory(build_linear(make(), calls), cfg("r"))
    before_b = next(s for s in history if s.next == ("b",))
    out["calls_first"] = dict(calls.counts)
    out["replayed"] = await build_linear(make(), calls).ainvoke(None, before_b.config)
    out["calls_replay"] = dict(calls.counts)
    chain = await aancestry(build_linear(make(), calls), cfg("r"))
    out["replay_hops_to_before_b"] = chain.index(before_b.config["configurable"]["checkpoint_id"])
    out["first_final_on_replay_chain"] = history[0].config["configurable"]["checkpoint_id"] in chain
    fork_config = await build_linear(make(), calls).aupdate_state(before_b.config, {"n": 100})
    fork_state = await build_linear(make(), calls).aget_state(fork_config)
    out["fork_parent_is_before_b"] = (
        fork_state.parent_config["configurable"]["checkpoint_id"]
        == before_b.config["configurable"]["checkpoint_id"]
    )
    out["fork_state"] = snapshot_summary(fork_state)
    out["forked"] = await build_linear(make(), calls).ainvoke(None, fork_config)
    out["latest"] = snapshot_summary(await build_linear(make(), calls).aget_state(cfg("r")))
    out["history"] = history_summary(await ahistory(build_linear(make(), calls), cfg("r")))
    out["calls"] = dict(calls.counts)
    return out


async def ascenario_subgraph(make: Make) -> dict[str, Any]:
    calls = Calls()
    out: dict[str, Any] = {}
    first = await build_nested(make(), calls).ainvoke({"topic": "tides", "notes": []}, cfg("s"))
    out["first"] = norm(first, Aliases())
    paused = await build_nested(make(), calls).aget_state(cfg("s"), subgraphs=True)
    out["paused"] = snapshot_summary(paused)
    (task,) = paused.tasks
    sub_state = task.state
    assert isinstance(sub_state, StateSnapshot)
    out["sub_paused"] = snapshot_summary(sub_state)
    sub_ns = sub_state.config["configurable"]["checkpoint_ns"]
    out["sub_ns_prefix"] = sub_ns.split(":", 1)[0]
    out["sub_history"] = history_summary(
        await ahistory(build_nested(make(), calls), sub_state.config)
    )
    out["final"] = await build_nested(make(), calls).ainvoke(Command(resume="deep"), cfg("s"))
    out["state"] = snapshot_summary(await build_nested(make(), calls).aget_state(cfg("s")))
    out["history"] = history_summary(await ahistory(build_nested(make(), calls), cfg("s")))
    out["sub_checkpoints"] = len([t async for t in make().alist(cfg("s", checkpoint_ns=sub_ns))])
    out["calls"] = dict(calls.counts)
    out["sub_ns"] = sub_ns
    return out


async def ascenario_fanout(make: Make) -> dict[str, Any]:
    calls = Calls()
    out: dict[str, Any] = {}
    out["final"] = await build_fanout(make(), calls).ainvoke(
        {"items": ["x", "y", "z"], "results": [], "sides": []}, cfg("f")
    )
    out["history"] = history_summary(await ahistory(build_fanout(make(), calls), cfg("f")))
    out["writes"] = await awrites_summary(make(), cfg("f"))
    out["calls"] = dict(calls.counts)
    return out


async def ascenario_failure(make: Make) -> dict[str, Any]:
    calls = Calls()
    fail = {"bad": True}
    out: dict[str, Any] = {}
    with pytest.raises(RuntimeError, match="failed on purpose"):
        await build_failing(make(), calls, fail).ainvoke({"log": []}, cfg("x"))
    failed = await build_failing(make(), calls, fail).aget_state(cfg("x"))
    out["failed"] = snapshot_summary(failed)
    out["failed_writes"] = await awrites_summary(make(), cfg("x"))
    out["calls_failed"] = dict(calls.counts)
    fail["bad"] = False
    out["final"] = await build_failing(make(), calls, fail).ainvoke(None, cfg("x"))
    out["history"] = history_summary(await ahistory(build_failing(make(), calls, fail), cfg("x")))
    out["calls"] = dict(calls.counts)
    return out


# --------------------------------------------------------------------------- tests
async def test_ainvoke_and_astream_match_in_memory(make: Make) -> None:
    """ainvoke/astream results, state, history and writes equal the InMemorySaver run."""
    got = await ascenario_invoke_stream(make)
    assert got == scenario_invoke_stream(shared(InMemorySaver()))
    assert got["invoke"] == {"n": 2, "log": ["a", "b2", "c"]}
    assert got["calls"] == {"a": 2, "b": 2, "c": 2}


async def test_async_interrupt_and_resume(make: Make) -> None:
    """An interrupt is visible from a new async saver and resumes from another one."""
    got = await ascenario_interrupt_resume(make)
    assert got == scenario_interrupt_resume(shared(InMemorySaver()))
    assert got["paused"]["next"] == ("approval",)
    assert got["calls"] == {"draft": 1, "approval": 2, "record": 1, "act": 1}


async def test_async_history_queries(make: Make) -> None:
    """aget_state_history with limit / before / filter equals InMemorySaver's."""
    got = await ascenario_history_queries(make)
    assert got == scenario_history_queries(shared(InMemorySaver()))
    assert len(got["full"]) == 10
    assert len(got["limit"]) == 3


async def test_async_update_state(make: Make) -> None:
    """aupdate_state on a paused thread is the latest checkpoint and the resume uses it."""
    got = await ascenario_update_state(make)
    assert got == scenario_update_state(shared(InMemorySaver()))
    assert got["update_is_latest"] is True
    assert got["final"]["outcome"].endswith("did refund half of #9")


async def test_async_replay_and_fork(make: Make) -> None:
    """Replay and fork from an earlier checkpoint id behave as on InMemorySaver."""
    got = await ascenario_replay_fork(make)
    assert got == scenario_replay_fork(shared(InMemorySaver()))
    assert got["calls_replay"] == {"a": 1, "b": 2, "c": 2}
    assert got["first_final_on_replay_chain"] is False
    assert got["fork_parent_is_before_b"] is True
    assert got["forked"] == {"n": 100, "log": ["a", "b100", "c"]}


async def test_async_subgraph_interrupt(make: Make, server_backend: Backend) -> None:
    """A subgraph interrupt under AsyncS3Saver is stored in the child namespace and resumes."""
    got = await ascenario_subgraph(make)
    expected = scenario_subgraph(shared(InMemorySaver()))
    sub_ns = got.pop("sub_ns")
    expected.pop("sub_ns")
    assert got == expected
    assert got["sub_paused"]["next"] == ("s2",)
    assert got["calls"] == {"prepare": 1, "s1": 1, "s2": 2, "s3": 1, "finish": 1}
    assert len(checkpoint_items(server_backend, "s", sub_ns)) == got["sub_checkpoints"]


async def test_async_parallel_branches_and_send(make: Make) -> None:
    """Branches and Send tasks: same results and pending-write order as InMemorySaver."""
    got = await ascenario_fanout(make)
    assert got == scenario_fanout(shared(InMemorySaver()))
    assert got["calls"] == {"plan": 1, "left": 1, "right": 1, "work": 3, "join": 1}


async def test_async_failed_node_keeps_sibling_writes(make: Make) -> None:
    """The succeeding sibling of a failed node is not re-run when the thread is resumed."""
    got = await ascenario_failure(make)
    assert got == scenario_failure(shared(InMemorySaver()))
    assert got["calls_failed"] == {"ok": 1, "bad": 1}
    assert got["calls"] == {"ok": 1, "bad": 2, "join": 1}


async def test_async_delete_thread(make: Make, server_backend: Backend) -> None:
    """adelete_thread removes one thread's items and objects and leaves the other intact."""
    calls = Calls()
    graph = build_approval(make(), calls)
    # 30 KB, incompressible: an S3 blob too (small pieces may be chunk items)
    big_request = "#1 " + random.Random(1).randbytes(15_000).hex()
    await graph.ainvoke({"request": big_request}, cfg("doomed"))
    await graph.ainvoke({"request": "#2"}, cfg("kept"))
    kept_before = snapshot_summary(await build_approval(make(), calls).aget_state(cfg("kept")))
    doomed = encode_segment("doomed")
    assert checkpoint_items(server_backend, "doomed")
    assert [k for k in thread_objects(server_backend, "doomed") if "/b/" in k]

    await make().adelete_thread("doomed")

    assert thread_objects(server_backend, "doomed") == []
    assert not [i for i in server_backend.items() if i["pk"]["S"] == doomed]
    fresh = make()
    assert await fresh.aget_tuple(cfg("doomed")) is None
    assert [t async for t in fresh.alist(cfg("doomed"))] == []
    reader = build_approval(make(), calls)
    assert (await reader.aget_state(cfg("doomed"))).values == {}
    assert snapshot_summary(await reader.aget_state(cfg("kept"))) == kept_before
    final = await build_approval(make(), calls).ainvoke(Command(resume=False), cfg("kept"))
    assert final["outcome"] == "recorded rejected; did refund #2"
