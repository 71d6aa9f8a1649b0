"""The I/O a saver performs, described as data.

The pure core (:mod:`langgraph_s3.core`) decides what to read and write by yielding
these operations; ``S3Saver`` performs them with boto3 and a thread pool,
``AsyncS3Saver`` with aiobotocore and ``asyncio.gather`` (both through
:mod:`langgraph_s3.transport`). Yielding a list means "perform these concurrently";
the result is the list of their results. A flow may also yield :class:`Emit`, a
result for its caller (``list`` emits tuples as it loads them). :func:`together` runs
two flows side by side, each round trip carrying what both ask for.

Each operation is a ``Request[R]``: ``R`` is the type of its result, and
:func:`perform` / :func:`perform_all` give a flow that result with its type.
Nothing here imports botocore.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import field
from typing import Any, Generic, TypeVar

from langgraph_s3.immutable import immutable

R = TypeVar("R")
T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")

#: A flow: a generator that yields operations (or lists of them), is sent their
#: results, and returns ``T``.
Flow = Generator[Any, Any, T]


class Request(Generic[R]):
    """An operation whose result has type ``R``."""


@immutable
class S3Get(Request[bytes | None]):
    """Read an object. Result: its bytes, or ``None`` if there is no such key.

    ``home=True`` reads the home region's bucket (cross-region ``"home"`` policy).
    ``start``/``end`` read only bytes ``start`` to ``end - 1`` (chunks in a pack).
    """

    key: str
    home: bool = False
    start: int | None = None
    end: int | None = None


@immutable
class S3Put(Request[None]):
    """Write an object. Result: ``None``.

    ``done`` (if given) is resolved by the driver as soon as this request finishes:
    ``True`` on success, ``False`` on failure. Other flows waiting for the same
    content-addressed blob (``WaitUpload``) wake up then.
    """

    key: str
    body: bytes = field(repr=False)
    done: Future[bool] | None = field(default=None, compare=False, repr=False)


@immutable
class WaitUpload(Request[bool]):
    """Wait for another flow's upload of ``key``. Result: ``True`` if it succeeded.

    ``pending`` is that upload's ``done`` future, taken when the wait was planned:
    the uploader may finish (and forget the upload) before the driver gets here, and
    only the future still knows whether it succeeded.
    """

    key: str
    pending: Future[bool] = field(compare=False, repr=False)


@immutable
class WaitKey(Request[bool]):
    """Wait for another flow's load of the data key of the thread stored under
    ``folder``, or of the tenant whose partition key it is (client-side encryption).
    Result: ``True`` if it loaded one."""

    folder: str
    pending: Future[bool] = field(compare=False, repr=False)


#: Operations that wait for another flow's work: drivers wait for ``pending`` on the
#: calling thread or the event loop, never on a worker the other flow may need.
WAITS = (WaitUpload, WaitKey)


@immutable
class ListPage:
    """One page of an S3 listing."""

    keys: list[tuple[str, float, int]]  # key, last-modified epoch seconds, size
    token: str | None


@immutable
class S3List(Request[ListPage]):
    """One page of keys under a prefix. Result: :class:`ListPage`."""

    prefix: str
    token: str | None = None


@immutable
class S3Delete(Request[None]):
    """Delete up to 1000 keys. Result: ``None``."""

    keys: tuple[str, ...]


@immutable
class S3Copy(Request[None]):
    """Server-side copy inside the bucket. Result: ``None``."""

    source: str
    target: str


class IndexRequest(Request[R]):
    """A request to the DynamoDB index; the typed requests are in
    :mod:`langgraph_s3.core.index`, which also decodes their answers."""

    #: Error codes that are an answer for this request (``refused``), not an error.
    expect: frozenset[str] = frozenset()

    def call(self) -> tuple[str, dict[str, Any]]:
        """The low-level client method and its arguments."""
        raise NotImplementedError

    def result(self, response: Mapping[str, Any]) -> R:
        """The result of a successful call, from DynamoDB's response."""
        raise NotImplementedError

    def refused(self, code: str, response: Mapping[str, Any]) -> R:
        """The result of a call that failed with one of the ``expect`` codes."""
        raise NotImplementedError(code)

    @property
    def method(self) -> str:
        """The low-level client method that performs this request."""
        return self.call()[0]

    @property
    def params(self) -> dict[str, Any]:
        """The request's arguments, as sent."""
        return self.call()[1]


@immutable
class Sleep(Request[None]):
    """Back off before retrying. Result: ``None``."""

    seconds: float


@immutable
class Emit:
    """Not a request: a result a listing flow hands out before it ends (``list``);
    the driver yields ``value`` to its caller and resumes the flow."""

    value: Any


#: An encryption context as a request holds it: its pairs sorted by key, so two
#: requests for the same context compare equal however the mapping was built.
Context = tuple[tuple[str, str], ...]


def context_of(context: Mapping[str, str]) -> Context:
    """``context`` as :data:`Context` (sorted pairs)."""
    return tuple(sorted((str(k), str(v)) for k, v in context.items()))


