"""The collector over sealed threads on moto: a key it may not use protects one thread
(the run goes on), and retention reports as shredded only threads whose own keys went."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from langgraph_s3 import AccessDeniedError, Encryption
from langgraph_s3.gc import collect
from langgraph_s3.sealing import StaticKeyRing
from langgraph_s3.sealing.kms import KmsKeyRing
from tests.conftest import Backend
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
