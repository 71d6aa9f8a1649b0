"""Run one workload against one saver in this process and print its figures as JSON.

Started by ``bench/run.py`` (once per saver and workload, in the venv the saver
needs); not meant to be run by hand, though it can be::

    bench/.venv/bin/python bench/runner.py --saver s3 --workload a \
        --endpoint http://127.0.0.1:PORT --latency-ms 15 --quick
"""

from __future__ import annotations

import argparse
import faulthandler
import gzip
import json
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import wire
from capacity import TableSnapshot, request_units
from catalog import LABELS, LATENCY_PROFILES
from prices import OLD_RULE_FREE_BYTES, S3_FREE, S3_RETRIEVALS, S3_TIER1, S3_UPLOADS
from savers import Driver, fake_credentials, make_driver
from workloads import (
    AGENT_ROUNDS,
    Sizes,
    agent_user_message,
    build_agent,
    build_approval,
    build_chat,
    build_document,
    build_fanout,
    document,
    fanout_topic,
    user_message,
)


@dataclass
class Phase:
    """Requests and calls recorded while one part of a workload ran."""

    name: str
    wall: float = 0.0
    requests: list[wire.RequestRecord] = field(default_factory=list)
    calls: list[wire.CallRecord] = field(default_factory=list)

    @contextmanager
    def timed(self) -> Iterator[None]:
        """Time a stretch of saver work and keep what it recorded."""
        wire.RECORDER.reset()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.wall += time.perf_counter() - start
            self.requests.extend(wire.RECORDER.requests)
            self.calls.extend(wire.RECORDER.calls)
            wire.RECORDER.reset()


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "max": 0.0, "min": 0.0}
    return {"mean": sum(values) / len(values), "max": max(values), "min": min(values)}


def phase_figures(phase: Phase, snapshot: TableSnapshot | None) -> dict[str, Any]:
    """Counts by kind, round trips, request units and per-method figures of a phase."""
    reqs = phase.requests
    kinds = Counter(wire.kind(r) for r in reqs)
    wru = rru = 0.0
    units_of: dict[int, dict[str, float]] = {}
    for r in reqs:
        if r.service == "dynamodb":
            units = request_units(r.summary, snapshot)
            units_of[id(r)] = units
            wru += units["wru"]
            rru += units["rru"]
    s3_ops = [r.op for r in reqs if r.service == "s3"]
    methods: dict[str, Any] = {}
    by_method: dict[str, list[wire.CallRecord]] = {}
    for call in phase.calls:
        by_method.setdefault(call.method, []).append(call)
    for method, calls in sorted(by_method.items()):
        per_call_kinds = Counter(wire.kind(r) for c in calls for r in c.requests)
        methods[method] = {
            "calls": len(calls),
            "requests": _stats([len(c.requests) for c in calls]),
            "round_trips": _stats([wire.critical_path(c.requests) for c in calls]),
            "seconds": _stats([c.end - c.start for c in calls]),
            "kinds_per_call": {k: v / len(calls) for k, v in sorted(per_call_kinds.items())},
            "s3_per_call": _stats([sum(1 for r in c.requests if r.service == "s3") for c in calls]),
            "ddb_per_call": _stats(
                [sum(1 for r in c.requests if r.service == "dynamodb") for c in calls]
            ),
            # DynamoDB requests other than chunk-item uploads (layout 5), which are
            # blob uploads like S3 PUTs.
            "index_per_call": _stats(
                [
                    sum(
                        1
                        for r in c.requests
                        if r.service == "dynamodb" and not wire.is_chunk_upload(r)
                    )
                    for c in calls
                ]
            ),
        }
    per_kind: dict[str, dict[str, float]] = {}
    for r in reqs:
        row = per_kind.setdefault(
            wire.kind(r), {"n": 0, "ms": 0.0, "bytes_out": 0, "bytes_in": 0, "wru": 0, "rru": 0}
        )
        row["n"] += 1
        row["wru"] += units_of.get(id(r), {}).get("wru", 0)
        row["rru"] += units_of.get(id(r), {}).get("rru", 0)
        # Time on the wire beyond the injected latency: moto's work plus transfer.
        row["ms"] += wire.service_seconds(r) * 1000
        row["bytes_out"] += r.bytes_out
        row["bytes_in"] += r.bytes_in
    for row in per_kind.values():
        row["ms"] = row["ms"] / row["n"]
    supersteps = len(by_method.get("put", []))
    chain = wire.critical_chain(reqs)
    put_keys = [r.summary.get("key") for r in reqs if r.op == "PutObject"]
    # Per request, for S3 Express One Zone's per-GB charges (prices.py): every byte,
    # and the part above 512 KiB (the launch rule).
    up = [r.bytes_out for r in reqs if r.service == "s3" and r.op in S3_UPLOADS]
    down = [r.bytes_in for r in reqs if r.service == "s3" and r.op in S3_RETRIEVALS]
    return {
        "wall_s": phase.wall,
        "supersteps": supersteps,
        "requests": len(reqs),
        "attempts": sum(r.attempts for r in reqs),
        # Requests botocore had to send again (throttling, 5xx): should be 0 on moto.
        "retried": sum(1 for r in reqs if r.attempts > 1),
        "kinds": dict(sorted(kinds.items())),
        "per_kind": dict(sorted(per_kind.items())),
        "round_trips": len(chain),
        # moto's own time on the sequential chain: what a service answering in
        # exactly the injected latency would not add.
        "chain_service_s": sum(wire.service_seconds(r) for r in chain),
        "latency_s": sum(wire.RECORDER.latency_for(r.service) for r in chain),
        "unattributed": sum(1 for r in reqs if r.call is None),
        "bytes_out": sum(r.bytes_out for r in reqs),
        "bytes_in": sum(r.bytes_in for r in reqs),
        "wru": wru,
        "rru": rru,
        # The same content-addressed object uploaded again within the phase.
        "s3_duplicate_puts": len(put_keys) - len(set(put_keys)),
        "s3_tier1": sum(1 for op in s3_ops if op in S3_TIER1),
        "kms_requests": sum(1 for r in reqs if r.service == "kms"),
        "s3_tier2": sum(1 for op in s3_ops if op not in S3_TIER1 and op not in S3_FREE),
        "s3_upload_bytes": sum(up),
        "s3_upload_bytes_over_512k": sum(max(0, n - OLD_RULE_FREE_BYTES) for n in up),
        "s3_retrieval_bytes": sum(down),
        "s3_retrieval_bytes_over_512k": sum(max(0, n - OLD_RULE_FREE_BYTES) for n in down),
        "methods": methods,
    }


