"""Re-encrypting a thread under a new data key (``reencrypt_thread``,
``core/reencrypt.py``) on moto: a thread with history (several checkpoints, pending
writes, bodies in the index and in S3, loose blobs, packs, a chunk list, a subgraph
namespace) reads the same afterwards, through cold and warm savers, on S3Saver and
AsyncS3Saver, with a static ring and with KMS; only the new key version is left; what
was sealed under the old one no longer opens and ``gc`` removes it; a run that stopped
midway is finished by the next; writes under the old key meanwhile are caught."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_s3 import (
    Encryption,
    InvalidConfigError,
    KeyScopeError,
    KeyVersionError,
    ReencryptionError,
)
from langgraph_s3.core import reseal, schema
from langgraph_s3.gc import collect
from langgraph_s3.sealing import StaticKeyRing
from langgraph_s3.sealing.kms import KmsKeyRing
from tests.conftest import REGION, Backend, RequestLog
from tests.core.test_sealed import ring as static_ring
from tests.graphs.test_encryption import build
from tests.graphs.test_graphs import cfg

SUB = "child:1"


def kms_client(backend: Backend) -> Any:
    return boto3.client("kms", region_name=REGION, endpoint_url=backend.endpoint_url)


def kms_ring(backend: Backend) -> tuple[KmsKeyRing, Any]:
    client = kms_client(backend)
    return KmsKeyRing(client.create_key()["KeyMetadata"]["Arn"]), client


def start(saver: Any, thread: str = "t") -> Any:
    """Run the graph up to its interrupt, and store a subgraph namespace beside it:
    two checkpoints with pending writes, one of them a value large enough for a blob."""
    graph = build(saver)
    graph.invoke({"log": ["start"]}, cfg(thread))
    parent = None
    for step in range(2):
        cp = empty_checkpoint()
        version = saver.get_next_version(None, None)
        cp["channel_values"] = {"v": os.urandom(30_000), "n": step}
        cp["channel_versions"] = {"v": version, "n": version}
        config = parent or {"configurable": {"thread_id": thread, "checkpoint_ns": SUB}}
        parent = saver.put(config, cp, {"step": step, "source": "loop"}, {"v": version})
        saver.put_writes(parent, [("v", os.urandom(20_000)), ("n", step + 1)], f"task-{step}")
    return graph


def snapshot(saver: Any, thread: str = "t") -> dict[str, Any]:
    """Every checkpoint tuple of both namespaces (whole tuples), and the latest ones."""
    out: dict[str, Any] = {}
    for ns in ("", SUB):
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        out[f"list {ns}"] = list(saver.list(config))
        out[f"latest {ns}"] = saver.get_tuple(config)
        out[f"first {ns}"] = saver.get_tuple(out[f"list {ns}"][-1].config)
    assert len(out["list "]) >= 4 and len(out[f"list {SUB}"]) == 2
    return out


def key_items(backend: Backend, thread: str = "t") -> list[str]:
    return sorted(
        i["sk"]["S"] for i in backend.items() if i["pk"]["S"] == thread and i["sk"]["S"][:2] == "k#"
    )


def reference_values() -> dict[str, Any]:
    graph = build(InMemorySaver())
    graph.invoke({"log": ["start"]}, cfg("t"))
    graph.invoke(Command(resume="yes"), cfg("t"))
    return dict(graph.get_state(cfg("t")).values)


@pytest.mark.parametrize("ring_kind", ["static", "kms"])
def test_a_thread_reads_the_same_under_its_new_key_and_the_old_key_is_gone(
    inproc_backend: Backend, ring_kind: str, request_log: RequestLog
) -> None:
    if ring_kind == "kms":
        ring, kms = kms_ring(inproc_backend)
        make: Callable[[], Any] = lambda: inproc_backend.saver(  # noqa: E731
            encryption=Encryption(ring), kms_client=kms
        )
        # A cold container (a ring of its own, nothing cached), its KMS calls counted.
        operator = inproc_backend.saver(
            encryption=Encryption(KmsKeyRing(ring.key_id)),
            kms_client=request_log.attach(kms_client(inproc_backend)),
        )
    else:
        ring = static_ring()
        make = lambda: inproc_backend.saver(encryption=Encryption(ring))  # noqa: E731
        operator = make()
    warm = make()
    start(warm)
    before = snapshot(make())
    first_item = next(
        i
        for i in inproc_backend.items()
        if i["pk"]["S"] == "t" and "b" in i and i["sk"]["S"][:2] == "c#" and "tid" not in i
    )

    for client in (operator.s3_client, operator.dynamodb_client):
        request_log.attach(client)
    done = operator.reencrypt_thread("t")
    assert (done.version, done.shredded) == (2, (1,))
    assert done.checkpoints == len(before["list "]) + 2
    assert done.objects > 0
    assert key_items(inproc_backend) == ["k#0000000002"]
    calls = request_log.counts()
    # the key versions, again to load both, the thread's items, again to check
    assert calls[("dynamodb", "Query")] == 4
    # the new key version, then each checkpoint and writes item in place
    rewritten = [i for i in inproc_backend.items() if i["sk"]["S"][:2] == "c#"]
    assert calls[("dynamodb", "PutItem")] == 1 + len(rewritten)
    # the old key deleted, and the chunk items re-sealed if any (random values: FastCDC
    # may cut a small last piece, a chunk item; 7 checkpoints are one batch)
    assert calls[("dynamodb", "BatchWriteItem")] == 1 + -(-done.chunk_items // 25)
    assert calls[("s3", "PutObject")] == done.objects
    if ring_kind == "kms":  # the new key, and the old one unwrapped once
        assert (calls[("kms", "GenerateDataKey")], calls[("kms", "Decrypt")]) == (1, 1)

    # A cold saver reads every checkpoint, pending write and parent link as before.
    assert snapshot(make()) == before
    # A warm one that loaded the old key (and cached its entries) too, and resumes.
    assert snapshot(warm) == before
    build(warm).invoke(Command(resume="yes"), cfg("t"))
    assert dict(build(make()).get_state(cfg("t")).values) == reference_values()

    # What was sealed under the old version no longer opens: the old item, put back.
    inproc_backend.dynamodb().put_item(TableName=inproc_backend.table, Item=first_item)
    with pytest.raises(KeyVersionError, match="shredded") as info:
        make().get_tuple(
            {
                "configurable": {
                    "thread_id": "t",
                    "checkpoint_ns": schema.parse_row(first_item).ns,
                    "checkpoint_id": schema.parse_row(first_item).checkpoint_id,
                }
            }
        )
    assert (info.value.key_id, info.value.thread_id, info.value.newer) == ("1", "t", False)


def test_gc_removes_what_was_sealed_under_the_old_key(inproc_backend: Backend) -> None:
    ring = static_ring()
    saver = inproc_backend.saver(encryption=Encryption(ring))
    start(saver)
    before = snapshot(inproc_backend.saver(encryption=Encryption(ring)))
    old = set(inproc_backend.object_keys())
    saver.reencrypt_thread("t")
    grown = set(inproc_backend.object_keys())
    assert old < grown
    collect(inproc_backend.saver(encryption=Encryption(ring)), grace=0)
    report = collect(inproc_backend.saver(encryption=Encryption(ring)), grace=0)
    assert not report.errors
    left = set(inproc_backend.object_keys()) - {".gc/state"}
    # Every object of before is gone (all were sealed under version 1), the new stay.
    assert not (left & old) and left == grown - old
    assert snapshot(inproc_backend.saver(encryption=Encryption(ring))) == before


class Stop(Exception):
    pass


def fail_puts(saver: Any, after: int) -> None:
    """The saver's PutItem calls fail from the ``after``+1-th on (a crash)."""
    seen = [0]

    def hook(**_: Any) -> None:
        seen[0] += 1
        if seen[0] > after:
            raise Stop("the process died")

    saver.dynamodb_client.meta.events.register("before-call.dynamodb.PutItem", hook)


