"""What an encrypted read costs on moto's KMS, DynamoDB and S3, cold and warm: the
requests each saver sends and its sequential round trips, both savers alike.

A saver that has not loaded a thread's data key (a cold container resuming the
thread) sends the thread's key Query in the same round trip as the read's
checkpoint Query (``core.read.keyed``), then KMS ``Decrypt`` (after a tenant
reference, the tenant's key Query first). Before, the key Query went after the
checkpoint Query: one round trip more per cold thread, the same requests. A new
thread's first read finds no key items that way, and its first put takes that
answer instead of asking again (``Encryption.absent``): the same requests as before,
one round trip fewer.

Round trips are counted at the driver: each request, or list of requests sent
together, it performs for a flow is one (``_outcome``); waits for another call's
work are not requests.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import Encryption
from langgraph_s3.operations import WAITS
from langgraph_s3.sealing.kms import KmsKeyRing
from tests.conftest import REGION, Backend, RequestLog
from tests.storage.test_sealed_storage import put

Rounds = list[list[str]]


def tenant_of(thread_id: str) -> str | None:
    return thread_id.split(":")[0] if ":" in thread_id else None


def record(saver: Any, rounds: Rounds) -> None:
    """Keep in ``rounds`` what each round trip of ``saver`` (sync or async) sends."""
    perform = saver._outcome

    def sent(op: Any) -> None:
        ops = op if isinstance(op, list) else [op]
        if not all(isinstance(o, WAITS) for o in ops):
            rounds.append([type(o).__name__ for o in ops])

    if saver.__class__.__name__ == "AsyncS3Saver":

        async def outcome_async(op: Any, stats: Any) -> Any:
            sent(op)
            return await perform(op, stats)

        saver._outcome = outcome_async
    else:

        def outcome(op: Any, stats: Any) -> Any:
            sent(op)
            return perform(op, stats)

        saver._outcome = outcome


@pytest.fixture
def kms_arn(server_backend: Backend) -> Iterator[str]:
    kms = boto3.client("kms", region_name=REGION, endpoint_url=server_backend.endpoint_url)
    yield str(kms.create_key()["KeyMetadata"]["Arn"])


def kms_client(backend: Backend, log: RequestLog | None = None) -> Any:
    client = boto3.client("kms", region_name=REGION, endpoint_url=backend.endpoint_url)
    return client if log is None else log.attach(client)


def stored_thread(backend: Backend, arn: str, thread: str, body: str) -> RunnableConfig:
    """A thread with one checkpoint (its body in the index item, or in S3 with a blob)."""
    inline = {} if body == "index" else {"index_inline_limit": 0}
    writer = backend.saver(
        encryption=Encryption(KmsKeyRing(arn), tenant_of=tenant_of),
        kms_client=kms_client(backend),
        **inline,
    )
    value = "small" if body == "index" else os.urandom(30_000)
    return put(writer, thread, value)  # type: ignore[no-any-return]


def reads(config: RunnableConfig, which: str) -> RunnableConfig:
    if which == "exact":
        return config
    return {"configurable": {"thread_id": config["configurable"]["thread_id"]}}


# A cold read: the key Query beside the checkpoint Query, then Decrypt (and for a
# tenant, its key Query between); then the object and its blob if the body is in S3.
COLD = {
    "thread": [["Query", "Query"], ["KmsDecrypt"]],
    "tenant": [["Query", "Query"], ["Query"], ["KmsDecrypt"]],
}
#: Before: [["Query"], ["Query"], ["KmsDecrypt"]] (and ["Query"] more for a tenant).
OBJECTS = [["S3Get", "S3Get"]]
WARM = [["Query"]]


@pytest.mark.parametrize("body", ["index", "s3"])
@pytest.mark.parametrize("which", ["latest", "exact"])
@pytest.mark.parametrize("scope", ["thread", "tenant"])
def test_a_cold_sync_read_sends_the_key_query_with_the_checkpoint_query(
    server_backend: Backend, kms_arn: str, scope: str, which: str, body: str
) -> None:
    thread = "solo" if scope == "thread" else "acme:1"
    config = reads(stored_thread(server_backend, kms_arn, thread, body), which)
    log, rounds = RequestLog(), []
    saver = server_backend.saver(
        encryption=Encryption(KmsKeyRing(kms_arn)),
        s3_client=log.attach(server_backend.s3()),
        dynamodb_client=log.attach(server_backend.dynamodb()),
        kms_client=kms_client(server_backend, log),
    )
    record(saver, rounds)
    assert saver.get_tuple(config) is not None
    cold = COLD[scope] + (OBJECTS if body == "s3" else [])
    assert rounds == cold
    assert len(log.calls) == sum(len(r) for r in cold)  # 3 to 6: as many as before
    log.clear()
    rounds.clear()
    assert saver.get_tuple(config) is not None
    assert rounds == WARM and log.calls == [("dynamodb", "Query")]


@pytest.mark.parametrize("body", ["index", "s3"])
@pytest.mark.parametrize("which", ["latest", "exact"])
@pytest.mark.parametrize("scope", ["thread", "tenant"])
async def test_a_cold_async_read_sends_the_key_query_with_the_checkpoint_query(
    server_backend: Backend, kms_arn: str, scope: str, which: str, body: str
) -> None:
    thread = "solo" if scope == "thread" else "acme:1"
    config = reads(stored_thread(server_backend, kms_arn, thread, body), which)
    rounds: Rounds = []
    async with server_backend.async_saver(encryption=Encryption(KmsKeyRing(kms_arn))) as saver:
        record(saver, rounds)
        assert await saver.aget_tuple(config) is not None
        assert rounds == COLD[scope] + (OBJECTS if body == "s3" else [])
        rounds.clear()
        assert await saver.aget_tuple(config) is not None
        assert rounds == WARM


def test_a_cold_list_sends_the_key_query_with_its_first_page(
    server_backend: Backend, kms_arn: str
) -> None:
    config = stored_thread(server_backend, kms_arn, "solo", "index")
    saver = server_backend.saver(
        encryption=Encryption(KmsKeyRing(kms_arn)), kms_client=kms_client(server_backend)
    )
    rounds: Rounds = []
    record(saver, rounds)
    assert [t.config for t in saver.list(reads(config, "latest"))] == [config]
    assert rounds == [["Query", "Query"], ["KmsDecrypt"]]  # before: Query, Query, Decrypt


def new_checkpoint() -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": "x"}
    cp["channel_versions"] = {"v": 1}
    return cp


@pytest.mark.parametrize(
    ("thread", "put_rounds"),
    [
        # Before: ["Query"], then as here (5 requests in 5 round trips with the read).
        # The thread's version 1 (or its reference) is a transaction with the check
        # that the other kind is absent (core/scopes.py; a PutNew before): the same
        # requests and round trips.
        ("solo", [["KmsGenerateDataKey"], ["Transact"], ["Transact"]]),
        # A new tenant: the tenant's key Query, its key, its item, the reference.
        ("acme:1", [["Query"], ["KmsGenerateDataKey"], ["PutNew"], ["Transact"], ["Transact"]]),
    ],
)
def test_a_new_threads_first_read_spares_its_first_put_the_key_query(
    server_backend: Backend, kms_arn: str, thread: str, put_rounds: Rounds
) -> None:
    log, rounds = RequestLog(), []
    saver = server_backend.saver(
        encryption=Encryption(KmsKeyRing(kms_arn), tenant_of=tenant_of),
        s3_client=log.attach(server_backend.s3()),
        dynamodb_client=log.attach(server_backend.dynamodb()),
        kms_client=kms_client(server_backend, log),
    )
    record(saver, rounds)
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    assert saver.get_tuple(config) is None
    assert rounds == [["Query", "Query"]]
    rounds.clear()
    saver.put(config, new_checkpoint(), {"step": -1}, {"v": 1})
    assert rounds == put_rounds
    # As many requests as before: the key Query moved from the put to the read.
    assert len(log.calls) == 2 + sum(len(r) for r in put_rounds)
    assert [c for c in log.calls if c[0] == "kms"] == [("kms", "GenerateDataKey")]
    assert log.calls.count(("dynamodb", "TransactWriteItems")) == 2  # the key's, the commit
    # The key item stored is the one every later reader finds.
    cold = server_backend.saver(
        encryption=Encryption(KmsKeyRing(kms_arn)), kms_client=kms_client(server_backend)
    )
    tup = cold.get_tuple(config)
    assert tup is not None and tup.checkpoint["channel_values"] == {"v": "x"}


async def test_two_cold_reads_of_a_thread_at_once_load_its_key_once(
    server_backend: Backend, kms_arn: str
) -> None:
    """The second read waits for the first one's key load (``WaitKey``) beside its own
    checkpoint Query: one key Query and one ``Decrypt`` for both."""
    config = reads(stored_thread(server_backend, kms_arn, "solo", "index"), "latest")
    rounds: Rounds = []
    async with server_backend.async_saver(encryption=Encryption(KmsKeyRing(kms_arn))) as saver:
        record(saver, rounds)
        got = await asyncio.gather(saver.aget_tuple(config), saver.aget_tuple(config))
    assert all(t is not None and t.checkpoint["channel_values"] == {"v": "small"} for t in got)
    sent = Counter(name for r in rounds for name in r)
    assert sent == {"Query": 3, "WaitKey": 1, "KmsDecrypt": 1}
    assert sorted(rounds) == [["KmsDecrypt"], ["Query", "Query"], ["WaitKey", "Query"]]


@pytest.mark.parametrize("operation", ["copy_thread", "reencrypt_thread"])
def test_a_resealed_thread_reads_cold_in_as_many_round_trips_as_a_put_one(
    server_backend: Backend, kms_arn: str, operation: str
) -> None:
    """A sealed copy or a re-encryption gives a body in S3 the read hints a put gives it
    (they name the re-sealed blobs): a cold read fetches the object and its blob in one
    round trip. Without them it took one more (the object, then the blob)."""
    stored_thread(server_backend, kms_arn, "solo", "s3")
    writer = server_backend.saver(
        encryption=Encryption(KmsKeyRing(kms_arn)),
        kms_client=kms_client(server_backend),
        index_inline_limit=0,  # as the thread was written: the body in S3, its value a blob
    )
    if operation == "copy_thread":
        writer.copy_thread("solo", "copy")
    else:
        writer.reencrypt_thread("solo")
    thread = "copy" if operation == "copy_thread" else "solo"
    saver = server_backend.saver(
        encryption=Encryption(KmsKeyRing(kms_arn)), kms_client=kms_client(server_backend)
    )
    rounds: Rounds = []
    record(saver, rounds)
    tup = saver.get_tuple(reads({"configurable": {"thread_id": thread}}, "latest"))
    assert tup is not None and len(tup.checkpoint["channel_values"]["v"]) == 30_000
    assert rounds == COLD["thread"] + OBJECTS
