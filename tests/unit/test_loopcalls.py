"""``loopcalls.run_on_loop``: a sync call from another thread runs on the loop; on the
loop's own thread, or with no running loop, it is refused and the coroutine closed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from langgraph_s3.loopcalls import run_on_loop


async def where() -> int | None:
    """The thread the coroutine ran on."""
    return threading.get_ident()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


def test_a_call_from_another_thread_runs_on_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    loop_thread = asyncio.run_coroutine_threadsafe(where(), loop).result()
    assert run_on_loop(loop, where()) == loop_thread != threading.get_ident()


def test_a_call_on_the_loops_own_thread_is_refused(loop: asyncio.AbstractEventLoop) -> None:
    async def on_the_loop() -> str:
        coro = where()
        with pytest.raises(asyncio.InvalidStateError, match="only allowed from a thread other"):
            run_on_loop(asyncio.get_running_loop(), coro)
        return str(coro.cr_frame)  # closed: no frame, never awaited (no warning)

    assert asyncio.run_coroutine_threadsafe(on_the_loop(), loop).result() == "None"


@pytest.mark.parametrize("running", [False, None])
def test_without_a_running_loop_the_call_is_refused(running: bool | None) -> None:
    stopped = asyncio.new_event_loop() if running is False else None
    coro = where()
    with pytest.raises(asyncio.InvalidStateError, match="event loop is not running"):
        run_on_loop(stopped, coro)
    assert coro.cr_frame is None
    if stopped is not None:
        stopped.close()
