"""A process that runs the fault graph on a moto server and kills itself with SIGKILL
at one AWS call: ``python -m tests.faults.child ENDPOINT BUCKET TABLE THREAD CALL WHEN
EFFECTS ACKS``. ``WHEN`` is ``before`` (the request is not sent) or ``after`` (it was
executed; the process dies before it learns the answer). The parent then resumes the
thread from a fresh saver and checks what was left."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> None:
    endpoint, bucket, table, thread, call, when, effects_path, acks_path = argv
    from tests.conftest import Backend
    from tests.faults.env import sync_saver
    from tests.faults.graph import Effects, build, drive
    from tests.faults.inject import client_config

    target = int(call)
    lock = threading.Lock()
    seen: dict[str, Any] = {"calls": 0, "armed": None}

    def armed() -> bool:
        # The thread making the target call: LangGraph stores pending writes on other
        # threads while a put is in flight, so the next call may start before the
        # target call is sent (a flag for "the last call" would be cleared by it).
        return bool(seen["armed"] == threading.get_ident())

    class Killer:
        def attach(self, client: Any) -> Any:
            def before_call(**_: Any) -> None:
                with lock:
                    seen["calls"] += 1
                    if seen["calls"] == target:
                        seen["armed"] = threading.get_ident()

            def before_send(**_: Any) -> None:
                if armed() and when == "before":
                    os.kill(os.getpid(), signal.SIGKILL)

            def needs_retry(**_: Any) -> None:
                if armed() and when == "after":
                    os.kill(os.getpid(), signal.SIGKILL)

            client.meta.events.register("before-call.*.*", before_call)
            client.meta.events.register_first("before-send.*.*", before_send)
            client.meta.events.register("needs-retry.*.*", needs_retry)
            return client

    backend = Backend("server", endpoint, bucket=bucket, table=table)
    # max_concurrency=1: one request at a time, so "the call-th request" is one point.
    saver = sync_saver(backend, client_config(True), Killer(), max_concurrency=1)
    put_writes = saver.put_writes

    def tracked(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        put_writes(config, writes, task_id, task_path)
        cid = config["configurable"]["checkpoint_id"]
        with Path(acks_path).open("a") as f:
            f.writelines(f"{cid}\t{task_id}\t{ch}\n" for ch, _ in writes)

    saver.put_writes = tracked
    drive(build(saver, Effects(Path(effects_path))), thread)


if __name__ == "__main__":
    main(sys.argv[1:])
