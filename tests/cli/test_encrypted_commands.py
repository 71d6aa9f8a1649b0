"""The commands on encrypted storage, through the console script, on a moto server with
KMS: ``--kms-key`` (or ``LANGGRAPH_S3_KMS_KEY``, or ``kms_key=`` in the URL) opens
sealed threads; without it every command says which key to pass and changes nothing
it cannot finish; ``delete`` and ``gc --idle-ttl`` shred (no key needed) and say so,
and the collector removes what a shredded thread leaves; ``export`` of an encrypted
thread needs ``--plaintext``, and its archive imports sealed again."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from langgraph_s3 import S3Saver
from langgraph_s3.core import schema
from langgraph_s3.sealing import KmsKeyRing
from tests.cli.test_commands import forked_thread, run, url
from tests.conftest import REGION, Backend
from tests.storage.test_sealed_storage import put

PREFIX = "sealed/"


def kms(backend: Backend) -> Any:
    return boto3.client("kms", region_name=REGION, endpoint_url=backend.endpoint_url)


def new_key(backend: Backend) -> str:
    arn: str = kms(backend).create_key()["KeyMetadata"]["Arn"]
    return arn


def sealed_saver(backend: Backend, arn: str, prefix: str = PREFIX, behind: float = 0.0) -> S3Saver:
    """Bodies in S3 (index_inline_limit=0), so the thread has objects to count;
    ``behind``: seconds the saver's clock is behind (what it writes looks that old)."""
    return S3Saver(
        bucket=backend.bucket, table=backend.table, prefix=prefix, region_name=REGION,
        endpoint_url=backend.endpoint_url, index_inline_limit=0, encryption=KmsKeyRing(arn),
        clock=lambda: time.time() - behind,
    )  # fmt: skip


def at(backend: Backend, *args: str, kms_key: str | None = None) -> Any:
    where = ["--url", url(backend, PREFIX)]
    return run(*where, *(["--kms-key", kms_key] if kms_key else []), *args)


def objects(backend: Backend, thread: str) -> list[str]:
    listed = backend.s3().list_objects_v2(Bucket=backend.bucket, Prefix=f"{PREFIX}{thread}/")
    return [o["Key"] for o in listed.get("Contents", [])]


def key_items(backend: Backend, thread: str, prefix: str = PREFIX) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = backend.dynamodb().query(
        TableName=backend.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :k)",
        ExpressionAttributeValues={
            ":pk": {"S": f"{prefix}{thread}"}, ":k": {"S": schema.KEY_SK_PREFIX}
        },
    )["Items"]  # fmt: skip
    return found


@pytest.fixture
def sealed(server_backend: Backend) -> tuple[Backend, str, list[str]]:
    """An encrypted thread t1 (paused on an interrupt, then forked): storage, KMS key,
    checkpoint ids newest first."""
    arn = new_key(server_backend)
    with sealed_saver(server_backend, arn) as saver:
        ids = forked_thread(saver, "t1")
    assert key_items(server_backend, "t1") and objects(server_backend, "t1")
    return server_backend, arn, ids


