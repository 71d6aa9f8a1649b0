"""How each saver under test is created, set up and driven.

Savers are imported lazily: the langgraph-checkpoint-aws venv has no langgraph_s3
and the project venv has no langgraph_checkpoint_aws.

A *driver* hides the one difference that matters to the workloads: sync savers
run graphs with ``graph.invoke`` and async savers with ``graph.ainvoke`` on an
event loop of their own, so the same workload code drives both.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from catalog import AWS, INLINE_VARIANT_LIMIT, VARIANTS
from stored import REGION, Storage, create_bucket
from wire import uninstrumented, wrap_saver

AWS_KINDS = (*AWS, *VARIANTS)


class Driver:
    """Creates savers of one kind over one bucket/table (or file) and runs graphs."""

    is_async = False

    def __init__(self, kind: str, endpoint: str, resource: str, state_dir: Path) -> None:
        self.kind = kind
        self.endpoint = endpoint
        self.bucket = resource
        self.table = resource
        self.state_dir = state_dir
        self.savers: list[Any] = []
        self._memory: Any = None
        self.kms_key = ""  # s3-sealed: the KMS key made at setup

    # ------------------------------------------------------------ resources
    def setup(self) -> None:
        """Create the bucket and table afresh (outside the instrumentation)."""
        self._reset()
        if self.kind in ("s3", "async", "s3-inline", "s3-sealed"):
            from langgraph_s3 import S3Saver

            with uninstrumented():
                saver = S3Saver(
                    bucket=self.bucket,
                    table=self.table,
                    region_name=REGION,
                    endpoint_url=self.endpoint,
                )
                saver.setup()
                saver.close()
                if self.kind == "s3-sealed":
                    import boto3

                    kms = boto3.client("kms", region_name=REGION, endpoint_url=self.endpoint)
                    self.kms_key = kms.create_key()["KeyMetadata"]["Arn"]
        elif self.kind == "dynamodb":
            self._setup_dynamodb()

    def _reset(self) -> None:
        """Drop what an earlier run of the same saver and workload left behind."""
        if self.kind == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.sqlite_path) + suffix).unlink(missing_ok=True)
        if self.kind not in AWS_KINDS:
            return
        import boto3
        from botocore.exceptions import ClientError

        with uninstrumented():
            s3 = boto3.client("s3", region_name=REGION, endpoint_url=self.endpoint)
            ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=self.endpoint)
        try:
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})
            s3.delete_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "NoSuchBucket":
                raise
        try:
            ddb.delete_table(TableName=self.table)
            ddb.get_waiter("table_not_exists").wait(TableName=self.table)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                raise

    def _setup_dynamodb(self) -> None:
        """The table and bucket of langgraph-checkpoint-aws's CloudFormation sample."""
        import boto3
        from botocore.exceptions import ClientError

        with uninstrumented():
            s3 = boto3.client("s3", region_name=REGION, endpoint_url=self.endpoint)
            ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=self.endpoint)
        create_bucket(s3, self.bucket)
        try:
            ddb.create_table(
                TableName=self.table,
                AttributeDefinitions=[
                    {"AttributeName": "PK", "AttributeType": "S"},
                    {"AttributeName": "SK", "AttributeType": "S"},
                ],
                KeySchema=[
                    {"AttributeName": "PK", "KeyType": "HASH"},
                    {"AttributeName": "SK", "KeyType": "RANGE"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceInUseException":
                raise
        ddb.get_waiter("table_exists").wait(TableName=self.table)

    def storage(self) -> Storage | None:
        if self.kind in AWS_KINDS:
            return Storage(self.endpoint, self.bucket, self.table)
        return None

    @property
    def sqlite_path(self) -> Path:
        return self.state_dir / f"{self.bucket}.sqlite"

    def local_bytes(self) -> int:
        """Bytes held by the non-AWS savers (serialized payloads / database file)."""
        if self.kind == "memory":
            return _payload_bytes(self._memory) if self._memory is not None else 0
        if self.kind == "sqlite":
            path = self.sqlite_path
            wal = Path(str(path) + "-wal")
            return sum(p.stat().st_size for p in (path, wal) if p.exists())
        raise ValueError(self.kind)

    # --------------------------------------------------------------- savers
    def _construct(self) -> Any:
        if self.kind in ("s3", "s3-inline", "s3-sealed"):
            from langgraph_s3 import S3Saver

            extra: dict[str, Any] = {}
            if self.kind == "s3-inline":
                extra["index_inline_limit"] = INLINE_VARIANT_LIMIT
            if self.kind == "s3-sealed":
                from langgraph_s3.sealing.kms import KmsKeyRing

                extra["encryption"] = KmsKeyRing(self.kms_key)
            return S3Saver(
                bucket=self.bucket,
                table=self.table,
                region_name=REGION,
                endpoint_url=self.endpoint,
                **extra,
            )
        if self.kind == "dynamodb":
            from langgraph_checkpoint_aws import DynamoDBSaver

            # As the package README recommends for large states: S3 offload and
            # compression on (no TTL: it is a retention choice, not a size one).
            return DynamoDBSaver(
                table_name=self.table,
                region_name=REGION,
                endpoint_url=self.endpoint,
                enable_checkpoint_compression=True,
                s3_offload_config={"bucket_name": self.bucket, "endpoint_url": self.endpoint},
            )
        if self.kind == "memory":
            from langgraph.checkpoint.memory import InMemorySaver

            # Its state lives in the instance: a "fresh" InMemorySaver would be empty,
            # so every new_saver() returns the same one.
            if self._memory is None:
                self._memory = InMemorySaver()
            return self._memory
        if self.kind == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            self.state_dir.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.sqlite_path), check_same_thread=False)
            return SqliteSaver(conn)
        raise ValueError(f"unknown saver kind {self.kind!r}")

    def new_saver(self) -> Any:
        """A new saver instance (as a new process or Lambda container would make)."""
        saver = self._construct()
        if saver not in self.savers:
            wrap_saver(saver)
            self.savers.append(saver)
        return saver

    def invoke(self, graph: Any, inputs: Any, config: dict[str, Any]) -> Any:
        return graph.invoke(inputs, config)

    def call(self, saver: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        """A checkpointer method called directly (``list`` is drained)."""
        result = getattr(saver, method)(*args, **kwargs)
        return list(result) if method == "list" else result

    def close(self) -> None:
        for saver in self.savers:
            close = getattr(saver, "close", None)
            if callable(close):
                close()
            conn = getattr(saver, "conn", None)
            if isinstance(conn, sqlite3.Connection):
                conn.close()


class AsyncDriver(Driver):
    """Runs ``AsyncS3Saver`` on an event loop in a thread of its own."""

    is_async = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def _construct(self) -> Any:
        from langgraph_s3 import AsyncS3Saver

        async def make() -> Any:
            return AsyncS3Saver(
                bucket=self.bucket, table=self.table, region_name=REGION, endpoint_url=self.endpoint
            )

        return self.run(make())

    def invoke(self, graph: Any, inputs: Any, config: dict[str, Any]) -> Any:
        return self.run(graph.ainvoke(inputs, config))

    def call(self, saver: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(saver, "a" + method)
        if method == "list":

            async def collect() -> list[Any]:
                return [t async for t in fn(*args, **kwargs)]

            return self.run(collect())
        return self.run(fn(*args, **kwargs))

    def close(self) -> None:
        for saver in self.savers:
            self.run(saver.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


def make_driver(kind: str, endpoint: str, resource: str, state_dir: Path) -> Driver:
    cls = AsyncDriver if kind == "async" else Driver
    return cls(kind, endpoint, resource, state_dir)


def _payload_bytes(obj: Any) -> int:
    """Sum of the serialized payloads an InMemorySaver holds."""
    if isinstance(obj, bytes | bytearray | memoryview):
        return len(obj)
    if isinstance(obj, str):
        return len(obj.encode("utf-8"))
    if isinstance(obj, dict):
        return sum(_payload_bytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_payload_bytes(v) for v in obj)
    if hasattr(obj, "storage") and hasattr(obj, "writes") and hasattr(obj, "blobs"):
        return sum(_payload_bytes(dict(x)) for x in (obj.storage, obj.writes, obj.blobs))
    return 0


def fake_credentials() -> None:
    """moto accepts any credentials; make sure no real ones are ever sent to it."""
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION=REGION
    )
    for var in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        os.environ.pop(var, None)
