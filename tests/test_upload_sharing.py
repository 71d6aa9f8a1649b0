"""Concurrent flows that need the same new blob share one upload, and never deadlock."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3.operations import S3Put
from tests.conftest import Backend


@pytest.mark.parametrize("workers", [1, 2])
def test_many_puts_sharing_new_chunks_finish_and_upload_each_chunk_once(
    inproc_backend: Backend, workers: int
) -> None:
    """Eight threads put checkpoints holding the same new 600 KB value at once through
    one saver whose pool is smaller than the number of chunks: the waits for another
    flow's upload must not occupy the pool (they used to, and deadlocked)."""
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

    def owner_submits_late(ops: list[Any]) -> list[Any]:
        if any(isinstance(op, S3Put) and op.done is not None for op in ops):
            time.sleep(0.3)
        return perform_many(ops)

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
    blobs = [k for k in sent if "/b/" in k]
    assert len(blobs) > workers, "the value should need more chunks than pool workers"
    assert all(sent[k] == 1 for k in blobs), "a shared chunk was uploaded more than once"
    for i in range(8):
        got = inproc_backend.saver().get_tuple(
            {"configurable": {"thread_id": "t", "checkpoint_ns": f"n{i}"}}
        )
        assert got is not None and got.checkpoint["channel_values"]["doc"] == value
