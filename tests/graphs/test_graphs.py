"""Real LangGraph graphs on S3Saver, read back through fresh savers, compared with InMemorySaver.

Every scenario is driven through a ``make`` callable that returns the checkpointer to
use for the next step. For S3 it is ``backend.saver`` (a brand-new saver with new
clients each time, as a new Lambda container would have); for the reference it
returns one shared ``InMemorySaver``. The two runs are then summarised without the
parts that are random by design (checkpoint ids, task ids, timestamps) and compared.
"""

from __future__ import annotations

import operator
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Interrupt, Send, StateSnapshot, interrupt

from langgraph_s3 import S3Saver
from langgraph_s3.keys import encode_segment
from tests.conftest import Backend

Make = Callable[[], Any]
NULL_TASK = "00000000-0000-0000-0000-000000000000"


# --------------------------------------------------------------------------- helpers
class Calls:
    """Thread-safe execution counter for graph nodes (nodes may run in worker threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def hit(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1

    def __getitem__(self, name: str) -> int:
        return self.counts[name]


def cfg(thread_id: str, **extra: Any) -> RunnableConfig:
    """A run config for ``thread_id``."""
    return {"configurable": {"thread_id": thread_id, **extra}}


class Aliases:
    """Replaces random ids (task ids, interrupt ids) by their order of first appearance."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {NULL_TASK: "null-task"}

    def __call__(self, value: str) -> str:
        return self.names.setdefault(value, f"id{len(self.names)}")


def norm(value: Any, ids: Aliases) -> Any:
    """A comparable form of a value: interrupts and sends as tuples, containers recursively."""
    if isinstance(value, Interrupt):
        return ("Interrupt", norm(value.value, ids))
    if isinstance(value, Send):
        return ("Send", value.node, norm(value.arg, ids))
    if isinstance(value, BaseException):
        return ("Exception", type(value).__name__, str(value))
    if isinstance(value, dict):
        return {k: norm(v, ids) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [norm(v, ids) for v in value]
    return value


def norm_metadata(metadata: Any) -> dict[str, Any]:
    """Metadata without the checkpoint ids that ``parents`` maps namespaces to."""
    md = dict(metadata or {})
    if "parents" in md:
        md["parents"] = sorted(md["parents"])
    return md


def snapshot_summary(snap: StateSnapshot, ids: Aliases | None = None) -> dict[str, Any]:
    """The parts of a StateSnapshot that must match between savers."""
    ids = ids or Aliases()
    return {
        "values": norm(snap.values, ids),
        "next": tuple(snap.next),
        "metadata": norm_metadata(snap.metadata),
        "tasks": [
            (t.name, t.error, [norm(i.value, ids) for i in t.interrupts], norm(t.result, ids))
            for t in snap.tasks
        ],
        "interrupts": [norm(i.value, ids) for i in snap.interrupts],
        "has_parent": snap.parent_config is not None,
    }


def history_summary(snaps: Iterable[StateSnapshot]) -> list[dict[str, Any]]:
    """Snapshot summaries, newest first, with each parent given as a position in the list."""
    snaps = list(snaps)
    position = {s.config["configurable"]["checkpoint_id"]: i for i, s in enumerate(snaps)}
    out = []
    for snap in snaps:
        summary = snapshot_summary(snap)
        parent = snap.parent_config["configurable"]["checkpoint_id"] if snap.parent_config else None
        summary["parent"] = position.get(parent) if parent else None
        out.append(summary)
    return out


def writes_summary(saver: Any, config: RunnableConfig) -> list[dict[str, Any]]:
    """Every checkpoint of ``config``'s thread/namespace: metadata and ordered pending writes."""
    ids = Aliases()
    out = []
    for tup in saver.list(config):
        out.append(
            {
                "metadata": norm_metadata(tup.metadata),
                "writes": [(ids(t), ch, norm(v, ids)) for t, ch, v in tup.pending_writes],
                "channels": norm(tup.checkpoint["channel_values"], ids),
            }
        )
    return out


def ancestry(graph: Any, config: RunnableConfig) -> list[str]:
    """Checkpoint ids from the latest of ``config`` back to the first, following parents."""
    snaps = {s.config["configurable"]["checkpoint_id"]: s for s in graph.get_state_history(config)}
    cursor: str | None = graph.get_state(config).config["configurable"]["checkpoint_id"]
    chain = []
    while cursor is not None:
        chain.append(cursor)
        parent = snaps[cursor].parent_config
        cursor = parent["configurable"]["checkpoint_id"] if parent else None
    return chain


def checkpoint_items(backend: Backend, thread_id: str, ns: str | None = None) -> list[Any]:
    """The thread's checkpoint index items (of one namespace if ``ns`` is given)."""
    prefix = "c#" if ns is None else f"c#{encode_segment(ns)}#"
    return [
        i
        for i in backend.items()
        if i["pk"]["S"] == encode_segment(thread_id)
        and "h" in i
        and i["sk"]["S"].startswith(prefix)
    ]


def thread_objects(backend: Backend, thread_id: str) -> list[str]:
    """S3 keys under the thread's folder."""
    return [k for k in backend.object_keys() if k.startswith(f"{encode_segment(thread_id)}/")]


def shared(saver: Any) -> Make:
    """A ``make`` that always returns the same (reference) saver."""
    return lambda: saver


# --------------------------------------------------------------------------- graphs
class LinearState(TypedDict, total=False):
    n: int
    log: Annotated[list[str], operator.add]


def build_linear(checkpointer: Any, calls: Calls) -> Any:
    """a -> b -> c, each appending its name; ``a`` increments ``n``."""

    def a(state: LinearState) -> LinearState:
        calls.hit("a")
        return {"n": state.get("n", 0) + 1, "log": ["a"]}

    def b(state: LinearState) -> LinearState:
        calls.hit("b")
        return {"log": [f"b{state['n']}"]}

    def c(state: LinearState) -> LinearState:
        calls.hit("c")
        return {"log": ["c"]}

    builder = StateGraph(LinearState)
    builder.add_node("a", a)
    builder.add_node("b", b)
    builder.add_node("c", c)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=checkpointer)


