"""Invoke the example Lambda handler once, in this fresh interpreter, as a new container.

Run by tests/deploy/test_lambda_example.py as::

    python tests/deploy/lambda_invoke.py EXAMPLE_DIR < event.json

The event is read from stdin. The last stdout line is ``RESULT <json>`` with the
handler's response and which heavy modules the invocation imported; anything the
handler logged comes before it.

Racing invocations are made to interleave in a chosen order through files in
``LAMBDA_TEST_SYNC_DIR``, using botocore events on the saver's DynamoDB client
(``LAMBDA_TEST_ROLE`` picks the script):

* ``peer`` (both racers): after its first Query - the read of the thread's latest
  checkpoint for the pending check - each waits until both have done it, so both
  see the thread pending before either resumes it.
* ``early`` / ``late``: a stale pending check. ``late`` passes its pending check,
  then ``early`` stores and commits its decision; ``late`` reads the thread again
  for the resume while ``early`` is held before its action step, then both continue.
  Resuming "the latest checkpoint" here would hand ``late`` the checkpoint
  ``early`` just committed, whose next step is the action.

Every wait is bounded, so a broken peer fails the test's assertions instead of
hanging it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULT_MARK = "RESULT "
_WAIT = 60.0


def _touch(directory: Path, name: str) -> None:
    (directory / name).touch()


def _wait(directory: Path, *names: str, count: int = 1) -> None:
    deadline = time.monotonic() + _WAIT
    while time.monotonic() < deadline:
        present = [n for n in os.listdir(directory) if n.startswith(names)]
        if len(present) >= count:
            return
        time.sleep(0.01)


def _on_nth(n: int, action: Callable[[], None]) -> Callable[..., None]:
    """A botocore event handler that runs ``action`` on the n-th event only."""
    seen = {"count": 0}

    def handler(**_: Any) -> None:
        seen["count"] += 1
        if seen["count"] == n:
            action()

    return handler


def _choreograph(handler: Any, role: str, directory: Path) -> None:
    events = handler.get_runtime().saver.dynamodb_client.meta.events
    me = str(os.getpid())
    if role == "peer":

        def both_checked() -> None:
            _touch(directory, f"checked-{me}")
            _wait(directory, "checked-", count=2)

        events.register("after-call.dynamodb.Query", _on_nth(1, both_checked))
    elif role == "early":
        # Store the decision (the approval task's writes, then the commit) only once
        # "late" has seen the thread pending: once those writes exist, a pending
        # check already reports the thread as decided. Then hold the action step
        # until "late" has read the thread again for its resume.
        # The task's writes and the commit may be sent concurrently: gate both.
        def gate(**_: Any) -> None:
            _wait(directory, "late-checked")

        events.register("before-call.dynamodb.UpdateItem", gate)
        events.register("before-call.dynamodb.TransactWriteItems", gate)

        def committed() -> None:
            _touch(directory, "early-committed")
            _wait(directory, "late-resumed")

        events.register("after-call.dynamodb.TransactWriteItems", _on_nth(1, committed))
    elif role == "late":

        def checked() -> None:
            _touch(directory, "late-checked")
            _wait(directory, "early-committed")

        events.register("after-call.dynamodb.Query", _on_nth(1, checked))
        events.register(
            "after-call.dynamodb.Query", _on_nth(2, lambda: _touch(directory, "late-resumed"))
        )
    else:
        raise SystemExit(f"unknown LAMBDA_TEST_ROLE {role!r}")


def main() -> None:
    """Read an event from stdin, invoke the handler, print the result line."""
    sys.path.insert(0, sys.argv[1])  # what Lambda does with the function's code directory
    event = json.load(sys.stdin)
    import handler

    sync_dir = os.environ.get("LAMBDA_TEST_SYNC_DIR")
    if sync_dir:
        _choreograph(handler, os.environ["LAMBDA_TEST_ROLE"], Path(sync_dir))
    response = handler.handler(event, None)
    loaded = {name: name in sys.modules for name in ("langgraph", "boto3", "langgraph_s3")}
    print(RESULT_MARK + json.dumps({"response": response, "loaded": loaded}), flush=True)


if __name__ == "__main__":
    main()
