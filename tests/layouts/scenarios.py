"""The threads a layout fixture holds: how each was written, and how it goes on.

Every scenario has a ``before`` part, run by the release whose layout the fixture
keeps (``python -m tests.layouts.write``), and an ``after`` part, run by today's
code on the loaded fixture. ``reference`` runs both parts on ``InMemorySaver``: what
``after`` returns from the fixture must equal what it returns there, so an old
thread reads, resumes, forks and lists as if it had never left memory.

The graphs come from ``tests.graphs.test_graphs``; the fixtures were written with
them as they are, so a change to their nodes or state is a change to these
scenarios (the fixture tests then fail and the fixtures must be rewritten by the
old release, never by hand).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command

from tests.graphs.test_graphs import (
    Aliases,
    Calls,
    build_approval,
    build_failing,
    build_fanout,
    build_nested,
    cfg,
    history_summary,
    norm,
    snapshot_summary,
    writes_summary,
)

Make = Callable[[], Any]
#: ~30 KB: the request, the draft and the outcome are stored as blobs.
BIG_REQUEST = "#91 " + " ".join(f"item-{i:05d}" for i in range(2_800))


@dataclass(frozen=True)
class Scenario:
    thread: str
    before: Callable[[Make], None]
    after: Callable[[Make], dict[str, Any]]
    #: the first layout whose fixture holds this thread: older fixtures were written
    #: before the scenario existed (their recorded ``threads`` leave it out)
    since: int = 1


# ------------------------------------------------------------------ approval
def approval_before(make: Make) -> None:
    build_approval(make(), Calls()).invoke({"request": BIG_REQUEST}, cfg("approval"))


def approval_after(make: Make) -> dict[str, Any]:
    """Inspect the paused thread, resume it, then fork it before the approval."""
    calls = Calls()
    graph = build_approval(make(), calls)
    out: dict[str, Any] = {"paused": snapshot_summary(graph.get_state(cfg("approval")))}
    out["paused_history"] = history_summary(graph.get_state_history(cfg("approval")))
    out["final"] = build_approval(make(), calls).invoke(Command(resume=True), cfg("approval"))
    graph = build_approval(make(), calls)
    before_approval = next(
        s for s in graph.get_state_history(cfg("approval")) if s.next == ("approval",)
    )
    forked = graph.update_state(before_approval.config, {"draft": "refund a smaller amount"})
    # the interrupt in the result has a random id
    out["fork_paused"] = norm(build_approval(make(), calls).invoke(None, forked), Aliases())
    out["fork_final"] = build_approval(make(), calls).invoke(Command(resume=False), forked)
    out["history"] = history_summary(graph.get_state_history(cfg("approval")))
    out["writes"] = writes_summary(make(), cfg("approval", checkpoint_ns=""))
    out["calls"] = dict(calls.counts)
    return out


# -------------------------------------------------------------------- nested
def nested_before(make: Make) -> None:
    build_nested(make(), Calls()).invoke({"topic": "tides", "notes": []}, cfg("nested"))


def nested_after(make: Make) -> dict[str, Any]:
    """A thread paused inside a subgraph: its child namespace is read and resumed."""
    calls = Calls()
    graph = build_nested(make(), calls)
    paused = graph.get_state(cfg("nested"), subgraphs=True)
    out: dict[str, Any] = {
        "paused": snapshot_summary(paused),
        "child": snapshot_summary(paused.tasks[0].state),
        "final": build_nested(make(), calls).invoke(Command(resume="deep"), cfg("nested")),
        "history": history_summary(graph.get_state_history(cfg("nested"))),
        "calls": dict(calls.counts),
    }
    return out


def unordered(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``writes_summary`` with each checkpoint's writes as a multiset.

    LangGraph emits a node's branch writes (``branch:to:ok``, ``branch:to:bad``) in
    set order, which depends on the hash seed of the process that ran it: the
    fixture's writer or this one. Write order is checked where one process writes
    and reads (tests/graphs/test_differential.py).
    """
    return [{**c, "writes": sorted(c["writes"], key=repr)} for c in summary]


