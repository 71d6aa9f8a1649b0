"""The fault sweep: a clean run for reference, then one injected fault per case, and
the scenarios of ``extras``; returns the figures ``tests/storage/test_faults.py`` asserts and
``python -m tests.faults --write-docs`` writes into docs/reliability.md."""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import Backend
from tests.faults import damage, env, extras
from tests.faults.cases import MODES, Case, Outcome, count_calls, run_async, run_sync
from tests.faults.checks import entry_kinds
from tests.faults.graph import Effects
from tests.faults.inject import KINDS, fast_backoff
from tests.faults.kill import akill9, kill9
from tests.faults.kill import figures as kill_figures

COMBOS = list(itertools.product(KINDS, (False, True), MODES))  # 8 per call index


@dataclass(frozen=True)
class Profile:
    name: str
    sample: int | None  # call indices sampled for S3Saver (None: every index)
    async_sample: int | None  # the same for AsyncS3Saver (slower: HTTP)
    every_combo_at: int  # of S3Saver's, how many get all 8 combinations (the rest one each)
    throttle_threads: int
    racers: int
    kills: int
    damages: tuple[str, ...] = damage.DAMAGES
    seed: int = 12


PROFILES = {
    "quick": Profile(
        "quick",
        6,
        4,
        every_combo_at=1,
        throttle_threads=4,
        racers=3,
        kills=2,
        damages=(
            "checkpoint-object",
            "blob",
            "list",
            "missing-list",
            "index-body",
            "pending-write",
            "head",
        ),
    ),
    "full": Profile("full", None, None, every_combo_at=0, throttle_threads=20, racers=8, kills=12),
}


def plan(saver: str, calls: int, profile: Profile) -> list[Case]:
    """The cases of one saver: every index, every combination, or a seeded sample that
    still covers all 8 combinations."""
    rng = random.Random(f"{profile.seed}-{saver}")
    sample = profile.sample if saver == "sync" else profile.async_sample
    every_combo_at = profile.every_combo_at if saver == "sync" else 0
    if sample is None:
        every = [Case(saver, i, *c) for i in range(1, calls + 1) for c in COMBOS]
        rng.shuffle(every)  # a run cut short by its time bound is still a fair sample
        return every
    indices = sorted(rng.sample(range(1, calls + 1), min(sample, calls)))
    full_at = set(rng.sample(indices, min(every_combo_at, len(indices))))
    start = rng.randrange(len(COMBOS))
    cases: list[Case] = []
    for n, i in enumerate(indices):
        combos = COMBOS if i in full_at else [COMBOS[(start + n) % len(COMBOS)]]
        cases.extend(Case(saver, i, *c) for c in combos)
    return cases


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    """The sweep's figures. A case whose run made fewer AWS calls than the clean run
    (the saver now and then stores a chunk list twice, one PUT more or less) and ended
    before its call is counted as not injected; one that should have fired and did not
    is a failure of the suite."""
    fired = [o for o in outcomes if o.fired]
    unfired = [o for o in outcomes if not o.fired]
    return {
        "cases": len(outcomes),
        "faults_injected": len(fired),
        "not_injected": len(unfired),
        "resumed": sum(1 for o in fired if o.raised),
        "absorbed_by_retries": sum(1 for o in fired if not o.raised),
        "identical_final_state": sum(o.verdict.identical for o in fired),
        "torn": sum(o.verdict.torn for o in fired),
        "forks": sum(o.verdict.forks for o in fired),
        "lost_writes": sum(o.verdict.lost_writes for o in fired),
        "double_side_effects_sync": sum(o.verdict.deliveries > 1 for o in fired),
        "missing_side_effects": sum(o.verdict.deliveries < 1 for o in fired),
        "side_effect_reruns": sum(max(0, o.verdict.executions - 1) for o in fired),
        "orphan_writes": sum(o.verdict.orphan_writes for o in fired),
        "failed": [
            f"{o.case.thread} ({o.fired}, raised {o.raised or '-'}): {o.verdict.problems[:2]}"
            f" torn={o.verdict.torn} forks={o.verdict.forks} lost={o.verdict.lost_writes}"
            f" deliveries={o.verdict.deliveries}"
            for o in fired if not o.verdict.ok
        ][:20] + [
            f"{o.case.thread}: not injected although its run made {o.calls} calls"
            for o in unfired if o.calls >= o.case.index
        ],
    }  # fmt: skip


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (moto in-process and the moto server
    are in it; the kill -9 children are not)."""
    scale = 2**20 if sys.platform == "darwin" else 2**10  # ru_maxrss: bytes on macOS
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale, 1)


def rss_mb() -> float:
    """This process's resident memory now, from /proc where there is one, else its peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError):
        return peak_rss_mb()


