"""AsyncS3Saver never blocks its event loop, reads blobs concurrently, serves sync calls
from other threads only, and is an optional extra.

Latency is injected at the wire (a ``before-send`` handler that sleeps) so every request
takes at least ``L``; timings are compared with ``L`` or with a control measured in the
same test, never with absolute numbers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

import langgraph_s3.aio
from langgraph_s3 import AsyncS3Saver, MissingDependencyError
from tests.conftest import REGION, Backend, RequestLog, add_latency
from tests.graphs.test_graphs import Calls, build_approval

LATENCY = 0.1  # seconds added to every request in the latency tests


def cfg(thread_id: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **extra}}


def wide_checkpoint(channels: int, size: int) -> Checkpoint:
    """A checkpoint with ``channels`` distinct values of ``size`` bytes (one blob each)."""
    cp = empty_checkpoint()
    cp["channel_values"] = {f"ch{i:02d}": os.urandom(size) for i in range(channels)}
    cp["channel_versions"] = {name: "1" for name in cp["channel_values"]}
    return cp


async def aput(saver: Any, thread: str, cp: Checkpoint) -> dict[str, Any]:
    return await saver.aput(  # type: ignore[no-any-return]
        cfg(thread), cp, {"source": "loop", "step": 0}, dict(cp["channel_versions"])
    )


async def aput_one_by_one(saver: Any, thread: str, cp: Checkpoint) -> dict[str, Any]:
    """Put ``cp`` as the last of a chain of checkpoints that add its channels one at a
    time: each put has one new chunk, kept as a loose blob, so the last checkpoint's
    values are in as many objects as it has channels (one put packs its new chunks)."""
    config = cfg(thread)
    names = list(cp["channel_values"])
    for i, name in enumerate(names):
        step = empty_checkpoint()
        step["channel_values"] = {n: cp["channel_values"][n] for n in names[: i + 1]}
        step["channel_versions"] = {n: "1" for n in names[: i + 1]}
        config = await saver.aput(config, step, {"source": "loop", "step": i}, {name: "1"})
    return config


@asynccontextmanager
async def slow_clients(
    backend: Backend, latency: float, log: RequestLog | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """aiobotocore S3 and DynamoDB clients on the moto server whose every request first
    awaits ``asyncio.sleep(latency)`` (so the wait itself never blocks the loop)."""
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    async def delay(**_: Any) -> None:
        await asyncio.sleep(latency)

    session = get_session()
    kw = {
        "endpoint_url": backend.endpoint_url,
        "region_name": REGION,
        "config": AioConfig(max_pool_connections=50),
    }
    async with (
        session.create_client("s3", **kw) as s3,
        session.create_client("dynamodb", **kw) as ddb,
    ):
        for client in (s3, ddb):
            client.meta.events.register("before-send.*.*", delay)
            if log is not None:
                log.attach(client)
        yield s3, ddb


class Heartbeat:
    """Ticks every ``interval`` on the running loop and records the largest gap."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.ticks = 0
        self.max_gap = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(self.interval)
            now = time.perf_counter()
            self.max_gap = max(self.max_gap, now - last)
            self.ticks += 1
            last = now

    async def around(self, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``work`` while ticking; return its result."""
        self._task = asyncio.create_task(self._run())
        await asyncio.sleep(self.interval * 2)  # the heartbeat is running
        self.max_gap = 0.0
        self.ticks = 0
        try:
            return await work()
        finally:
            await asyncio.sleep(self.interval * 2)  # let it see a gap that just ended
            self._task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await self._task


# --------------------------------------------------------------------------- (a)
HEARTBEAT_LATENCY = 0.4  # long enough that OS scheduling hiccups (~0.1 s here) are small


@pytest.fixture(scope="module")
def moto_elsewhere() -> Iterator[str]:
    """A moto server in another process (``langgraph_s3.local``), so the fake service's
    own CPU work does not compete with the event loop under test for this process's GIL."""
    script = (
        "import time\n"
        "from langgraph_s3.local import local_endpoint\n"
        "with local_endpoint() as url:\n"
        "    print(url, flush=True)\n"
        "    time.sleep(3600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait(10)


async def test_event_loop_keeps_ticking_during_io(moto_elsewhere: str) -> None:
    """While a checkpoint of 30 x 40 KB channels (one pack) is written and read back with
    L = 0.4 s added to every request, a 5 ms heartbeat on the same loop keeps ticking: its
    largest gap stays far below one request (< L/2). Control, same test: a blocking
    S3Saver read on the loop stalls the heartbeat for longer than one request.

    The machine is shared, so the process itself is sometimes descheduled for ~0.1 s; the
    write+read is measured twice and the better attempt counts. A saver that blocks the
    loop on I/O stalls it for >= L in every attempt.
    """
    latency = HEARTBEAT_LATENCY
    backend = Backend("server", moto_elsewhere)
    backend.saver().setup()
    attempts: list[tuple[float, float]] = []
    async with slow_clients(backend, latency) as (s3, ddb):
        for attempt in range(2):
            cp = wide_checkpoint(30, 40_000)
            writer = AsyncS3Saver(backend.bucket, backend.table, s3_client=s3, dynamodb_client=ddb)
            beat = Heartbeat()
            config = await beat.around(lambda: aput(writer, f"wide-{attempt}", cp))  # noqa: B023
            write_gap, write_ticks = beat.max_gap, beat.ticks
            reader = AsyncS3Saver(backend.bucket, backend.table, s3_client=s3, dynamodb_client=ddb)
            tup = await beat.around(lambda: reader.aget_tuple(config))  # noqa: B023
            assert tup is not None
            assert tup.checkpoint["channel_values"] == cp["channel_values"]
            assert write_ticks > 20 and beat.ticks > 20
            attempts.append((write_gap, beat.max_gap))
    # each attempt's put packs its 30 new chunks into one object
    packs = [k for k in backend.object_keys() if k.endswith(".pack")]
    assert len(packs) == 2

    # Control: the same read done by blocking calls on the loop thread.
    s3_sync, ddb_sync = backend.s3(), backend.dynamodb()
    for client in (s3_sync, ddb_sync):
        add_latency(client, latency)
    blocking = backend.saver(s3_client=s3_sync, dynamodb_client=ddb_sync)

    async def blocking_read() -> Any:
        return blocking.get_tuple(config)

    beat = Heartbeat()
    assert await beat.around(blocking_read) is not None
    blocked_gap = beat.max_gap

    assert blocked_gap > latency, "the heartbeat does not detect a blocked loop"
    best = min(attempts, key=max)
    assert max(best) < latency / 2, (attempts, blocked_gap)


# --------------------------------------------------------------------------- (b)
async def test_blobs_are_read_concurrently(server_backend: Backend) -> None:
    """A cold read of a checkpoint with 20 blobs sends its GetObjects together: with
    every request held for LATENCY, most of them are in flight at the same moment
    (counted at the send hook, not timed)."""
    cp = wide_checkpoint(20, 20_000)
    async with server_backend.async_saver() as writer:
        config = await aput_one_by_one(writer, "twenty", cp)
    blob_keys = [k for k in server_backend.object_keys() if "/b/" in k]
    assert len(blob_keys) == 20

    log = RequestLog()
    in_flight = {"now": 0, "most": 0}

    def count(**_: Any) -> None:
        in_flight["now"] += 1
        in_flight["most"] = max(in_flight["most"], in_flight["now"])

    def done(**_: Any) -> None:
        in_flight["now"] -= 1

    async with slow_clients(server_backend, LATENCY, log) as (s3, ddb):
        # Counted when the saver issues the request, before the added latency.
        s3.meta.events.register("provide-client-params.s3.GetObject", count)
        s3.meta.events.register("after-call.s3.GetObject", done)
        reader = AsyncS3Saver(
            server_backend.bucket, server_backend.table, s3_client=s3, dynamodb_client=ddb
        )
        tup = await reader.aget_tuple(cfg("twenty"))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == cp["channel_values"]
        assert (
            tup.config["configurable"]["checkpoint_id"] == config["configurable"]["checkpoint_id"]
        )
        # 20 blobs, plus the checkpoint object if its body is in S3 (not in the index item)
        objects = [k for k in server_backend.object_keys() if "/c/" in k]
        assert log.counts()[("s3", "GetObject")] == 20 + len(objects), log.calls
    assert in_flight["most"] >= 15, in_flight  # one at a time would show 1


async def test_put_writes_lets_work_already_due_run_first(server_backend: Backend) -> None:
    """LangGraph starts ``aput_writes`` in the background from a task's done callback,
    then wakes what waits for that task. The woken code runs before the saver sends
    (and builds) its request, instead of after ~2 ms of request building on the loop."""
    async with server_backend.async_saver() as saver:
        config = await saver.aput(cfg("due"), empty_checkpoint(), {"source": "input"}, {})
        _, ddb = await saver.clients()
        order: list[str] = []
        ddb.meta.events.register("before-call.dynamodb.*", lambda **_: order.append("request"))
        done = asyncio.get_running_loop().create_future()

        async def waiting_task() -> None:
            await done
            order.append("woken")

        waiter = asyncio.create_task(waiting_task())
        await asyncio.sleep(0)  # it is waiting now
        writes = asyncio.ensure_future(saver.aput_writes(config, [("x", 1)], "task-1"))
        done.set_result(None)
        await asyncio.gather(writes, waiter)
        assert order == ["woken", "request"]
        tup = await saver.aget_tuple(config)
        assert tup is not None and tup.pending_writes == [("task-1", "x", 1)]


# --------------------------------------------------------------------------- (c)
class LoopThread:
    """An event loop running in a background thread (as in a web server's worker)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def call_on_loop(self, fn: Callable[[], Any], timeout: float) -> tuple[str, Any]:
        """Call ``fn`` from inside the loop's thread; ("ok", result) or ("error", exc).

        Waits at most ``timeout``: a deadlocked loop fails the test instead of hanging it.
        """
        done: concurrent.futures.Future[tuple[str, Any]] = concurrent.futures.Future()

        def call() -> None:
            try:
                done.set_result(("ok", fn()))
            except BaseException as exc:
                done.set_result(("error", exc))

        self.loop.call_soon_threadsafe(call)
        return done.result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def test_sync_calls_from_other_threads_run_on_the_saver_loop(server_backend: Backend) -> None:
    """Sync methods called from threads other than the saver's loop work (and a sync graph
    runs on the async saver that way); from the loop's own thread they raise
    InvalidStateError at once instead of deadlocking."""
    runner = LoopThread()
    try:

        async def create() -> AsyncS3Saver:
            saver: AsyncS3Saver = server_backend.async_saver()
            await saver.aget_tuple(cfg("warm-up"))  # binds the saver to this loop
            return saver

        saver = runner.run(create())
        assert saver.loop is runner.loop

        cp = wide_checkpoint(2, 30_000)
        config = saver.put(
            cfg("sync"), cp, {"source": "loop", "step": 0}, {"ch00": "1", "ch01": "1"}
        )
        saver.put_writes(config, [("ch00", b"w")], "task-1")
        tup = saver.get_tuple(cfg("sync"))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == cp["channel_values"]
        assert tup.pending_writes == [("task-1", "ch00", b"w")]
        assert [t.config for t in saver.list(cfg("sync"))] == [config]
        assert runner.run(saver.aget_tuple(config)) == tup

        calls = Calls()
        graph = build_approval(saver, calls)
        graph.invoke({"request": "#5"}, cfg("graph"))
        assert graph.get_state(cfg("graph")).next == ("approval",)

        kind, outcome = runner.call_on_loop(lambda: saver.get_tuple(cfg("sync")), timeout=10)
        assert kind == "error", outcome
        assert isinstance(outcome, asyncio.InvalidStateError)
        assert "aget_tuple" in str(outcome)
        kind, outcome = runner.call_on_loop(lambda: list(saver.list(cfg("sync"))), timeout=10)
        assert kind == "error" and isinstance(outcome, asyncio.InvalidStateError)

        # The loop is still healthy afterwards.
        assert runner.run(saver.aget_tuple(cfg("sync"))) == tup
        runner.run(saver.aclose())
    finally:
        runner.close()


def test_sync_call_without_a_running_loop(server_backend: Backend) -> None:
    """A saver created outside any loop has no loop to serve sync calls: InvalidStateError."""
    saver = server_backend.async_saver()
    with pytest.raises(asyncio.InvalidStateError, match="not running"):
        saver.get_tuple(cfg("t"))


# --------------------------------------------------------------------------- (d)
def test_missing_aiobotocore_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without aiobotocore, constructing AsyncS3Saver raises MissingDependencyError (an
    ImportError) that says how to install the extra."""
    monkeypatch.setattr(langgraph_s3.aio, "aiobotocore_session", None)
    with pytest.raises(MissingDependencyError) as info:
        AsyncS3Saver("bucket", "table")
    assert "pip install 'langgraph-s3[async]'" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_package_imports_without_aiobotocore() -> None:
    """In a fresh interpreter where aiobotocore cannot be imported, ``import langgraph_s3``
    and S3Saver work and AsyncS3Saver explains the missing extra; a normal import does not
    load aiobotocore at all."""
    script = """
import sys
sys.modules["aiobotocore"] = None
sys.modules["aiobotocore.session"] = None
import langgraph_s3
from langgraph_s3 import S3Saver, MissingDependencyError
S3Saver("bucket", "table", region_name="us-east-1")
try:
    langgraph_s3.AsyncS3Saver("bucket", "table")
except MissingDependencyError as exc:
    print("MISSING:", exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "MISSING:" in done.stdout
    assert "pip install 'langgraph-s3[async]'" in done.stdout

    lazy = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, langgraph_s3; print('aioboto3' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert lazy.returncode == 0, lazy.stderr
    assert lazy.stdout.strip() == "False"


def test_an_async_saver_imports_nothing_a_plain_saver_does_not_use() -> None:
    """Cold start: importing and constructing an unencrypted AsyncS3Saver loads neither
    boto3 (the sync saver's), cryptography (sealing), the CLI or the collector, nor
    difflib (only for the messages of misspelt options)."""
    script = """
import sys
from langgraph_s3 import AsyncS3Saver
AsyncS3Saver("bucket", "table", region_name="us-east-1", endpoint_url="http://127.0.0.1:9")
unused = ("boto3", "cryptography", "difflib", "langgraph_s3.cli", "langgraph_s3.gc")
print(sorted(m for m in sys.modules if m.startswith(unused)))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --------------------------------------------------------------------------- harness
LOCAL_ENDPOINT_SCRIPT = """
import asyncio, os
from langgraph.checkpoint.base import empty_checkpoint
from langgraph_s3 import AsyncS3Saver
from langgraph_s3.local import local_endpoint

async def main(url):
    async with AsyncS3Saver("bkt", "tbl", endpoint_url=url, region_name="us-east-1") as saver:
        await saver.setup()
        s3, ddb = await saver.clients()

        async def delay(**_):
            await asyncio.sleep(0.05)  # a slower network, awaited: it never blocks the loop

        for client in (s3, ddb):
            client.meta.events.register("before-send.*.*", delay)
        cp = empty_checkpoint()
        cp["channel_values"] = {f"c{j}": os.urandom(40_000) for j in range(30)}
        cp["channel_versions"] = {k: "1" for k in cp["channel_values"]}
        conf = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        await saver.aput(conf, cp, {}, dict(cp["channel_versions"]))
        assert (await saver.aget_tuple(conf)).checkpoint["channel_values"] == cp["channel_values"]

with local_endpoint() as url:
    asyncio.run(main(url))
print("done")
"""


def test_local_endpoint_never_blocks_an_async_client() -> None:
    """``langgraph_s3.local`` (the embedded moto endpoint of the demo and the tests) serves
    an AsyncS3Saver that writes and reads 30 blobs with a little network latency.

    Regression: its lock used to be taken in moto's client-side hook too, so the client's
    event loop waited for a server thread that was waiting for that loop. Run in a
    subprocess with a deadline (it normally takes a few seconds), so a deadlock fails this
    test instead of hanging the suite."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", LOCAL_ENDPOINT_SCRIPT],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        done = None
    assert done is not None, (
        "an AsyncS3Saver on langgraph_s3.local.local_endpoint() made no progress for 30 s: "
        "serialize_moto's lock in the client-side before-send hook blocks the event loop "
        "while the server thread holds it, waiting for a body only that loop can send"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("done")