class ApprovalState(TypedDict, total=False):
    request: str
    draft: str
    decision: str
    outcome: str


def build_approval(checkpointer: Any, calls: Calls) -> Any:
    """draft -> approval (interrupt) -> record -> act (the side effect); every node counted."""

    def draft(state: ApprovalState) -> ApprovalState:
        calls.hit("draft")
        return {"draft": f"refund {state['request']}"}

    def approval(state: ApprovalState) -> ApprovalState:
        calls.hit("approval")
        answer = interrupt({"question": "approve?", "draft": state["draft"]})
        return {"decision": "approved" if answer else "rejected"}

    def record(state: ApprovalState) -> ApprovalState:
        calls.hit("record")
        return {"outcome": f"recorded {state['decision']}"}

    def act(state: ApprovalState) -> ApprovalState:
        calls.hit("act")
        return {"outcome": f"{state['outcome']}; did {state['draft']}"}

    builder = StateGraph(ApprovalState)
    builder.add_node("draft", draft)
    builder.add_node("approval", approval)
    builder.add_node("record", record)
    builder.add_node("act", act)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approval")
    builder.add_edge("approval", "record")
    builder.add_edge("record", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=checkpointer)


class SubState(TypedDict, total=False):
    topic: str
    detail: str


class NestedState(TypedDict, total=False):
    topic: str
    detail: str
    notes: Annotated[list[str], operator.add]