def merge(name: str, *phases: Phase) -> Phase:
    out = Phase(name)
    for p in phases:
        out.wall += p.wall
        out.requests.extend(p.requests)
        out.calls.extend(p.calls)
    return out


class Run:
    """One (saver, workload) run: its driver, phases and storage measurements."""

    def __init__(self, driver: Driver, sizes: Sizes) -> None:
        self.driver = driver
        self.sizes = sizes
        self.storage = driver.storage()
        self.phases: list[Phase] = []
        self.extra: dict[str, Any] = {}
        self._sampled: dict[str, int] = {}
        # What was stored before the workload ran ((e) continues (b)'s thread): the
        # cost model charges a workload only for the bytes it added.
        self.before = self.stored_bytes()

    def phase(self, name: str) -> Phase:
        p = Phase(name)
        self.phases.append(p)
        return p

    def sample_bytes(self, phase: Phase) -> int:
        """Stored bytes now, re-reading only the items the phase wrote since last time."""
        if self.storage is None:
            return self.driver.local_bytes()
        start = self._sampled.get(phase.name, 0)
        written = [
            (w["key"][0], w["key"][1])
            for r in phase.requests[start:]
            for w in r.summary.get("writes", [])
            if w.get("key") and w.get("table") == self.driver.table
        ]
        self._sampled[phase.name] = len(phase.requests)
        return self.storage.measure_written(written)["bytes"]

    def stored_bytes(self) -> dict[str, Any]:
        if self.storage is not None:
            totals, _ = self.storage.measure()
            return totals
        return {"bytes": self.driver.local_bytes()}

    def finish(self) -> dict[str, Any]:
        snapshot = None
        if self.storage is not None:
            totals, snapshot = self.storage.measure()
        else:
            totals = {"bytes": self.driver.local_bytes()}
        if "growth" in self.extra:
            # The incremental samples must agree with the full scan at the end.
            self.extra["growth_check"] = {
                "last_sample": self.extra["growth"][-1][1],
                "full_scan": totals["bytes"],
            }
        added = {
            k: totals.get(k, 0) - self.before.get(k, 0)
            for k in (
                "bytes",
                "s3_bytes",
                "ddb_bytes",
                "gsi_bytes",
                "s3_objects",
                "ddb_items",
                "gsi_entries",
            )
        }
        return {
            "phases": {p.name: phase_figures(p, snapshot) for p in self.phases},
            "storage": totals,
            "storage_added": added,
            **self.extra,
        }


