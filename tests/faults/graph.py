"""The graph the fault suite drives, the side-effect log, and a user's recovery loop.

About ten supersteps: a growing message list, a ~200 KB document that changes three
times (so it is stored as chunked blobs, 10-12 chunks, named by a chunk list under the
suite's ``env.LIST_MIN``), a 3-way ``Send`` fan-out, an approval
``interrupt()`` resumed with ``Command(resume=...)``, and ``act``, the side effect.

``act`` follows the pattern of README and docs/concurrency.md: it runs in the superstep
*after* the checkpoint that records the decision, under ``durability="sync"``. A node
runs at least once, so the external system deduplicates by the task id (derived from
the committed checkpoint the task runs from): the log counts *deliveries*, one per
distinct key, and *executions*. Two deliveries for one thread would mean the decision
was committed twice (a fork): that is what the saver must prevent.
"""

from __future__ import annotations

import operator
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

INPUT: dict[str, Any] = {"messages": ["user: refund order #42"], "request": "#42"}
RESUME = "approve"
DOC_BYTES = 200_000
TASK_ID_KEY = "__pregel_task_id"  # LangGraph's CONFIG_KEY_TASK_ID


def document(version: int) -> str:
    """A ~200 KB document; each version rewrites a different ~10% region of the first."""
    rng = random.Random(1234)
    words = [f"{rng.getrandbits(40):010x}" for _ in range(DOC_BYTES // 11)]
    if version:
        edit = random.Random(version)
        start = (version * len(words)) // 5
        for i in range(start, start + len(words) // 10):
            words[i] = f"{edit.getrandbits(40):010x}"
    return " ".join(words)


class FaultState(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]
    request: str
    doc: str
    parts: Annotated[list[str], operator.add]
    decision: str
    outcome: str


class Effects:
    """Where ``act`` records what it did; survives any saver (and, with ``path``, the
    process: one line per execution appended to a file)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._rows: list[tuple[str, str]] = []

    def record(self, thread: str, key: str) -> None:
        if self.path is not None:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{thread}\t{key}\n".encode())
            finally:
                os.close(fd)
            return
        with self._lock:
            self._rows.append((thread, key))

    def rows(self) -> list[tuple[str, str]]:
        if self.path is not None:
            if not self.path.exists():
                return []
            lines = self.path.read_text().splitlines()
            return [(t, k) for t, k in (line.split("\t") for line in lines)]
        with self._lock:
            return list(self._rows)

    def executions(self, thread: str) -> int:
        return sum(1 for t, _ in self.rows() if t == thread)

    def deliveries(self, thread: str) -> int:
        """Distinct idempotency keys: what an external system that deduplicates saw."""
        return len({k for t, k in self.rows() if t == thread})


def build(checkpointer: Any, effects: Effects, gate: Callable[[], object] | None = None) -> Any:
    """Compile the fault graph; ``gate`` runs in ``approval`` once the answer arrived."""

    def intake(state: FaultState) -> FaultState:
        return {"messages": ["agent: looking up #42"], "doc": document(0)}

    def plan(state: FaultState) -> FaultState:
        return {"messages": ["agent: checking three sources"]}

    def fan_out(state: FaultState) -> list[Send]:
        return [Send("work", {"part": k}) for k in range(3)]

    def work(arg: dict[str, int]) -> FaultState:
        return {"parts": [f"source {arg['part']} ok"]}

    def merge(state: FaultState) -> FaultState:
        parts = ", ".join(sorted(state["parts"]))
        return {"messages": [f"agent: {parts}"], "doc": document(1)}

    def approval(state: FaultState) -> FaultState:
        answer = interrupt({"question": f"refund {state['request']}?"})
        if gate is not None:
            gate()
        return {"decision": str(answer), "messages": [f"human: {answer}"]}

    def act(state: FaultState, config: RunnableConfig) -> FaultState:
        thread = str(config["configurable"]["thread_id"])
        effects.record(thread, str(config["configurable"][TASK_ID_KEY]))
        return {"outcome": f"refunded {state['request']} ({state['decision']})"}

    def revise(state: FaultState) -> FaultState:
        return {"doc": document(2), "messages": ["agent: receipt attached"]}

    def summarize(state: FaultState) -> FaultState:
        return {"messages": [f"agent: {state['outcome']}"], "doc": document(3)}

    def finish(state: FaultState) -> FaultState:
        return {"messages": ["agent: done"]}

    builder = StateGraph(FaultState)
    for name, node in [
        ("intake", intake), ("plan", plan), ("work", work), ("merge", merge),
        ("approval", approval), ("act", act), ("revise", revise),
        ("summarize", summarize), ("finish", finish),
    ]:  # fmt: skip
        builder.add_node(name, node)  # type: ignore[call-overload]
    builder.add_edge(START, "intake")
    builder.add_edge("intake", "plan")
    builder.add_conditional_edges("plan", fan_out, ["work"])
    builder.add_edge("work", "merge")
    builder.add_edge("merge", "approval")
    builder.add_edge("approval", "act")
    builder.add_edge("act", "revise")
    builder.add_edge("revise", "summarize")
    builder.add_edge("summarize", "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=checkpointer)


def cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


MAX_INVOCATIONS = 6


def next_input(state: Any) -> tuple[bool, Any]:
    """What a user sends next, from the thread's state: (done, input)."""
    if not state.config.get("configurable", {}).get("checkpoint_id"):
        return False, INPUT  # nothing committed yet: start the thread
    if state.interrupts:
        return False, Command(resume=RESUME)
    if state.tasks:
        # Stopped by an error. ``next`` leaves out tasks whose writes were saved, so a
        # step whose tasks all finished but whose checkpoint was not committed shows
        # ``next == ()`` with those tasks: continue from the latest checkpoint.
        return False, None
    return True, None


def drive(graph: Any, thread: str) -> dict[str, Any]:
    """Start or continue ``thread`` until it is finished, as a user would: look at the
    state, then start it, answer the interrupt, or continue after an error."""
    for _ in range(MAX_INVOCATIONS):
        state = graph.get_state(cfg(thread))
        done, value = next_input(state)
        if done:
            return dict(state.values)
        graph.invoke(value, cfg(thread), durability="sync")
    raise AssertionError(f"{thread} did not finish in {MAX_INVOCATIONS} invocations")


async def adrive(graph: Any, thread: str) -> dict[str, Any]:
    """``drive`` through the async API."""
    for _ in range(MAX_INVOCATIONS):
        state = await graph.aget_state(cfg(thread))
        done, value = next_input(state)
        if done:
            return dict(state.values)
        await graph.ainvoke(value, cfg(thread), durability="sync")
    raise AssertionError(f"{thread} did not finish in {MAX_INVOCATIONS} invocations")
