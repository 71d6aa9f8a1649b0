"""Concurrent flows that need the same new blob share one upload, and never deadlock."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3.operations import S3Put, WaitUpload
from tests.conftest import Backend


@pytest.mark.parametrize("workers", [1, 2])
def test_many_puts_sharing_new_chunks_finish_and_upload_each_chunk_once(
    inproc_backend: Backend, workers: int
) -> None:
    """Eight threads put checkpoints holding the same new 600 KB value at once through
    one saver whose pool is smaller than the number of waiting flows: the waits for
    another flow's upload must not occupy the pool (they used to, and deadlocked)."""
    s3 = inproc_backend.s3()
    sent: Counter[str] = Counter()
    s3.meta.events.register(
        "before-parameter-build.s3.PutObject", lambda params, **_: sent.update([params["Key"]])
    )
    saver = inproc_backend.saver(s3_client=s3, max_concurrency=workers)
    value = os.urandom(300_000).hex()  # ~600 KB: dozens of chunks

    # The flow that claimed the uploads submits them late, so the other flows' waits
    # for those uploads reach the pool first: the order that used to deadlock it.
    perform_many = saver._perform_many

    def owner_submits_late(ops: list[Any], stats: Any) -> list[Any]:
        if any(isinstance(op, S3Put) and op.done is not None for op in ops):
            time.sleep(0.3)
        return perform_many(ops, stats)

    saver._perform_many = owner_submits_late
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def put(i: int) -> None:
        try:
            cp = empty_checkpoint()
            cp["channel_values"] = {"doc": value}
            cp["channel_versions"] = {"doc": saver.get_next_version(None, None)}
            config: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": f"n{i}"}}
            start.wait()
            saver.put(config, cp, {"step": i}, cp["channel_versions"])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "puts sharing uploads deadlocked"
    assert not errors, errors
    # The chunks go up as one pack, which all eight puts build alike: one flow
    # uploads it while seven wait, more waits than the pool has workers.
    assert [k for k in sent if "/b/" in k] == [k for k in sent if k.endswith(".pack")]
    assert list(sent.values()) == [1], "the shared pack was uploaded more than once"
    for i in range(8):
        got = inproc_backend.saver().get_tuple(
            {"configurable": {"thread_id": "t", "checkpoint_ns": f"n{i}"}}
        )
        assert got is not None and got.checkpoint["channel_values"]["doc"] == value


# A value LangGraph hands to put_writes and to put at the same moment: one blob.
SHARED = os.urandom(40_000).hex()


def _shared_value_checkpoint(saver: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"ch": SHARED}
    cp["channel_versions"] = {"ch": saver.get_next_version(None, None)}
    return cp, dict(cp["channel_versions"])


def _injected_failure() -> ClientError:
    return ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, "PutObject")


def test_a_waiter_whose_uploader_failed_uploads_itself(inproc_backend: Backend) -> None:
    """Flow A (put_writes) claims the upload of a blob and fails to send it; flow B
    (put of a checkpoint with the same value) waits for A's upload and is parked until
    A has failed and forgotten the upload. B must learn that the upload failed and
    upload the blob itself: it used to be told "uploaded" and commit a checkpoint
    whose blob was never written (torn)."""
    s3 = inproc_backend.s3()
    saver = inproc_backend.saver(s3_client=s3)
    root = saver.put(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
        empty_checkpoint(), {"step": -1}, {},
    )  # fmt: skip
    a_sending, b_parked, a_done = threading.Event(), threading.Event(), threading.Event()
    calls: list[str] = []

    def fail_first_blob(request: Any, **kwargs: Any) -> None:
        calls.append(request.url)
        if len(calls) == 1:
            a_sending.set()
            assert b_parked.wait(10)
            raise _injected_failure()

    s3.meta.events.register("before-send.s3.PutObject", fail_first_blob)
    perform = saver._perform

    def park_waits_until_a_failed(op: Any, stats: Any = None) -> Any:
        if isinstance(op, WaitUpload):
            b_parked.set()
            assert a_done.wait(10)
        return perform(op, stats)

    saver._perform = park_waits_until_a_failed
    outcome: dict[str, Any] = {}

    def flow_a() -> None:
        try:
            saver.put_writes(root, [("ch", SHARED)], "task-1")
        except Exception as exc:
            outcome["a"] = exc
        finally:
            a_done.set()

    a = threading.Thread(target=flow_a, daemon=True)
    a.start()
    assert a_sending.wait(10)
    cp, versions = _shared_value_checkpoint(saver)
    committed = saver.put(root, cp, {"step": 0}, versions)
    a.join(10)
    assert isinstance(outcome.get("a"), Exception), "flow A's upload should have failed"
    got = inproc_backend.saver().get_tuple(committed)
    assert got is not None and got.checkpoint["channel_values"]["ch"] == SHARED
    assert calls.count(calls[0]) == 2, "B should have sent the blob A failed to send"


async def test_a_waiter_whose_uploader_failed_uploads_itself_async(
    server_backend: Backend,
) -> None:
    """The same forced ordering through AsyncS3Saver over HTTP."""
    import asyncio

    async with server_backend.async_saver() as saver:
        root = await saver.aput(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            empty_checkpoint(), {"step": -1}, {},
        )  # fmt: skip
        s3, _ = await saver.clients()
        a_sending, b_parked, a_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
        calls: list[str] = []

        async def fail_first_put(**kwargs: Any) -> None:
            calls.append(kwargs["request"].url)
            if len(calls) == 1:
                a_sending.set()
                await asyncio.wait_for(b_parked.wait(), 10)
                raise _injected_failure()

        s3.meta.events.register("before-send.s3.PutObject", fail_first_put)
        perform = saver._perform

        async def park_waits_until_a_failed(op: Any, stats: Any = None) -> Any:
            if isinstance(op, WaitUpload):
                b_parked.set()
                await asyncio.wait_for(a_done.wait(), 10)
            return await perform(op, stats)

        saver._perform = park_waits_until_a_failed

        async def flow_a() -> BaseException | None:
            try:
                await saver.aput_writes(root, [("ch", SHARED)], "task-1")
            except Exception as exc:
                return exc
            finally:
                a_done.set()
            return None

        a = asyncio.create_task(flow_a())
        await asyncio.wait_for(a_sending.wait(), 10)
        cp, versions = _shared_value_checkpoint(saver)
        committed = await saver.aput(root, cp, {"step": 0}, versions)
        assert isinstance(await a, Exception), "flow A's upload should have failed"
    async with server_backend.async_saver() as fresh:
        got = await fresh.aget_tuple(committed)
    assert got is not None and got.checkpoint["channel_values"]["ch"] == SHARED
    assert calls.count(calls[0]) == 2, "B should have sent the blob A failed to send"
