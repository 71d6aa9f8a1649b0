"""The scenarios beside the call-by-call sweep: throttling, racing resumes, damaged
storage, and ``kill -9`` of a process at an AWS call."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from langgraph.types import Command

from langgraph_s3 import CheckpointConflictError, S3SaverError
from langgraph_s3.errors import ObjectError
from langgraph_s3.keys import Layout
from tests.conftest import Backend
from tests.faults.checks import Acks, history, judge
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


LAYOUT = Layout("")
BARRIER_TIMEOUT = 60.0


# ------------------------------------------------------------------ throttling
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
    checker = sync_saver(backend, client_config(True))
    verdicts = [
        judge(history(checker, n), checker.get_tuple, r if k == "ok" else None, reference,
              acks, effects, n)
        for (k, r), n in zip(results, names, strict=True)
    ]  # fmt: skip
    return {
        "threads": threads,
        "attempts": sum(t.attempts for t in throttlers),
        "throttled": sum(t.throttled for t in throttlers),
        "completed": sum(1 for k, _ in results if k == "ok"),
        "identical": sum(v.identical for v in verdicts),
        "bad": sum(not v.ok for v in verdicts),
        "errors": [repr(r)[:300] for k, r in results if k != "ok"],
    }


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


# -------------------------------------------------------------------- damage
def _flip(data: bytes, seed: int) -> bytes:
    broken = bytearray(data)
    broken[random.Random(seed).randrange(len(broken))] ^= 0x5A
    return bytes(broken)


def _snapshot(saver: Any, thread: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in history(saver, thread):
        writes = sorted((task, ch, repr(v)) for task, ch, v in t.pending_writes)
        out[t.checkpoint["id"]] = (t.checkpoint["channel_values"], writes)
    return out


def _reads_are_right_or_refused(
    backend: Backend, thread: str, before: dict[str, Any], key: str
) -> tuple[int, list[str]]:
    """Every read of the thread returns what it returned before the damage, or raises an
    ObjectError whose key names the damaged ``key``: (refusals, problems)."""
    saver = sync_saver(backend, client_config(True))
    refusals, problems = 0, []

    def check(what: str, read: Any) -> Any:
        nonlocal refusals
        try:
            return read()
        except ObjectError as exc:
            refusals += 1
            if key not in exc.key or key not in str(exc):
                problems.append(f"{what}: {type(exc).__name__} names {exc.key!r}, not {key!r}")
        except Exception as exc:
            problems.append(f"{what}: untyped {exc!r}"[:300])
        return None

    for cid, (values, writes) in before.items():
        got = check(
            f"get_tuple {cid}",
            lambda cid=cid: saver.get_tuple(
                {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": cid}}
            ),
        )
        if got is not None and (
            got.checkpoint["channel_values"] != values
            or sorted((t, c, repr(v)) for t, c, v in got.pending_writes) != writes
        ):
            problems.append(f"get_tuple {cid}: a wrong value")
    latest = check("latest", lambda: saver.get_tuple(cfg(thread)))
    newest = max(before)
    if latest is not None and latest.checkpoint["channel_values"] != before[newest][0]:
        problems.append("latest: a wrong value")
    listed = check("list", lambda: history(saver, thread))
    if listed is not None and [t.checkpoint["id"] for t in listed] != sorted(before, reverse=True):
        problems.append("list: wrong checkpoints")
    return refusals, problems


def _resume_is_right_or_refused(
    backend: Backend, thread: str, reference: Any, effects: Effects, key: str
) -> tuple[str, list[str]]:
    try:
        final = drive(build(sync_saver(backend, client_config(True)), effects), thread)
    except S3SaverError as exc:
        wrong = isinstance(exc, ObjectError) and key not in exc.key
        return type(exc).__name__, [f"resume: {exc!r} does not name {key!r}"] if wrong else []
    except Exception as exc:
        return "untyped", [f"resume: untyped {exc!r}"[:300]]
    return "completed", ([] if final == reference else ["resume: wrong final state"])


DAMAGES = (
    "checkpoint-object", "blob", "missing-blob", "index-body", "pending-write", "head",
    "missing-head",
)  # fmt: skip


def damage(backend: Backend, kind: str, reference: Any, effects: Effects) -> dict[str, Any]:
    """Pause a thread at the approval, damage one stored thing of ``kind``, then read
    every checkpoint and resume: right values or a typed error naming the key."""
    thread = f"damage-{kind}"
    options: dict[str, Any] = {"index_inline_limit": 0} if kind == "checkpoint-object" else {}
    writer = sync_saver(backend, client_config(True), **options)
    build(writer, effects).invoke(INPUT, cfg(thread), durability="sync")
    before = _snapshot(sync_saver(backend, client_config(True)), thread)
    s3, ddb = backend.s3(), backend.dynamodb()
    newest = max(before)
    pk = {"S": LAYOUT.pk(thread)}
    item_key = {"pk": pk, "sk": {"S": LAYOUT.checkpoint_sk("", newest)}}
    prefix = LAYOUT.thread_prefix(thread)
    objects = [
        o for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=backend.bucket, Prefix=prefix)
        for o in page.get("Contents", [])
    ]  # fmt: skip

    def rewrite(key: str, change: Any) -> None:
        body = s3.get_object(Bucket=backend.bucket, Key=key)["Body"].read()
        s3.put_object(Bucket=backend.bucket, Key=key, Body=change(body))

    def set_attr(key: dict[str, Any], attr: str, value: Any) -> None:
        ddb.update_item(
            TableName=backend.table, Key=key, UpdateExpression="SET #a = :v",
            ExpressionAttributeNames={"#a": attr}, ExpressionAttributeValues={":v": value},
        )  # fmt: skip

    if kind == "checkpoint-object":
        digest = ddb.get_item(TableName=backend.table, Key=item_key)["Item"]["h"]["S"]
        key = LAYOUT.checkpoint_key(thread, "", newest, digest)
        rewrite(key, lambda b: _flip(b, 1))
    elif kind in ("blob", "missing-blob"):
        blob = max((o for o in objects if "/b/" in o["Key"]), key=lambda o: o["Size"])
        key = blob["Key"]
        if kind == "blob":
            rewrite(key, lambda b: _flip(b, 2))
        else:
            s3.delete_object(Bucket=backend.bucket, Key=key)
    elif kind == "index-body":
        item = ddb.get_item(TableName=backend.table, Key=item_key)["Item"]
        # A body kept in its index item is named like the object it would be in S3
        # (same key, digest and checks either way; see docs/layout.md).
        key = LAYOUT.checkpoint_key(thread, "", newest, item["h"]["S"])
        set_attr(item_key, "b", {"B": _flip(item["b"]["B"], 3)})
    elif kind == "pending-write":
        rows = ddb.query(
            TableName=backend.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :w)",
            ExpressionAttributeValues={":pk": pk, ":w": {"S": item_key["sk"]["S"] + "#w#"}},
        )["Items"]
        row = rows[0]
        attr = sorted(a for a in row if a[0] in "wm" and a[1:].isdigit())[0]
        key = row["sk"]["S"]
        set_attr({"pk": pk, "sk": row["sk"]}, attr, {"B": _flip(row[attr]["B"], 4)})
    else:
        head_key = {"pk": pk, "sk": {"S": LAYOUT.head_sk("")}}
        key = head_key["sk"]["S"]
        if kind == "head":
            set_attr(head_key, "cid", {"N": "7"})  # not a checkpoint id at all
        else:
            ddb.delete_item(TableName=backend.table, Key=head_key)
    refusals, problems = _reads_are_right_or_refused(backend, thread, before, key)
    resumed, more = _resume_is_right_or_refused(backend, thread, reference, effects, key)
    return {"kind": kind, "key": key, "refused_reads": refusals, "resume": resumed,
            "problems": problems + more}  # fmt: skip


# ------------------------------------------------------------------- kill -9
def kill9(backend: Backend, call: int, when: str, reference: Any, workdir: Path) -> dict[str, Any]:
    """Run the graph in a child process that SIGKILLs itself at AWS call ``call``
    (``before`` sending it or ``after`` it was executed), then resume the thread from
    a fresh saver in this process and check the invariants."""
    thread = f"kill-{call}-{when}"
    effects_path, acks_path = workdir / f"{thread}.effects", workdir / f"{thread}.acks"
    assert backend.endpoint_url
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.run(
        [sys.executable, "-m", "tests.faults.child", backend.endpoint_url, backend.bucket,
         backend.table, thread, str(call), when, str(effects_path), str(acks_path)],
        env=env, capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    effects = Effects(effects_path)
    acks = Acks()
    if acks_path.exists():
        for line in acks_path.read_text().splitlines():
            cid, task, ch = line.split("\t")
            acks.rows.add((cid, task, ch))
    problems = []
    if child.returncode not in (-9, 0):
        problems.append(f"child exited {child.returncode}: {child.stderr.decode()[-500:]}")
    saver = sync_saver(backend, client_config(True), acks=acks)
    try:
        final = drive(build(saver, effects), thread)
    except Exception as exc:
        final = None
        problems.append(f"resume failed: {exc!r}"[:300])
    checker = sync_saver(backend, client_config(True))
    v = judge(history(checker, thread), checker.get_tuple, final, reference, acks, effects, thread)
    v.problems[:0] = problems
    return {"call": call, "when": when, "killed": child.returncode == -9, "verdict": v}
