"""Containers whose clocks disagree: the committed lineage never depends on them agreeing.

LangGraph's checkpoint ids are uuid6 values taken from the writing process's clock,
and "the latest" is the greatest id. Each test plays two containers in one process
by giving LangGraph's id generator a clock offset (and forgetting its monotonic
memory when the "container" changes).

The clock is simulated: it moves a millisecond each time an id is made and
otherwise only when a test says time passes. On the wall clock, what a test does
between two "containers" (new clients, reading the history) takes over a second on
a loaded machine, and that time would eat into the skew being played: 1.2 s after
the head, a container 1 s behind makes ids above it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.base import id as lg_id
from langgraph.types import Command

from langgraph_s3 import ClockSkewError
from tests.conftest import Backend
from tests.graphs.test_graphs import Calls, cfg
from tests.storage.test_concurrency import build_gated

SKEWS = [0.0, 0.05, 0.25, 1.0, 10.0]


class Clock:
    """The clock LangGraph's uuid6 reads, with an offset per simulated container.

    It starts at the wall clock's time and moves ``STEP_NS`` each time it is read.
    """

    STEP_NS = 1_000_000

    def __init__(self) -> None:
        self.now_ns = time.time_ns()
        self.offset = 0.0

    def time_ns(self) -> int:
        self.now_ns += self.STEP_NS
        return self.now_ns + int(self.offset * 1e9)

    def container(self, offset: float) -> None:
        self.offset = offset
        lg_id._last_v6_timestamp = None  # a new process has no memory of ids it made


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    fake = Clock()
    monkeypatch.setattr(lg_id, "time", fake)
    yield fake
    lg_id._last_v6_timestamp = None


def history(saver: Any, thread: str) -> list[Any]:
    return list(saver.list(cfg(thread)))


def assert_one_ordered_chain(saver: Any, thread: str) -> None:
    """Newest first, each checkpoint's parent is the next one: no fork, no inversion."""
    tuples = history(saver, thread)
    ids = [t.config["configurable"]["checkpoint_id"] for t in tuples]
    assert ids == sorted(ids, reverse=True)
    parents = [
        t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        for t in tuples
    ]
    assert parents == [*ids[1:], None]


@pytest.mark.parametrize("skew", SKEWS)
@pytest.mark.parametrize("behind", ["resumer-behind", "writer-ahead"])
def test_resume_on_a_skewed_clock_is_refused_before_writing_then_succeeds(
    backend: Backend, clock: Clock, skew: float, behind: str
) -> None:
    """A container whose ids would sort below the head it resumes is told to retry
    (nothing written); once its clock has passed the head's, the same resume commits."""
    thread = f"skew-{behind}-{skew}"
    calls = Calls()
    writer_offset, resumer_offset = (0.0, -skew) if behind == "resumer-behind" else (skew, 0.0)

    clock.container(writer_offset)
    build_gated(backend.saver(), calls, None).invoke({"request": "r"}, cfg(thread))
    paused = history(backend.saver(), thread)

    clock.container(resumer_offset)
    resumer = build_gated(backend.saver(), calls, None)
    try:
        out = resumer.invoke(Command(resume="ann"), cfg(thread), durability="sync")
        refused = None
    except ClockSkewError as exc:
        refused = exc
    # The resume's own time (a few ids, a millisecond each) covers none of the skews.
    assert (refused is not None) == (skew > 0)
    if refused is not None:
        assert refused.retry_after is not None and 0 < refused.retry_after < skew + 1.0
        after = history(backend.saver(), thread)
        assert [t.checkpoint["id"] for t in after] == [t.checkpoint["id"] for t in paused]
        assert calls["act"] == 0
        clock.container(resumer_offset + refused.retry_after)  # time passes
        out = build_gated(backend.saver(), calls, None).invoke(
            Command(resume="ann"), cfg(thread), durability="sync"
        )

    assert out["outcome"] == "refund r (approved by ann)"
    assert calls["act"] == 1
    assert_one_ordered_chain(backend.saver(), thread)
    state = build_gated(backend.saver(), calls, None).get_state(cfg(thread))
    assert state.next == () and state.values["outcome"] == out["outcome"]


@pytest.mark.parametrize("skew", [1.0, 10.0])
def test_fork_on_a_clock_behind_does_not_strand_the_thread(
    backend: Backend, clock: Clock, skew: float
) -> None:
    """update_state from an old snapshot on a clock behind the head commits the fork
    beside the head without moving it (as InMemorySaver with those ids would not
    make it the latest), and the thread stays resumable from its latest checkpoint."""
    thread = f"fork-behind-{skew}"
    calls = Calls()
    clock.container(0.0)
    graph = build_gated(backend.saver(), calls, None)
    graph.invoke({"request": "r"}, cfg(thread))
    first = history(backend.saver(), thread)
    head = first[0].checkpoint["id"]

    clock.container(-skew)
    build_gated(backend.saver(), calls, None).update_state(first[1].config, {"request": "edited"})
    assert len(history(backend.saver(), thread)) == len(first) + 1
    latest = backend.saver().get_tuple(cfg(thread))
    assert latest is not None and latest.checkpoint["id"] == head

    clock.container(0.0)
    out = build_gated(backend.saver(), calls, None).invoke(
        Command(resume="ann"), cfg(thread), durability="sync"
    )
    assert out["outcome"] == "refund r (approved by ann)"
    assert calls["act"] == 1
