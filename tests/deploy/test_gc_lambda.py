"""The collector's Lambda entry point: configured from the storage stack's connection
string, and failing (so its Errors alarm fires) when a run finds damage."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import DamageFoundError, S3SaverError, gc
from tests.conftest import Backend


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
    put_big(inproc_backend.saver(), "t")
    monkeypatch.setenv(
        "CHECKPOINT_CONNECTION_STRING", f"s3://{inproc_backend.bucket}?table={inproc_backend.table}"
    )
    report = gc.lambda_handler({}, None)
    assert report["errors"] == [] and report["threads"] == 1
    assert report["objects"] == report["objects_referenced"] > 0
