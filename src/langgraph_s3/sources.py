"""Which savers ``langgraph-s3 migrate`` reads from, and how their threads are found.

A source is a LangGraph saver opened from a URL, and a way to list its thread ids:

| URL | saver | package |
|---|---|---|
| ``sqlite:///path/to/file.db`` | ``SqliteSaver`` | ``langgraph-checkpoint-sqlite`` |
| ``postgresql://user:pw@host/db`` | ``PostgresSaver`` | ``langgraph-checkpoint-postgres`` |
| ``dynamodb://TABLE?region=R`` | ``DynamoDBSaver`` | ``langgraph-checkpoint-aws`` |
| ``s3://bucket/prefix?table=T`` | ``S3Saver`` | this one |

Most savers list every thread through ``list(None)``. ``DynamoDBSaver.list`` needs a
thread id, so its thread ids come from a scan of its table (its checkpoint items have
the partition key ``CHECKPOINT_{thread_id}``), which needs ``dynamodb:Scan``.
``dynamodb://`` takes ``region``, ``endpoint_url`` and, when the saver offloads large
checkpoints to S3, ``s3_bucket`` and ``s3_prefix`` (its ``s3_offload_config``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_s3.archive import thread_ids
from langgraph_s3.errors import (
    EndpointError,
    InvalidConfigError,
    MissingDependencyError,
    StorageNotFoundError,
)

#: Partition key prefix of DynamoDBSaver's checkpoint items (``_checkpoint_pk``).
DYNAMODB_CHECKPOINT_PK = "CHECKPOINT_"
_DYNAMODB_OPTIONS = ("region", "endpoint_url", "s3_bucket", "s3_prefix")
_EXAMPLES = (
    "sqlite:///path/to/file.db, postgresql://user:password@host/db, "
    "dynamodb://TABLE?region=us-east-1 or s3://bucket/prefix?table=TABLE"
)


@dataclass
class Source:
    """A saver to copy threads from, and how to list its thread ids."""

    saver: BaseCheckpointSaver[Any]
    #: Every thread id the source holds, in the order it gives them.
    thread_ids: Callable[[], list[str]]


@contextmanager
def open_source(url: str, serde: Any = None) -> Iterator[Source]:
    """The source a ``migrate --from URL`` names (see the module docstring).

    A source that does not exist is refused (``InvalidConfigError`` for a missing
    SQLite file, ``StorageNotFoundError`` for a missing table), never created.
    ``serde`` (default: the saver's own) reads its values.
    """
    scheme = urlparse(url).scheme
    if scheme == "sqlite":
        with _sqlite(url, serde) as saver:
            yield Source(saver, lambda: thread_ids(saver))
    elif scheme in ("postgres", "postgresql"):
        cls = _import(
            "langgraph.checkpoint.postgres", "PostgresSaver", "langgraph-checkpoint-postgres"
        )
        with _postgres(cls, url) as saver:
            if serde is not None:
                saver.serde = serde
            yield Source(saver, lambda: thread_ids(saver))
    elif scheme == "dynamodb":
        saver = dynamodb_saver(url)
        name = saver.table_name
        yield Source(saver, lambda: dynamodb_thread_ids(saver.client, name))
    elif scheme == "s3":
        from langgraph_s3 import S3Saver

        with S3Saver.from_conn_string(url, **({"serde": serde} if serde else {})) as s3:
            yield Source(s3, lambda: thread_ids(s3))
    else:
        raise InvalidConfigError(f"cannot migrate from {url!r}: use {_EXAMPLES}")


@contextmanager
def _sqlite(url: str, serde: Any) -> Iterator[Any]:
    """A SqliteSaver on an existing database file (sqlite3 would create a missing one)."""
    import sqlite3
    from contextlib import closing
    from pathlib import Path

    cls = _import("langgraph.checkpoint.sqlite", "SqliteSaver", "langgraph-checkpoint-sqlite")
    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
    if not path or not Path(path).is_file():
        raise InvalidConfigError(
            f"no SQLite database at {path or url!r}: check the path in --from "
            "(sqlite:///relative.db, sqlite:////absolute/path.db)"
        )
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        yield cls(conn, serde=serde)


@contextmanager
def _postgres(cls: Any, url: str) -> Iterator[Any]:
    """A PostgresSaver; a server that does not answer is an ``EndpointError``."""
    import psycopg

    with ExitStack() as stack:
        try:
            saver = stack.enter_context(cls.from_conn_string(url))
        except psycopg.OperationalError as exc:
            where = urlparse(url)
            raise EndpointError(
                f"could not connect to PostgreSQL at {where.hostname}:{where.port or 5432} "
                f"({' '.join(str(exc).split())}): check the host, port and credentials in --from"
            ) from exc
        yield saver


def dynamodb_saver(url: str) -> Any:
    """A ``DynamoDBSaver`` for ``dynamodb://TABLE?region=...&endpoint_url=...``, its
    table checked to exist."""
    from langgraph_s3.connection import check_endpoint_url, check_url_options

    cls = _import("langgraph_checkpoint_aws", "DynamoDBSaver", "langgraph-checkpoint-aws")
    parsed = urlparse(url)
    query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    check_url_options(url, query, _DYNAMODB_OPTIONS)
    if not parsed.netloc:
        raise InvalidConfigError(f"{url!r} must look like dynamodb://TABLE?region=us-east-1")
    if query.get("endpoint_url"):
        check_endpoint_url(query["endpoint_url"])
    offload = None
    if "s3_bucket" in query:
        offload = {"bucket_name": query["s3_bucket"], "endpoint_url": query.get("endpoint_url")}
        if "s3_prefix" in query:
            offload["key_prefix"] = query["s3_prefix"]
    saver = cls(
        table_name=parsed.netloc,
        region_name=query.get("region"),
        endpoint_url=query.get("endpoint_url"),
        s3_offload_config=offload,
    )
    _check_table(saver.client, parsed.netloc, query.get("region"))
    return saver


def _check_table(client: Any, table: str, region: str | None) -> None:
    from botocore.exceptions import ClientError

    from langgraph_s3.transport import error_code, translate

    try:
        client.describe_table(TableName=table)
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            raise StorageNotFoundError(
                f"the source DynamoDB table {table!r} does not exist in region "
                f"{region or '(default)'!r}: check the table and region= in --from"
            ) from exc
        raise translate(exc, bucket="", table=table, region=region) from exc


def dynamodb_thread_ids(client: Any, table: str) -> list[str]:
    """The thread ids of a DynamoDBSaver table: its checkpoint partition keys, scanned."""
    from langgraph_s3.core.index import KeyPrefixScan

    seen: dict[str, None] = {}
    scan: KeyPrefixScan | None = KeyPrefixScan(table, "PK", DYNAMODB_CHECKPOINT_PK)
    while scan is not None:
        method, params = scan.call()
        page = scan.result(getattr(client, method)(**params))
        for item in page.items:
            seen.setdefault(item["PK"]["S"][len(DYNAMODB_CHECKPOINT_PK) :], None)
        scan = scan.following(page)
    return list(seen)


def _import(module: str, name: str, package: str) -> Any:
    try:
        return getattr(__import__(module, fromlist=[name]), name)
    except ImportError as exc:
        raise MissingDependencyError(
            f"migrating from this URL needs {package}: pip install {package}"
        ) from exc
