"""The collector over sealed threads on moto: a key it may not use protects one thread
(the run goes on), and retention reports as shredded only threads whose own keys went.
What a shred left (a warm saver wrote after ``delete_thread``; a thread of its own key
or of a tenant's) is deleted once older than the grace period, item by item on its
``at``; a thread whose key item is there but gives no key stays protected, however old."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from langgraph_s3 import AccessDeniedError, Encryption
from langgraph_s3.gc import acollect, collect
from langgraph_s3.sealing import StaticKeyRing
from langgraph_s3.sealing.kms import KmsKeyRing
from tests.conftest import Backend, RequestLog
from tests.storage.test_kms_keys import kms_client, kms_key
from tests.storage.test_sealed_storage import put

DAY = 86400.0


def deny(client: Any, operation: str, thread: str) -> None:
    """Make ``client`` refuse ``operation`` for ``thread`` as AWS does when a policy
    denies it (moto evaluates no key policies or encryption-context conditions)."""

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if repr(thread) in repr(params):
            error = {"Error": {"Code": "AccessDeniedException", "Message": "denied"}}
            raise ClientError(error, operation)  # type: ignore[arg-type]

    service = client.meta.service_model.service_name
    client.meta.events.register(f"provide-client-params.{service}.{operation}", refuse)


def two_threads(backend: Backend, arn: str) -> None:
    """Threads 'ok' and 'denied', each with a blob made garbage by a prune."""
    saver = backend.saver(encryption=Encryption(KmsKeyRing(arn)), kms_client=kms_client(backend))
    for thread in ("ok", "denied"):
        config = put(saver, thread, os.urandom(40_000))
        put(saver, thread, os.urandom(40_000), config)
    saver.prune(["ok", "denied"], strategy="keep_latest")


def blobs(backend: Backend, thread: str) -> list[str]:
    return [k for k in backend.object_keys() if k.startswith(f"{thread}/b/")]


def test_kms_denying_one_threads_key_protects_that_thread_and_the_run_goes_on(
    inproc_backend: Backend,
) -> None:
    arn = kms_key(inproc_backend)
    two_threads(inproc_backend, arn)
    kms = kms_client(inproc_backend)
    deny(kms, "Decrypt", "denied")
    gc = inproc_backend.saver(encryption=Encryption(KmsKeyRing(arn)), kms_client=kms)
    report = collect(gc, grace=0)
    assert [p["thread_id"] for p in report.threads_protected] == ["denied"]
    assert "kms:Decrypt" in report.threads_protected[0]["reason"]
    assert len(blobs(inproc_backend, "ok")) == 1  # its garbage went
    assert len(blobs(inproc_backend, "denied")) == 2  # spared
    assert report.objects_deleted == 1 and not report.errors


def test_access_denied_by_dynamodb_still_stops_the_run(inproc_backend: Backend) -> None:
    arn = kms_key(inproc_backend)
    two_threads(inproc_backend, arn)
    ddb = inproc_backend.dynamodb()
    deny(ddb, "Query", "denied")  # the query for the thread's key items
    gc = inproc_backend.saver(
        encryption=Encryption(KmsKeyRing(arn)),
        kms_client=kms_client(inproc_backend),
        dynamodb_client=ddb,
    )
    with pytest.raises(AccessDeniedError) as info:
        collect(gc, grace=0)
    assert info.value.action == "Query"  # not a KMS action
    assert len(blobs(inproc_backend, "ok")) + len(blobs(inproc_backend, "denied")) == 4


def test_expiring_a_tenant_thread_is_not_shredding_it(inproc_backend: Backend) -> None:
    ring = StaticKeyRing({"r": os.urandom(32)}, current="r")
    tenant = inproc_backend.saver(encryption=Encryption(ring, tenant_of=lambda t: "T"))
    put(tenant, "t1", os.urandom(20_000))
    put(inproc_backend.saver(encryption=Encryption(ring)), "own", "a thread with its own key")
    later = time.time() + 30 * DAY
    gc = inproc_backend.saver(encryption=Encryption(ring), clock=lambda: later)
    report = collect(gc, grace=0, idle_ttl=7 * DAY)
    assert sorted(report.threads_expired) == ["own", "t1"]
    assert report.threads_shredded == ["own"]  # t1's key is its tenant's, and stays
    assert [i["pk"]["S"] for i in inproc_backend.items()] == ["#tenant/T"]


# ----------------------------------------------- writes after a shred (a warm saver's)
HOUR = 3600.0
KEYS = ["own", "tenant"]


def a_ring() -> StaticKeyRing:
    return StaticKeyRing({"r": os.urandom(32)}, current="r")


def written_after_delete(backend: Backend, ring: StaticKeyRing, keys: str) -> list[str]:
    """Thread 't' (its own key, or tenant 'T''s) deleted by one saver while a warm
    saver, which holds its key, goes on writing: a pending write with a blob and a
    checkpoint with a value blob, sealed under the shredded key (or, for a tenant's
    thread, under the tenant's key, with no reference left to it). Returns what it
    left: the objects."""
    tenant_of = (lambda _: "T") if keys == "tenant" else None
    warm = backend.saver(encryption=Encryption(ring, tenant_of=tenant_of), index_inline_limit=0)
    config = put(warm, "t", os.urandom(40_000))
    backend.saver(encryption=Encryption(ring)).delete_thread("t")
    assert not [k for k in backend.object_keys() if k.startswith("t/")]
    warm.put_writes(config, [("v", os.urandom(60_000)), ("w", "small")], "task-1")
    put(warm, "t", os.urandom(40_000), config)
    left = [i for i in backend.items() if i["pk"]["S"] == "t"]
    assert left and not [i for i in left if i["sk"]["S"].startswith("k#")]
    objects = [k for k in backend.object_keys() if k.startswith("t/")]
    assert len(objects) == 3  # the write's blob, the value blob, the body
    return objects


def collector(backend: Backend, ring: StaticKeyRing, at: float) -> Any:
    return backend.saver(encryption=Encryption(ring), clock=lambda: at)


@pytest.mark.parametrize("keys", KEYS)
def test_what_a_warm_saver_writes_after_a_shred_is_collected_after_the_grace_period(
    inproc_backend: Backend, keys: str
) -> None:
    ring, start = a_ring(), time.time()
    objects = written_after_delete(inproc_backend, ring, keys)
    put(inproc_backend.saver(encryption=Encryption(ring)), "other", os.urandom(40_000))
    # Within the grace period nothing of it goes (its key item may still be on its
    # way), and it is not damage either: no protected thread, no error.
    young = collect(collector(inproc_backend, ring, start + 60), grace=HOUR)
    assert young.threads_protected == [] and young.errors == [] and young.objects_deleted == 0
    assert young.threads_orphaned_waiting == ["t"] and young.threads_orphaned == []
    assert [i for i in inproc_backend.items() if i["pk"]["S"] == "t"]
    assert set(objects) <= set(inproc_backend.object_keys())
    # After it: its index items go at once, its objects through the two-phase sweep.
    old = collect(collector(inproc_backend, ring, start + 2 * HOUR), grace=HOUR)
    assert old.threads_protected == [] and not old.errors and old.threads_orphaned == ["t"]
    assert "1 thread(s) whose data key was shredded: their leftovers deleted" in old.summary()
    assert not [i for i in inproc_backend.items() if i["pk"]["S"] == "t"]
    last = collect(collector(inproc_backend, ring, start + 4 * HOUR), grace=HOUR)
    assert last.objects_deleted == len(objects) and not last.threads_orphaned
    assert not [k for k in inproc_backend.object_keys() if k.startswith("t/")]
    # The other thread is untouched, and the id can be used again.
    assert collector(inproc_backend, ring, start).get_tuple(
        {"configurable": {"thread_id": "other", "checkpoint_ns": ""}}
    )
    again = inproc_backend.saver(encryption=Encryption(ring))
    config = put(again, "t", "a new start")
    assert inproc_backend.saver(encryption=Encryption(ring)).get_tuple(config) is not None


def test_what_a_warm_saver_writes_after_expiry_shredded_the_thread_is_collected_too(
    inproc_backend: Backend,
) -> None:
    ring, start = a_ring(), time.time()
    warm = inproc_backend.saver(encryption=Encryption(ring), index_inline_limit=0)
    config = put(warm, "t", os.urandom(40_000))
    expiry = collect(collector(inproc_backend, ring, start + 30 * DAY), grace=HOUR, idle_ttl=DAY)
    assert expiry.threads_shredded == ["t"] and not thread_items(inproc_backend, "t")
    put(warm, "t", os.urandom(40_000), config)  # it still holds the key
    left = thread_items(inproc_backend, "t")
    assert left and not [i for i in left if i["sk"]["S"].startswith("k#")]
    first = collect(collector(inproc_backend, ring, start + 2 * HOUR), grace=HOUR)
    assert first.threads_orphaned_waiting == ["t"] and thread_items(inproc_backend, "t")
    report = collect(collector(inproc_backend, ring, start + 4 * HOUR), grace=HOUR)
    assert report.threads_orphaned == ["t"] and not report.threads_protected
    assert not thread_items(inproc_backend, "t")


def thread_items(backend: Backend, thread: str) -> list[dict[str, Any]]:
    return [i for i in backend.items() if i["pk"]["S"] == thread]


def objects_of(backend: Backend, thread: str) -> list[str]:
    return [k for k in backend.object_keys() if k.startswith(f"{thread}/")]


def test_the_requests_a_shreds_leftovers_cost(
    inproc_backend: Backend, request_log: RequestLog
) -> None:
    ring, start = a_ring(), time.time()
    written_after_delete(inproc_backend, ring, "own")
    items = len(thread_items(inproc_backend, "t"))
    assert collect(
        collector(inproc_backend, ring, start + 2 * HOUR), grace=HOUR
    ).threads_orphaned_waiting == ["t"]
    ddb, s3 = request_log.attach(inproc_backend.dynamodb()), request_log.attach(inproc_backend.s3())
    gc = inproc_backend.saver(
        encryption=Encryption(ring),
        clock=lambda: start + 4 * HOUR,
        dynamodb_client=ddb,
        s3_client=s3,
    )
    assert collect(gc, grace=HOUR).threads_orphaned == ["t"]
    counts = request_log.counts()
    # Two key queries (the loader's, then the one that sees no tenant reference
    # either), the body in S3 read to see it is sealed, each item deleted on its own
    # condition.
    assert counts["dynamodb", "Query"] == 2 and counts["dynamodb", "DeleteItem"] == items == 3
    assert counts["s3", "GetObject"] == 2  # the body, and the run's state object


@pytest.mark.parametrize("damage", ["damaged key item", "tenant key gone", "kms refused", "plain"])
def test_a_thread_whose_key_does_not_load_is_still_protected_long_after(
    inproc_backend: Backend, damage: str
) -> None:
    """Only a partition without any key item is a shred's leftover: a key item that
    is there but does not give a key (or data stored without encryption) is never
    taken for one, however old."""
    arn = kms_key(inproc_backend)
    kms = kms_client(inproc_backend)
    ring: Any = KmsKeyRing(arn) if damage == "kms refused" else a_ring()
    tenant_of = (lambda _: "T") if damage == "tenant key gone" else None
    writer = inproc_backend.saver(
        encryption=None if damage == "plain" else Encryption(ring, tenant_of=tenant_of),
        kms_client=kms,
        index_inline_limit=0,
    )
    config = put(writer, "t", os.urandom(40_000))
    put(writer, "t", os.urandom(40_000), config)  # the first value blob is garbage now
    ddb = inproc_backend.dynamodb()
    if damage == "damaged key item":
        key = {"pk": {"S": "t"}, "sk": {"S": "k#0000000001"}}
        ddb.update_item(TableName=inproc_backend.table, Key=key, UpdateExpression="REMOVE wk")
    elif damage == "tenant key gone":
        (tenant_key,) = [i for i in inproc_backend.items() if i["pk"]["S"] == "#tenant/T"]
        ddb.delete_item(
            TableName=inproc_backend.table, Key={"pk": tenant_key["pk"], "sk": tenant_key["sk"]}
        )
    elif damage == "kms refused":
        deny(kms, "Decrypt", "t")
    items, objects = thread_items(inproc_backend, "t"), objects_of(inproc_backend, "t")
    later = time.time() + 30 * DAY
    # A ring of its own: the writer's has the key cached.
    gc_ring = (
        KmsKeyRing(arn) if damage == "kms refused" else a_ring() if damage == "plain" else ring
    )
    gc = inproc_backend.saver(encryption=Encryption(gc_ring), kms_client=kms, clock=lambda: later)
    for _ in range(2):
        report = collect(gc, grace=0)
        assert [p["thread_id"] for p in report.threads_protected] == ["t"]
        assert report.threads_orphaned == report.threads_orphaned_waiting == []
    assert thread_items(inproc_backend, "t") == items
    assert objects_of(inproc_backend, "t") == objects


def test_an_item_written_again_after_the_scan_is_not_deleted(inproc_backend: Backend) -> None:
    """A writer that writes the partition between the collector's scan and its delete
    (a warm saver still going, an id used again): the item it wrote stays, and the
    thread waits for another run."""
    ring, start = a_ring(), time.time()
    objects = written_after_delete(inproc_backend, ring, "own")
    ddb = inproc_backend.dynamodb()
    other = inproc_backend.dynamodb()
    rewritten: list[str] = []

    def write_first(params: dict[str, Any], **_: Any) -> None:
        # The head written again just before its delete (the deletes are concurrent:
        # only the head's is hooked).
        if params["Key"]["sk"]["S"] == "h#~":
            item = other.get_item(TableName=params["TableName"], Key=params["Key"])["Item"]
            item["at"] = {"N": str(int(item["at"]["N"]) + 1)}
            other.put_item(TableName=params["TableName"], Item=item)
            rewritten.append(item["sk"]["S"])

    ddb.meta.events.register("provide-client-params.dynamodb.DeleteItem", write_first)
    collect(collector(inproc_backend, ring, start + 2 * HOUR), grace=HOUR)  # first found
    gc = inproc_backend.saver(
        encryption=Encryption(ring), clock=lambda: start + 4 * HOUR, dynamodb_client=ddb
    )
    report = collect(gc, grace=HOUR)
    assert report.threads_orphaned_waiting == ["t"] and report.threads_orphaned == []
    assert [i["sk"]["S"] for i in thread_items(inproc_backend, "t")] == rewritten
    assert set(objects) <= set(inproc_backend.object_keys())  # its folder waits too


def test_writes_left_under_a_version_reencryption_shredded_are_garbage_not_damage(
    inproc_backend: Backend,
) -> None:
    """Pending writes of a checkpoint that never committed are not re-sealed by
    ``reencrypt_thread``: they stay under the old version, which it deletes. Within
    the grace period the collector leaves them (no error: nothing can open them, and
    they are no checkpoint's); after it, it deletes them with their blobs."""
    ring, start = a_ring(), time.time()
    saver = inproc_backend.saver(encryption=Encryption(ring))
    config = put(saver, "t", os.urandom(40_000))
    never = {"configurable": {**config["configurable"], "checkpoint_id": "never-committed"}}
    saver.put_writes(never, [("v", os.urandom(60_000))], "task-1")
    blob_before = set(objects_of(inproc_backend, "t"))
    assert inproc_backend.saver(encryption=Encryption(ring)).reencrypt_thread("t").version == 2
    young = collect(collector(inproc_backend, ring, start + 60), grace=HOUR)
    assert young.errors == [] and young.threads_protected == [] and young.orphan_writes == 0
    old = collect(collector(inproc_backend, ring, start + 2 * HOUR), grace=HOUR)
    assert old.errors == [] and old.orphan_writes == 1
    collect(collector(inproc_backend, ring, start + 4 * HOUR), grace=HOUR)
    assert not blob_before & set(inproc_backend.object_keys())  # re-sealed ones replaced them
    assert collector(inproc_backend, ring, start).get_tuple(config) is not None


async def test_the_async_collector_deletes_a_shreds_leftovers_too(server_backend: Backend) -> None:
    ring, start = a_ring(), time.time()
    objects = written_after_delete(server_backend, ring, "own")
    for at in (start + 2 * HOUR, start + 4 * HOUR):  # found, then deleted: grace apart
        async with server_backend.async_saver(
            encryption=Encryption(ring), clock=lambda at=at: at
        ) as gc:
            report = await acollect(gc, grace=HOUR)
    assert report.threads_orphaned == ["t"] and not report.errors
    assert thread_items(server_backend, "t") == []
    assert set(objects) <= set(server_backend.object_keys())  # swept by a later run
