"""Per-tenant data keys on moto (``Encryption(ring, tenant_of=...)``): the threads of a
tenant share one key item, found through a tenant reference in each thread's
partition, so readers need no ``tenant_of``; the requests each step costs; the scope
check; deleting a thread keeps the tenant's key, erasing the tenant shreds it; rekey,
copy and the collector with references.

Thread ids here are ``tenant:name``; a thread without ``:`` keeps a key of its own.
"""

from __future__ import annotations

import asyncio
import operator
import os
import threading
from typing import Annotated, Any, TypedDict

import boto3
import pytest
from langgraph.graph import END, START, StateGraph

from langgraph_s3 import DataKeyError, Encryption, InvalidConfigError, KeyScopeError
from langgraph_s3.core import datakeys, rewrap, schema
from langgraph_s3.core.datakeys import KeyScope
from langgraph_s3.gc import collect
from langgraph_s3.sealing import StaticKeyRing
from langgraph_s3.sealing.kms import KmsKeyRing
from tests.conftest import REGION, Backend, RequestLog
from tests.graphs.test_graphs import cfg

R1, R2 = os.urandom(32), os.urandom(32)
RING = StaticKeyRing({"r1": R1}, current="r1")


def tenant_of(thread_id: str) -> str | None:
    return thread_id.split(":")[0] if ":" in thread_id else None


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    doc: bytes


DOC = b"tenant data " * 4000


def build(saver: Any, value: bytes = DOC) -> Any:
    """Two steps: a small value, then a 40 KB one (a loose blob)."""

    def note(state: State) -> State:
        return {"log": ["note"]}

    def doc(state: State) -> State:
        return {"log": ["doc"], "doc": value}

    g = StateGraph(State)
    g.add_node("note", note)
    g.add_node("doc", doc)
    g.add_edge(START, "note")
    g.add_edge("note", "doc")
    g.add_edge("doc", END)
    return g.compile(checkpointer=saver)


EXPECTED = {"log": ["start", "note", "doc"], "doc": DOC}


def run(saver: Any, *threads: str) -> None:
    graph = build(saver)
    for thread in threads:
        graph.invoke({"log": ["start"]}, cfg(thread))


def state(saver: Any, thread: str) -> dict[str, Any]:
    return dict(build(saver).get_state(cfg(thread)).values)


def writer(backend: Backend, ring: Any = RING, **kwargs: Any) -> Any:
    return backend.saver(encryption=Encryption(ring, tenant_of=tenant_of), **kwargs)


def reader(backend: Backend, ring: Any = RING, **kwargs: Any) -> Any:
    """A cold container without ``tenant_of``."""
    return backend.saver(encryption=Encryption(ring), **kwargs)


def key_items(backend: Backend) -> dict[str, list[str]]:
    """Partition -> sort keys of its key items (references included)."""
    out: dict[str, list[str]] = {}
    for item in backend.items():
        if schema.is_key_item(item):
            out.setdefault(item["pk"]["S"], []).append(item["sk"]["S"])
    return {pk: sorted(sks) for pk, sks in sorted(out.items())}


def kms_client(backend: Backend, log: RequestLog) -> Any:
    return log.attach(boto3.client("kms", region_name=REGION, endpoint_url=backend.endpoint_url))


def test_a_tenants_threads_share_one_key_item_and_a_reader_without_tenant_of_opens_them(
    inproc_backend: Backend, request_log: RequestLog
) -> None:
    arn = kms_client(inproc_backend, RequestLog()).create_key()["KeyMetadata"]["Arn"]
    kms = kms_client(inproc_backend, request_log)
    run(writer(inproc_backend, KmsKeyRing(arn), kms_client=kms), "acme:1", "acme:2", "solo")
    assert [c for c in request_log.calls if c[0] == "kms"] == [
        ("kms", "GenerateDataKey"),  # acme's, shared by both of its threads
        ("kms", "GenerateDataKey"),  # solo's own
    ]
    assert key_items(inproc_backend) == {
        "#tenant/acme": ["k#0000000001"],
        "acme:1": ["k#t"],
        "acme:2": ["k#t"],
        "solo": ["k#0000000001"],
    }
    request_log.clear()
    cold = reader(inproc_backend, KmsKeyRing(arn), kms_client=kms)
    for thread in ("acme:1", "acme:2", "solo"):
        assert state(cold, thread) == EXPECTED
    # One Decrypt per key: the tenant's, once for both threads, and solo's.
    assert [c for c in request_log.calls if c[0] == "kms"] == [("kms", "Decrypt")] * 2