def build_nested(checkpointer: Any, calls: Calls) -> Any:
    """prepare -> child (s1 -> s2 [interrupt] -> s3) -> finish; the child builds ``detail``."""

    def s1(state: SubState) -> SubState:
        calls.hit("s1")
        return {"detail": f"s1:{state['topic']}"}

    def s2(state: SubState) -> SubState:
        calls.hit("s2")
        answer = interrupt({"ask": "detail?", "seen": state["detail"]})
        return {"detail": f"{state['detail']}|s2:{answer}"}

    def s3(state: SubState) -> SubState:
        calls.hit("s3")
        return {"detail": f"{state['detail']}|s3"}

    sub = StateGraph(SubState)
    sub.add_node("s1", s1)
    sub.add_node("s2", s2)
    sub.add_node("s3", s3)
    sub.add_edge(START, "s1")
    sub.add_edge("s1", "s2")
    sub.add_edge("s2", "s3")
    sub.add_edge("s3", END)

    def prepare(state: NestedState) -> NestedState:
        calls.hit("prepare")
        return {"notes": ["prepare"]}

    def finish(state: NestedState) -> NestedState:
        calls.hit("finish")
        return {"notes": [f"finish:{state['detail']}"]}

    builder = StateGraph(NestedState)
    builder.add_node("prepare", prepare)
    builder.add_node("child", sub.compile())
    builder.add_node("finish", finish)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "child")
    builder.add_edge("child", "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=checkpointer)


class FanState(TypedDict, total=False):
    items: list[str]
    results: Annotated[list[str], operator.add]
    sides: Annotated[list[str], operator.add]
    item: str


def build_fanout(checkpointer: Any, calls: Calls) -> Any:
    """Static parallel branches (left, right) and a dynamic ``Send`` fan-out to ``work``."""

    def plan(state: FanState) -> FanState:
        calls.hit("plan")
        return {"sides": ["plan"]}

    def left(state: FanState) -> FanState:
        calls.hit("left")
        return {"sides": ["left"]}

    def right(state: FanState) -> FanState:
        calls.hit("right")
        return {"sides": ["right"]}

    def dispatch(state: FanState) -> list[Send]:
        return [Send("work", {"item": item}) for item in state["items"]]

    def work(state: FanState) -> FanState:
        calls.hit("work")
        return {"results": [state["item"].upper()]}

    def join(state: FanState) -> FanState:
        calls.hit("join")
        return {"sides": [f"join:{len(state['results'])}"]}

    builder = StateGraph(FanState)
    builder.add_node("plan", plan)
    builder.add_node("left", left)
    builder.add_node("right", right)
    builder.add_node("work", work)
    builder.add_node("join", join)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "left")
    builder.add_edge("plan", "right")
    builder.add_conditional_edges("plan", dispatch, ["work"])
    builder.add_edge(["left", "right", "work"], "join")
    builder.add_edge("join", END)
    return builder.compile(checkpointer=checkpointer)


class FailState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def build_failing(checkpointer: Any, calls: Calls, fail: dict[str, bool]) -> Any:
    """``ok`` and ``bad`` run in parallel; ``bad`` raises while ``fail['bad']`` is true.

    ``bad`` fails only after ``ok`` has finished (plus a short settle time), because
    LangGraph's async runner cancels siblings that are still running when a task fails;
    the scenario is about a sibling that *succeeded*.
    """
    ok_done = threading.Event()

    def ok(state: FailState) -> FailState:
        calls.hit("ok")
        ok_done.set()
        return {"log": ["ok"]}

    def bad(state: FailState) -> FailState:
        calls.hit("bad")
        if fail["bad"]:
            assert ok_done.wait(10), "sibling never ran"
            time.sleep(0.2)  # let the runner record ok's result before this task fails
            raise RuntimeError("bad node failed on purpose")
        return {"log": ["bad"]}

    def join(state: FailState) -> FailState:
        calls.hit("join")
        return {"log": [f"join:{len(state['log'])}"]}

    builder = StateGraph(FailState)
    builder.add_node("ok", ok)
    builder.add_node("bad", bad)
    builder.add_node("join", join)
    builder.add_edge(START, "ok")
    builder.add_edge(START, "bad")
    builder.add_edge(["ok", "bad"], "join")
    builder.add_edge("join", END)
    return builder.compile(checkpointer=checkpointer)


# --------------------------------------------------------------------------- scenarios
def scenario_invoke_stream(make: Make) -> dict[str, Any]:
    """invoke one thread, stream another, read both back with a fresh saver."""
    calls = Calls()
    out: dict[str, Any] = {}
    out["invoke"] = build_linear(make(), calls).invoke({"n": 1}, cfg("inv"))
    out["stream"] = list(
        build_linear(make(), calls).stream({"n": 5}, cfg("str"), stream_mode="updates")
    )
    reader = build_linear(make(), calls)
    out["state_inv"] = snapshot_summary(reader.get_state(cfg("inv")))
    out["state_str"] = snapshot_summary(reader.get_state(cfg("str")))
    out["history_inv"] = history_summary(reader.get_state_history(cfg("inv")))
    out["writes_str"] = writes_summary(make(), cfg("str"))
    out["calls"] = dict(calls.counts)
    return out


