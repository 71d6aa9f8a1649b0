"""The fault sweep: a clean run for reference, then one injected fault per case, and
the scenarios of ``extras``; returns the figures ``tests/storage/test_faults.py`` asserts and
``python -m tests.faults --write-docs`` writes into docs/reliability.md."""

from __future__ import annotations

import asyncio
import itertools
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.faults import env, extras
from tests.faults.cases import MODES, Case, Outcome, count_calls, run_async, run_sync
from tests.faults.graph import Effects
from tests.faults.inject import KINDS, fast_backoff

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
    damages: tuple[str, ...] = extras.DAMAGES
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
        damages=("checkpoint-object", "blob", "index-body", "pending-write", "head"),
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
    fired = [o for o in outcomes if o.fired]
    return {
        "cases": len(outcomes),
        "faults_injected": len(fired),
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
        ][:20],
    }  # fmt: skip


def run(
    profile: Profile,
    *,
    server_url: str | None = None,
    deadline: float | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run ``profile``; stop starting new sweep cases after ``deadline`` (time.time())."""
    started = time.time()
    figures: dict[str, Any] = {"profile": profile.name}
    effects = Effects()
    outcomes: list[Outcome] = []
    planned = 0
    phases: dict[str, float] = {}

    # With a time bound, the S3Saver sweep gets half of it and AsyncS3Saver the rest.
    half = None if deadline is None else started + (deadline - started) / 2

    def in_time(bound: float | None = deadline) -> bool:
        return bound is None or time.time() < bound

    with fast_backoff():
        with env.inproc() as backend:
            calls, _, reference = count_calls(backend, "sync", effects)
            figures["calls_per_run"] = {"S3Saver": calls}
            cases = plan("sync", calls, profile)
            planned += len(cases)
            for n, case in enumerate(cases):
                if not in_time(half):
                    break
                outcomes.append(run_sync(backend, case, reference, effects))
                if n % 50 == 0:
                    log(f"S3Saver {n}/{len(cases)}")
            phases["S3Saver sweep"] = time.time()
            figures["damage"] = [
                extras.damage(backend, kind, reference, effects) for kind in profile.damages
            ]
            phases["damage"] = time.time()
            figures["race_sync"] = extras.race_sync(backend, profile.racers, reference, effects)
            phases["S3Saver race"] = time.time()
        with env.server(server_url) as backend:
            acalls, _, areference = count_calls(backend, "async", effects)
            figures["calls_per_run"]["AsyncS3Saver"] = acalls
            figures["same_reference"] = areference == reference
            acases = plan("async", acalls, profile)
            planned += len(acases)

            async def sweep_async() -> None:
                for n, case in enumerate(acases):
                    if not in_time():
                        break
                    outcomes.append(await run_async(backend, case, reference, effects))
                    if n % 50 == 0:
                        log(f"AsyncS3Saver {n}/{len(acases)}")
                # LangGraph runs sync nodes on the loop's default executor (cpu + 4
                # workers): more racers than that could never all reach the barrier.
                figures["race_async"] = await extras.race_async(
                    backend, min(profile.racers, 4), reference, effects
                )

            asyncio.run(sweep_async())
            phases["AsyncS3Saver sweep and race"] = time.time()
            figures["throttle"] = extras.throttled_threads(
                backend, profile.throttle_threads, profile.seed, reference, effects
            )
            phases["throttling"] = time.time()
            rng = random.Random(profile.seed)
            kills = []
            with tempfile.TemporaryDirectory() as tmp:
                for _ in range(profile.kills):  # bounded by their number, not the clock
                    kills.append(
                        extras.kill9(
                            backend, rng.randint(1, calls), rng.choice(("before", "after")),
                            reference, Path(tmp),
                        )
                    )  # fmt: skip
            figures["kill9"] = {
                "runs": len(kills),
                "killed": sum(k["killed"] for k in kills),
                "identical": sum(k["verdict"].identical for k in kills),
                "bad": [
                    f"call {k['call']} {k['when']}: {k['verdict']}"[:400]
                    for k in kills if not k["verdict"].ok
                ],
            }  # fmt: skip
    phases["kill -9"] = time.time()
    figures["sweep"] = summarize(outcomes)
    marks = [started, *phases.values()]
    figures["phase_seconds"] = {
        name: round(end - begin, 1)
        for name, begin, end in zip(phases, marks, marks[1:], strict=False)
    }
    figures["sweep"]["planned"] = planned
    figures["seconds"] = round(time.time() - started, 1)
    return figures
