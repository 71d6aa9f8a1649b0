"""``kms_key=`` (and ``previous_kms_key=``) in a connection string: both savers'
``from_conn_string``, and the Agent Server's factory, seal with a ``KmsKeyRing`` on
that key (moto server with KMS); malformed key options are refused."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from langgraph.types import Command

from langgraph_s3 import AsyncS3Saver, CorruptObjectError, S3Saver, parse_conn_string
from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.sealing import KmsKeyRing
from langgraph_s3.server import CONNECTION_STRING_VAR, checkpointer
from tests.conftest import REGION, Backend
from tests.graphs.test_graphs import Calls, build_approval, cfg

ARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
OLD = "arn:aws:kms:us-east-1:111122223333:key/0000abcd-12ab-34cd-56ef-1234567890ab"


def conn(backend: Backend, arn: str) -> str:
    return (
        f"s3://{backend.bucket}/keyed/?table={backend.table}&region={REGION}"
        f"&endpoint_url={backend.endpoint_url}&kms_key={arn}"
    )


def new_key(backend: Backend) -> str:
    kms = boto3.client("kms", region_name=REGION, endpoint_url=backend.endpoint_url)
    arn: str = kms.create_key()["KeyMetadata"]["Arn"]
    return arn


def key_items(backend: Backend) -> list[dict[str, Any]]:
    return [i for i in backend.items() if i["sk"]["S"].startswith("k#")]


def test_parse_conn_string_makes_a_kms_key_ring() -> None:
    base = "s3://b/p/?table=t"
    ring = parse_conn_string(f"{base}&kms_key={ARN}&previous_kms_key={OLD}")["encryption"]
    assert isinstance(ring, KmsKeyRing) and ring.key_id == ARN and ring.previous == (OLD,)
    assert "encryption" not in parse_conn_string(base)
    with pytest.raises(InvalidConfigError, match="previous_kms_key without kms_key"):
        parse_conn_string(f"{base}&previous_kms_key={OLD}")
    with pytest.raises(InvalidConfigError, match="is a KMS alias"):
        parse_conn_string(f"{base}&kms_key=alias/checkpoints")
    with pytest.raises(InvalidConfigError, match="did you mean 'kms_key'"):
        parse_conn_string(f"{base}&kms_keys={ARN}")


def test_from_conn_string_seals_with_the_key_it_names(server_backend: Backend) -> None:
    arn = new_key(server_backend)
    with S3Saver.from_conn_string(conn(server_backend, arn)) as saver:
        assert isinstance(saver.encryption.ring, KmsKeyRing)
        build_approval(saver, Calls()).invoke({"request": "r1"}, cfg("t"))
    [item] = key_items(server_backend)
    assert item["kek"]["S"] == arn
    plain_url = conn(server_backend, arn).rsplit("&kms_key=", 1)[0]
    # Without it: sealed data (the pending writes are met first) does not open.
    with S3Saver.from_conn_string(plain_url) as plain, pytest.raises(CorruptObjectError):
        plain.get_tuple(cfg("t"))
    with S3Saver.from_conn_string(conn(server_backend, arn)) as cold:
        latest = cold.get_tuple(cfg("t"))
    assert latest is not None and latest.checkpoint["channel_values"]["draft"] == "refund r1"


async def test_the_async_saver_and_the_server_factory_take_it_too(
    server_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = new_key(server_backend)
    async with AsyncS3Saver.from_conn_string(conn(server_backend, arn)) as saver:
        await build_approval(saver, Calls()).ainvoke({"request": "r1"}, cfg("a"))
    monkeypatch.setenv(CONNECTION_STRING_VAR, conn(server_backend, arn))
    async with checkpointer() as served:
        graph = build_approval(served, Calls())
        await graph.ainvoke(Command(resume=True), cfg("a"))
        final = (await graph.aget_state(cfg("a"))).values
    assert final["decision"] == "approved"
    assert [i["th"]["S"] for i in key_items(server_backend)] == ["a"]
