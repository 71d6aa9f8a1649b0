"""``kill -9`` of a process at an AWS call, with S3Saver or AsyncS3Saver: a child
process (``tests.faults.child``) runs the graph and SIGKILLs itself at call *k*; this
process then resumes the thread from a fresh saver of the same kind and checks what
was left."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import Backend
from tests.faults.cases import verdict_async, verdict_sync
from tests.faults.checks import Acks, entry_kinds
from tests.faults.env import async_saver, sync_saver
from tests.faults.graph import Effects, adrive, build, drive
from tests.faults.inject import client_config


def _child(backend: Backend, saver: str, thread: str, call: int, when: str,
           workdir: Path) -> tuple[list[str], bool, Effects, Acks, int]:  # fmt: skip
    """Run the child; (problems, killed, its side effects, its acknowledged writes, the
    chunk lists named in what it left: the child stores lists too, ``env.chunk_lists``)."""
    effects_path, acks_path = workdir / f"{thread}.effects", workdir / f"{thread}.acks"
    assert backend.endpoint_url
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.run(
        [sys.executable, "-m", "tests.faults.child", backend.endpoint_url, backend.bucket,
         backend.table, thread, str(call), when, str(effects_path), str(acks_path), saver],
        env=env, capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    acks = Acks()
    if acks_path.exists():
        for line in acks_path.read_text().splitlines():
            cid, task, ch = line.split("\t")
            acks.rows.add((cid, task, ch))
    problems = []
    if child.returncode not in (-9, 0):
        problems.append(f"child exited {child.returncode}: {child.stderr.decode()[-500:]}")
    kinds = entry_kinds(backend)
    lists = kinds["lists_packed"] + kinds["lists_loose"]
    return problems, child.returncode == -9, Effects(effects_path), acks, lists


def kill9(backend: Backend, call: int, when: str, reference: Any, workdir: Path) -> dict[str, Any]:
    """S3Saver: the child SIGKILLs itself at AWS call ``call`` (``before`` sending it or
    ``after`` it was executed); a fresh S3Saver here resumes, then the invariants."""
    thread = f"kill-{call}-{when}"
    problems, killed, effects, acks, lists = _child(backend, "sync", thread, call, when, workdir)
    final = None
    try:
        final = drive(build(sync_saver(backend, client_config(True), acks=acks), effects), thread)
    except Exception as exc:
        problems.append(f"resume failed: {exc!r}"[:300])
    v = verdict_sync(backend, thread, final, reference, acks, effects)
    v.problems[:0] = problems
    return {"call": call, "when": when, "killed": killed, "lists": lists, "verdict": v}


def akill9(backend: Backend, call: int, when: str, reference: Any, workdir: Path) -> dict[str, Any]:
    """The same with AsyncS3Saver, in the child and for the resume."""
    thread = f"akill-{call}-{when}"
    problems, killed, effects, acks, lists = _child(backend, "async", thread, call, when, workdir)

    async def resume() -> Any:
        final = None
        async with async_saver(backend, client_config(True), acks=acks) as saver:
            try:
                final = await adrive(build(saver, effects), thread)
            except Exception as exc:
                problems.append(f"resume failed: {exc!r}"[:300])
        return await verdict_async(backend, thread, final, reference, acks, effects)

    v = asyncio.run(resume())
    v.problems[:0] = problems
    return {"call": call, "when": when, "killed": killed, "lists": lists, "verdict": v}


def figures(kills: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "runs": len(kills),
        "killed": sum(k["killed"] for k in kills),
        "identical": sum(k["verdict"].identical for k in kills),
        "lists_by_children": sum(k["lists"] for k in kills),
        "bad": [
            f"call {k['call']} {k['when']}: {k['verdict']}"[:400]
            for k in kills if not k["verdict"].ok
        ],
    }  # fmt: skip