# ------------------------------------------------------------------- failing
def failing_before(make: Make) -> None:
    with pytest.raises(RuntimeError, match="failed on purpose"):
        build_failing(make(), Calls(), {"bad": True}).invoke({"log": []}, cfg("failing"))


def failing_after(make: Make) -> dict[str, Any]:
    """A failed step whose sibling's writes were kept: the resume does not re-run it."""
    calls = Calls()
    fixed = {"bad": False}
    out: dict[str, Any] = {
        "failed": snapshot_summary(build_failing(make(), calls, fixed).get_state(cfg("failing"))),
        "failed_writes": unordered(writes_summary(make(), cfg("failing", checkpoint_ns=""))),
        "final": build_failing(make(), calls, fixed).invoke(None, cfg("failing")),
    }
    graph = build_failing(make(), calls, fixed)
    out["history"] = history_summary(graph.get_state_history(cfg("failing")))
    out["calls"] = dict(calls.counts)
    return out


# -------------------------------------------------------------------- fanout
def fanout_before(make: Make) -> None:
    build_fanout(make(), Calls()).invoke({"items": ["a", "b", "c"]}, cfg("fanout"))


def fanout_after(make: Make) -> dict[str, Any]:
    """A finished thread: replayed from its first step with new input."""
    calls = Calls()
    graph = build_fanout(make(), calls)
    first = list(graph.get_state_history(cfg("fanout")))[-1]
    forked = graph.update_state(first.config, {"items": ["x", "y"]})
    out: dict[str, Any] = {
        "writes": unordered(writes_summary(make(), cfg("fanout", checkpoint_ns=""))),
        "final": build_fanout(make(), calls).invoke(None, forked),
        "history": history_summary(graph.get_state_history(cfg("fanout"))),
        "calls": dict(calls.counts),
    }
    return out


# -------------------------------------------------------------------- direct
def words(seed: str, n: int) -> str:
    """``n`` characters of incompressible-ish text, the same on every machine."""
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz     ") for _ in range(n))


def direct_states() -> list[dict[str, Any]]:
    """The channel values of the direct thread's three checkpoints.

    The first two are written by the old release: a 200 KB document (chunked blobs)
    beside 30 small channels (a checkpoint body too large for the index, so an S3
    object). The third is written by today's code on top of them.
    """
    small = {f"s{i:02d}": words(f"small-{i}", 300) for i in range(30)}
    doc = words("doc", 200_000)
    return [
        {"doc": doc, **small},
        {"doc": doc + words("doc+1", 3_000), **small, "s00": "changed"},
        {"doc": doc + words("doc+1", 3_000) + words("doc+2", 5_000), **small, "s00": "again"},
    ]


def put_state(
    saver: Any, config: dict[str, Any], state: dict[str, Any], step: int, author: str = "step"
) -> Any:
    """Put the next checkpoint of the direct thread: ``state`` after ``config``'s.

    Its metadata says ``author``: ``{author}-{step}``. The direct thread's filtered
    ``list`` spans every thread of the fixture, so other threads must use another.
    """
    parent = saver.get_tuple(config) if config["configurable"].get("checkpoint_id") else None
    old = parent.checkpoint if parent else empty_checkpoint()
    versions = dict(old["channel_versions"])
    new_versions = {}
    for name, value in state.items():
        if parent is None or old["channel_values"].get(name) != value:
            versions[name] = new_versions[name] = saver.get_next_version(versions.get(name), None)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(state)
    checkpoint["channel_versions"] = versions
    checkpoint["updated_channels"] = sorted(new_versions)
    metadata = {"source": "loop", "step": step, "parents": {}, "author": f"{author}-{step}"}
    return saver.put(config, checkpoint, metadata, new_versions)