def test_a_run_that_stopped_midway_is_finished_by_the_next(
    inproc_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reseal, "_BATCH", 2)  # several batches of checkpoints
    ring = static_ring()
    start(inproc_backend.saver(encryption=Encryption(ring)))
    before = snapshot(inproc_backend.saver(encryption=Encryption(ring)))
    dying = inproc_backend.saver(encryption=Encryption(ring))
    fail_puts(dying, after=8)  # the new key, then the first batches' items
    with pytest.raises(Stop):
        dying.reencrypt_thread("t")
    # Half re-sealed, both versions there; the thread reads the same meanwhile.
    assert key_items(inproc_backend) == ["k#0000000001", "k#0000000002"]
    reader = inproc_backend.saver(encryption=Encryption(ring))
    assert snapshot(reader) == before
    done = inproc_backend.saver(encryption=Encryption(ring)).reencrypt_thread("t")
    assert (done.version, done.shredded) == (2, (1,))
    assert key_items(inproc_backend) == ["k#0000000002"]
    assert snapshot(inproc_backend.saver(encryption=Encryption(ring))) == before
    # The reader read the latest checkpoint still under version 1 while it held both
    # versions: nothing it cached names blobs of version 1 in what it puts now.
    latest = before["latest "]
    config = reader.put(latest.config, {**latest.checkpoint, "id": str(uuid6())}, {}, {})
    got = inproc_backend.saver(encryption=Encryption(ring)).get_tuple(config)
    assert got is not None
    assert got.checkpoint["channel_values"] == latest.checkpoint["channel_values"]