# ------------------------------------------------------------------ workloads
def run_approval(run: Run) -> None:
    """(a) run until interrupt(), then resume each thread from a brand-new saver."""
    from langgraph.types import Command

    from workloads import approval_request

    builder = build_approval()
    first = run.phase("until_interrupt")
    resume = run.phase("resume")
    with first.timed():
        saver = run.driver.new_saver()
        graph = builder.compile(checkpointer=saver)
        for i in range(run.sizes.approvals):
            cfg = {"configurable": {"thread_id": f"approval-{i}"}}
            out = run.driver.invoke(graph, {"request": approval_request(i)}, cfg)
            assert "__interrupt__" in out, "the approval graph did not pause"
    for i in range(run.sizes.approvals):
        cfg = {"configurable": {"thread_id": f"approval-{i}"}}
        with resume.timed():
            fresh = run.driver.new_saver()
            graph = builder.compile(checkpointer=fresh)
            out = run.driver.invoke(graph, Command(resume=True), cfg)
        assert out.get("outcome", "").startswith("approved"), out
    run.phases.append(merge("total", first, resume))


def run_chat(run: Run, thread: str = "chat") -> None:
    """(b) a long chat on one thread; stored bytes sampled as it grows."""
    turns = run.sizes.chat_turns
    every = max(1, turns // run.sizes.growth_samples)
    phase = run.phase("total")
    with phase.timed():
        saver = run.driver.new_saver()
        graph = build_chat().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    growth = [[0, run.sample_bytes(phase)]]
    per_turn: list[float] = []
    for turn in range(1, turns + 1):
        start = time.perf_counter()
        with phase.timed():
            out = run.driver.invoke(graph, {"messages": [user_message(turn)]}, cfg)
        per_turn.append(time.perf_counter() - start)
        assert len(out["messages"]) == 2 * turn
        if turn % every == 0 or turn == turns:
            growth.append([turn, run.sample_bytes(phase)])
    run.extra["growth"] = growth
    run.extra["turn_seconds"] = per_turn


def run_fanout(run: Run) -> None:
    """(c) plan -> 10 parallel workers via Send -> reduce, on several threads."""
    phase = run.phase("total")
    builder = build_fanout(run.sizes.fanout_branches)
    with phase.timed():
        saver = run.driver.new_saver()
        graph = builder.compile(checkpointer=saver)
        for i in range(run.sizes.fanout_runs):
            cfg = {"configurable": {"thread_id": f"fan-{i}"}}
            out = run.driver.invoke(graph, {"topic": fanout_topic(i)}, cfg)
            assert len(out["results"]) == run.sizes.fanout_branches


def run_document(run: Run) -> None:
    """(d) store a 5 MB document, then edit ~1% of it per superstep."""
    doc = document(run.sizes.doc_bytes)
    raw = doc.encode("utf-8")
    compressed = {"gzip6": len(gzip.compress(raw, 6))}
    try:
        import zstandard

        compressed["zstd3"] = len(zstandard.ZstdCompressor(level=3).compress(raw))
    except ImportError:  # not installed in the langgraph-checkpoint-aws venv
        pass
    builder = build_document()
    load = run.phase("load")
    edit = run.phase("edit")
    cfg: dict[str, Any] = {"configurable": {"thread_id": "doc"}}
    with load.timed():
        saver = run.driver.new_saver()
        graph = builder.compile(checkpointer=saver)
        run.driver.invoke(graph, {"doc": doc, "remaining": 0}, cfg)
    before = run.stored_bytes()["bytes"]
    steps = run.sizes.doc_steps
    with edit.timed():
        out = run.driver.invoke(graph, {"remaining": steps}, {**cfg, "recursion_limit": steps + 10})
    assert out["edits"] == steps
    after = run.stored_bytes()["bytes"]
    run.phases.append(merge("total", load, edit))
    run.extra["document"] = {
        "raw_bytes": len(raw),
        "compressed": compressed,
        "stored_after_load": before,
        "stored_after_edits": after,
        "edit_steps": steps,
        "bytes_per_edit_step": (after - before) / steps,
    }


def run_cold_resume(run: Run) -> None:
    """(e) a new process loads the long chat thread and answers one more turn."""
    cfg = {"configurable": {"thread_id": "chat"}}
    load = run.phase("cold_load")
    turn = run.phase("next_turn")
    with load.timed():
        saver = run.driver.new_saver()
        tup = run.driver.call(saver, "get_tuple", cfg)
    assert tup is not None, "the chat thread of workload (b) is missing"
    n = len(tup.checkpoint["channel_values"]["messages"]) // 2
    with turn.timed():
        graph = build_chat().compile(checkpointer=saver)
        out = run.driver.invoke(graph, {"messages": [user_message(n + 1)]}, cfg)
    assert len(out["messages"]) == 2 * (n + 1)
    run.phases.append(merge("total", load, turn))
    run.extra["resumed_turns"] = n


def run_agent(run: Run) -> None:
    """(f) small-state tool agents, one new saver per invocation (as on Lambda).

    Each thread: the first user turn runs tool rounds until the approval tool's
    ``interrupt()``; a new saver resumes it to the answer; a new saver takes the
    second user turn, which runs its tool rounds to the answer.
    """
    from langgraph.types import Command

    phases = {name: run.phase(name) for name in ("first_turn", "resume", "second_turn")}
    invocations: list[dict[str, Any]] = []
    for i in range(run.sizes.agent_threads):
        cfg = {"configurable": {"thread_id": f"agent-{i}"}}
        builder = build_agent(i)
        for name, inputs in (
            ("first_turn", {"messages": [agent_user_message(i, 0)]}),
            ("resume", Command(resume=True)),
            ("second_turn", {"messages": [agent_user_message(i, 1)]}),
        ):
            phase = phases[name]
            before = len(phase.requests), len(phase.calls)
            with phase.timed():
                saver = run.driver.new_saver()
                graph = builder.compile(checkpointer=saver)
                out = run.driver.invoke(graph, inputs, cfg)
            requests = phase.requests[before[0] :]
            invocations.append(
                {
                    "thread": i,
                    "phase": name,
                    "requests": len(requests),
                    "round_trips": len(wire.critical_chain(requests)),
                    "supersteps": sum(1 for c in phase.calls[before[1] :] if c.method == "put"),
                }
            )
            if name == "first_turn":
                assert "__interrupt__" in out, "the agent did not pause for approval"
            else:
                tools = sum(1 for m in out["messages"] if m.type == "tool")
                assert tools == sum(AGENT_ROUNDS[: 1 if name == "resume" else 2]), out
                assert not out["messages"][-1].tool_calls, "the agent did not answer"
    run.phases.append(merge("total", *phases.values()))
    run.extra["invocations"] = invocations


WORKLOADS: dict[str, Callable[[Run], None]] = {
    "a": run_approval,
    "b": run_chat,
    "c": run_fanout,
    "d": run_document,
    "e": run_cold_resume,
    "f": run_agent,
}
#: Runs that call the checkpointer directly (their own modules).
EXTRAS = ("probes", "long")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--saver", required=True, choices=sorted(LABELS))
    parser.add_argument("--workload", required=True, choices=[*WORKLOADS, *EXTRAS])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--latency-ms", type=float, default=15.0)
    parser.add_argument("--latency-profile", default="uniform", choices=sorted(LATENCY_PROFILES))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--state-dir", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument(
        "--watchdog", type=float, default=300.0, help="dump all stacks and exit after N s"
    )
    args = parser.parse_args(argv)
    # A run that hangs (a deadlock in a saver or in LangGraph) must fail loudly with
    # every thread's stack instead of stalling the whole benchmark.
    faulthandler.dump_traceback_later(args.watchdog, exit=True)

    fake_credentials()
    profile = LATENCY_PROFILES[args.latency_profile]
    wire.install(args.latency_ms / 1000.0, {k: ms / 1000.0 for k, ms in profile.items()})
    sizes = Sizes.pick(args.quick)
    # (e) resumes the thread (b) wrote, so it works on (b)'s bucket and table.
    resource_of = {"e": "b"}.get(args.workload, args.workload)
    driver = make_driver(
        args.saver, args.endpoint, f"bench-{args.saver}-{resource_of}", args.state_dir
    )
    started = time.perf_counter()
    if args.workload != "e":
        driver.setup()
    if args.workload == "probes":
        import probes

        result = probes.run_probes(driver)
    elif args.workload == "long":
        import longthread

        result = longthread.run_longthread(driver, args.quick)
    else:
        run = Run(driver, sizes)
        WORKLOADS[args.workload](run)
        result = run.finish()
    driver.close()
    result.update(
        saver=args.saver,
        label=LABELS[args.saver],
        workload=args.workload,
        quick=args.quick,
        latency_ms=args.latency_ms,
        latency_profile=args.latency_profile,
        elapsed_s=time.perf_counter() - started,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        versions=_versions(),
    )
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in (
        "langgraph",
        "langgraph-checkpoint",
        "boto3",
        "langgraph-s3",
        "langgraph-checkpoint-aws",
        "langgraph-checkpoint-sqlite",
        "aiobotocore",
    ):
        with suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
