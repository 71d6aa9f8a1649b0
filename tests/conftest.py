"""Shared fixtures: moto in-process and moto server (real HTTP), a fresh bucket and
table per test, and helpers to count requests and inject latency at the wire.

No test needs AWS credentials or the network: fake credentials are set for the
whole session and every client points at moto.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.config import Config

from langgraph_s3.local import local_endpoint, serialize_moto

os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_SESSION_TOKEN="testing",
    AWS_DEFAULT_REGION="us-east-1",
)
for _var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB"):
    os.environ.pop(_var, None)

REGION = "us-east-1"


# moto is not thread-safe; see langgraph_s3.local.serialize_moto.
serialize_moto()
# Savers use up to 16 requests at once; boto3's default pool of 10 would only warn.
_POOL = Config(max_pool_connections=32)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """One moto server per test process, reached over real HTTP."""
    with local_endpoint() as url:
        yield url


@dataclass
class Backend:
    """Where a test's bucket and table live, and how to make clients for them."""

    mode: str  # "inproc" or "server"
    endpoint_url: str | None
    bucket: str = field(default_factory=lambda: f"lgs3-{uuid.uuid4().hex[:12]}")
    table: str = field(default_factory=lambda: f"lgs3-{uuid.uuid4().hex[:12]}")

    def s3(self) -> Any:
        return boto3.client("s3", region_name=REGION, endpoint_url=self.endpoint_url, config=_POOL)

    def dynamodb(self) -> Any:
        return boto3.client(
            "dynamodb", region_name=REGION, endpoint_url=self.endpoint_url, config=_POOL
        )

    def saver(self, **kwargs: Any) -> Any:
        """A brand-new S3Saver with brand-new clients, as a new Lambda container has."""
        from langgraph_s3 import S3Saver

        kwargs.setdefault("s3_client", self.s3())
        kwargs.setdefault("dynamodb_client", self.dynamodb())
        return S3Saver(bucket=self.bucket, table=self.table, **kwargs)

    def async_saver(self, **kwargs: Any) -> Any:
        """A brand-new AsyncS3Saver over HTTP (moto in-process does not cover aiobotocore)."""
        from langgraph_s3 import AsyncS3Saver

        assert self.endpoint_url, "AsyncS3Saver tests need the moto server backend"
        return AsyncS3Saver(
            bucket=self.bucket,
            table=self.table,
            region_name=REGION,
            endpoint_url=self.endpoint_url,
            **kwargs,
        )

    def sibling(self) -> Backend:
        """A new bucket and table, set up, on the same moto: moto's queries sort and its
        transactions copy the whole table, so a second workload in a table of its own
        costs what it would alone."""
        other = Backend(self.mode, self.endpoint_url)
        other.saver().setup()
        return other

    def object_keys(self) -> list[str]:
        s3 = self.s3()
        keys: list[str] = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            keys.extend(o["Key"] for o in page.get("Contents", []))
        return keys

    def object_bytes(self) -> int:
        s3 = self.s3()
        total = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            total += sum(o["Size"] for o in page.get("Contents", []))
        return total

    def items(self) -> list[dict[str, Any]]:
        ddb = self.dynamodb()
        out: list[dict[str, Any]] = []
        for page in ddb.get_paginator("scan").paginate(TableName=self.table):
            out.extend(page["Items"])
        return out

    def chunk_items(self, pk: str | None = None) -> dict[str, bytes]:
        """The chunk items (layout 5) of the partition ``pk`` (every one if None):
        ``pk|sk`` -> the frame each holds."""
        return {
            f"{i['pk']['S']}|{i['sk']['S']}": i["v"]["B"]
            for i in self.items()
            if i["sk"]["S"].startswith("b#") and pk in (None, i["pk"]["S"])
        }


@pytest.fixture(params=["inproc", "server"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """A fresh bucket and table, in moto in-process and in a moto server."""
    if request.param == "inproc":
        from moto import mock_aws

        with mock_aws():
            b = Backend("inproc", None)
            b.saver().setup()
            yield b
    else:
        b = Backend("server", request.getfixturevalue("moto_server"))
        b.saver().setup()
        yield b


@pytest.fixture
def server_backend(moto_server: str) -> Backend:
    """A fresh bucket and table in the moto server (for async and HTTP-level tests)."""
    b = Backend("server", moto_server)
    b.saver().setup()
    return b


@pytest.fixture
def inproc_backend() -> Iterator[Backend]:
    from moto import mock_aws

    with mock_aws():
        b = Backend("inproc", None)
        b.saver().setup()
        yield b


class RequestLog:
    """Counts AWS requests by (service, operation) as botocore sends them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def attach(self, client: Any) -> Any:
        service = client.meta.service_model.service_name

        def record(model: Any, **_: Any) -> None:
            self.calls.append((service, model.name))

        client.meta.events.register("before-call.*.*", record)
        return client

    def counts(self) -> Counter[tuple[str, str]]:
        return Counter(self.calls)

    def clear(self) -> None:
        self.calls.clear()


@pytest.fixture
def request_log() -> RequestLog:
    return RequestLog()


def add_latency(client: Any, seconds: float) -> Callable[..., None]:
    """Make every request of a boto3 client take at least ``seconds`` longer."""
    import time

    def delay(**_: Any) -> None:
        time.sleep(seconds)

    client.meta.events.register("before-send.*.*", delay)
    return delay


def create_keyed_table(client: Any, name: str, hash_key: str, range_key: str) -> None:
    """An on-demand table with a string hash and range key, as other savers' own
    setups (DynamoDBSaver, the Lambda example's ledger) create them."""
    client.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": hash_key, "KeyType": "HASH"},
            {"AttributeName": range_key, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": hash_key, "AttributeType": "S"},
            {"AttributeName": range_key, "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print how much the differential test covered (tests/graphs/test_differential.py) and
    the fault suite's figures (tests/storage/test_faults.py)."""
    seeds = ops = 0
    faults: Counter[str] = Counter()
    for rep in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        for name, value in getattr(rep, "user_properties", ()):
            if name == "differential":
                seeds, ops = seeds + value[0], ops + value[1]
            elif name == "faults":
                faults.update(value)
    if seeds:
        terminalreporter.write_line(
            f"differential test vs InMemorySaver: {seeds} seeds, {ops} operations compared"
        )
    if faults:
        terminalreporter.write_line(
            f"fault injection (quick profile): {faults['injected']} faults injected, "
            f"{faults['resumed']} resumed, {faults['absorbed']} absorbed by retries, "
            f"{faults['identical']} identical final states, torn {faults['torn']}, "
            f"forks {faults['forks']}, lost writes {faults['lost_writes']}, double side "
            f"effects under sync {faults['double_side_effects_sync']}"
        )
