"""Differential test: random sequences of LangGraph operations on InMemorySaver and on ours.

Each seed draws a sequence of operations run one after another — invoke and stream
with fresh input, interrupt and resume, ``update_state`` on the latest and on old
checkpoints, ``bulk_update_state``, replay and fork from any checkpoint, a graph
with a subgraph, every durability mode — and runs it on ``InMemorySaver`` and on
our saver. After every operation both must have raised the same exception type (or
none) and have identical ``get_state_history`` (values, next, metadata step and
source, parent links as positions, tasks, pending writes and interrupts).

``LGS3_DIFF_SEEDS`` sets the number of seeds per test chunk (default below); a failure
names the seed and the operations, so ``LGS3_DIFF_ONLY=<seed>`` reproduces it.
"""

from __future__ import annotations

import operator
import os
import random
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, StateUpdate, interrupt

from tests.conftest import Backend
from tests.graphs.test_graphs import cfg, history_summary

# Seeds per test chunk: 4 chunks with S3Saver, 2 with AsyncS3Saver (204 programs).
SEEDS = int(os.environ.get("LGS3_DIFF_SEEDS", "34"))
ONLY = os.environ.get("LGS3_DIFF_ONLY")
OPS_PER_SEED = 7
DURABILITIES = ("sync", "async", "exit")


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    ask: bool


def build(saver: Any, kind: str) -> Any:
    def a(state: State) -> State:
        return {"log": ["a"]}

    def gate(state: State) -> State:
        if state.get("ask"):
            return {"log": [f"answer:{interrupt('ok?')}"], "ask": False}
        return {"log": ["gate"]}

    def b(state: State) -> State:
        return {"log": ["b"]}

    g = StateGraph(State)
    g.add_node("a", a)
    if kind == "subgraph":
        inner = StateGraph(State)
        inner.add_node("gate", gate)
        inner.add_edge(START, "gate")
        inner.add_edge("gate", END)
        g.add_node("sub", inner.compile())
        middle = "sub"
    else:
        g.add_node("gate", gate)
        middle = "gate"
    g.add_node("b", b)
    g.add_edge(START, "a")
    g.add_edge("a", middle)
    g.add_edge(middle, "b")
    g.add_edge("b", END)
    return g.compile(checkpointer=saver)


Op = tuple[str, dict[str, Any]]


def draw_ops(rng: random.Random) -> list[Op]:
    """A random program; old checkpoints are named by position, oldest first."""
    ops: list[Op] = [("invoke", {"input": {"log": ["in0"], "ask": rng.random() < 0.5}})]
    kinds = [
        "invoke", "stream", "resume", "update_latest", "update_old", "update_old_as",
        "replay", "fork", "bulk_old", "get_state_old",
    ]  # fmt: skip
    for i in range(1, OPS_PER_SEED):
        kind = rng.choice(kinds)
        args: dict[str, Any] = {
            "durability": rng.choice(DURABILITIES),
            "pos": rng.random(),
            "input": {"log": [f"in{i}"], "ask": rng.random() < 0.4},
            "value": f"v{i}",
        }
        ops.append((kind, args))
    return ops


def old_config(history: list[Any], thread: str, pos: float) -> Any:
    """The config of the snapshot at ``pos`` (0..1) of ``history``, newest first."""
    if not history:
        return cfg(thread)
    return history[min(int(pos * len(history)), len(history) - 1)].config


def plan(history: list[Any], thread: str, op: Op) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """The graph method (sync name) and arguments that carry out ``op``."""
    kind, a = op
    config = cfg(thread)
    run = {"durability": a.get("durability", "sync")}
    old = old_config(history, thread, a.get("pos", 0.0))
    if kind == "invoke":
        return "invoke", (a["input"], config), run
    if kind == "stream":
        return "stream", (a["input"], config), {**run, "stream_mode": "values"}
    if kind == "resume":
        return "invoke", (Command(resume=a["value"]), config), run
    if kind == "update_latest":
        return "update_state", (config, {"log": [f"edit-{a['value']}"]}), {}
    if kind == "update_old":
        return "update_state", (old, {"log": [f"old-{a['value']}"]}), {}
    if kind == "update_old_as":
        return "update_state", (old, {"log": ["as-a"]}), {"as_node": "a"}
    if kind == "replay":
        return "invoke", (None, old), run
    if kind == "fork":
        return "invoke", (a["input"], old), run
    if kind == "bulk_old":
        updates = [[StateUpdate({"log": ["bulk1"]}, "a")], [StateUpdate({"log": ["bulk2"]})]]
        return "bulk_update_state", (old, updates), {}
    if kind == "get_state_old":
        return "get_state", (old,), {}
    raise AssertionError(kind)