def test_the_requests_of_a_tenant_key_are_one_query_per_thread_and_one_load_per_tenant(
    inproc_backend: Backend, request_log: RequestLog
) -> None:
    arn = kms_client(inproc_backend, RequestLog()).create_key()["KeyMetadata"]["Arn"]
    log_clients = {
        "dynamodb_client": request_log.attach(inproc_backend.dynamodb()),
        "kms_client": kms_client(inproc_backend, request_log),
    }
    saver = writer(inproc_backend, KmsKeyRing(arn), **log_clients)

    def cost(flow: Any) -> list[tuple[str, str]]:
        request_log.clear()
        assert saver.run(flow) is not None
        return list(request_log.calls)

    ddb = "dynamodb"
    # The first thread of a new tenant: its Query, the tenant's Query, the tenant's key
    # generated and put, then the thread's reference, in a transaction with the check
    # that the thread has no key of its own (core/scopes.py; a PutItem before).
    assert cost(datakeys.thread_key(saver, "acme:1", create=True)) == [
        (ddb, "Query"), (ddb, "Query"), ("kms", "GenerateDataKey"), (ddb, "PutItem"),
        (ddb, "TransactWriteItems"),
    ]  # fmt: skip
    # A new thread of a known tenant: a Query and the reference; no KMS request.
    assert cost(datakeys.thread_key(saver, "acme:2", create=True)) == [
        (ddb, "Query"),
        (ddb, "TransactWriteItems"),
    ]
    assert cost(datakeys.thread_key(saver, "acme:2", create=True)) == []  # warm
    # A cold reader: one Query per thread, and once per tenant a Query and a Decrypt.
    saver = reader(inproc_backend, KmsKeyRing(arn), **log_clients)
    assert cost(datakeys.thread_key(saver, "acme:1")) == [
        (ddb, "Query"),
        (ddb, "Query"),
        ("kms", "Decrypt"),
    ]
    assert cost(datakeys.thread_key(saver, "acme:2")) == [(ddb, "Query")]


def test_new_threads_of_a_new_tenant_started_at_once_make_one_key(
    inproc_backend: Backend, request_log: RequestLog
) -> None:
    arn = kms_client(inproc_backend, RequestLog()).create_key()["KeyMetadata"]["Arn"]
    kms = kms_client(inproc_backend, request_log)
    # One saver (its loads of the tenant's key wait for one another) and a second one
    # (its key loses the conditional put and takes the winner's).
    savers = [writer(inproc_backend, KmsKeyRing(arn), kms_client=kms) for _ in range(2)]
    starts = [(savers[i % 2], f"acme:{i}") for i in range(6)] + [(savers[1], "acme:0")]
    barrier = threading.Barrier(len(starts))
    keys: list[bytes] = []

    def start(saver: Any, thread: str) -> None:
        barrier.wait()
        keys.append(saver.run(datakeys.thread_key(saver, thread, create=True)).secret)

    workers = [threading.Thread(target=start, args=pair) for pair in starts]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(keys) == len(starts) and len(set(keys)) == 1
    calls = [name for service, name in request_log.calls if service == "kms"]
    # One load of the tenant's key per saver: one generates, the other either finds
    # the key or loses the conditional put (and generated one for nothing); either way
    # it unwraps the winner's.
    assert calls.count("GenerateDataKey") in (1, 2) and calls.count("Decrypt") == 1
    assert key_items(inproc_backend) == {
        "#tenant/acme": ["k#0000000001"],
        **{f"acme:{i}": ["k#t"] for i in range(6)},
    }


