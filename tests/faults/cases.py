"""One injected fault on one run of the graph, the recovery, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.conftest import Backend
from tests.faults.checks import Acks, Verdict, ahistory, history, judge
from tests.faults.env import async_saver, sync_saver
from tests.faults.graph import Effects, adrive, build, drive
from tests.faults.inject import Injector, client_config

MODES = ("die", "warm")


@dataclass(frozen=True)
class Case:
    saver: str  # "sync" (S3Saver, moto in-process) or "async" (AsyncS3Saver, moto server)
    index: int  # which AWS call of the run fails (1-based)
    kind: str  # "refused" or "lost"
    retries: bool
    mode: str  # "die": a fresh saver resumes; "warm": the same saver resumes

    @property
    def thread(self) -> str:
        return f"{self.saver}-{self.index}-{self.kind}-r{int(self.retries)}-{self.mode}"


@dataclass
class Outcome:
    case: Case
    fired: str = ""  # the operation that was failed ("" if the run had fewer calls)
    calls: int = 0  # the AWS calls the faulty run made (before any resume)
    raised: str = ""  # what the faulty run raised ("" if botocore's retry absorbed it)
    verdict: Verdict = field(default_factory=Verdict)


def count_calls(backend: Backend, saver: str, effects: Effects) -> tuple[int, list[str], Any]:
    """Run the graph cleanly once: (number of AWS calls, their operations, final state)."""
    counter = Injector()
    if saver == "sync":
        final = drive(build(sync_saver(backend, client_config(True), counter), effects), "clean")
    else:
        import asyncio

        async def run() -> Any:
            async with async_saver(backend, client_config(True), counter) as s:
                return await adrive(build(s, effects), "clean-async")

        final = asyncio.run(run())
    return counter.calls, counter.ops, final


def run_sync(backend: Backend, case: Case, reference: Any, effects: Effects) -> Outcome:
    """Inject ``case`` into a run of the graph on S3Saver, recover, and judge."""
    out = Outcome(case)
    acks = Acks()
    config = client_config(case.retries)
    injector = Injector(target=case.index, kind=case.kind, retries=case.retries)
    saver = sync_saver(backend, config, injector, acks=acks)
    final: Any = None
    try:
        final = drive(build(saver, effects), case.thread)
    except Exception as exc:
        out.raised = type(exc).__name__
    out.fired, out.calls = injector.fired, injector.calls
    injector.disarm()
    problems: list[str] = []
    if out.raised:
        if case.mode == "die":
            saver = sync_saver(backend, config, acks=acks)
        try:
            final = drive(build(saver, effects), case.thread)
        except Exception as exc:
            problems.append(f"resume failed: {exc!r}")
    out.verdict = verdict_sync(backend, case.thread, final, reference, acks, effects)
    out.verdict.problems[:0] = problems
    return out


async def run_async(backend: Backend, case: Case, reference: Any, effects: Effects) -> Outcome:
    """Inject ``case`` into a run of the graph on AsyncS3Saver, recover, and judge."""
    out = Outcome(case)
    acks = Acks()
    config = client_config(case.retries)
    injector = Injector(target=case.index, kind=case.kind, retries=case.retries)
    problems: list[str] = []
    final: Any = None
    async with async_saver(backend, config, injector, acks=acks) as saver:
        try:
            final = await adrive(build(saver, effects), case.thread)
        except Exception as exc:
            out.raised = type(exc).__name__
        out.fired, out.calls = injector.fired, injector.calls
        injector.disarm()
        if out.raised and case.mode == "warm":
            try:
                final = await adrive(build(saver, effects), case.thread)
            except Exception as exc:
                problems.append(f"resume failed: {exc!r}")
    if out.raised and case.mode == "die":
        async with async_saver(backend, config, acks=acks) as fresh:
            try:
                final = await adrive(build(fresh, effects), case.thread)
            except Exception as exc:
                problems.append(f"resume failed: {exc!r}")
    out.verdict = await verdict_async(backend, case.thread, final, reference, acks, effects)
    out.verdict.problems[:0] = problems
    return out


def verdict_sync(
    backend: Backend, thread: str, final: Any, reference: Any, acks: Acks, effects: Effects
) -> Verdict:
    """Judge ``thread`` as a fresh S3Saver without faults reads it."""
    checker = sync_saver(backend, client_config(True))
    return judge(
        history(checker, thread), checker.get_tuple, final, reference, acks, effects, thread
    )


async def verdict_async(
    backend: Backend, thread: str, final: Any, reference: Any, acks: Acks, effects: Effects
) -> Verdict:
    """Judge ``thread`` as a fresh AsyncS3Saver without faults reads it (every checkpoint
    is loaded first, since ``judge`` calls ``load`` synchronously)."""
    async with async_saver(backend, client_config(True)) as checker:
        tuples = await ahistory(checker, thread)
        loaded = {}
        for t in tuples:
            try:
                loaded[t.checkpoint["id"]] = await checker.aget_tuple(t.config)
            except Exception as exc:
                loaded[t.checkpoint["id"]] = exc

    def load(config: Any) -> Any:
        got = loaded[config["configurable"]["checkpoint_id"]]
        if isinstance(got, Exception):
            raise got
        return got

    return judge(tuples, load, final, reference, acks, effects, thread)