def apply(app: Any, history: list[Any], thread: str, op: Op) -> Any:
    name, args, kwargs = plan(history, thread, op)
    result = getattr(app, name)(*args, **kwargs)
    if name == "stream":
        return list(result)
    if name == "get_state":
        return result.values
    return None if name.endswith("update_state") else result


async def aapply(app: Any, history: list[Any], thread: str, op: Op) -> Any:
    name, args, kwargs = plan(history, thread, op)
    if name == "stream":
        return [chunk async for chunk in app.astream(*args, **kwargs)]
    result = await getattr(app, f"a{name}")(*args, **kwargs)
    if name == "get_state":
        return result.values
    return None if name.endswith("update_state") else result


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        result = fn()
    except Exception as exc:
        return "raised", type(exc).__name__
    return "ok", _plain(result)


async def aoutcome(pending: Awaitable[Any]) -> tuple[str, Any]:
    try:
        result = await pending
    except Exception as exc:
        return "raised", type(exc).__name__
    return "ok", _plain(result)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "__interrupt__"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def run_seed(seed: int, saver: Any) -> int:
    """Run seed's program on InMemorySaver and on ``saver``; return operations run.

    Before every operation, and after the last, both histories must be identical;
    each operation must have the same outcome on both.
    """
    rng = random.Random(seed)
    kind = rng.choice(["plain", "subgraph"])
    ops = draw_ops(rng)
    ref, ours = build(InMemorySaver(), kind), build(saver, kind)
    thread = f"diff-{seed}"
    for n, op in enumerate([*ops, None]):
        where = f"seed {seed} ({kind}), after {ops[:n]}"
        ref_history = list(ref.get_state_history(cfg(thread)))
        ours_history = list(ours.get_state_history(cfg(thread)))
        assert history_summary(ours_history) == history_summary(ref_history), where
        if op is None:
            break
        expected = outcome(partial(apply, ref, ref_history, thread, op))
        got = outcome(partial(apply, ours, ours_history, thread, op))
        assert got == expected, f"{where}, op {n}: {op[0]} {op[1]}"
    return len(ops)


async def arun_seed(seed: int, saver: Any) -> int:
    """``run_seed`` through the graphs' async API (ainvoke, astream, aupdate_state ...)."""
    rng = random.Random(seed)
    kind = rng.choice(["plain", "subgraph"])
    ops = draw_ops(rng)
    ref, ours = build(InMemorySaver(), kind), build(saver, kind)
    thread = f"diff-{seed}"
    for n, op in enumerate([*ops, None]):
        where = f"seed {seed} ({kind}), after {ops[:n]}"
        ref_history = [s async for s in ref.aget_state_history(cfg(thread))]
        ours_history = [s async for s in ours.aget_state_history(cfg(thread))]
        assert history_summary(ours_history) == history_summary(ref_history), where
        if op is None:
            break
        expected = await aoutcome(aapply(ref, ref_history, thread, op))
        got = await aoutcome(aapply(ours, ours_history, thread, op))
        assert got == expected, f"{where}, op {n}: {op[0]} {op[1]}"
    return len(ops)


def seeds(offset: int) -> list[int]:
    if ONLY is not None:
        return [int(ONLY)]
    return list(range(offset, offset + SEEDS))


@pytest.mark.parametrize("chunk", range(4))
def test_random_programs_match_in_memory(
    inproc_backend: Backend, chunk: int, record_property: Callable[[str, Any], None]
) -> None:
    chosen = seeds(chunk * 1_000)
    ops = sum(run_seed(seed, inproc_backend.sibling().saver()) for seed in chosen)
    record_property("differential", (len(chosen), ops))


@pytest.mark.parametrize("chunk", range(2))
async def test_random_programs_match_in_memory_async(
    server_backend: Backend, chunk: int, record_property: Callable[[str, Any], None]
) -> None:
    """The same kind of programs through AsyncS3Saver and the graphs' async API."""
    chosen = seeds(20_000 + chunk * 1_000)
    ops = 0
    for seed in chosen:
        async with server_backend.sibling().async_saver() as saver:
            ops += await arun_seed(seed, saver)
    record_property("differential", (len(chosen), ops))


def test_random_programs_match_in_memory_sealed(
    inproc_backend: Backend, record_property: Callable[[str, Any], None]
) -> None:
    """The same programs on a saver with ``encryption=`` (a third of a chunk's seeds)."""
    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    chosen = seeds(40_000)[: max(1, SEEDS // 3)]
    ops = 0
    for seed in chosen:
        ring = StaticKeyRing({"ring": os.urandom(32)}, current="ring")
        saver = inproc_backend.sibling().saver(encryption=Encryption(ring))
        ops += run_seed(seed, saver)
    record_property("differential", (len(chosen), ops))