def test_a_writer_refuses_a_thread_stored_under_another_scope(inproc_backend: Backend) -> None:
    run(writer(inproc_backend), "acme:1", "solo")
    wrong = inproc_backend.saver(encryption=Encryption(RING, tenant_of=lambda _: "beta"))
    with pytest.raises(KeyScopeError) as refused:
        run(wrong, "acme:1")
    message = str(refused.value)
    assert "thread 'acme:1'" in message
    assert "tenant 'acme'" in message and "tenant 'beta'" in message
    with pytest.raises(KeyScopeError, match="'solo' is sealed under a key of its own"):
        run(wrong, "solo")
    none = inproc_backend.saver(encryption=Encryption(RING, tenant_of=lambda _: None))
    with pytest.raises(KeyScopeError, match="tenant_of says a key of its own"):
        run(none, "acme:1")
    # Nothing was sealed under another scope: a reader still opens both threads.
    assert state(reader(inproc_backend), "acme:1") == EXPECTED
    assert state(reader(inproc_backend), "solo") == EXPECTED
    # The refusing saver reads them too, and a copy moves a thread to its scope.
    assert state(wrong, "solo") == EXPECTED
    wrong.copy_thread("solo", "moved")
    assert key_items(inproc_backend)["moved"] == ["k#t"]
    run(wrong, "moved")
    assert state(reader(inproc_backend), "moved")["log"] == ["start", "note", "doc"] * 2


def test_tenant_of_is_checked(inproc_backend: Backend) -> None:
    with pytest.raises(InvalidConfigError, match="tenant_of must be a function"):
        Encryption(RING, tenant_of="acme")  # type: ignore[arg-type]
    empty = inproc_backend.saver(encryption=Encryption(RING, tenant_of=lambda _: ""))
    with pytest.raises(InvalidConfigError, match=r"tenant_of\('t'\) returned ''"):
        run(empty, "t")


def test_delete_thread_keeps_the_tenant_key_and_delete_tenant_shreds_it(
    inproc_backend: Backend,
) -> None:
    saver = writer(inproc_backend)
    run(saver, "acme:1", "acme:2", "acme:3", "beta:1", "solo")
    saver.delete_thread("acme:3")
    assert "acme:3" not in key_items(inproc_backend)
    assert key_items(inproc_backend)["#tenant/acme"] == ["k#0000000001"]
    assert state(reader(inproc_backend), "acme:1") == EXPECTED
    # A backup of the tenant's threads, index and objects, taken before the erasure.
    items = [i for i in inproc_backend.items() if i["pk"]["S"].startswith("acme:")]
    s3 = inproc_backend.s3()
    objects = {
        k: s3.get_object(Bucket=inproc_backend.bucket, Key=k)["Body"].read()
        for k in inproc_backend.object_keys()
        if k.startswith("acme:")
    }
    assert saver.delete_tenant("acme") == 2
    assert sorted(key_items(inproc_backend)) == ["#tenant/beta", "beta:1", "solo"]
    assert not [k for k in inproc_backend.object_keys() if k.startswith("acme")]
    assert build(reader(inproc_backend)).get_state(cfg("acme:1")).values == {}
    # The backup put back does not open: the tenant's key is gone.
    for item in items:
        inproc_backend.dynamodb().put_item(TableName=inproc_backend.table, Item=item)
    for key, body in objects.items():
        s3.put_object(Bucket=inproc_backend.bucket, Key=key, Body=body)
    for thread in ("acme:1", "acme:2"):
        with pytest.raises(DataKeyError):
            state(reader(inproc_backend), thread)
    for thread in ("beta:1", "solo"):
        assert state(reader(inproc_backend), thread) == EXPECTED
    assert saver.delete_tenant("acme") == 2  # the restored threads: erased again
    assert saver.delete_tenant("acme") == 0


