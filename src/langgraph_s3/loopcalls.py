"""Sync calls of ``AsyncS3Saver`` from other threads, run on the saver's event loop.

The async saver's clients belong to the loop it was created or first used on, so a
sync method (``get_tuple``, ``put``, ...) hands its coroutine to that loop and waits
for the result, as LangGraph's async Postgres saver does. Called on the loop's own
thread it would wait for itself for ever, so it is refused, and so is a call when the
loop is not running (nothing would ever run the coroutine).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


def run_on_loop(loop: asyncio.AbstractEventLoop | None, coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` on ``loop`` from another thread and return its result.

    Raises:
        asyncio.InvalidStateError: called on ``loop``'s own thread, or ``loop`` is not
            running (``coro`` is closed unrun).
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None and running is loop:
        coro.close()
        raise asyncio.InvalidStateError(
            "synchronous calls to AsyncS3Saver are only allowed from a thread other than "
            "its event loop's; on the loop use the async API (await saver.aget_tuple(...), "
            "await graph.ainvoke(...)), or use S3Saver for sync code"
        )
    if loop is None or not loop.is_running():
        coro.close()
        raise asyncio.InvalidStateError(
            "AsyncS3Saver's event loop is not running: sync calls are served by the loop "
            "the saver was created or first used on"
        )
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