@dataclass
class Sweep:
    """One run of a profile: what the phases share, and what they have found."""

    profile: Profile
    deadline: float | None
    log: Callable[[str], None]
    started: float = field(default_factory=time.time)
    effects: Effects = field(default_factory=Effects)
    figures: dict[str, Any] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    planned: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    memory: list[float] = field(default_factory=list)  # RSS (MB) after every 50 cases
    reference: Any = None

    def in_time(self, bound: float | None) -> bool:
        return bound is None or time.time() < bound

    def mark(self, phase: str) -> None:
        self.phases[phase] = time.time()

    def progress(self, saver: str, n: int, total: int) -> None:
        if n % 50 == 0:
            self.memory.append(rss_mb())
            self.log(f"{saver} {n}/{total}, {self.memory[-1]} MB resident")

    def on_inproc(self, base: Backend) -> None:
        """S3Saver on moto in-process: the clean run, the sweep, damage and the race."""
        # With a time bound, the S3Saver sweep gets half of it and AsyncS3Saver the rest.
        half = None if self.deadline is None else (self.started + self.deadline) / 2
        calls, _, self.reference = count_calls(base, "sync", self.effects)
        self.figures["calls_per_run"] = {"S3Saver": calls}
        self.figures["entries"] = {"S3Saver": entry_kinds(base)}
        cases = plan("sync", calls, self.profile)
        self.planned += len(cases)
        for n, case in enumerate(cases):
            if not self.in_time(half):
                break
            with env.scratch(base) as backend:
                self.outcomes.append(run_sync(backend, case, self.reference, self.effects))
            self.progress("S3Saver", n, len(cases))
        self.mark("S3Saver sweep")
        self.figures["damage"] = []
        for kind in self.profile.damages:
            with env.scratch(base) as backend:
                self.figures["damage"].append(
                    damage.damage(backend, kind, self.reference, self.effects)
                )
        self.mark("S3Saver damage")
        with env.scratch(base) as backend:
            self.figures["race_sync"] = extras.race_sync(
                backend, self.profile.racers, self.reference, self.effects
            )
        self.mark("S3Saver race")

    def on_server(self, base: Backend) -> None:
        """AsyncS3Saver on the moto server: the clean run, then (on one event loop) the
        sweep, damage, the race and throttling."""
        acalls, _, areference = count_calls(base, "async", self.effects)
        self.figures["calls_per_run"]["AsyncS3Saver"] = acalls
        self.figures["entries"]["AsyncS3Saver"] = entry_kinds(base)
        self.figures["same_reference"] = areference == self.reference
        cases = plan("async", acalls, self.profile)
        self.planned += len(cases)
        asyncio.run(self.on_server_async(base, cases))

    async def on_server_async(self, base: Backend, cases: list[Case]) -> None:
        for n, case in enumerate(cases):
            if not self.in_time(self.deadline):
                break
            with env.scratch(base) as backend:
                self.outcomes.append(await run_async(backend, case, self.reference, self.effects))
            self.progress("AsyncS3Saver", n, len(cases))
        self.mark("AsyncS3Saver sweep")
        self.figures["damage_async"] = []
        for kind in self.profile.damages:
            with env.scratch(base) as backend:
                self.figures["damage_async"].append(
                    await damage.adamage(backend, kind, self.reference, self.effects)
                )
        self.mark("AsyncS3Saver damage")
        # LangGraph runs sync nodes on the loop's default executor (cpu + 4 workers):
        # more racers than that could never all reach the barrier.
        with env.scratch(base) as backend:
            self.figures["race_async"] = await extras.race_async(
                backend, min(self.profile.racers, 4), self.reference, self.effects
            )
        self.mark("AsyncS3Saver race")
        with env.scratch(base) as backend:
            self.figures["throttle_async"] = await extras.athrottled_threads(
                backend, self.profile.throttle_threads, self.profile.seed, self.reference,
                self.effects,
            )  # fmt: skip
        self.mark("AsyncS3Saver throttling")

    def kills_on_server(self, base: Backend) -> None:
        """S3Saver's throttling over HTTP, then ``kill -9`` of child processes, each
        saver at the same seeded calls (bounded by their number, not the clock)."""
        with env.scratch(base) as backend:
            self.figures["throttle"] = extras.throttled_threads(
                backend, self.profile.throttle_threads, self.profile.seed, self.reference,
                self.effects,
            )  # fmt: skip
        self.mark("S3Saver throttling")
        rng = random.Random(self.profile.seed)
        calls = self.figures["calls_per_run"]["S3Saver"]
        points = [(rng.randint(1, calls), rng.choice(("before", "after")))
                  for _ in range(self.profile.kills)]  # fmt: skip
        for name, kill in (("kill9", kill9), ("kill9_async", akill9)):
            runs = []
            for call, when in points:
                # A directory per kill: two kills at the same point would otherwise share
                # the files where the child logs its side effects and acknowledged writes.
                with tempfile.TemporaryDirectory() as tmp, env.scratch(base) as backend:
                    runs.append(kill(backend, call, when, self.reference, Path(tmp)))
            self.figures[name] = kill_figures(runs)
            self.mark(f"{'AsyncS3Saver' if name.endswith('async') else 'S3Saver'} kill -9")

    def results(self) -> dict[str, Any]:
        figures = {"profile": self.profile.name, **self.figures}
        figures["sweep"] = summarize(self.outcomes)
        figures["sweep"]["planned"] = self.planned
        marks = [self.started, *self.phases.values()]
        figures["phase_seconds"] = {
            name: round(end - begin, 1)
            for name, begin, end in zip(self.phases, marks, marks[1:], strict=False)
        }
        figures["memory_mb"] = {
            "every_50_cases": self.memory,
            "end": rss_mb(),
            "peak": peak_rss_mb(),
        }
        figures["seconds"] = round(time.time() - self.started, 1)
        return figures


def run(
    profile: Profile,
    *,
    server_url: str | None = None,
    deadline: float | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run ``profile``; stop starting new sweep cases after ``deadline`` (time.time()).

    Every case and scenario gets a bucket and table of its own, deleted when it ends
    (``env.scratch``), so memory stays flat however many cases run.
    """
    sweep = Sweep(profile, deadline, log)
    with fast_backoff(), env.chunk_lists():
        with env.inproc() as base:
            sweep.on_inproc(base)
        with env.server(server_url) as base:
            sweep.on_server(base)
            sweep.kills_on_server(base)
    return sweep.results()