def test_with_kms_key_the_read_commands_open_an_encrypted_thread(
    sealed: tuple[Backend, str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, arn, ids = sealed
    paused = at(backend, "show", "t1", ids[0], "--json", kms_key=arn)
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout)["interrupts"][0]["value"]["question"] == "approve?"
    rows = json.loads(at(backend, "history", "t1", "--json", kms_key=arn).stdout)
    assert {r["checkpoint_id"] for r in rows} >= set(ids)
    changes = json.loads(at(backend, "diff", "t1", ids[-1], ids[0], "--json", kms_key=arn).stdout)
    assert changes["added"]["draft"] == "refund r1"
    checked = at(backend, "verify", "--json", kms_key=arn)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == {
        "checked": len(ids) + 1, "damaged": [], "undecodable": [], "locked": []
    }  # fmt: skip
    # The environment variable, and kms_key= in the URL, do the same.
    monkeypatch.setenv("LANGGRAPH_S3_KMS_KEY", arn)
    assert at(backend, "show", "t1", "--json").returncode == 0
    monkeypatch.delenv("LANGGRAPH_S3_KMS_KEY")
    in_url = run("--url", f"{url(backend, PREFIX)}&kms_key={arn}", "show", "t1", "--json")
    assert in_url.returncode == 0, in_url.stderr

    copied = at(backend, "copy", "t1", "t1-copy", "--yes", kms_key=arn)
    assert copied.returncode == 0, copied.stderr
    again = json.loads(at(backend, "show", "t1-copy", "--json", kms_key=arn).stdout)
    assert (
        again["values"]
        == json.loads(at(backend, "show", "t1", "--json", kms_key=arn).stdout)["values"]
    )
    assert key_items(backend, "t1-copy")  # sealed under a key of its own


def test_without_kms_key_each_command_says_which_key_to_pass_and_changes_nothing(
    sealed: tuple[Backend, str, list[str]], tmp_path: Path
) -> None:
    backend, arn, ids = sealed
    advice = f"pass --kms-key {arn}"
    for args in (
        ["show", "t1"], ["history", "t1"], ["diff", "t1", ids[-1], ids[0]], ["stats", "t1"],
        ["copy", "t1", "t9", "--yes"], ["prune", "t1", "--yes"],
        ["export", "t1", "-o", str(tmp_path / "t1.jsonl")],
    ):  # fmt: skip
        done = at(backend, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "KeyNeededError: thread 't1' is encrypted" in done.stderr and advice in done.stderr
    assert not objects(backend, "t9") and not list(tmp_path.iterdir())  # nothing made
    assert len(json.loads(at(backend, "history", "t1", "--json", kms_key=arn).stdout)) == 4

    checked = at(backend, "verify", "--json")
    assert checked.returncode == 2  # not damage: the key option is missing
    report = json.loads(checked.stdout)
    assert report["damaged"] == [] and len(report["locked"]) == len(ids) + 1
    assert advice in report["locked"][0]["error"]
    assert "did not open with the key options given (not damage)" in checked.stderr

    collected = at(backend, "gc", "--grace", "0s", "--json")
    assert collected.returncode == 2, collected.stderr
    gc = json.loads(collected.stdout)
    assert gc["errors"] == [] and [p["thread_id"] for p in gc["threads_protected"]] == ["t1"]
    assert "pass that KMS key with --kms-key (or LANGGRAPH_S3_KMS_KEY)" in str(gc)
    assert arn in gc["threads_protected"][0]["reason"] and gc["objects_deleted"] == 0

    # A key the data was not wrapped under: the advice names --previous-kms-key.
    other = at(backend, "show", "t1", kms_key=new_key(backend))
    assert other.returncode == 2 and "pass it with --previous-kms-key" in other.stderr


def test_delete_shreds_without_a_key_and_says_what_that_means(
    sealed: tuple[Backend, str, list[str]],
) -> None:
    backend, arn, _ = sealed
    dry = at(backend, "delete", "t1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would delete thread 't1' and shred its data key" in dry.stdout
    assert f"would delete its data key version 1 (wrapped under {arn})" in dry.stdout
    assert key_items(backend, "t1") and objects(backend, "t1")

    done = at(backend, "delete", "t1", "--yes")
    assert done.returncode == 0, done.stderr
    assert f"shredded thread 't1': deleted its data key version 1 (wrapped under {arn})" in (
        done.stdout
    )
    assert "can no longer be opened" in done.stdout and "key_ttl" in done.stdout
    assert key_items(backend, "t1") == [] and objects(backend, "t1") == []
    # A delete that stopped after the index (a crash) leaves the objects, sealed under
    # the shredded key: the collector, with no key, removes them.
    with sealed_saver(backend, arn) as saver:
        forked_thread(saver, "t4")
    ddb, pk = backend.dynamodb(), {":pk": {"S": f"{PREFIX}t4"}}
    for item in ddb.query(TableName=backend.table, KeyConditionExpression="pk = :pk",
                          ExpressionAttributeValues=pk)["Items"]:  # fmt: skip
        ddb.delete_item(TableName=backend.table, Key={"pk": item["pk"], "sk": item["sk"]})
    left = len(objects(backend, "t4"))
    collected = at(backend, "gc", "--grace", "0s", "--json")
    assert collected.returncode == 0, collected.stderr
    report = json.loads(collected.stdout)
    assert report["threads"] == 0 and report["objects_deleted"] == left > 0
    assert objects(backend, "t1") == objects(backend, "t4") == []

    # With the key, the report names the saver's key_ttl; a plain thread shreds nothing.
    with sealed_saver(backend, arn) as saver:
        forked_thread(saver, "t2")
    assert "for up to 300 s" in at(backend, "delete", "t2", "--yes", kms_key=arn).stdout
    with S3Saver(
        bucket=backend.bucket, table=backend.table, prefix=PREFIX, region_name=REGION,
        endpoint_url=backend.endpoint_url,
    ) as plain:  # fmt: skip
        forked_thread(plain, "t3")
    assert at(backend, "delete", "t3", "--yes").stdout.strip() == "deleted thread 't3'"


def test_gc_idle_ttl_shreds_an_encrypted_thread_and_collects_its_objects(
    server_backend: Backend,
) -> None:
    arn = new_key(server_backend)
    # Written an hour ago (the saver's clock), where the test once waited out a 5 s ttl.
    with sealed_saver(server_backend, arn, behind=3600) as saver:
        forked_thread(saver, "old")
    assert objects(server_backend, "old")
    dry = at(server_backend, "gc", "--idle-ttl", "30m", "--grace", "0s", "--dry-run", kms_key=arn)
    assert dry.returncode == 0, dry.stderr
    assert "1 expired (0 kept: waiting on an interrupt, 1 of them would be shredded" in dry.stdout

    with sealed_saver(server_backend, arn) as saver:
        forked_thread(saver, "new")  # idle for seconds when the run reads it
    done = at(server_backend, "gc", "--idle-ttl", "30m", "--grace", "0s", "--json", kms_key=arn)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["threads_expired"] == report["threads_shredded"] == ["old"]
    assert report["threads_protected"] == [] and report["errors"] == []
    assert key_items(server_backend, "old") == [] and objects(server_backend, "old") == []
    assert key_items(server_backend, "new") and objects(server_backend, "new")


def test_gc_reports_and_removes_what_a_warm_saver_wrote_after_delete(
    server_backend: Backend,
) -> None:
    """A run goes on writing a thread that ``delete`` shredded (its saver holds the
    key): gc deletes what it wrote, counts it, and exits 0 (garbage, not damage)."""
    arn = new_key(server_backend)
    with sealed_saver(server_backend, arn) as warm:
        config = put(warm, "t", os.urandom(40_000))
        assert at(server_backend, "delete", "t", "--yes").returncode == 0
        put(warm, "t", os.urandom(40_000), config)
    assert objects(server_backend, "t") and not key_items(server_backend, "t")
    text = at(server_backend, "gc", "--grace", "0s", kms_key=arn)
    assert text.returncode == 0, text.stderr
    assert "1 thread(s) whose data key was shredded: their leftovers deleted (0 more" in text.stdout
    done = at(server_backend, "gc", "--grace", "0s", "--json", kms_key=arn)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["threads_orphaned"] == [] and report["threads_protected"] == []
    assert report["threads"] == 0 and objects(server_backend, "t") == []


def test_export_of_an_encrypted_thread_needs_plaintext_and_imports_sealed_again(
    sealed: tuple[Backend, str, list[str]], tmp_path: Path
) -> None:
    backend, arn, _ = sealed
    archive = tmp_path / "t1.jsonl"
    refused = at(backend, "export", "t1", "-o", str(archive), kms_key=arn)
    assert refused.returncode == 2 and "PlaintextArchiveError" in refused.stderr
    assert "pass --plaintext" in refused.stderr and not archive.exists()

    exported = at(backend, "export", "t1", "-o", str(archive), "--plaintext", kms_key=arn)
    assert exported.returncode == 0, exported.stderr
    # In the clear (serializer output, base64): out of reach of shredding.
    records = [json.loads(line) for line in archive.read_text().splitlines()[1:]]
    assert b"refund r1" in b"".join(base64.b64decode(r["checkpoint"][1]) for r in records)

    other = new_key(backend)
    target = ["--url", url(backend, "restored/"), "--kms-key", other]
    imported = run(*target, "import", str(archive), "--thread-id", "t2")
    assert imported.returncode == 0, imported.stderr
    assert key_items(backend, "t2", prefix="restored/")[0][schema.KEK]["S"] == other
    restored = json.loads(run(*target, "show", "t2", "--json").stdout)
    original = json.loads(at(backend, "show", "t1", "--json", kms_key=arn).stdout)
    assert restored["values"] == original["values"]
    locked = run("--url", url(backend, "restored/"), "show", "t2")
    assert locked.returncode == 2 and f"pass --kms-key {other}" in locked.stderr


def test_the_key_options_are_checked_and_rekey_keeps_its_own(
    sealed: tuple[Backend, str, list[str]],
) -> None:
    backend, arn, _ = sealed
    alias = at(backend, "show", "t1", kms_key="alias/checkpoints")
    assert alias.returncode == 2 and "--kms-key 'alias/checkpoints' is a KMS alias" in alias.stderr
    alone = at(backend, "--previous-kms-key", arn, "show", "t1")
    assert alone.returncode == 2 and "--previous-kms-key needs --kms-key" in alone.stderr
    both = run("--url", f"{url(backend, PREFIX)}&kms_key={arn}", "--kms-key", new_key(backend),
               "show", "t1")  # fmt: skip
    assert both.returncode == 2 and "name the key once" in both.stderr
    # The global option and rekey's own: each where it is written.
    new = new_key(backend)
    rekeyed = at(backend, "rekey", "--kms-key", new, "--previous-kms-key", arn, "--dry-run",
                 kms_key=arn)  # fmt: skip
    assert rekeyed.returncode == 0, rekeyed.stderr
    assert f"would re-wrap 1 data key(s); 0 already under {new}" in rekeyed.stdout


def test_a_missing_or_refused_data_key_is_not_ok_and_says_what_to_do(
    sealed: tuple[Backend, str, list[str]],
) -> None:
    """Exit 1 (the data cannot be opened), not 3 (a storage error worth a retry)."""
    backend, arn, _ = sealed
    (item,) = key_items(backend, "t1")
    # Another data key's ciphertext in the item: KMS refuses it (the context differs).
    with sealed_saver(backend, arn) as saver:
        forked_thread(saver, "t2")
    (other,) = key_items(backend, "t2")
    forged = {**item, schema.WRAPPED: other[schema.WRAPPED]}
    backend.dynamodb().put_item(TableName=backend.table, Item=forged)
    refused = at(backend, "show", "t1", kms_key=arn)
    assert refused.returncode == 1, refused.stderr
    assert "KeyUnwrapError" in refused.stderr and "backup" in refused.stderr

    backend.dynamodb().delete_item(
        TableName=backend.table, Key={"pk": item["pk"], "sk": item["sk"]}
    )
    missing = at(backend, "show", "t1", kms_key=arn)
    assert missing.returncode == 1, missing.stderr
    assert "DataKeyError" in missing.stderr and "'t1'" in missing.stderr
    assert "backup" in missing.stderr and "delete" in missing.stderr
