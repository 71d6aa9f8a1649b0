"""Crypto-shredding on moto: once ``delete_thread`` has deleted a sealed thread's key
items, no copy of its data opens any more, wherever the copy survived (a replica
bucket, noncurrent object versions, a restored table), and the collector removes
what comes back once it is older than the grace period.

The copies are made by hand before the delete: every object of the thread, and
every index item but the key items (a copy that kept those would still open:
docs/security.md, "Shredding: what it reaches, and what it does not")."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from langgraph_s3 import DataKeyError, Encryption, SealedObjectError
from langgraph_s3.core import sealed
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.gc import collect
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend
from tests.storage.test_sealed_storage import put

HOUR = 3600.0


@pytest.fixture
def enc() -> Encryption:
    return Encryption(StaticKeyRing({"ring-1": os.urandom(32)}, current="ring-1"))


def copy_of(backend: Backend, thread: str) -> tuple[dict[str, bytes], list[dict[str, Any]]]:
    """The thread's objects (key -> bytes) and its index items without key items."""
    s3 = backend.s3()
    objects = {
        k: s3.get_object(Bucket=backend.bucket, Key=k)["Body"].read()
        for k in backend.object_keys()
        if k.startswith(f"{thread}/")
    }
    items = [
        i for i in backend.items() if i["pk"]["S"] == thread and not i["sk"]["S"].startswith("k#")
    ]
    return objects, items


def restore(backend: Backend, objects: dict[str, bytes], items: list[dict[str, Any]]) -> None:
    s3, ddb = backend.s3(), backend.dynamodb()
    for key, body in objects.items():
        s3.put_object(Bucket=backend.bucket, Key=key, Body=body)
    for item in items:
        ddb.put_item(TableName=backend.table, Item=item)


def write_thread(saver: Any, thread: str) -> Any:
    """Three checkpoints, two with blobs (40 KB values), and pending writes."""
    config = put(saver, thread, os.urandom(40_000))
    config = put(saver, thread, {"doc": os.urandom(40_000)}, config)
    saver.put_writes(config, [("v", "a pending value"), ("w", os.urandom(2000))], "task-1")
    return put(saver, thread, "small", config)


def test_no_copy_of_a_deleted_thread_opens_and_gc_removes_its_objects(
    inproc_backend: Backend, enc: Encryption
) -> None:
    saver = inproc_backend.saver(encryption=enc, index_inline_limit=0)  # bodies in S3
    config = write_thread(saver, "t")
    objects, items = copy_of(inproc_backend, "t")
    assert any("/b/" in k for k in objects) and any("/c/" in k for k in objects)

    saver.delete_thread("t")
    restore(inproc_backend, objects, items)  # what a replica or a backup kept

    # A cold saver over the same key ring opens nothing of it: the key is gone.
    with pytest.raises(DataKeyError, match="no data key"):
        inproc_backend.saver(encryption=Encryption(enc.ring)).get_tuple(config)
    with pytest.raises(DataKeyError):
        list(inproc_backend.saver(encryption=Encryption(enc.ring)).list(config))
    # Nobody can open them, so the collector removes them, but only once they are
    # older than its grace period (a key item restored with them would be back by
    # then): until then it spares them, and it is neither damage nor protection.
    now = time.time()
    report = collect(collector(inproc_backend, enc, now), grace=HOUR)
    assert report.objects_deleted == 0 and not report.errors and not report.threads_protected
    assert report.threads_orphaned_waiting == ["t"]
    report = collect(collector(inproc_backend, enc, now + 2 * HOUR), grace=HOUR)
    assert report.threads_orphaned == ["t"] and not report.errors
    assert not [i for i in inproc_backend.items() if i["pk"]["S"] == "t"]
    report = collect(collector(inproc_backend, enc, now + 4 * HOUR), grace=HOUR)
    assert not report.errors and report.objects_deleted == len(objects)
    assert not set(objects) & set(inproc_backend.object_keys())

    # The same thread id written again gets a new key, which opens none of the copies.
    again = inproc_backend.saver(encryption=Encryption(enc.ring))
    put(again, "t", "a new start")
    again.run(thread_key(again, "t"))
    for key, body in objects.items():
        with pytest.raises(SealedObjectError):
            if "/b/" in key:
                sealed.open_blob(again, key, body, key)
            else:
                ids = ("t", "", key.rsplit("/", 1)[1].split(".")[0])
                sealed.open_body(again, ids, body, key)
    assert again.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}) is not None


def collector(backend: Backend, enc: Encryption, at: float) -> Any:
    """A saver for a collection run at time ``at`` (a new process)."""
    return backend.saver(encryption=Encryption(enc.ring), clock=lambda: at)
