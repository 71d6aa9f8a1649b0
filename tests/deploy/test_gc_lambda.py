"""The collector's Lambda entry point: configured from the storage stack's connection
string (and, on encrypted storage, CHECKPOINT_KMS_KEY), and failing (so its Errors
alarm fires) when a run finds damage or threads it cannot open."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import DamageFoundError, InvalidConfigError, S3Saver, S3SaverError, gc
from langgraph_s3.sealing import KmsKeyRing
from tests.conftest import REGION, Backend, RequestLog


def kms(backend: Backend) -> Any:
    return boto3.client("kms", region_name=REGION, endpoint_url=backend.endpoint_url)


def put_big(saver: object, thread: str) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"doc": "x" * 50_000}
    checkpoint["channel_versions"] = {"doc": saver.get_next_version(None, None)}  # type: ignore[attr-defined]
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saver.put(config, checkpoint, {"step": 0}, checkpoint["channel_versions"])  # type: ignore[attr-defined]


def test_a_run_that_finds_damage_fails_after_reporting(
    inproc_backend: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint object altered in place is damage: the handler prints its summary,
    then raises DamageFoundError naming it; the damaged thread's blobs are spared."""
    saver = inproc_backend.saver(index_inline_limit=0)  # checkpoint bodies in S3
    put_big(saver, "sound")
    put_big(saver, "damaged")
    s3 = inproc_backend.s3()
    body_key = next(k for k in inproc_backend.object_keys() if k.startswith("damaged/c/"))
    s3.put_object(Bucket=inproc_backend.bucket, Key=body_key, Body=b"LGS3 not a checkpoint")
    objects = set(inproc_backend.object_keys())
    url = f"s3://{inproc_backend.bucket}?table={inproc_backend.table}"
    monkeypatch.setenv("CHECKPOINT_CONNECTION_STRING", url)
    monkeypatch.setenv("GC_GRACE", "0s")
    with pytest.raises(DamageFoundError) as info:
        gc.lambda_handler({}, None)
    assert isinstance(info.value, S3SaverError)
    assert len(info.value.errors) == 1 and body_key in info.value.errors[0]
    assert "delete_thread" in str(info.value)
    assert "1 error(s)" in capsys.readouterr().out
    # Nothing of either thread went; the collector only wrote its own state.
    assert set(inproc_backend.object_keys()) == objects | {".gc/state"}


