"""``get_delta_channel_history`` equals InMemorySaver's in every namespace of a thread.

tests/storage/test_thread_ops.py compares the root namespace at every checkpoint (forks by
``update_state`` and replay, snapshots, deleted runs, walks over several index
pages, after prune and copy). This adds what it does not reach: subgraph
namespaces (each paused on ``interrupt()`` and resumed, one forked from an older
root checkpoint), and the read of the latest checkpoint of a namespace (a config
without ``checkpoint_id``), on the same program run on both savers.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests.conftest import Backend
from tests.graphs.test_graphs import cfg
from tests.storage.test_thread_ops import DELTA_CHANNELS, build_delta_nested, delta_histories, turn


def program(saver: Any) -> None:
    """Two runs of a nested delta graph, each paused in its subgraph and resumed, then
    a fork from the first run's end that pauses in a new subgraph namespace."""
    graph = build_delta_nested(saver)
    for i in range(2):
        graph.invoke(turn(i), cfg("n"))
        graph.invoke(Command(resume=f"ok{i}"), cfg("n"))
    history = list(graph.get_state_history(cfg("n")))
    first_end = next(s for s in reversed(history) if s.metadata.get("step") == 3)
    graph.invoke(turn(7), first_end.config)


def by_namespace(saver: Any) -> list[list[RunnableConfig]]:
    """Every checkpoint config of thread ``n``, grouped by namespace (namespaces in
    the order they were created, checkpoints newest first): the same program gives
    the same shape on both savers, though ids and task ids differ."""
    groups: dict[str, list[RunnableConfig]] = {}
    for tup in saver.list(cfg("n")):
        groups.setdefault(tup.config["configurable"]["checkpoint_ns"], []).append(tup.config)
    for configs in groups.values():
        configs.sort(key=lambda c: c["configurable"]["checkpoint_id"], reverse=True)
    return sorted(groups.values(), key=lambda cs: cs[-1]["configurable"]["checkpoint_id"])


def latest_of(configs: list[RunnableConfig]) -> RunnableConfig:
    """The config of a namespace's latest checkpoint, without its id."""
    conf = configs[0]["configurable"]
    return {
        "configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": conf["checkpoint_ns"]}
    }


def test_delta_history_matches_in_memory_in_every_namespace(inproc_backend: Backend) -> None:
    twin = InMemorySaver()
    program(inproc_backend.saver())
    program(twin)
    saver = inproc_backend.saver()
    ours, theirs = by_namespace(saver), by_namespace(twin)
    assert [len(cs) for cs in ours] == [len(cs) for cs in theirs]
    assert len(ours) == 4  # the root and three subgraph runs
    every = list(DELTA_CHANNELS)
    for mine, twins in zip(ours, theirs, strict=True):
        got = delta_histories(saver, mine, [every] * len(mine))
        assert got == delta_histories(twin, twins, [every] * len(twins))
        # A namespace's history is not trivially empty: some writes are replayed.
        assert any(h["log"]["writes"] for h in got)
        assert delta_histories(saver, [latest_of(mine)], [every]) == delta_histories(
            twin, [latest_of(twins)], [every]
        )
