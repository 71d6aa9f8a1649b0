"""``setup``, ``claim`` and ``demo`` end to end, through the console script, on a moto
server: storage created where the options say, a thread handed over to another
region, and the demo against an endpoint it is given."""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import S3Saver
from langgraph_s3.errors import ThreadOwnedElsewhereError
from langgraph_s3.regions import CrossRegion
from tests.cli.test_commands import run
from tests.conftest import REGION, Backend

REPLICA = "eu-west-1"


def storage(backend: Backend, bucket: str, table: str, region: str = REGION) -> list[str]:
    return [
        "--bucket", bucket, "--table", table, "--region", region,
        "--endpoint-url", backend.endpoint_url or "",
    ]  # fmt: skip


def test_setup_creates_what_the_options_name_and_is_idempotent(server_backend: Backend) -> None:
    name = f"made-by-setup-{uuid.uuid4().hex[:8]}"
    where = storage(server_backend, name, name)
    missing = run(*where, "threads", "--json")
    assert missing.returncode == 3 and name in missing.stderr  # the table does not exist
    for _ in range(2):
        made = run(*where, "setup")
        assert made.returncode == 0, made.stderr
        assert f"bucket {name!r} and table {name!r} are ready" in made.stdout
    listed = run(*where, "threads", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=server_backend.endpoint_url)
    assert s3.head_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200


def put_one(saver: S3Saver, thread: str) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"x": 1}
    cp["channel_versions"] = {"x": saver.get_next_version(None, None)}
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saver.put(config, cp, {"step": 0}, cp["channel_versions"])


def test_claim_makes_the_given_region_the_owner(server_backend: Backend) -> None:
    # The replica region has its own bucket and table of the same name (as
    # infra/multi-region.yaml makes them); the home region owns unclaimed threads.
    bucket = f"{server_backend.bucket}-eu"
    assert (
        run(*storage(server_backend, bucket, server_backend.table, REPLICA), "setup").returncode
        == 0
    )

    def replica_saver() -> S3Saver:
        return S3Saver(
            bucket=bucket, table=server_backend.table, region_name=REPLICA,
            endpoint_url=server_backend.endpoint_url,
            cross_region=CrossRegion(home_region=REGION, read_policy="fail"),
        )  # fmt: skip

    with pytest.raises(ThreadOwnedElsewhereError):
        put_one(replica_saver(), "order-7")
    where = storage(server_backend, bucket, server_backend.table, REPLICA)
    unknown = run(*where, "claim", "order-7", "--home-region", REGION, "--yes")
    assert unknown.returncode == 1 and "'order-7'" in unknown.stderr  # nothing to claim yet
    # The thread as the global table would replicate it from the home region.
    with S3Saver(
        bucket=bucket, table=server_backend.table, region_name=REPLICA,
        endpoint_url=server_backend.endpoint_url, cross_region=CrossRegion(home_region=REPLICA),
    ) as home_writer:  # fmt: skip
        put_one(home_writer, "order-7")
    no_region = run(
        "--bucket", bucket, "--table", server_backend.table,
        "--endpoint-url", server_backend.endpoint_url or "",
        "claim", "order-7", "--home-region", REGION, "--yes",
    )  # fmt: skip
    assert no_region.returncode == 2 and "--region" in no_region.stderr
    dry = run(*where, "claim", "order-7", "--home-region", REGION, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    with pytest.raises(ThreadOwnedElsewhereError):
        put_one(replica_saver(), "order-7")  # a dry run changed nothing

    claimed = run(*where, "claim", "order-7", "--home-region", REGION, "--yes")
    assert claimed.returncode == 0, claimed.stderr
    assert f"owner {REGION} -> {REPLICA}" in claimed.stdout
    put_one(replica_saver(), "order-7")  # the replica now writes the thread
    assert replica_saver().get_tuple({"configurable": {"thread_id": "order-7"}}) is not None


def test_demo_runs_against_the_endpoint_it_is_given(server_backend: Backend) -> None:
    name = f"demo-{uuid.uuid4().hex[:8]}"
    done = run(
        "--endpoint-url", server_backend.endpoint_url or "", "--bucket", name,
        "--table", name, "--region", REGION, "--prefix", "demo/", "demo", "--thread",
        "demo-thread", "--setup",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "outcome = 'done: Refund order A-1042" in done.stdout
    with S3Saver(
        bucket=name, table=name, prefix="demo/", region_name=REGION,
        endpoint_url=server_backend.endpoint_url,
    ) as saver:  # fmt: skip
        latest = saver.get_tuple({"configurable": {"thread_id": "demo-thread"}})
    assert latest is not None
    assert latest.checkpoint["channel_values"]["outcome"].startswith("done: Refund order A-1042")
