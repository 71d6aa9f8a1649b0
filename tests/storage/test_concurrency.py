"""Two runs resuming the same interrupted thread at once: one commits, the other is refused.

The race is made deterministic with a ``threading.Barrier`` inside the node that runs
after the resume: both runs have read the latest checkpoint (the interrupted one)
before either can commit the next. ``durability="sync"`` makes each checkpoint commit
before the next superstep, so the loser is stopped before the side-effecting node.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command, interrupt

from langgraph_s3 import CheckpointConflictError, continuation
from tests.conftest import Backend
from tests.graphs.test_graphs import (
    ApprovalState,
    Calls,
    cfg,
)

BARRIER_TIMEOUT = 30.0


def build_gated(checkpointer: Any, calls: Calls, gate: Callable[[], object] | None) -> Any:
    """draft -> approval (interrupt; ``gate`` runs once the answer arrives) -> act.

    ``act`` is the side effect; it runs in the superstep after the checkpoint that records
    the decision, as docs/concurrency.md prescribes.
    """
    from langgraph.graph import END, START, StateGraph

    def draft(state: ApprovalState) -> ApprovalState:
        calls.hit("draft")
        return {"draft": f"refund {state['request']}"}

    def approval(state: ApprovalState) -> ApprovalState:
        calls.hit("approval")
        answer = interrupt({"question": "approve?"})
        if gate is not None:
            gate()  # both resumed runs are here: both read the head, neither committed
        return {"decision": f"approved by {answer}"}

    def act(state: ApprovalState) -> ApprovalState:
        calls.hit("act")
        return {"outcome": f"{state['draft']} ({state['decision']})"}

    builder = StateGraph(ApprovalState)
    builder.add_node("draft", draft)
    builder.add_node("approval", approval)
    builder.add_node("act", act)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approval")
    builder.add_edge("approval", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=checkpointer)


def run_together(jobs: list[Callable[[], Any]]) -> list[tuple[str, Any]]:
    """Run ``jobs`` in threads at once; return ("ok", result) or ("error", exception)."""
    out: list[tuple[str, Any]] = [("missing", None)] * len(jobs)

    def runner(i: int, job: Callable[[], Any]) -> None:
        try:
            out[i] = ("ok", job())
        except BaseException as exc:
            out[i] = ("error", exc)

    threads = [threading.Thread(target=runner, args=(i, j)) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BARRIER_TIMEOUT * 2)
        assert not t.is_alive(), "a run hung"
    return out


def parents_of(graph: Any, config: RunnableConfig) -> dict[str, str | None]:
    """checkpoint id -> parent id for the whole (root namespace) history."""
    return {
        s.config["configurable"]["checkpoint_id"]: (
            s.parent_config["configurable"]["checkpoint_id"] if s.parent_config else None
        )
        for s in graph.get_state_history(config)
    }


def assert_linear(parents: dict[str, str | None]) -> None:
    """One root, and no checkpoint has two children: the lineage never forked."""
    assert list(parents.values()).count(None) == 1
    children = Counter(p for p in parents.values() if p is not None)
    assert all(n == 1 for n in children.values()), children


def race(backend: Backend, make_pair: Callable[[], tuple[Any, Any]], thread: str) -> None:
    """Interrupt ``thread``, resume it twice at once, and check the outcome."""
    calls = Calls()
    build_gated(backend.saver(), calls, None).invoke({"request": "#42"}, cfg(thread))
    paused = build_gated(backend.saver(), calls, None).get_state(cfg(thread))
    assert paused.next == ("approval",)
    head = paused.config["configurable"]["checkpoint_id"]

    barrier = threading.Barrier(2, timeout=BARRIER_TIMEOUT)
    first, second = make_pair()
    graphs = [build_gated(s, calls, barrier.wait) for s in (first, second)]
    results = run_together(
        [
            lambda g=g, who=who: g.invoke(Command(resume=who), cfg(thread), durability="sync")
            for g, who in zip(graphs, ("alice", "bob"), strict=True)
        ]
    )

    kinds = sorted(kind for kind, _ in results)
    assert kinds == ["error", "ok"], results
    (winner,) = [r for kind, r in results if kind == "ok"]
    (error,) = [r for kind, r in results if kind == "error"]
    assert isinstance(error, CheckpointConflictError), repr(error)
    assert error.thread_id == thread
    assert error.checkpoint_ns == ""
    assert error.expected == head
    assert error.actual is not None and error.actual != head
    assert "reload" in str(error)

    # Both resumed and ran the approval node; only the winner reached the side effect.
    assert calls["approval"] == 3
    assert calls["act"] == 1
    who = winner["decision"].removeprefix("approved by ")
    assert winner["outcome"] == f"refund #42 (approved by {who})"

    reader = build_gated(backend.saver(), calls, None)
    final = reader.get_state(cfg(thread))
    assert final.next == ()
    assert final.values == winner
    parents = parents_of(reader, cfg(thread))
    assert_linear(parents)
    assert Counter(parents.values())[head] == 1
    assert error.actual in parents

    # A deliberate fork from the interrupted checkpoint still commits afterwards ...
    forked = reader.update_state(paused.config, {"draft": "refund half of #42"})
    assert parents_of(reader, cfg(thread))[forked["configurable"]["checkpoint_id"]] == head
    fork_result = build_gated(backend.saver(), calls, None).invoke(
        Command(resume="carol"), forked, durability="sync"
    )
    assert fork_result["outcome"] == "refund half of #42 (approved by carol)"
    assert calls["act"] == 2
    # ... and so does a replay from an explicit earlier checkpoint id.
    before_approval = next(s for s in reader.get_state_history(cfg(thread)) if s.next == ("draft",))
    replayed = build_gated(backend.saver(), calls, None).invoke(
        None, before_approval.config, durability="sync"
    )
    assert replayed["draft"] == "refund #42"
    after = parents_of(build_gated(backend.saver(), calls, None), cfg(thread))
    assert Counter(after.values())[head] == 2  # the winner's child and the fork


def test_two_containers_resume_same_thread(backend: Backend) -> None:
    """Two savers (two Lambda containers) resume the same interrupted thread at once:
    exactly one completes, the other raises CheckpointConflictError, the side effect ran
    once, the history did not fork, and a deliberate fork afterwards still works."""
    race(backend, lambda: (backend.saver(), backend.saver()), "webhook-twice")


def test_one_saver_shared_by_two_threads(backend: Backend) -> None:
    """The same saver instance resuming one thread from two Python threads at once is
    protected the same way."""
    shared = backend.saver()
    race(backend, lambda: (shared, shared), "shared-saver")


def test_new_thread_started_twice(backend: Backend) -> None:
    """Two runs starting the same brand-new thread with ``continuation``: one commits,
    one is refused."""
    barrier = threading.Barrier(2, timeout=BARRIER_TIMEOUT)
    observed: list[Any] = []
    config = continuation(cfg("new"))

    def start(saver: Any) -> Any:
        observed.append(saver.get_tuple(config))  # the run's "give me the latest"
        barrier.wait()
        cp = empty_checkpoint()
        return saver.put(config, cp, {"source": "input", "step": -1}, {})

    results = run_together([lambda: start(backend.saver()), lambda: start(backend.saver())])
    assert observed == [None, None]
    assert sorted(kind for kind, _ in results) == ["error", "ok"], results
    (error,) = [r for kind, r in results if kind == "error"]
    assert isinstance(error, CheckpointConflictError)
    assert error.expected is None
    assert len(list(backend.saver().list(cfg("new")))) == 1


def test_new_thread_started_twice_without_continuation_forks_like_in_memory(
    backend: Backend,
) -> None:
    """Without ``continuation`` two starts of one new thread both commit, as with
    InMemorySaver: a plain start is not a continuation of anything."""
    saver = backend.saver()
    assert saver.get_tuple(cfg("plain")) is None
    assert backend.saver().get_tuple(cfg("plain")) is None
    saver.put(cfg("plain"), empty_checkpoint(), {"source": "input", "step": -1}, {})
    backend.saver().put(cfg("plain"), empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert len(list(backend.saver().list(cfg("plain")))) == 2


def test_retried_put_of_committed_checkpoint_succeeds(backend: Backend) -> None:
    """Re-putting a checkpoint that already committed (a retried request) succeeds and
    leaves one checkpoint, while a different continuation from the same parent is refused."""
    saver = backend.saver()
    root = saver.put(cfg("retry"), empty_checkpoint(), {"source": "input", "step": -1}, {})
    # A run that read the latest (root) carries that read into its puts: the put
    # below and its retry are both guarded continuations of root.
    run = saver.get_tuple(cfg("retry"))
    assert run is not None
    run_config = {**run.config, "configurable": {**run.config["configurable"]}}
    child = empty_checkpoint()
    committed = saver.put(run_config, child, {"source": "loop", "step": 0}, {})
    again = saver.put(run_config, child, {"source": "loop", "step": 0}, {})
    assert again == committed
    assert len(list(saver.list(cfg("retry")))) == 2

    late = backend.saver().get_tuple(cfg("retry"))
    assert late is not None
    assert late.config["configurable"]["checkpoint_id"] == child["id"]
    # Another run continues `child` first: the late run's continuation is refused.
    backend.saver().put(committed, empty_checkpoint(), {"source": "loop", "step": 1}, {})
    with pytest.raises(CheckpointConflictError):
        backend.saver().put(late.config, empty_checkpoint(), {"source": "loop", "step": 1}, {})
    # A fork from an explicit id is never refused, also with the config of an exact read
    # made from a config that carried an old read of the latest.
    exact = backend.saver().get_tuple({"configurable": {**late.config["configurable"]}})
    assert exact is not None
    backend.saver().put(exact.config, empty_checkpoint(), {"source": "fork", "step": 1}, {})
    backend.saver().put(root, empty_checkpoint(), {"source": "fork", "step": 0}, {})
    assert len(list(backend.saver().list(cfg("retry")))) == 5