def racing_a_writer(backend: Backend, times: int) -> tuple[StaticKeyRing, Any, list[Any]]:
    """A started thread, the saver that will re-encrypt it, and the checkpoints a saver
    that loaded the old key puts (each in a namespace of its own) at each of the
    re-encryption's first ``times`` PutItem calls (its new key, its items)."""
    ring = static_ring()
    start(backend.saver(encryption=Encryption(ring)))
    writer = backend.saver(encryption=Encryption(ring))
    writer.get_tuple(cfg("t"))  # loads version 1 for key_ttl
    written: list[Any] = []

    def hook(**_: Any) -> None:
        if len(written) < times:
            cp = empty_checkpoint()
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": f"late:{len(written)}"}}
            written.append(writer.put(config, cp, {"step": len(written)}, {}))

    operator = backend.saver(encryption=Encryption(ring))
    operator.dynamodb_client.meta.events.register("before-call.dynamodb.PutItem", hook)
    return ring, operator, written


def test_a_checkpoint_sealed_under_the_old_key_meanwhile_is_resealed(
    inproc_backend: Backend,
) -> None:
    ring, operator, written = racing_a_writer(inproc_backend, times=1)
    done = operator.reencrypt_thread("t")
    assert len(written) == 1 and done.shredded == (1,)
    cold = inproc_backend.saver(encryption=Encryption(ring))
    assert cold.get_tuple(written[0]) is not None  # re-sealed in the second pass


def test_runs_that_keep_writing_under_the_old_key_stop_the_shred(
    inproc_backend: Backend,
) -> None:
    ring, operator, written = racing_a_writer(inproc_backend, times=100)
    with pytest.raises(ReencryptionError, match="a run is writing to it") as info:
        operator.reencrypt_thread("t")
    assert info.value.thread_id == "t"
    assert key_items(inproc_backend) == ["k#0000000001", "k#0000000002"]  # nothing shredded
    cold = inproc_backend.saver(encryption=Encryption(ring))
    assert all(cold.get_tuple(c) is not None for c in written)


def test_without_encryption_it_is_refused(inproc_backend: Backend) -> None:
    with pytest.raises(InvalidConfigError, match="needs a saver with encryption="):
        inproc_backend.saver().reencrypt_thread("t")


