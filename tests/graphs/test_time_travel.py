"""Time travel from old snapshots is never refused: the same history as InMemorySaver.

The program of the semantics issue, one process and nothing concurrent: run, look at
the thread, run on, then edit the old snapshot (LangGraph's documented fork), and
replay or fork from it again. With the saver-memory guard this raised
``CheckpointConflictError``; the run-bound guard must accept it in every durability
mode, for both savers, and store the same history as ``InMemorySaver``.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, StateUpdate, interrupt

from tests.conftest import Backend
from tests.graphs.test_graphs import cfg, history_summary

DURABILITIES = ["sync", "async", "exit"]


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def build(saver: Any, with_interrupt: bool = False) -> Any:
    def a(state: Log) -> Log:
        return {"log": ["a"]}

    def b(state: Log) -> Log:
        if with_interrupt:
            return {"log": [f"b:{interrupt('ok?')}"]}
        return {"log": ["b"]}

    g = StateGraph(Log)
    g.add_node("a", a)
    g.add_node("b", b)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile(checkpointer=saver)


def program(saver: Any, durability: str) -> list[dict[str, Any]]:
    """The issue's snippet, then more time travel from the same stale snapshot."""
    app = build(saver)
    config = cfg("t")
    app.invoke({"log": ["in1"]}, config, durability=durability)
    snap = app.get_state(config)
    app.invoke({"log": ["in2"]}, config, durability=durability)
    app.update_state(snap.config, {"log": ["edit"]})
    app.invoke(None, snap.config, durability=durability)  # replay the old snapshot
    app.invoke({"log": ["in3"]}, snap.config, durability=durability)  # fork from it
    app.bulk_update_state(snap.config, [[StateUpdate({"log": ["bulk"]}, "b")]])
    app.invoke({"log": ["in4"]}, config, durability=durability)  # carry on from latest
    return history_summary(app.get_state_history(config))


def paused_program(saver: Any, durability: str) -> list[dict[str, Any]]:
    """Snapshots of a paused thread reused after it was resumed."""
    app = build(saver, with_interrupt=True)
    config = cfg("p")
    app.invoke({"log": ["in"]}, config, durability=durability)
    paused = app.get_state(config)
    app.invoke(Command(resume="yes"), config, durability=durability)
    app.invoke(Command(resume="again"), paused.config, durability=durability)  # replay
    app.update_state(paused.config, {"log": ["edited"]})
    app.invoke(Command(resume="late"), config, durability=durability)
    return history_summary(app.get_state_history(config))


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("scenario", [program, paused_program], ids=["edit", "paused"])
def test_stale_snapshot_time_travel_matches_in_memory(
    backend: Backend, durability: str, scenario: Any
) -> None:
    expected = scenario(InMemorySaver(), durability)
    assert scenario(backend.saver(), durability) == expected


@pytest.mark.parametrize("durability", DURABILITIES)
async def test_stale_snapshot_time_travel_matches_in_memory_async(
    server_backend: Backend, durability: str
) -> None:
    expected = program(InMemorySaver(), durability)

    async with server_backend.async_saver() as saver:
        app = build(saver)
        config = cfg("t")
        await app.ainvoke({"log": ["in1"]}, config, durability=durability)
        snap = await app.aget_state(config)
        await app.ainvoke({"log": ["in2"]}, config, durability=durability)
        await app.aupdate_state(snap.config, {"log": ["edit"]})
        await app.ainvoke(None, snap.config, durability=durability)
        await app.ainvoke({"log": ["in3"]}, snap.config, durability=durability)
        await app.abulk_update_state(snap.config, [[StateUpdate({"log": ["bulk"]}, "b")]])
        await app.ainvoke({"log": ["in4"]}, config, durability=durability)
        got = history_summary([s async for s in app.aget_state_history(config)])
    assert got == expected


def test_snapshot_configs_equal_in_memory_ones(backend: Backend) -> None:
    """The mark a read of the latest carries is invisible: configs compare equal."""
    app = build(backend.saver())
    app.invoke({"log": ["x"]}, cfg("c"))
    snap = app.get_state(cfg("c"))
    cid = snap.config["configurable"]["checkpoint_id"]
    assert snap.config == {
        "configurable": {"thread_id": "c", "checkpoint_ns": "", "checkpoint_id": cid}
    }
    assert snap.metadata is not None
    assert not any(k.startswith("__") for k in snap.metadata)
