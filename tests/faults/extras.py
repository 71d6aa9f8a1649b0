"""The scenarios beside the call-by-call sweep that run many savers at once: throttling
and racing resumes (damaged storage is in ``damage``, ``kill -9`` in ``kill``)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from langgraph.types import Command

from langgraph_s3 import CheckpointConflictError
from tests.conftest import Backend
from tests.faults.cases import verdict_async, verdict_sync
from tests.faults.checks import Acks, Verdict, history, judge
from tests.faults.env import async_saver, sync_saver
from tests.faults.graph import INPUT, RESUME, Effects, adrive, build, cfg, drive
from tests.faults.inject import Throttler, client_config


def run_together(jobs: list[Any], timeout: float = 900.0) -> list[tuple[str, Any]]:
    """Run ``jobs`` in threads at once: ("ok", result) or ("error", exception) each.

    Like tests/storage/test_concurrency.run_together, with a bound for 20 slow runs on a
    loaded 2-core machine (60 s was not enough for the full profile's throttling).
    """
    out: list[tuple[str, Any]] = [("error", TimeoutError("did not finish"))] * len(jobs)

    def runner(i: int) -> None:
        try:
            out[i] = ("ok", jobs[i]())
        except BaseException as exc:
            out[i] = ("error", exc)

    threads = [threading.Thread(target=runner, args=(i,), daemon=True) for i in range(len(jobs))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return out


BARRIER_TIMEOUT = 60.0


# ------------------------------------------------------------------ throttling
def _throttle_figures(
    throttlers: list[Throttler], results: list[tuple[str, Any]], verdicts: list[Verdict]
) -> dict[str, Any]:
    return {
        "threads": len(throttlers),
        "attempts": sum(t.attempts for t in throttlers),
        "throttled": sum(t.throttled for t in throttlers),
        "completed": sum(1 for k, _ in results if k == "ok"),
        "identical": sum(v.identical for v in verdicts),
        "bad": sum(not v.ok for v in verdicts),
        "errors": [repr(r)[:300] for k, r in results if k != "ok"],
    }


def throttled_threads(
    backend: Backend, threads: int, seed: int, reference: Any, effects: Effects
) -> dict[str, Any]:
    """``threads`` threads run the graph at once, each through its own saver whose
    clients get a throttling error on a seeded 30% of attempts (retries on, 10 attempts)."""
    throttlers = [Throttler(seed=seed * 1000 + i) for i in range(threads)]
    acks = Acks()
    names = [f"throttle-{seed}-{i}" for i in range(threads)]
    savers = [
        sync_saver(backend, client_config(True, attempts=10), t, acks=acks) for t in throttlers
    ]
    results = run_together(
        [lambda s=s, n=n: drive(build(s, effects), n) for s, n in zip(savers, names, strict=True)]
    )
    verdicts = [
        verdict_sync(backend, n, r if k == "ok" else None, reference, acks, effects)
        for (k, r), n in zip(results, names, strict=True)
    ]
    return _throttle_figures(throttlers, results, verdicts)


async def athrottled_threads(
    backend: Backend, threads: int, seed: int, reference: Any, effects: Effects
) -> dict[str, Any]:
    """The same with AsyncS3Savers over HTTP, ``threads`` runs at once on one event loop
    (the same seeds, so the same share of attempts is throttled)."""
    throttlers = [Throttler(seed=seed * 1000 + i) for i in range(threads)]
    acks = Acks()
    names = [f"athrottle-{seed}-{i}" for i in range(threads)]

    async def one(throttler: Throttler, thread: str) -> tuple[str, Any]:
        config = client_config(True, attempts=10)
        async with async_saver(backend, config, throttler, acks=acks) as saver:
            try:
                return ("ok", await adrive(build(saver, effects), thread))
            except Exception as exc:
                return ("error", exc)

    results = list(await asyncio.gather(*map(one, throttlers, names)))
    verdicts = [
        await verdict_async(backend, n, r if k == "ok" else None, reference, acks, effects)
        for (k, r), n in zip(results, names, strict=True)
    ]
    return _throttle_figures(throttlers, results, verdicts)


# --------------------------------------------------------------------- races
def _race_outcome(
    results: list[tuple[str, Any]], final: Any, reference: Any, effects: Effects, thread: str
) -> dict[str, Any]:
    refused = [r for k, r in results if k == "error" and isinstance(r, CheckpointConflictError)]
    return {
        "racers": len(results),
        "commits": sum(1 for k, _ in results if k == "ok"),
        "refused": len(refused),
        "other_errors": [repr(r)[:300] for k, r in results
                         if k == "error" and not isinstance(r, CheckpointConflictError)],
        "side_effects": effects.executions(thread),
        "identical": final == reference,
    }  # fmt: skip


def race_sync(backend: Backend, racers: int, reference: Any, effects: Effects) -> dict[str, Any]:
    """``racers`` fresh S3Savers resume one interrupted thread at once (a barrier holds
    every run inside the approval node until all have read the head)."""
    thread = f"race-sync-{racers}"
    build(sync_saver(backend, client_config(True)), effects).invoke(
        INPUT, cfg(thread), durability="sync"
    )
    barrier = threading.Barrier(racers, timeout=BARRIER_TIMEOUT)
    graphs = [
        build(sync_saver(backend, client_config(True)), effects, barrier.wait)
        for _ in range(racers)
    ]
    results = run_together(
        [lambda g=g: g.invoke(Command(resume=RESUME), cfg(thread), durability="sync")
         for g in graphs]
    )  # fmt: skip
    checker = sync_saver(backend, client_config(True))
    final = drive(build(checker, effects), thread)
    out = _race_outcome(results, final, reference, effects, thread)
    v = judge(
        history(checker, thread), checker.get_tuple, final, reference, Acks(), effects, thread
    )
    out["forks"] = v.forks
    return out


async def race_async(
    backend: Backend, racers: int, reference: Any, effects: Effects
) -> dict[str, Any]:
    """The same race with AsyncS3Savers over HTTP, one event loop."""
    thread = f"race-async-{racers}"
    async with async_saver(backend, client_config(True)) as first:
        await build(first, effects).ainvoke(INPUT, cfg(thread), durability="sync")
    barrier = threading.Barrier(racers, timeout=BARRIER_TIMEOUT)

    async def resume() -> tuple[str, Any]:
        async with async_saver(backend, client_config(True)) as s:
            try:
                got = await build(s, effects, barrier.wait).ainvoke(
                    Command(resume=RESUME), cfg(thread), durability="sync"
                )
                return ("ok", got)
            except Exception as exc:
                return ("error", exc)

    results = list(await asyncio.gather(*(resume() for _ in range(racers))))
    async with async_saver(backend, client_config(True)) as checker:
        final = await adrive(build(checker, effects), thread)
        tuples = [t async for t in checker.alist(cfg(thread))]
    out = _race_outcome(results, final, reference, effects, thread)
    ids = [t.checkpoint["id"] for t in tuples]
    parents = [t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
               for t in tuples]  # fmt: skip
    out["forks"] = sum(1 for p, w in zip(parents, [*ids[1:], None], strict=True) if p != w)
    return out