def test_a_clean_run_returns_its_report(
    inproc_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_big(inproc_backend.saver(chunk_items=False), "t")  # an S3 blob
    put_big(inproc_backend.saver(), "u")  # a chunk item (layout 5): a blob kept in the index
    monkeypatch.setenv(
        "CHECKPOINT_CONNECTION_STRING", f"s3://{inproc_backend.bucket}?table={inproc_backend.table}"
    )
    report = gc.lambda_handler({}, None)
    assert report["errors"] == [] and report["threads"] == 2
    assert report["objects"] == report["objects_referenced"] > 0
    assert report["chunk_items"] == report["chunk_items_referenced"] > 0


# ------------------------------------------------------------- encrypted storage
def sealed_env(backend: Backend, monkeypatch: pytest.MonkeyPatch, kms_key: str) -> None:
    """The environment infra/gc.yaml gives the function, pointed at the moto server."""
    where = f"s3://{backend.bucket}/app/?table={backend.table}&region={REGION}"
    monkeypatch.setenv(
        "CHECKPOINT_CONNECTION_STRING", f"{where}&endpoint_url={backend.endpoint_url}"
    )
    monkeypatch.setenv("CHECKPOINT_KMS_KEY", kms_key)
    monkeypatch.setenv("GC_GRACE", "0s")


def sealed_saver(backend: Backend, kms_key: str, behind: float = 0.0) -> S3Saver:
    """``behind``: seconds the saver's clock is behind (what it writes looks that old)."""
    return S3Saver(
        bucket=backend.bucket, table=backend.table, prefix="app/", region_name=REGION,
        endpoint_url=backend.endpoint_url, index_inline_limit=0, encryption=KmsKeyRing(kms_key),
        clock=lambda: time.time() - behind,
    )  # fmt: skip


def test_with_the_key_the_handler_shreds_expired_threads_and_collects_sealed_ones(
    server_backend: Backend, monkeypatch: pytest.MonkeyPatch, request_log: RequestLog
) -> None:
    """CHECKPOINT_KMS_KEY: an expired encrypted thread is shredded and its objects
    collected; a live one is opened (one KMS Decrypt, no GenerateDataKey) and keeps
    every object it references, while garbage in its folder goes."""
    kms_key = kms(server_backend).create_key()["KeyMetadata"]["Arn"]
    with sealed_saver(server_backend, kms_key, behind=3600) as saver:
        put_big(saver, "old")  # an hour ago: idle longer than GC_IDLE_TTL
    with sealed_saver(server_backend, kms_key) as saver:
        put_big(saver, "live")
    garbage = "app/live/b/" + "0" * 64
    server_backend.s3().put_object(Bucket=server_backend.bucket, Key=garbage, Body=b"LGS3")
    live = [k for k in server_backend.object_keys() if k.startswith("app/live/") and k != garbage]
    sealed_env(server_backend, monkeypatch, kms_key)
    monkeypatch.setenv("GC_IDLE_TTL", "30m")
    make_client = boto3.client
    monkeypatch.setattr(boto3, "client", lambda *a, **kw: request_log.attach(make_client(*a, **kw)))

    before = len(server_backend.object_keys())
    report = gc.lambda_handler({}, None)  # grace 0s: garbage goes in this run
    assert report["threads_expired"] == report["threads_shredded"] == ["old"]
    assert report["threads_protected"] == [] and report["errors"] == []
    assert report["objects_referenced"] == len(live)
    assert report["objects_deleted"] == before - len(live) > 1  # old's objects, the blob
    assert sorted(server_backend.object_keys()) == sorted([*live, "app/.gc/state"])
    kms_calls = {op: n for (service, op), n in request_log.counts().items() if service == "kms"}
    assert kms_calls == {"Decrypt": 1}  # live's data key, once; the collector makes none
    with sealed_saver(server_backend, kms_key) as reader:
        assert reader.get_tuple({"configurable": {"thread_id": "live"}}) is not None
        assert reader.get_tuple({"configurable": {"thread_id": "old"}}) is None


def test_without_the_key_the_handler_spares_sealed_threads_and_fails(
    server_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    kms_key = kms(server_backend).create_key()["KeyMetadata"]["Arn"]
    with sealed_saver(server_backend, kms_key) as saver:
        put_big(saver, "t")
    objects = set(server_backend.object_keys())
    sealed_env(server_backend, monkeypatch, "")  # gc.yaml without ClientSideKeyArn
    with pytest.raises(DamageFoundError) as info:
        gc.lambda_handler({}, None)
    assert "could not open 1 thread(s) (first: 't'" in str(info.value)
    assert "set CHECKPOINT_KMS_KEY" in str(info.value) and kms_key in str(info.value)
    assert set(server_backend.object_keys()) == objects | {"app/.gc/state"}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("alias/checkpoints", "CHECKPOINT_KMS_KEY 'alias/checkpoints' is a KMS alias"),
        ("arn:aws:kms:us-east-1:111122223333:alias/x", "is a KMS alias: pass the key ARN"),
        ("arn:aws:kms:us-east-1:1111:key/x", "is not a KMS key ARN or key id"),
    ],
)
def test_a_key_that_is_not_a_key_arn_is_refused_before_any_request(
    monkeypatch: pytest.MonkeyPatch, value: str, says: str
) -> None:
    monkeypatch.setenv("CHECKPOINT_BUCKET", "b")
    monkeypatch.setenv("CHECKPOINT_TABLE", "t")
    monkeypatch.setenv("CHECKPOINT_KMS_KEY", value)
    monkeypatch.setattr(boto3, "client", None)  # no AWS client may be made
    with pytest.raises(InvalidConfigError) as info:
        gc.lambda_handler({}, None)
    assert says in str(info.value)


def test_the_key_is_named_once(monkeypatch: pytest.MonkeyPatch) -> None:
    arn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    monkeypatch.setenv("CHECKPOINT_CONNECTION_STRING", f"s3://b/app/?table=t&kms_key={arn}")
    monkeypatch.setenv("CHECKPOINT_KMS_KEY", arn)
    with pytest.raises(InvalidConfigError, match="name the key once"):
        gc.lambda_handler({}, None)


ARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"CHECKPOINT_PREVIOUS_KMS_KEY": ARN}, "set without CHECKPOINT_KMS_KEY"),
        (
            {"CHECKPOINT_KMS_KEY": ARN, "CHECKPOINT_PREVIOUS_KMS_KEY": "alias/old"},
            "CHECKPOINT_PREVIOUS_KMS_KEY 'alias/old' is a KMS alias",
        ),
    ],
)
def test_a_previous_key_needs_a_key_and_must_be_a_key_arn(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], says: str
) -> None:
    monkeypatch.setenv("CHECKPOINT_BUCKET", "b")
    monkeypatch.setenv("CHECKPOINT_TABLE", "t")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(boto3, "client", None)  # no AWS client may be made
    with pytest.raises(InvalidConfigError) as info:
        gc.lambda_handler({}, None)
    assert says in str(info.value)


def test_a_previous_key_is_not_named_beside_a_connection_string_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHECKPOINT_CONNECTION_STRING", f"s3://b/app/?table=t&kms_key={ARN}")
    monkeypatch.setenv("CHECKPOINT_PREVIOUS_KMS_KEY", ARN.replace("1234abcd-", "9999abcd-"))
    with pytest.raises(InvalidConfigError, match="name the key once"):
        gc.lambda_handler({}, None)