def test_a_thread_without_anything_stored_is_left_alone(inproc_backend: Backend) -> None:
    done = inproc_backend.saver(encryption=Encryption(static_ring())).reencrypt_thread("none")
    assert (done.version, done.checkpoints, done.shredded) == (None, 0, ())
    assert not inproc_backend.items()


def test_the_async_saver_reencrypts_with_kms(server_backend: Backend) -> None:
    ring, kms = kms_ring(server_backend)
    start(server_backend.saver(encryption=Encryption(ring), kms_client=kms))
    before = snapshot(server_backend.saver(encryption=Encryption(ring), kms_client=kms))

    async def main() -> Any:
        async with server_backend.async_saver(encryption=Encryption(ring)) as saver:
            done = await saver.areencrypt_thread("t")
            graph = build(saver)
            await graph.ainvoke(Command(resume="yes"), cfg("t"))
            return done

    done = asyncio.run(main())
    assert (done.version, done.shredded) == (2, (1,))
    assert key_items(server_backend) == ["k#0000000002"]
    cold = server_backend.saver(encryption=Encryption(ring), kms_client=kms)
    assert dict(build(cold).get_state(cfg("t")).values) == reference_values()
    after = snapshot(server_backend.saver(encryption=Encryption(ring), kms_client=kms))
    # The resume added checkpoints to the root namespace (and the resume value to the
    # pending writes of the one it resumed); the older ones are unchanged.
    assert after[f"list {SUB}"] == before[f"list {SUB}"]
    assert after["list "][-len(before["list "]) + 1 :] == before["list "][1:]


def test_a_warm_writer_stores_no_entry_naming_blobs_under_the_old_key(
    inproc_backend: Backend,
) -> None:
    ring = static_ring()
    warm = inproc_backend.saver(encryption=Encryption(ring, key_ttl=0.2))
    start(warm)  # it caches the entries of the values it stores, to re-use them
    latest = warm.get_tuple(cfg("t"))
    inproc_backend.saver(encryption=Encryption(ring)).reencrypt_thread("t")
    time.sleep(0.25)  # its key_ttl passes: its next call loads the keys again
    cp = {**latest.checkpoint, "id": str(uuid6())}
    config = warm.put(latest.config, cp, {"step": 99}, {})  # no channel moved
    got = inproc_backend.saver(encryption=Encryption(ring)).get_tuple(config)
    assert got is not None and got.checkpoint["channel_values"] == cp["channel_values"]


def test_a_pending_write_added_while_its_item_is_rewritten_is_kept(
    inproc_backend: Backend,
) -> None:
    ring = static_ring()
    start(inproc_backend.saver(encryption=Encryption(ring)))
    writer = inproc_backend.saver(encryption=Encryption(ring))
    oldest = list(writer.list({"configurable": {"thread_id": "t", "checkpoint_ns": SUB}}))[-1]
    added: list[bool] = []

    def hook(**_: Any) -> None:  # after the operator read the items, before it rewrites
        if not added:
            added.append(True)
            writer.put_writes(oldest.config, [("__error__", "boom")], "task-0")

    operator = inproc_backend.saver(encryption=Encryption(ring))
    operator.s3_client.meta.events.register("before-call.s3.PutObject", hook)
    assert operator.reencrypt_thread("t").shredded == (1,)
    got = inproc_backend.saver(encryption=Encryption(ring)).get_tuple(oldest.config)
    assert got is not None and ("task-0", "__error__", "boom") in got.pending_writes
    assert len(got.pending_writes) == len(oldest.pending_writes) + 1


def test_a_thread_under_its_tenants_key_is_refused(inproc_backend: Backend) -> None:
    ring = static_ring()
    tenant = Encryption(ring, tenant_of=lambda thread: "acme")
    start(inproc_backend.saver(encryption=tenant))
    with pytest.raises(KeyScopeError, match="re-encrypting a tenant is not built yet"):
        inproc_backend.saver(encryption=Encryption(ring)).reencrypt_thread("t")
    assert snapshot(inproc_backend.saver(encryption=Encryption(ring)))  # nothing changed
