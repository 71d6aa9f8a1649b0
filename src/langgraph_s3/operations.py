"""The I/O a saver performs, described as data.

The pure core (:mod:`langgraph_s3.core`) decides what to read and write by yielding
these operations; ``S3Saver`` performs them with boto3 and a thread pool,
``AsyncS3Saver`` with aiobotocore and ``asyncio.gather`` (both through
:mod:`langgraph_s3.transport`). Yielding a list means "perform these concurrently";
the result is the list of their results.

Each operation is a ``Request[R]``: ``R`` is the type of its result, and
:func:`perform` / :func:`perform_all` give a flow that result with its type.
Nothing here imports botocore.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")
T = TypeVar("T")

#: A flow: a generator that yields operations (or lists of them), is sent their
#: results, and returns ``T``.
Flow = Generator[Any, Any, T]


class Request(Generic[R]):
    """An operation whose result has type ``R``."""


@dataclass(frozen=True)
class S3Get(Request[bytes | None]):
    """Read an object. Result: its bytes, or ``None`` if there is no such key.

    ``home=True`` reads the home region's bucket (cross-region ``"home"`` policy).
    """

    key: str
    home: bool = False


@dataclass(frozen=True)
class S3Put(Request[None]):
    """Write an object. Result: ``None``.

    ``done`` (if given) is resolved by the driver as soon as this request finishes:
    ``True`` on success, ``False`` on failure. Other flows waiting for the same
    content-addressed blob (``WaitUpload``) wake up then.
    """

    key: str
    body: bytes = field(repr=False)
    done: Future[bool] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class WaitUpload(Request[bool]):
    """Wait for another flow's upload of ``key``. Result: ``True`` if it succeeded.

    ``pending`` is that upload's ``done`` future, taken when the wait was planned:
    the uploader may finish (and forget the upload) before the driver gets here, and
    only the future still knows whether it succeeded.
    """

    key: str
    pending: Future[bool] = field(compare=False, repr=False)


@dataclass(frozen=True)
class S3HeadBucket(Request[None]):
    """Check that the bucket exists (once per saver). Result: ``None``."""


@dataclass(frozen=True)
class ListPage:
    """One page of an S3 listing."""

    keys: list[tuple[str, float, int]]  # key, last-modified epoch seconds, size
    token: str | None


@dataclass(frozen=True)
class S3List(Request[ListPage]):
    """One page of keys under a prefix. Result: :class:`ListPage`."""

    prefix: str
    token: str | None = None


@dataclass(frozen=True)
class S3Delete(Request[None]):
    """Delete up to 1000 keys. Result: ``None``."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class S3Copy(Request[None]):
    """Server-side copy inside the bucket. Result: ``None``."""

    source: str
    target: str


@dataclass(frozen=True)
class DdbFailure:
    """A DynamoDB error the flow asked to handle itself (its code is in ``expect``)."""

    code: str
    response: dict[str, Any]


@dataclass(frozen=True)
class Ddb(Request[dict[str, Any] | DdbFailure]):
    """One DynamoDB call on the low-level client (``op`` is the method name).

    Result: the response dict, or a :class:`DdbFailure` when the error code is in
    ``expect`` (the flow handles those itself).
    """

    op: str
    params: dict[str, Any]
    expect: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Sleep(Request[None]):
    """Back off before retrying. Result: ``None``."""

    seconds: float


@dataclass(frozen=True)
class CreateBucket(Request[None]):
    """Create the bucket if it does not exist (``setup()``). Result: ``None``."""

    region: str | None


Op = (
    S3Get
    | S3Put
    | S3List
    | S3Delete
    | S3Copy
    | Ddb
    | Sleep
    | CreateBucket
    | WaitUpload
    | S3HeadBucket
)


def perform(op: Request[R]) -> Generator[Request[R], R, R]:
    """Perform one operation: ``result = yield from perform(op)``, typed."""
    return (yield op)


def perform_all(ops: Sequence[Request[R]]) -> Generator[list[Request[R]], list[R], list[R]]:
    """Perform operations concurrently; their results in the same order, typed."""
    if not ops:
        return []
    return (yield list(ops))


def response(result: dict[str, Any] | DdbFailure) -> dict[str, Any]:
    """The response of a ``Ddb`` request that expected no failure."""
    assert not isinstance(result, DdbFailure), result
    return result