def direct_before(make: Make) -> None:
    saver = make()
    config: Any = cfg("direct", checkpoint_ns="")
    first, second, _ = direct_states()
    config = put_state(saver, config, first, 0)
    # a pending write large enough for a blob, one inline, one special
    saver.put_writes(config, [("doc_edit", words("edit", 40_000)), ("note", "hi")], "task-1")
    saver.put_writes(config, [("__error__", ValueError("boom"))], "task-2")
    put_state(saver, config, second, 1)


def direct_after(make: Make) -> dict[str, Any]:
    """Read the old checkpoints and their writes, then continue the thread."""
    saver = make()
    listed = list(saver.list(cfg("direct", checkpoint_ns="")))
    out: dict[str, Any] = {
        "listed": [
            (t.checkpoint["channel_values"], t.metadata, _writes(t.pending_writes)) for t in listed
        ],
        "filtered": [t.metadata["step"] for t in saver.list(None, filter={"author": "step-0"})],
    }
    latest = saver.get_tuple(cfg("direct", checkpoint_ns=""))
    put_state(saver, latest.config, direct_states()[2], 2)
    again = make().get_tuple(cfg("direct", checkpoint_ns=""))
    out["continued"] = again.checkpoint["channel_values"]
    out["parent_is_old_latest"] = again.parent_config == latest.config
    out["limited"] = [t.metadata["step"] for t in make().list(cfg("direct"), limit=2)]
    out["before"] = [t.metadata["step"] for t in make().list(cfg("direct"), before=again.config)]
    return out


def _writes(writes: list[Any]) -> list[Any]:
    return [(task, ch, repr(v) if isinstance(v, Exception) else v) for task, ch, v in writes]


# --------------------------------------------------------------------- lists
def lists_states() -> list[dict[str, Any]]:
    """The channel values of the lists thread's five checkpoints.

    ``doc`` is 1.6 MB, about 79 chunks: more than 64, so layout 3 stores its entry
    as a chunk list. It is a numbered item list (the same on every machine, and it
    compresses 20-fold, so the fixture stays small); what decides a list is the
    number of chunks, not how well they compress. The first three checkpoints are
    written by the old release, the last two by today's code on top of them: one
    that keeps the document (its body names the old list), one that edits it.
    """
    doc = " ".join(f"item-{i:07d}" for i in range(123_000))
    edited = doc[:600_000] + words("edit-1", 30_000) + doc[630_000:]
    again = words("edit-2", 20_000) + edited[20_000:] + words("tail", 40_000)
    return [
        {"title": "empty"},
        {"title": "draft", "doc": doc},
        {"title": "edited", "doc": edited},
        {"title": "renamed", "doc": edited},
        {"title": "again", "doc": again},
    ]


def lists_before(make: Make) -> None:
    """Two writes of a document with more than 64 chunks, each taken up by a checkpoint.

    On 0.3.0: each write's record names a chunk list packed with its new chunks, and
    the next checkpoint's body (in the index) names the same list; the second list
    names chunks of the first pack beside its own.
    """
    saver = make()
    config: Any = cfg("lists", checkpoint_ns="")
    states = lists_states()
    config = put_state(saver, config, states[0], 0, author="lists")
    for step, state in enumerate(states[1:3], start=1):
        saver.put_writes(config, [("doc", state["doc"]), ("note", f"edit {step}")], "task-1")
        config = put_state(saver, config, state, step, author="lists")