def scenario_interrupt_resume(make: Make) -> dict[str, Any]:
    """Interrupt, inspect the pause from a fresh saver, resume from another fresh saver."""
    calls = Calls()
    out: dict[str, Any] = {}
    first = build_approval(make(), calls).invoke({"request": "#7"}, cfg("t"))
    out["first"] = norm(first, Aliases())
    out["paused"] = snapshot_summary(build_approval(make(), calls).get_state(cfg("t")))
    out["calls_paused"] = dict(calls.counts)
    out["final"] = build_approval(make(), calls).invoke(Command(resume=True), cfg("t"))
    reader = build_approval(make(), calls)
    out["state"] = snapshot_summary(reader.get_state(cfg("t")))
    out["history"] = history_summary(reader.get_state_history(cfg("t")))
    out["writes"] = writes_summary(make(), cfg("t"))
    out["calls"] = dict(calls.counts)
    return out


def scenario_history_queries(make: Make) -> dict[str, Any]:
    """get_state_history with limit, before and a metadata filter."""
    calls = Calls()
    build_linear(make(), calls).invoke({"n": 1}, cfg("h"))
    build_linear(make(), calls).invoke({"n": 10}, cfg("h"))
    reader = build_linear(make(), calls)
    full = list(reader.get_state_history(cfg("h")))
    middle = full[len(full) // 2].config
    return {
        "full": history_summary(full),
        "limit": [snapshot_summary(s) for s in reader.get_state_history(cfg("h"), limit=3)],
        "before": [snapshot_summary(s) for s in reader.get_state_history(cfg("h"), before=middle)],
        "filter": [
            snapshot_summary(s)
            for s in reader.get_state_history(cfg("h"), filter={"source": "input"})
        ],
        "filter_step": [
            snapshot_summary(s) for s in reader.get_state_history(cfg("h"), filter={"step": 2})
        ],
        # None matches a key the metadata does not have (InMemorySaver's .get semantics).
        "filter_absent_none": [
            snapshot_summary(s)
            for s in reader.get_state_history(cfg("h"), filter={"absent": None, "step": 2})
        ],
        "filter_source_none": [
            snapshot_summary(s) for s in reader.get_state_history(cfg("h"), filter={"source": None})
        ],
    }


def scenario_update_state(make: Make) -> dict[str, Any]:
    """Edit an interrupted thread's state, read it back, and resume with the edit."""
    calls = Calls()
    out: dict[str, Any] = {}
    build_approval(make(), calls).invoke({"request": "#9"}, cfg("u"))
    updated = build_approval(make(), calls).update_state(cfg("u"), {"draft": "refund half of #9"})
    out["updated_config_thread"] = updated["configurable"]["thread_id"]
    reader = build_approval(make(), calls)
    out["after_update"] = snapshot_summary(reader.get_state(cfg("u")))
    out["update_is_latest"] = (
        reader.get_state(cfg("u")).config["configurable"]["checkpoint_id"]
        == updated["configurable"]["checkpoint_id"]
    )
    out["final"] = build_approval(make(), calls).invoke(Command(resume=True), cfg("u"))
    out["history"] = history_summary(build_approval(make(), calls).get_state_history(cfg("u")))
    out["calls"] = dict(calls.counts)
    return out


def scenario_replay_fork(make: Make) -> dict[str, Any]:
    """Replay from the checkpoint before ``b`` and fork from it with a changed ``n``."""
    calls = Calls()
    out: dict[str, Any] = {}
    out["first"] = build_linear(make(), calls).invoke({"n": 1}, cfg("r"))
    history = list(build_linear(make(), calls).get_state_history(cfg("r")))
    before_b = next(s for s in history if s.next == ("b",))
    out["calls_first"] = dict(calls.counts)

    replayed = build_linear(make(), calls).invoke(None, before_b.config)
    out["replayed"] = replayed
    out["calls_replay"] = dict(calls.counts)
    chain = ancestry(build_linear(make(), calls), cfg("r"))
    out["replay_hops_to_before_b"] = chain.index(before_b.config["configurable"]["checkpoint_id"])
    out["first_final_on_replay_chain"] = history[0].config["configurable"]["checkpoint_id"] in chain

    fork_config = build_linear(make(), calls).update_state(before_b.config, {"n": 100})
    fork_state = build_linear(make(), calls).get_state(fork_config)
    out["fork_parent_is_before_b"] = (
        fork_state.parent_config["configurable"]["checkpoint_id"]
        == before_b.config["configurable"]["checkpoint_id"]
    )
    out["fork_state"] = snapshot_summary(fork_state)
    out["forked"] = build_linear(make(), calls).invoke(None, fork_config)
    out["latest"] = snapshot_summary(build_linear(make(), calls).get_state(cfg("r")))
    out["history"] = history_summary(build_linear(make(), calls).get_state_history(cfg("r")))
    out["calls"] = dict(calls.counts)
    return out


def scenario_subgraph(make: Make) -> dict[str, Any]:
    """An interrupt inside a subgraph, inspected and resumed through fresh savers."""
    calls = Calls()
    out: dict[str, Any] = {}
    first = build_nested(make(), calls).invoke({"topic": "tides", "notes": []}, cfg("s"))
    out["first"] = norm(first, Aliases())
    paused = build_nested(make(), calls).get_state(cfg("s"), subgraphs=True)
    out["paused"] = snapshot_summary(paused)
    (task,) = paused.tasks
    sub_state = task.state
    assert isinstance(sub_state, StateSnapshot)
    out["sub_paused"] = snapshot_summary(sub_state)
    sub_ns = sub_state.config["configurable"]["checkpoint_ns"]
    out["sub_ns_prefix"] = sub_ns.split(":", 1)[0]
    out["sub_history"] = history_summary(
        build_nested(make(), calls).get_state_history(sub_state.config)
    )
    out["final"] = build_nested(make(), calls).invoke(Command(resume="deep"), cfg("s"))
    out["state"] = snapshot_summary(build_nested(make(), calls).get_state(cfg("s")))
    out["history"] = history_summary(build_nested(make(), calls).get_state_history(cfg("s")))
    out["sub_checkpoints"] = len(list(make().list(cfg("s", checkpoint_ns=sub_ns))))
    out["calls"] = dict(calls.counts)
    out["sub_ns"] = sub_ns
    return out


def scenario_fanout(make: Make) -> dict[str, Any]:
    """Parallel static branches plus three ``Send`` tasks, then a join."""
    calls = Calls()
    out: dict[str, Any] = {}
    out["final"] = build_fanout(make(), calls).invoke(
        {"items": ["x", "y", "z"], "results": [], "sides": []}, cfg("f")
    )
    out["history"] = history_summary(build_fanout(make(), calls).get_state_history(cfg("f")))
    out["writes"] = writes_summary(make(), cfg("f"))
    out["calls"] = dict(calls.counts)
    return out


def scenario_failure(make: Make) -> dict[str, Any]:
    """A failing node next to a succeeding sibling; resume after the failure is fixed."""
    calls = Calls()
    fail = {"bad": True}
    out: dict[str, Any] = {}
    with pytest.raises(RuntimeError, match="failed on purpose"):
        build_failing(make(), calls, fail).invoke({"log": []}, cfg("x"))
    failed = build_failing(make(), calls, fail).get_state(cfg("x"))
    out["failed"] = snapshot_summary(failed)
    out["failed_writes"] = writes_summary(make(), cfg("x"))
    out["calls_failed"] = dict(calls.counts)
    fail["bad"] = False
    out["final"] = build_failing(make(), calls, fail).invoke(None, cfg("x"))
    out["history"] = history_summary(build_failing(make(), calls, fail).get_state_history(cfg("x")))
    out["calls"] = dict(calls.counts)
    return out


# --------------------------------------------------------------------------- tests
def test_invoke_and_stream_match_in_memory(backend: Backend) -> None:
    """invoke/stream results, state, history and pending writes read by a new saver match
    InMemorySaver's, and each node ran exactly once per run."""
    got = scenario_invoke_stream(backend.saver)
    assert got == scenario_invoke_stream(shared(InMemorySaver()))
    assert got["invoke"] == {"n": 2, "log": ["a", "b2", "c"]}
    assert got["calls"] == {"a": 2, "b": 2, "c": 2}
    assert [s["metadata"]["step"] for s in got["history_inv"]] == [3, 2, 1, 0, -1]
    assert len(checkpoint_items(backend, "inv", "")) == len(got["history_inv"])


def test_interrupt_and_resume_across_containers(backend: Backend) -> None:
    """An interrupt is visible from a new saver, and a resume from yet another saver runs
    the interrupted node again and the later nodes once."""
    got = scenario_interrupt_resume(backend.saver)
    assert got == scenario_interrupt_resume(shared(InMemorySaver()))
    assert got["paused"]["next"] == ("approval",)
    assert got["paused"]["interrupts"] == [{"question": "approve?", "draft": "refund #7"}]
    assert got["calls_paused"] == {"draft": 1, "approval": 1}
    assert got["final"]["outcome"] == "recorded approved; did refund #7"
    assert got["calls"] == {"draft": 1, "approval": 2, "record": 1, "act": 1}
    resume_writes = [w for c in got["writes"] for w in c["writes"] if w[1] == "__resume__"]
    assert resume_writes, "the resume value was not stored as a pending write"


def test_get_state_history_queries(backend: Backend) -> None:
    """History with limit / before / metadata filters equals InMemorySaver's on two runs."""
    got = scenario_history_queries(backend.saver)
    assert got == scenario_history_queries(shared(InMemorySaver()))
    assert len(got["full"]) == 10
    assert len(got["limit"]) == 3
    assert got["limit"] == [{k: v for k, v in s.items() if k != "parent"} for s in got["full"][:3]]
    middle = len(got["full"]) // 2
    strip = [{k: v for k, v in s.items() if k != "parent"} for s in got["full"]]
    assert got["before"] == strip[middle + 1 :]
    assert got["filter"] == [s for s in strip if s["metadata"]["source"] == "input"]
    assert len(got["filter"]) == 2
    assert got["filter_step"] == [s for s in strip if s["metadata"]["step"] == 2]
    assert len(got["filter_step"]) == 1


def test_update_state_then_resume(backend: Backend) -> None:
    """update_state on a paused thread is the new latest checkpoint (source 'update') and the
    resumed run sees the edited value."""
    got = scenario_update_state(backend.saver)
    assert got == scenario_update_state(shared(InMemorySaver()))
    assert got["update_is_latest"] is True
    assert got["after_update"]["metadata"]["source"] == "update"
    assert got["after_update"]["values"]["draft"] == "refund half of #9"
    assert got["final"]["outcome"].endswith("did refund half of #9")


def test_replay_and_fork_from_earlier_checkpoint(backend: Backend) -> None:
    """Replaying from an earlier checkpoint re-runs the later nodes on a new branch, and a
    fork via update_state on that checkpoint takes its changed value through the run."""
    got = scenario_replay_fork(backend.saver)
    assert got == scenario_replay_fork(shared(InMemorySaver()))
    assert got["first"] == got["replayed"] == {"n": 2, "log": ["a", "b2", "c"]}
    assert got["calls_first"] == {"a": 1, "b": 1, "c": 1}
    assert got["calls_replay"] == {"a": 1, "b": 2, "c": 2}
    assert got["replay_hops_to_before_b"] >= 1
    assert got["first_final_on_replay_chain"] is False
    assert got["fork_parent_is_before_b"] is True
    assert got["forked"] == {"n": 100, "log": ["a", "b100", "c"]}
    assert got["latest"]["values"] == got["forked"]


def test_subgraph_interrupt_and_namespaces(backend: Backend) -> None:
    """A subgraph interrupt is stored under the child's namespace, is visible with
    subgraphs=True from a new saver and resumes to the same result as InMemorySaver."""
    got = scenario_subgraph(backend.saver)
    expected = scenario_subgraph(shared(InMemorySaver()))
    sub_ns = got.pop("sub_ns")
    expected.pop("sub_ns")
    assert got == expected
    assert got["sub_ns_prefix"] == "child"
    assert got["sub_paused"]["next"] == ("s2",)
    assert got["sub_paused"]["interrupts"] == [{"ask": "detail?", "seen": "s1:tides"}]
    assert got["final"]["notes"] == ["prepare", "finish:s1:tides|s2:deep|s3"]
    assert got["calls"] == {"prepare": 1, "s1": 1, "s2": 2, "s3": 1, "finish": 1}
    assert got["sub_checkpoints"] > 0
    assert len(checkpoint_items(backend, "s", sub_ns)) == got["sub_checkpoints"]
    assert len(checkpoint_items(backend, "s", "")) == len(got["history"])


def test_parallel_branches_and_send(backend: Backend) -> None:
    """Static branches and Send tasks: same results, history and pending-write order as
    InMemorySaver, every task ran once."""
    got = scenario_fanout(backend.saver)
    assert got == scenario_fanout(shared(InMemorySaver()))
    assert got["final"]["results"] == ["X", "Y", "Z"]
    assert sorted(got["final"]["sides"]) == sorted(["plan", "left", "right", "join:3"])
    assert got["calls"] == {"plan": 1, "left": 1, "right": 1, "work": 3, "join": 1}


def test_failed_node_keeps_sibling_writes(backend: Backend) -> None:
    """When one parallel node fails, the sibling's writes are kept (visible from a new
    saver) and the sibling is not run again on resume."""
    got = scenario_failure(backend.saver)
    assert got == scenario_failure(shared(InMemorySaver()))
    assert got["calls_failed"] == {"ok": 1, "bad": 1}
    assert got["failed"]["next"] == ("bad",)
    errors = [t for t in got["failed"]["tasks"] if t[1]]
    assert [t[0] for t in errors] == ["bad"]
    assert "failed on purpose" in errors[0][1]
    latest_writes = got["failed_writes"][0]["writes"]
    assert ("log", ["ok"]) in [(ch, v) for _, ch, v in latest_writes]
    assert "__error__" in [ch for _, ch, _ in latest_writes]
    assert got["calls"] == {"ok": 1, "bad": 2, "join": 1}
    assert sorted(got["final"]["log"]) == sorted(["ok", "bad", "join:2"])


def test_delete_thread_removes_everything_of_that_thread_only(backend: Backend) -> None:
    """delete_thread removes a thread's index items and objects; a fresh saver sees it empty,
    and another thread is untouched and can still be resumed."""
    calls = Calls()
    graph = build_approval(backend.saver(), calls)
    # 30 KB, incompressible: an S3 blob too (small pieces may be chunk items)
    big_request = "#1 " + random.Random(1).randbytes(15_000).hex()
    graph.invoke({"request": big_request}, cfg("doomed"))
    graph.invoke({"request": "#2"}, cfg("kept"))
    kept_before = snapshot_summary(build_approval(backend.saver(), calls).get_state(cfg("kept")))
    kept_objects = thread_objects(backend, "kept")
    doomed_pk = encode_segment("doomed")
    assert checkpoint_items(backend, "doomed")
    assert [k for k in thread_objects(backend, "doomed") if "/b/" in k]

    backend.saver().delete_thread("doomed")

    assert thread_objects(backend, "doomed") == []
    assert not [i for i in backend.items() if i["pk"]["S"] == doomed_pk]
    assert thread_objects(backend, "kept") == kept_objects
    fresh = backend.saver()
    assert fresh.get_tuple(cfg("doomed")) is None
    assert list(fresh.list(cfg("doomed"))) == []
    reader = build_approval(backend.saver(), calls)
    assert reader.get_state(cfg("doomed")).values == {}
    assert snapshot_summary(reader.get_state(cfg("kept"))) == kept_before
    final = build_approval(backend.saver(), calls).invoke(Command(resume=False), cfg("kept"))
    assert final["outcome"] == "recorded rejected; did refund #2"
    # The deleted thread id can be used again from scratch.
    again = build_approval(backend.saver(), calls).invoke({"request": "#3"}, cfg("doomed"))
    assert again["draft"] == "refund #3"
    assert len(list(backend.saver().list(cfg("doomed")))) == 3


def test_uuid_thread_id_round_trips(backend: Backend) -> None:
    """A thread keyed by a uuid4 string is read back by a new saver under the same id."""
    saver: S3Saver = backend.saver()
    thread = str(uuid.uuid4())
    calls = Calls()
    build_linear(saver, calls).invoke({"n": 3}, cfg(thread))
    state = build_linear(backend.saver(), calls).get_state(cfg(thread))
    assert state.config["configurable"]["thread_id"] == thread
    assert state.values == {"n": 4, "log": ["a", "b4", "c"]}
