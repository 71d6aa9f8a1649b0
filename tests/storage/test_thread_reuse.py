"""A thread id deleted by another saver and used again, on a warm saver without
encryption: the warm saver's caches (blobs it knows exist, entries it stored) must not
make the new run name objects the delete removed.

The encrypted twin is tests/storage/test_key_cache.py, where the cached data key is
what must not survive the delete.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from tests.conftest import Backend
from tests.storage.test_sealed_storage import put

ROOT = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def values(saver: Any, config: Any) -> Any:
    return saver.get_tuple(config).checkpoint["channel_values"]


@pytest.mark.parametrize("size", [200_000, 1_400_000], ids=["chunks", "chunk-list"])
def test_a_thread_id_deleted_elsewhere_uploads_its_blobs_again(
    inproc_backend: Backend, size: int
) -> None:
    big = os.urandom(size)  # chunks named by content; over 64 of them, a chunk list
    a = inproc_backend.saver()
    put(a, "t", big)
    inproc_backend.saver().delete_thread("t")
    assert inproc_backend.object_keys() == []
    # The same conversation again on warm A (LangGraph reads the latest first).
    assert a.get_tuple(ROOT) is None
    config = put(a, "t", big)
    assert inproc_backend.object_keys() != []
    assert values(inproc_backend.saver(), config) == {"v": big}


@pytest.mark.parametrize("deleter", ["another saver", "the same saver"])
def test_a_first_checkpoint_alone_uploads_its_blobs_again(
    inproc_backend: Backend, deleter: str
) -> None:
    """Without the read LangGraph does first: ``put`` of a checkpoint with no parent."""
    big = os.urandom(200_000)
    a = inproc_backend.saver()
    put(a, "t", big)
    (inproc_backend.saver() if deleter == "another saver" else a).delete_thread("t")
    config = put(a, "t", big)
    assert values(inproc_backend.saver(), config) == {"v": big}


def test_a_new_thread_leaves_what_the_saver_knows_of_other_threads(
    inproc_backend: Backend,
) -> None:
    big = os.urandom(1_400_000)
    a = inproc_backend.saver()
    config = put(a, "b", big)
    stored = set(inproc_backend.object_keys())
    assert a.get_tuple(ROOT) is None  # a new thread: nothing of "b" is forgotten
    put(a, "t", "hello")
    put(a, "b", big, parent=config)
    assert set(inproc_backend.object_keys()) == stored  # b's chunks and list re-used


def test_the_async_saver_uploads_the_blobs_of_a_deleted_thread_id_again(
    server_backend: Backend,
) -> None:
    big = os.urandom(200_000)

    async def main() -> Any:
        async with server_backend.async_saver() as a:
            await put_async(a, big)
            async with server_backend.async_saver() as b:
                await b.adelete_thread("t")
            assert await a.aget_tuple(ROOT) is None
            return await put_async(a, big)

    config = asyncio.run(main())
    assert values(server_backend.saver(), config) == {"v": big}


async def put_async(saver: Any, value: Any) -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    version = saver.get_next_version(None, None)
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": version}
    return await saver.aput(ROOT, cp, {"step": 1}, {"v": version})