def test_the_collector_follows_references_and_removes_an_erased_tenants_leftovers(
    inproc_backend: Backend,
) -> None:
    saver = writer(inproc_backend, chunk_items=False)  # S3 blobs, which it collects
    run(saver, "acme:1", "solo")
    build(saver, b"other data " * 4000).invoke({"log": ["again"]}, cfg("acme:1"))
    saver.prune(["acme:1"], strategy="keep_latest")  # the first doc's blob is garbage now

    def blobs() -> list[str]:  # in S3, or chunk items (layout 5) in the index
        s3 = [k for k in inproc_backend.object_keys() if k.startswith("acme:1/b/")]
        return s3 + list(inproc_backend.chunk_items("acme:1"))

    stored = blobs()
    for _ in range(2):  # a cold collector without tenant_of
        report = collect(reader(inproc_backend), grace=0)
        assert not report.errors, report.summary()
    assert len(blobs()) == len(stored) - 1
    assert state(reader(inproc_backend), "acme:1")["doc"] == b"other data " * 4000
    # Objects of an erased tenant left behind (a crash during the erasure, say) are
    # garbage: no thread references them. (acme:1 keeps its chunks in the index, chunk
    # items, which go with its items: a thread stored in S3 leaves objects.)
    run(writer(inproc_backend, chunk_items=False), "acme:2")
    s3 = inproc_backend.s3()
    leftovers = {
        k: s3.get_object(Bucket=inproc_backend.bucket, Key=k)["Body"].read()
        for k in inproc_backend.object_keys()
        if k.startswith("acme:")
    }
    assert leftovers
    saver.delete_tenant("acme")
    for key, body in leftovers.items():
        s3.put_object(Bucket=inproc_backend.bucket, Key=key, Body=body)
    collect(reader(inproc_backend), grace=0)
    assert not [k for k in inproc_backend.object_keys() if k.startswith("acme:")]
    assert state(reader(inproc_backend), "solo") == EXPECTED


def test_rekey_rewraps_the_tenant_key_and_skips_references(inproc_backend: Backend) -> None:
    saver = writer(inproc_backend)
    run(saver, "acme:1", "acme:2", "solo")
    rotated = StaticKeyRing({"r1": R1, "r2": R2}, current="r2")
    done = saver.run(rewrap.rekey(saver, rotated))
    assert done.failed == []
    assert sorted(done.rewrapped, key=str) == sorted(
        [(KeyScope.tenant("acme"), 1), (KeyScope.thread("solo"), 1)], key=str
    )
    only_r2 = StaticKeyRing({"r2": R2}, current="r2")
    for thread in ("acme:1", "acme:2", "solo"):
        assert state(reader(inproc_backend, only_r2), thread) == EXPECTED


def test_a_copy_takes_the_scope_tenant_of_gives_its_target(inproc_backend: Backend) -> None:
    saver = writer(inproc_backend)
    run(saver, "acme:1")
    saver.copy_thread("acme:1", "acme:copy")
    saver.copy_thread("acme:1", "beta:copy")
    saver.copy_thread("acme:1", "alone")
    keys = key_items(inproc_backend)
    assert keys["acme:copy"] == keys["beta:copy"] == ["k#t"]
    assert keys["alone"] == ["k#0000000001"]
    assert keys["#tenant/acme"] == keys["#tenant/beta"] == ["k#0000000001"]
    for thread in ("acme:copy", "beta:copy", "alone"):
        assert state(reader(inproc_backend), thread) == EXPECTED


def test_the_async_saver_shares_a_tenant_key_and_erases_the_tenant(
    server_backend: Backend,
) -> None:
    async def main() -> int:
        enc = Encryption(RING, tenant_of=tenant_of)
        async with server_backend.async_saver(encryption=enc) as saver:
            graph = build(saver)
            for thread in ("acme:1", "acme:2", "beta:1"):
                await graph.ainvoke({"log": ["start"]}, cfg(thread))
            assert dict((await graph.aget_state(cfg("acme:2"))).values) == EXPECTED
            assert key_items(server_backend)["#tenant/acme"] == ["k#0000000001"]
            assert key_items(server_backend)["acme:1"] == ["k#t"]
            for thread in ("acme:1", "acme:2", "beta:1"):
                assert state(reader(server_backend), thread) == EXPECTED
            return int(await saver.adelete_tenant("acme"))

    assert asyncio.run(main()) == 2
    assert sorted(key_items(server_backend)) == ["#tenant/beta", "beta:1"]
    assert state(reader(server_backend), "beta:1") == EXPECTED
