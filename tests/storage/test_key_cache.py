"""The data keys a warm saver keeps (``Encryption.keys``) on moto: what another saver
(or another call of the same saver) does to a thread's key reaches them.

* A thread id deleted by another saver and used again starts under a new key item
  (or tenant reference), never under the cached, shredded key.
* Re-encrypting a thread does not pull its keys from under a read of the same saver.
* A tenant's shredded key opens nothing on a warm saver after ``key_ttl``, also for
  a thread whose slot was loaded later than the tenant's key.
"""

from __future__ import annotations

import asyncio
import os
import time
from types import SimpleNamespace
from typing import Any

import pytest

from langgraph_s3 import DataKeyError, Encryption
from langgraph_s3.core import datakeys
from langgraph_s3.core.datakeys import KeyScope
from langgraph_s3.core.read import get_tuple
from langgraph_s3.driving import Steps
from langgraph_s3.operations import S3Get
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend
from tests.storage.test_sealed_storage import put


def ring() -> StaticKeyRing:
    return StaticKeyRing({"r": os.urandom(32)}, current="r")


def key_sks(backend: Backend, thread: str) -> list[str]:
    return sorted(
        i["sk"]["S"]
        for i in backend.items()
        if i["pk"]["S"] == thread and i["sk"]["S"].startswith("k#")
    )


def values(saver: Any, config: Any) -> Any:
    return saver.get_tuple(config).checkpoint["channel_values"]


@pytest.mark.parametrize("tenant", [None, "T"], ids=["thread-key", "tenant-key"])
def test_a_thread_id_deleted_elsewhere_starts_again_under_a_stored_key(
    inproc_backend: Backend, tenant: str | None
) -> None:
    keys = ring()
    a = inproc_backend.saver(encryption=Encryption(keys, tenant_of=lambda _: tenant))
    b = inproc_backend.saver(encryption=Encryption(keys, tenant_of=lambda _: tenant))
    before = put(a, "t", "hello")
    stored = key_sks(inproc_backend, "t")
    b.delete_thread("t")  # shreds t's key (or drops its tenant reference)
    assert key_sks(inproc_backend, "t") == []
    # A new conversation with the same id on warm A, within its key_ttl.
    assert a.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}) is None
    assert a.encryption.fresh("t/", time.monotonic()) is None  # the read alone: reload
    config = put(a, "t", "fresh start " * 10)
    assert key_sks(inproc_backend, "t") == stored
    cold = inproc_backend.saver(encryption=Encryption(keys))
    assert values(cold, config) == {"v": "fresh start " * 10}
    assert values(a, config) == {"v": "fresh start " * 10}
    assert cold.get_tuple(before) is None


def test_a_first_checkpoint_alone_reloads_the_key(inproc_backend: Backend) -> None:
    """Without the read LangGraph does first: ``put`` of a checkpoint with no parent."""
    keys = ring()
    a = inproc_backend.saver(encryption=Encryption(keys))
    put(a, "t", "hello")
    inproc_backend.saver(encryption=Encryption(keys)).delete_thread("t")
    config = put(a, "t", "again")
    assert key_sks(inproc_backend, "t") == ["k#0000000001"]
    assert values(inproc_backend.saver(encryption=Encryption(keys)), config) == {"v": "again"}


def test_the_async_saver_starts_a_deleted_thread_id_under_a_stored_key(
    server_backend: Backend,
) -> None:
    keys = ring()
    b = server_backend.saver(encryption=Encryption(keys))

    async def main() -> Any:
        async with server_backend.async_saver(encryption=Encryption(keys)) as a:
            first = await a.aput(*_first("hello"))
            assert first
            b.delete_thread("t")
            assert await a.aget_tuple(_first("")[0]) is None
            return await a.aput(*_first("again"))

    config = asyncio.run(main())
    assert key_sks(server_backend, "t") == ["k#0000000001"]
    assert values(server_backend.saver(encryption=Encryption(keys)), config) == {"v": "again"}


def _first(value: str) -> tuple[Any, ...]:
    """``aput`` arguments: a first checkpoint of thread t holding ``value``."""
    from langgraph.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": 1}
    return {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {"step": 1}, {"v": 1}


def test_reencrypting_does_not_pull_the_key_from_under_a_read(inproc_backend: Backend) -> None:
    s = inproc_backend.saver(encryption=Encryption(ring()), index_inline_limit=0)
    config = put(s, "t", os.urandom(30_000))  # the body in S3
    # As an AsyncS3Saver interleaves two calls: get_tuple up to its S3 read ...
    steps = Steps(get_tuple(s, config))
    answer = None
    for op in steps:
        if any(isinstance(o, S3Get) for o in (op if isinstance(op, list) else [op])):
            answer = s._outcome(op, None)
            break
        steps.answer(*s._outcome(op, None))
    assert answer is not None
    assert s.reencrypt_thread("t").version == 2  # ... meanwhile, on the same saver
    steps.answer(*answer)
    for op in steps:
        steps.answer(*s._outcome(op, None))
    assert steps.result is not None
    assert steps.result.checkpoint["id"] == config["configurable"]["checkpoint_id"]


def test_a_shredded_tenant_key_opens_nothing_after_key_ttl(
    inproc_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = ring()
    w = inproc_backend.saver(encryption=Encryption(keys, tenant_of=lambda _: "T"))
    one, two = put(w, "t1", "one"), put(w, "t2", "two")
    now = [100.0]
    monkeypatch.setattr(datakeys, "time", SimpleNamespace(monotonic=lambda: now[0]))
    a = inproc_backend.saver(encryption=Encryption(keys, key_ttl=10.0))
    a.get_tuple(one)  # loads tenant T's key at 100
    now[0] = 105.0
    inproc_backend.saver(encryption=Encryption(keys)).run(
        datakeys.shred(w, keys, KeyScope.tenant("T"))
    )
    now[0] = 108.0
    assert values(a, two) == {"v": "two"}  # t2's slot: its reference read now, T's key cached
    now[0] = 110.5  # key_ttl after T's key was read, not after t2's slot was
    with pytest.raises(DataKeyError):
        a.get_tuple(two)