@immutable
class GeneratedKey:
    """What ``GenerateDataKey`` answered: the data key, wrapped and in the clear."""

    secret: bytes = field(repr=False)
    wrapped: bytes = field(repr=False)
    kms_key: str  # the ARN of the KMS key that wrapped it


@immutable
class KmsGenerateDataKey(Request[GeneratedKey]):
    """Ask AWS KMS for a new 256-bit data key under ``kms_key``, wrapped for ``context``.

    Result: :class:`GeneratedKey`. ``data_key_id`` is the id the data key will get
    (for error messages only; KMS never sees it).
    """

    kms_key: str
    context: Context
    data_key_id: str


@immutable
class KmsDecrypt(Request[bytes]):
    """Ask AWS KMS to unwrap ``wrapped`` with ``kms_key``, for exactly ``context``.

    Result: the data key's bytes. ``kms_key`` is sent as ``KeyId``, so KMS refuses a
    blob wrapped under any other key instead of using whichever key it names.
    """

    wrapped: bytes = field(repr=False)
    kms_key: str
    context: Context
    data_key_id: str


@immutable
class KmsReEncrypt(Request[bytes]):
    """Ask AWS KMS to re-wrap ``wrapped`` from ``kms_key`` under ``destination``, for
    the same ``context`` (``langgraph-s3 rekey``). Result: the new wrapped bytes.

    The data key never leaves KMS in the clear.
    """

    wrapped: bytes = field(repr=False)
    kms_key: str
    destination: str
    context: Context
    data_key_id: str


#: The requests that go to AWS KMS.
KmsRequest = KmsGenerateDataKey | KmsDecrypt | KmsReEncrypt


@immutable
class CreateBucket(Request[None]):
    """Create the bucket if it does not exist (``setup()``). Result: ``None``."""

    region: str | None


Op = (
    S3Get
    | S3Put
    | S3List
    | S3Delete
    | S3Copy
    | IndexRequest[Any]
    | Sleep
    | CreateBucket
    | WaitUpload
    | WaitKey
    | KmsGenerateDataKey
    | KmsDecrypt
    | KmsReEncrypt
)


def perform(op: Request[R]) -> Generator[Request[R], R, R]:
    """Perform one operation: ``result = yield from perform(op)``, typed."""
    return (yield op)


def perform_all(ops: Sequence[Request[R]]) -> Generator[list[Request[R]], list[R], list[R]]:
    """Perform operations concurrently; their results in the same order, typed."""
    if not ops:
        return []
    return (yield list(ops))


def together(first: Flow[A], second: Flow[B]) -> Flow[tuple[A, B]]:
    """Run two flows that do not depend on each other side by side; their results.

    Each round trip carries what both ask for, in one list: two reads cost the round
    trips of the longer, not of both. A flow that ends without asking costs nothing.
    Neither may :class:`Emit`.

    An error answered to a combined round trip is thrown into each flow that asked in
    it, first to last (the driver does not say which request failed); the first one to
    raise ends both: the other is closed, so its cleanup (``finally``) runs.
    """
    flows: tuple[Flow[Any], Flow[Any]] = (first, second)
    asks: list[Any] = [_ENDED, _ENDED]
    results: list[Any] = [None, None]
    try:
        for i, flow in enumerate(flows):
            asks[i], results[i] = _resume(flow, None, None)
        while True:
            live = [i for i in (0, 1) if asks[i] is not _ENDED]
            if not live:
                return results[0], results[1]
            if len(live) == 1:
                combined = asks[live[0]]
            else:
                combined = [op for i in live for op in _as_list(asks[i])]
            error: Exception | None = None
            answer: Any = None
            try:
                answer = yield combined
            except Exception as exc:
                error = exc
            if len(live) == 1 or error is not None:
                parts = [answer] * len(live)
            else:
                parts = _split(answer, [asks[i] for i in live])
            for i, part in zip(live, parts, strict=True):
                asks[i], results[i] = _resume(flows[i], part, error)
    finally:
        for flow in flows:
            flow.close()


_ENDED = object()


def _resume(flow: Flow[Any], value: Any, error: Exception | None) -> tuple[Any, Any]:
    """Send ``value`` (or throw ``error``) into ``flow``: (what it asks next, None), or
    (``_ENDED``, its result)."""
    try:
        op = flow.send(value) if error is None else flow.throw(error)
    except StopIteration as stop:
        return _ENDED, stop.value
    if isinstance(op, Emit):
        raise TypeError("a flow run by together() may not emit results")
    return op, None


def _as_list(ask: Any) -> list[Any]:
    return ask if isinstance(ask, list) else [ask]


def _split(answer: Sequence[Any], asks: Sequence[Any]) -> list[Any]:
    """The answer to each of ``asks`` from the answer to their combined list."""
    parts: list[Any] = []
    at = 0
    for ask in asks:
        if isinstance(ask, list):
            parts.append(answer[at : at + len(ask)])
            at += len(ask)
        else:
            parts.append(answer[at])
            at += 1
    return parts
