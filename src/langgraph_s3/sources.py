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
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_s3.archive import thread_ids
from langgraph_s3.errors import InvalidConfigError, MissingDependencyError

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
def open_source(url: str) -> Iterator[Source]:
    """The source a ``migrate --from URL`` names (see the module docstring)."""
    scheme = urlparse(url).scheme
    if scheme == "sqlite":
        cls = _import("langgraph.checkpoint.sqlite", "SqliteSaver", "langgraph-checkpoint-sqlite")
        with cls.from_conn_string(url[len("sqlite:///") :]) as saver:
            yield Source(saver, lambda: thread_ids(saver))
    elif scheme in ("postgres", "postgresql"):
        cls = _import(
            "langgraph.checkpoint.postgres", "PostgresSaver", "langgraph-checkpoint-postgres"
        )
        with cls.from_conn_string(url) as saver:
            yield Source(saver, lambda: thread_ids(saver))
    elif scheme == "dynamodb":
        saver = dynamodb_saver(url)
        yield Source(saver, lambda: dynamodb_thread_ids(saver.client, saver.table_name))
    elif scheme == "s3":
        from langgraph_s3 import S3Saver

        with S3Saver.from_conn_string(url) as s3:
            yield Source(s3, lambda: thread_ids(s3))
    else:
        raise InvalidConfigError(f"cannot migrate from {url!r}: use {_EXAMPLES}")


def dynamodb_saver(url: str) -> Any:
    """A ``DynamoDBSaver`` for ``dynamodb://TABLE?region=...&endpoint_url=...``."""
    cls = _import("langgraph_checkpoint_aws", "DynamoDBSaver", "langgraph-checkpoint-aws")
    parsed = urlparse(url)
    query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    unknown = sorted(set(query) - set(_DYNAMODB_OPTIONS))
    if not parsed.netloc or unknown:
        raise InvalidConfigError(
            f"{url!r} must look like dynamodb://TABLE?region=us-east-1 (options: "
            f"{', '.join(_DYNAMODB_OPTIONS)})" + (f"; unknown: {unknown}" if unknown else "")
        )
    offload = None
    if "s3_bucket" in query:
        offload = {"bucket_name": query["s3_bucket"], "endpoint_url": query.get("endpoint_url")}
        if "s3_prefix" in query:
            offload["key_prefix"] = query["s3_prefix"]
    return cls(
        table_name=parsed.netloc,
        region_name=query.get("region"),
        endpoint_url=query.get("endpoint_url"),
        s3_offload_config=offload,
    )


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
