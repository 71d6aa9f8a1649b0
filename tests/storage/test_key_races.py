"""Races around a thread's data key: calls cancelled during a key load or while
waiting for one, writers that disagree on ``tenant_of`` starting a thread (one of them
having taken a read's 'no key', or both at once: one scope, core/scopes.py), and a key
item that arrives after its thread's data (what the shred-leftover collector must not
take)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import Encryption, KeyScopeError
from langgraph_s3.gc import collect
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend
from tests.storage.test_sealed_storage import put


def ring() -> StaticKeyRing:
    return StaticKeyRing({"ring-1": b"\x01" * 32}, current="ring-1")


async def test_a_read_cancelled_during_its_key_load_does_not_block_later_reads(
    server_backend: Backend,
) -> None:
    """A cold encrypted read cancelled while its key Query is in flight ends the key
    load: the thread's next read loads the key itself
    instead of waiting for the cancelled one for ever."""
    config = put(server_backend.saver(encryption=ring()), "t", "v")
    stuck = asyncio.Event()
    async with server_backend.async_saver(encryption=Encryption(ring())) as saver:
        outcome = saver._outcome

        async def slow(op: Any, stats: Any) -> Any:
            ops = op if isinstance(op, list) else [op]
            if any(getattr(o, "prefix", None) == "k#" for o in ops) and not stuck.is_set():
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


@pytest.mark.parametrize("first", ["own key", "tenant"])
def test_a_writer_whose_read_found_no_key_does_not_seal_under_a_second_scope(
    inproc_backend: Backend, first: str
) -> None:
    """A saver whose read found no key items (``Encryption.absent``) writes the thread
    after another saver started it under another scope (a key of its own, or its
    tenant's): it refuses (``KeyScopeError``), or writes under the scope stored, as a
    writer that asked for the key items does; every checkpoint opens for a reader."""
    tenant = inproc_backend.saver(encryption=Encryption(ring(), tenant_of=lambda _: "acme"))
    own = inproc_backend.saver(encryption=Encryption(ring()))
    other, late = (own, tenant) if first == "own key" else (tenant, own)
    thread = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    assert late.get_tuple(thread) is None  # no key items: remembered
    configs = [put(other, "t", "first")]
    with contextlib.suppress(KeyScopeError):  # refused: it sealed nothing
        configs.append(put(late, "t", "second"))
    fresh = inproc_backend.saver(encryption=Encryption(ring()))
    for config in configs:
        assert fresh.get_tuple(config) is not None


@pytest.mark.parametrize("first", ["own key", "tenant"])
async def test_an_async_writer_whose_read_found_no_key_does_not_seal_under_a_second_scope(
    server_backend: Backend, first: str
) -> None:
    """The same with ``AsyncS3Saver`` as the late writer: the flows are the core's."""
    tenant = Encryption(ring(), tenant_of=lambda _: "acme")
    own = Encryption(ring())
    late_enc, other_enc = (tenant, own) if first == "own key" else (own, tenant)
    thread = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    async with server_backend.async_saver(encryption=late_enc) as late:
        assert await late.aget_tuple(thread) is None  # no key items: remembered
        configs = [put(server_backend.saver(encryption=other_enc), "t", "first")]
        cp = empty_checkpoint()
        cp["channel_values"], cp["channel_versions"] = {"v": "second"}, {"v": 1}
        with contextlib.suppress(KeyScopeError):  # refused: it sealed nothing
            configs.append(await late.aput(thread, cp, {"step": 1}, {"v": 1}))
    assert len(configs) == (2 if first == "tenant" else 1)
    fresh = server_backend.saver(encryption=Encryption(ring()))
    for config in configs:
        assert fresh.get_tuple(config) is not None


def test_writers_that_disagree_on_tenant_of_starting_a_thread_at_once_agree_on_one_scope(
    inproc_backend: Backend,
) -> None:
    """Two writers, one with a tenant and one with a key of its own, each start the same
    new threads at the same moment (both find no key items, both create): each thread
    gets one scope, the refused writer raises ``KeyScopeError``, and everything written
    opens for a reader."""
    savers = [
        inproc_backend.saver(encryption=Encryption(ring(), tenant_of=lambda _: "acme")),
        inproc_backend.saver(encryption=Encryption(ring())),
    ]
    threads = [f"t-{i}" for i in range(6)]
    barrier = threading.Barrier(2)
    written: list[Any] = []
    errors: list[BaseException] = []

    def write(saver: Any) -> None:
        for thread in threads:
            barrier.wait()
            try:
                written.append(put(saver, thread, thread))
            except KeyScopeError:
                pass  # refused: it sealed nothing
            except BaseException as exc:  # a worker's error would otherwise be lost
                errors.append(exc)

    workers = [threading.Thread(target=write, args=(saver,)) for saver in savers]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    keys = [i for i in inproc_backend.items() if i["sk"]["S"].startswith("k#")]
    for thread in threads:
        scopes = [i["sk"]["S"] for i in keys if i["pk"]["S"] == thread]
        assert scopes in (["k#0000000001"], ["k#t"]), (thread, scopes)
    assert len(written) >= len(threads)  # the first writer of each, at least
    fresh = inproc_backend.saver(encryption=Encryption(ring()))
    for config in written:
        tup = fresh.get_tuple(config)
        assert tup is not None and tup.checkpoint["channel_values"] == {
            "v": tup.config["configurable"]["thread_id"]
        }


async def test_a_read_cancelled_while_it_waits_for_a_key_load_leaves_the_other_waiters_be(
    server_backend: Backend,
) -> None:
    """Three cold reads of one thread at once: the first loads its key, the two others
    wait for that load (``WaitKey``). Cancelling one waiter cancels that read only:
    the other one still gets the checkpoint, not a ``CancelledError`` of its own."""
    config = put(server_backend.saver(encryption=ring()), "t", "v")
    release, asked = asyncio.Event(), asyncio.Event()
    async with server_backend.async_saver(encryption=Encryption(ring())) as saver:
        outcome = saver._outcome

        async def slow(op: Any, stats: Any) -> Any:
            names = [type(o).__name__ for o in (op if isinstance(op, list) else [op])]
            if names == ["Query", "Query"]:  # the key load, beside the checkpoint Query
                asked.set()
                await release.wait()
            return await outcome(op, stats)

        saver._outcome = slow
        loader = asyncio.ensure_future(saver.aget_tuple(config))
        await asked.wait()
        cancelled, waiter = (asyncio.ensure_future(saver.aget_tuple(config)) for _ in range(2))
        await asyncio.sleep(0.2)  # both wait for the load now
        cancelled.cancel()
        await asyncio.sleep(0)
        release.set()
        got = await asyncio.gather(loader, waiter, cancelled, return_exceptions=True)
    assert isinstance(got[2], asyncio.CancelledError)
    for tup in got[:2]:
        assert not isinstance(tup, BaseException), repr(got)
        assert tup is not None and tup.checkpoint["channel_values"] == {"v": "v"}


HOUR = 3600.0


def test_a_thread_whose_key_item_arrives_late_loses_nothing_to_one_run(
    inproc_backend: Backend,
) -> None:
    """A live thread whose key item has not replicated to the collector's region yet,
    while its data items have (a region catching up: old items, older than grace),
    survives the run that finds it keyless; by the next run, grace later, the key
    item has arrived and the thread reads as before. As objects, a shred's leftovers
    go only after two runs grace apart."""
    start = time.time()
    config = put(inproc_backend.saver(encryption=ring(), index_inline_limit=0), "t", "v")
    before = inproc_backend.items()
    ddb = inproc_backend.dynamodb()
    keys = [i for i in before if i["sk"]["S"].startswith("k#")]
    for item in keys:  # not replicated yet
        ddb.delete_item(TableName=inproc_backend.table, Key={n: item[n] for n in ("pk", "sk")})
    gc = inproc_backend.saver(encryption=Encryption(ring()), clock=lambda: start + 2 * HOUR)
    report = collect(gc, grace=HOUR)
    assert report.threads_orphaned_waiting == ["t"] and report.threads_orphaned == []
    assert report.objects_deleted == 0  # its objects are only condemned
    for item in keys:  # replicated now
        ddb.put_item(TableName=inproc_backend.table, Item=item)
    gc = inproc_backend.saver(encryption=Encryption(ring()), clock=lambda: start + 4 * HOUR)
    report = collect(gc, grace=HOUR)
    assert report.threads_orphaned == report.threads_orphaned_waiting == []
    assert report.objects_deleted == 0 and not report.errors
    assert sorted(map(str, inproc_backend.items())) == sorted(map(str, before))
    tup = inproc_backend.saver(encryption=Encryption(ring())).get_tuple(config)
    assert tup is not None and tup.checkpoint["channel_values"] == {"v": "v"}


@pytest.mark.parametrize("sealed_first", [True, False])
def test_a_keyless_thread_mixing_sealed_and_plain_checkpoints_is_not_a_shreds_leftover(
    inproc_backend: Backend, sealed_first: bool
) -> None:
    """Sealed data beside data stored without encryption, in a partition without key
    items, whichever body comes first: the thread is protected, nothing deleted (every
    body in S3 is read, not the first alone)."""
    start = time.time()
    sealed = inproc_backend.saver(encryption=ring(), index_inline_limit=0)
    plain = inproc_backend.saver(index_inline_limit=0)
    first, second = (sealed, plain) if sealed_first else (plain, sealed)
    config = put(first, "t", "one")
    put(second, "t", "two", config)
    ddb = inproc_backend.dynamodb()
    for item in inproc_backend.items():
        if item["sk"]["S"].startswith("k#"):  # shredded since
            ddb.delete_item(TableName=inproc_backend.table, Key={n: item[n] for n in ("pk", "sk")})
    before = inproc_backend.items()
    gc = inproc_backend.saver(encryption=Encryption(ring()), clock=lambda: start + 2 * HOUR)
    report = collect(gc, grace=HOUR)
    assert report.threads_orphaned == [] and report.threads_orphaned_waiting == []
    assert [p["thread_id"] for p in report.threads_protected] == ["t"]
    assert len(inproc_backend.items()) == len(before)


@pytest.mark.parametrize("late", ["checkpoint", "writes of a committed one"])
def test_what_a_warm_saver_commits_under_a_shredded_version_stays_protected(
    inproc_backend: Backend, late: str
) -> None:
    """A warm saver writes a checkpoint, or pending writes of a committed one, under
    version 1 after re-encryption shredded it: damage, not garbage. The collector
    reports it and deletes nothing of the thread, however old."""
    start = time.time()
    warm = inproc_backend.saver(encryption=Encryption(ring()), index_inline_limit=0)
    config = put(warm, "t", "v")
    assert inproc_backend.saver(encryption=Encryption(ring())).reencrypt_thread("t").version == 2
    if late == "checkpoint":
        put(warm, "t", "late", config)
    else:  # a blob of its own, which only this item references
        warm.put_writes(config, [("v", os.urandom(60_000))], "task-1")
    items, objects = len(inproc_backend.items()), set(inproc_backend.object_keys())
    for at in (start + 2 * HOUR, start + 4 * HOUR):
        gc = inproc_backend.saver(encryption=Encryption(ring()), clock=lambda at=at: at)
        report = collect(gc, grace=HOUR)
        assert report.errors and report.orphan_writes == 0 and report.objects_deleted == 0
    assert len(inproc_backend.items()) == items
    assert objects <= set(inproc_backend.object_keys())
