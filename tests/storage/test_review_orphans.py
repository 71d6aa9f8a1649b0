"""Adversarial checks of the shred-leftover collector and the cold key read
(review of merges a94d6a4 and 69ac152): what must not lose data or hang."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph_s3 import Encryption
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend
from tests.storage.test_sealed_storage import put


def ring() -> StaticKeyRing:
    return StaticKeyRing({"ring-1": b"\x01" * 32}, current="ring-1")


async def test_a_read_cancelled_during_its_key_load_does_not_block_later_reads(
    server_backend: Backend,
) -> None:
    """A cold encrypted read cancelled while its key Query is in flight (beside its
    checkpoint Query) ends the key load: the thread's next read loads the key itself
    instead of waiting for the cancelled one for ever."""
    config = put(server_backend.saver(encryption=ring()), "t", "v")
    stuck = asyncio.Event()
    async with server_backend.async_saver(encryption=Encryption(ring())) as saver:
        outcome = saver._outcome

        async def slow(op: Any, stats: Any) -> Any:
            if isinstance(op, list) and not stuck.is_set():
                stuck.set()
                await asyncio.Event().wait()  # the round trip never answers
            return await outcome(op, stats)

        saver._outcome = slow
        task = asyncio.ensure_future(saver.aget_tuple(config))
        await stuck.wait()
        task.cancel()
        # Whoever started the read still holds its task (and so its traceback).
        (cancelled,) = await asyncio.gather(task, return_exceptions=True)
        assert isinstance(cancelled, asyncio.CancelledError)
        tup = await asyncio.wait_for(saver.aget_tuple(config), timeout=10)
    assert tup is not None and tup.checkpoint["channel_values"] == {"v": "v"}
