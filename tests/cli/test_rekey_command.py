"""``langgraph-s3 rekey`` end to end on a moto server: data keys of threads and a tenant,
wrapped under one KMS key, are re-wrapped under another by KMS itself; the data keys
stay the same, a second run finds nothing to do, and a key item moved to another
thread is reported (exit 1) while the others are re-wrapped."""

from __future__ import annotations

from typing import Any

import boto3

from langgraph_s3.core import datakeys, schema
from langgraph_s3.core.datakeys import KeyScope
from langgraph_s3.sealing.kms import KmsKeyRing
from tests.cli.test_commands import run, url
from tests.conftest import REGION, Backend

PREFIX = "keys/"


def kms(backend: Backend) -> Any:
    return boto3.client("kms", region_name=REGION, endpoint_url=backend.endpoint_url)


def rekey(backend: Backend, *args: str) -> Any:
    return run("--url", url(backend, PREFIX), "--endpoint-url", backend.endpoint_url or "",
               "rekey", *args)  # fmt: skip


def test_rekey_moves_every_data_key_to_the_new_kms_key(server_backend: Backend) -> None:
    old, new = (kms(server_backend).create_key()["KeyMetadata"]["Arn"] for _ in range(2))
    saver = server_backend.saver(prefix=PREFIX, kms_client=kms(server_backend))
    scopes = [KeyScope.thread("t-1"), KeyScope.thread("t-2"), KeyScope.tenant("acme")]
    keys = {s: saver.run(datakeys.key_for(saver, KmsKeyRing(old), s)) for s in scopes}

    dry = rekey(server_backend, "--kms-key", new, "--previous-kms-key", old, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would re-wrap 3 data key(s); 0 already under" in dry.stdout
    assert all(saver.run(datakeys.current(saver, s)).kek == old for s in scopes)

    done = rekey(server_backend, "--kms-key", new, "--previous-kms-key", old)
    assert done.returncode == 0, done.stderr
    assert "re-wrapped 3 data key(s); 0 already under" in done.stdout
    for scope in scopes:
        assert saver.run(datakeys.current(saver, scope)).kek == new
        # A ring that knows only the new KMS key unwraps the same data key.
        assert saver.run(datakeys.key_for(saver, KmsKeyRing(new), scope)) == keys[scope]

    again = rekey(server_backend, "--kms-key", new)
    assert again.returncode == 0, again.stderr
    assert "re-wrapped 0 data key(s); 3 already under" in again.stdout


def test_rekey_reports_a_key_item_that_does_not_unwrap_and_rewraps_the_others(
    server_backend: Backend,
) -> None:
    old, new = (kms(server_backend).create_key()["KeyMetadata"]["Arn"] for _ in range(2))
    saver = server_backend.saver(prefix=PREFIX, kms_client=kms(server_backend))
    for thread in ("t-1", "t-2"):
        saver.run(datakeys.key_for(saver, KmsKeyRing(old), KeyScope.thread(thread)))
    # t-2's wrapped key is replaced by t-1's: KMS refuses it for t-2's context.
    ddb = saver.dynamodb_client
    t1 = saver.run(datakeys.current(saver, KeyScope.thread("t-1")))
    ddb.update_item(
        TableName=saver.table,
        Key={schema.PK: {"S": f"{PREFIX}t-2"}, schema.SK: {"S": schema.key_sk(1)}},
        UpdateExpression="SET wk = :w",
        ExpressionAttributeValues={":w": {"B": t1.wrapped}},
    )
    done = rekey(server_backend, "--kms-key", new, "--previous-kms-key", old)
    assert done.returncode == 1
    assert "re-wrapped 1 data key(s); 0 already under" in done.stdout
    assert "thread 't-2', data key 1: KMS refused to unwrap" in done.stderr
    assert saver.run(datakeys.current(saver, KeyScope.thread("t-1"))).kek == new
    assert saver.run(datakeys.current(saver, KeyScope.thread("t-2"))).kek == old


def test_rekey_reencrypt_seals_a_thread_under_a_new_data_key(server_backend: Backend) -> None:
    from langgraph_s3 import Encryption
    from tests.storage.test_reencrypt import key_items, snapshot, start

    old, new = (kms(server_backend).create_key()["KeyMetadata"]["Arn"] for _ in range(2))

    def saver(ring: KmsKeyRing) -> Any:
        return server_backend.saver(
            prefix=PREFIX, encryption=Encryption(ring), kms_client=kms(server_backend)
        )

    start(saver(KmsKeyRing(old)))
    before = snapshot(saver(KmsKeyRing(old)))

    dry = rekey(server_backend, "--kms-key", new, "--reencrypt", "t", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would re-encrypt thread 't' (data key versions: 1)" in dry.stdout
    assert key_items(server_backend, f"{PREFIX}t") == ["k#0000000001"]

    done = rekey(server_backend, "--kms-key", new, "--previous-kms-key", old,
                 "--reencrypt", "t", "--reencrypt", "nope")  # fmt: skip
    assert done.returncode == 1  # one thread was not there
    assert "re-encrypted thread 't': 7 checkpoint(s), " in done.stdout
    assert "data key version 2; shredded version(s) 1" in done.stdout
    assert "thread 'nope': no such thread" in done.stderr
    assert "re-wrapped" not in done.stdout  # no other key is touched
    assert key_items(server_backend, f"{PREFIX}t") == ["k#0000000002"]
    # The new data key is wrapped under the new KMS key: a ring without the old reads it.
    assert snapshot(saver(KmsKeyRing(new))) == before