def lists_after(make: Make) -> dict[str, Any]:
    """Read the old checkpoints and their writes, then edit the document again."""
    saver = make()
    listed = list(saver.list(cfg("lists", checkpoint_ns="")))
    out: dict[str, Any] = {
        "listed": [
            (_digests(t.checkpoint["channel_values"]), t.metadata, _digest_writes(t.pending_writes))
            for t in listed
        ],
        "filtered": [t.metadata["step"] for t in saver.list(None, filter={"author": "lists-1"})],
    }
    latest = saver.get_tuple(cfg("lists", checkpoint_ns=""))
    states = lists_states()
    renamed = put_state(saver, latest.config, states[3], 3, author="lists")
    saver.put_writes(renamed, [("doc", states[1]["doc"])], "task-2")
    put_state(saver, renamed, states[4], 4, author="lists")
    read = make().get_tuple(renamed)
    out["renamed"] = (
        _digests(read.checkpoint["channel_values"]),
        _digest_writes(read.pending_writes),
    )
    out["parent_is_old_latest"] = read.parent_config == latest.config
    again = make().get_tuple(cfg("lists", checkpoint_ns=""))
    out["continued"] = _digests(again.checkpoint["channel_values"])
    out["parent_is_renamed"] = again.parent_config == renamed
    out["history"] = [
        (t.metadata["step"], _digests(t.checkpoint["channel_values"]))
        for t in make().list(cfg("lists"))
    ]
    return out


def _digests(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with long strings replaced by their length and SHA-256 (short diffs)."""
    return {
        k: (len(v), hashlib.sha256(v.encode()).hexdigest())
        if isinstance(v, str) and len(v) > 1000
        else v
        for k, v in values.items()
    }


def _digest_writes(writes: list[Any]) -> list[Any]:
    return [(task, ch, *_digests({"v": v}).values()) for task, ch, v in writes]


# ---------------------------------------------------------------------- chat
class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


#: Turns the old release writes: the message list passes the 16 KiB inline threshold
#: after about nine, so the later turns' writes (0.10.0 on) are pieces.
CHAT_TURNS = 14


def chat_graph(saver: Any) -> Any:
    """One node answering every user message, over a message list."""

    def answer(state: ChatState) -> dict[str, Any]:
        turn = sum(1 for m in state["messages"] if m.type == "human")
        text = words(f"ai-{turn}", 300 + (97 * turn) % 1200)
        return {"messages": [AIMessage(content=text, id=f"ai-{turn}")]}

    builder = StateGraph(ChatState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    return builder.compile(checkpointer=saver)


def chat_input(turn: int) -> dict[str, Any]:
    text = words(f"user-{turn}", 300 + (53 * turn) % 1200)
    return {"messages": [HumanMessage(content=text, id=f"user-{turn}")]}


def chat_before(make: Make) -> None:
    graph = chat_graph(make())
    for turn in range(CHAT_TURNS):
        graph.invoke(chat_input(turn), cfg("chat"))


def chat_after(make: Make) -> dict[str, Any]:
    """Four more turns (today's code stores their inputs as pieces), a replay from an
    input the old release wrote, an ``update_state`` on one today's code wrote, and a
    turn after them: the history and every checkpoint's values and writes, cold."""
    graph = chat_graph(make())
    for turn in range(CHAT_TURNS, CHAT_TURNS + 4):
        graph.invoke(chat_input(turn), cfg("chat"))
    inputs = [s for s in graph.get_state_history(cfg("chat")) if s.metadata["source"] == "input"]
    graph.invoke(None, inputs[6].config)
    graph.update_state(inputs[1].config, {"messages": [HumanMessage("edited", id="edited")]})
    graph.invoke(chat_input(99), cfg("chat"))
    return {
        "history": history_summary(chat_graph(make()).get_state_history(cfg("chat"))),
        "writes": writes_summary(make(), cfg("chat")),
    }


SCENARIOS = [
    Scenario("approval", approval_before, approval_after),
    Scenario("nested", nested_before, nested_after),
    Scenario("failing", failing_before, failing_after),
    Scenario("fanout", fanout_before, fanout_after),
    Scenario("direct", direct_before, direct_after),
    Scenario("lists", lists_before, lists_after, since=3),
    Scenario("chat", chat_before, chat_after, since=9),
]


def reference(scenario: Scenario) -> dict[str, Any]:
    """What ``after`` returns when the whole thread lived in ``InMemorySaver``."""
    saver = InMemorySaver()
    scenario.before(lambda: saver)
    return scenario.after(lambda: saver)
