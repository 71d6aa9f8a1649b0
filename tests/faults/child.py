"""A process that runs the fault graph on a moto server and kills itself with SIGKILL
at one AWS call: ``python -m tests.faults.child ENDPOINT BUCKET TABLE THREAD CALL WHEN
EFFECTS ACKS [SAVER]``. ``WHEN`` is ``before`` (the request is not sent) or ``after`` (it
was executed; the process dies before it learns the answer). ``SAVER`` is ``sync``
(S3Saver, the default) or ``async`` (AsyncS3Saver). The parent then resumes the thread
from a fresh saver and checks what was left."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any


class Killer:
    """Counts API calls on every client it is attached to; SIGKILLs this process at
    call ``target``, before sending it or after it was executed.

    The target call is marked in its own request context, not by a flag for "the
    last call": LangGraph stores pending writes on other threads (or tasks) while a
    put is in flight, so the next call may start before the target call is sent."""

    def __init__(self, target: int, when: str) -> None:
        self.target, self.when = target, when
        self.calls = 0
        self.lock = threading.Lock()

    def attach(self, client: Any) -> Any:
        def before_call(context: dict[str, Any], **_: Any) -> None:
            with self.lock:
                self.calls += 1
                if self.calls == self.target:
                    context["kill_here"] = True

        def before_send(request: Any, **_: Any) -> None:
            if request.context.get("kill_here") and self.when == "before":
                os.kill(os.getpid(), signal.SIGKILL)

        def needs_retry(request_dict: dict[str, Any], **_: Any) -> None:
            if request_dict["context"].get("kill_here") and self.when == "after":
                os.kill(os.getpid(), signal.SIGKILL)

        client.meta.events.register("before-call.*.*", before_call)
        client.meta.events.register_first("before-send.*.*", before_send)
        client.meta.events.register("needs-retry.*.*", needs_retry)
        return client


def track(saver: Any, acks_path: str) -> None:
    """Append every acknowledged pending write to ``acks_path`` (the parent reads it)."""
    put_writes, aput_writes = saver.put_writes, saver.aput_writes

    def record(config: Any, writes: Any, task_id: str) -> None:
        cid = config["configurable"]["checkpoint_id"]
        with Path(acks_path).open("a") as f:
            f.writelines(f"{cid}\t{task_id}\t{ch}\n" for ch, _ in writes)

    def tracked(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        put_writes(config, writes, task_id, task_path)
        record(config, writes, task_id)

    async def atracked(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        await aput_writes(config, writes, task_id, task_path)
        record(config, writes, task_id)

    saver.put_writes, saver.aput_writes = tracked, atracked


def main(argv: list[str]) -> None:
    endpoint, bucket, table, thread, call, when, effects_path, acks_path = argv[:8]
    saver_kind = argv[8] if len(argv) > 8 else "sync"
    from tests.conftest import Backend
    from tests.faults.env import async_saver, chunk_lists, sync_saver
    from tests.faults.graph import Effects, adrive, build, drive
    from tests.faults.inject import client_config

    backend = Backend("server", endpoint, bucket=bucket, table=table)
    effects = Effects(Path(effects_path))
    killer = Killer(int(call), when)

    # max_concurrency=1: one request at a time, so "the call-th request" is one point.
    async def run() -> None:
        config = client_config(True)
        async with async_saver(backend, config, killer, max_concurrency=1) as asaver:
            track(asaver, acks_path)
            await adrive(build(asaver, effects), thread)

    # The same chunk-list threshold as the parent that started it (env.LIST_MIN).
    with chunk_lists():
        if saver_kind == "sync":
            saver = sync_saver(backend, client_config(True), killer, max_concurrency=1)
            track(saver, acks_path)
            drive(build(saver, effects), thread)
        else:
            asyncio.run(run())


if __name__ == "__main__":
    main(sys.argv[1:])
