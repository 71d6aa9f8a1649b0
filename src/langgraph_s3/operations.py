"""The I/O a saver performs, described as data.

The pure core (``protocol.py``) decides what to read and write by yielding these
operations; ``S3Saver`` performs them with boto3 and a thread pool,
``AsyncS3Saver`` with aioboto3 and ``asyncio.gather``. Yielding a list means
"perform these concurrently"; the result is the list of their results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from botocore.exceptions import ClientError

from langgraph_s3.errors import StorageNotFoundError


@dataclass(frozen=True)
class S3Get:
    """Read an object. Result: its bytes, or ``None`` if there is no such key.

    ``home=True`` reads the home region's bucket (cross-region ``"home"`` policy).
    """

    key: str
    home: bool = False


@dataclass(frozen=True)
class S3Put:
    """Write an object. Result: ``None``."""

    key: str
    body: bytes = field(repr=False)


@dataclass(frozen=True)
class S3List:
    """One page of keys under a prefix. Result: :class:`ListPage`."""

    prefix: str
    token: str | None = None


@dataclass(frozen=True)
class ListPage:
    keys: list[tuple[str, float, int]]  # key, last-modified epoch seconds, size
    token: str | None


@dataclass(frozen=True)
class S3Delete:
    """Delete up to 1000 keys. Result: ``None``."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class S3Copy:
    """Server-side copy inside the bucket. Result: ``None``."""

    source: str
    target: str


@dataclass(frozen=True)
class Ddb:
    """One DynamoDB call on the low-level client (``op`` is the method name).

    Result: the response dict, or a :class:`DdbFailure` when the error code is in
    ``expect`` (the protocol handles those itself).
    """

    op: str
    params: dict[str, Any]
    expect: frozenset[str] = frozenset()


@dataclass(frozen=True)
class DdbFailure:
    code: str
    response: dict[str, Any]


@dataclass(frozen=True)
class Sleep:
    """Back off before retrying. Result: ``None``."""

    seconds: float


Op = S3Get | S3Put | S3List | S3Delete | S3Copy | Ddb | Sleep

_MISSING_BUCKET = {"NoSuchBucket"}
_MISSING_TABLE = {"ResourceNotFoundException"}
_MISSING_KEY = {"NoSuchKey", "404", "NotFound"}


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def is_missing_key(exc: ClientError) -> bool:
    return error_code(exc) in _MISSING_KEY


def translate(exc: ClientError, *, bucket: str, table: str) -> BaseException:
    """Turn a missing bucket or table into an error that says what to do."""
    code = error_code(exc)
    if code in _MISSING_BUCKET:
        return StorageNotFoundError(
            f"S3 bucket {bucket!r} does not exist: run saver.setup() (development and tests) "
            "or deploy infra/storage.yaml and pass its BucketName output"
        )
    if code in _MISSING_TABLE:
        return StorageNotFoundError(
            f"DynamoDB table {table!r} does not exist: run saver.setup() (development and "
            "tests) or deploy infra/storage.yaml and pass its TableName output"
        )
    return cast(BaseException, exc)
