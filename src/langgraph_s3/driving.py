"""What both drivers do with a flow: step it, and turn each request's outcome into a
result or our error.

``S3Saver`` (boto3, a thread pool) and ``AsyncS3Saver`` (aiobotocore, asyncio) differ
only in how they wait for a request. Everything else about running a flow is
written once, here: how a flow is stepped (:class:`Steps`), what a request's answer
becomes (:class:`Exchange`: settled, logged, translated), and which clients a saver
created and so may close (:class:`Clients`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Generic

from langgraph.checkpoint.serde.base import SerializerProtocol
from typing_extensions import Unpack

from langgraph_s3.core.config import SaverOptions, check_options
from langgraph_s3.core.state import SaverCore
from langgraph_s3.operations import Emit, Flow, S3Get, S3Put, T
from langgraph_s3.tracing import Stats
from langgraph_s3.transport import (
    DYNAMODB,
    HOME_S3,
    KMS,
    S3,
    call_spec,
    failed,
    finish,
    log_request,
    settle,
    translate_transport,
)


class Driver(SaverCore):
    """What both drivers hold besides the core state: where the endpoint is, how to
    make clients, and the clients themselves. Each driver adds what its way of
    waiting needs in ``_start``.

    Args: see ``S3Saver`` and ``AsyncS3Saver``.
    """

    def __init__(
        self,
        # Defaults only so that a misspelt name (tabel=, table_name=) reaches
        # check_options, which names the right one; empty ones are refused there.
        bucket: str = "",
        table: str = "",
        prefix: str = "",
        s3_client: Any = None,
        dynamodb_client: Any = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        serde: SerializerProtocol | None = None,
        compression_level: int = 3,
        *,
        home_s3_client: Any = None,
        kms_client: Any = None,
        session: Any = None,
        boto_config: Any = None,
        **options: Unpack[SaverOptions],
    ) -> None:
        check_options(type(self), options)
        super().__init__(
            bucket=bucket,
            table=table,
            prefix=prefix,
            serde=serde,
            compression_level=compression_level,
            region_name=region_name,
            **options,
        )
        self.endpoint_url = endpoint_url
        self._clients = Clients(s3_client, dynamodb_client, home_s3_client, kms_client)
        self._session = session
        self._boto_config = boto_config
        self._start()

    def _start(self) -> None:
        """Set up what the driver needs to perform requests (no request is made)."""


class Steps(Generic[T]):
    """A flow, stepped: iterating gives the requests it yields; each is answered
    with :meth:`answer` before the next is asked for; ``result`` once it returned.
    Results it hands out on the way (``Emit``, from ``list``) wait in :meth:`emitted`;
    a driver gives them to its caller before it performs the next request.

    An error answered to a request is thrown into the flow at once, so its cleanup
    (``finally``) runs before the error reaches the caller. Used as a context manager,
    it closes the flow on the way out, so its cleanup runs too when the driver stops
    stepping it: a cancelled call (``CancelledError``), an interrupt, an abandoned
    iteration. A key load left open would hold its claim
    (``Encryption.loading``): every later call for the thread would wait for it.
    """

    def __init__(self, flow: Flow[T]) -> None:
        self._flow = flow
        self._value: Any = None
        self._error: BaseException | None = None
        self._emitted: list[Any] = []
        self.result: T | None = None

    def __iter__(self) -> Iterator[Any]:
        return self

    def __enter__(self) -> Steps[T]:
        return self

    def __exit__(self, *_: object) -> None:
        self._flow.close()  # nothing for a flow that returned

    def __next__(self) -> Any:
        while True:
            try:
                if self._error is not None:
                    op = self._flow.throw(self._error)
                else:
                    op = self._flow.send(self._value)
            except StopIteration as stop:
                self.result = stop.value
                raise StopIteration from None
            # The flow has the value now: do not hold it through the next request.
            self._value = self._error = None
            if not isinstance(op, Emit):
                return op
            self._emitted.append(op.value)  # a result for the caller: the flow goes on

    def emitted(self) -> list[Any]:
        """The results the flow handed out (``Emit``) since this was last asked."""
        out, self._emitted = self._emitted, []
        return out

    def answer(self, value: Any, error: BaseException | None) -> None:
        """The outcome of the request last given out: its result, or an error."""
        self._value, self._error = value, error


class Exchange:
    """One request to S3 or DynamoDB: the boto call to make, then its outcome.

    A driver makes the call (``client_name``, ``method``, ``params``) on its client,
    reads the body of an ``S3Get``, and hands the response to :meth:`done` or the
    exception to :meth:`failed`; both settle the upload future, log the request and
    give the operation's result or raise our typed error.
    """

    def __init__(
        self, saver: SaverCore, op: Any, endpoint_url: str | None, stats: Stats | None = None
    ) -> None:
        self.saver, self.op, self.endpoint_url, self.stats = saver, op, endpoint_url, stats
        self.retries = 0
        home_bucket = saver.cross_region.home_bucket if saver.cross_region else None
        self.client_name, self.method, self.params = call_spec(op, saver.bucket, home_bucket)
        self.reads_body = isinstance(op, S3Get)
        self.region: str | None = saver.region_name
        self.started = time.perf_counter()

    def on(self, client: Any) -> Any:
        """Note the client the call goes to (its region names the place in errors)."""
        meta = getattr(client, "meta", None)
        self.region = self.region or getattr(meta, "region_name", None)
        return client

    def answered(self, response: Any) -> Any:
        """Note what botocore says of the raw response (its retries); returns it."""
        meta = response.get("ResponseMetadata", {}) if isinstance(response, dict) else {}
        self.retries = int(meta.get("RetryAttempts", 0) or 0)
        return response

    def _count(self, received: int = 0) -> None:
        if self.stats is not None:
            service = self.client_name if self.client_name in (DYNAMODB, KMS) else S3
            sent = len(self.op.body) if isinstance(self.op, S3Put) else 0
            self.stats.add(service, sent, received, self.retries)

    def done(self, response: Any) -> Any:
        """The operation's result from a successful call (an ``S3Get``'s: the body)."""
        self._count(len(response) if self.reads_body and response is not None else 0)
        settle(self.op, True)
        log_request(self.op, self.method, time.perf_counter() - self.started, response, True)
        return finish(self.op, response)

    def failed(self, exc: BaseException) -> Any:
        """The operation's result for a failed call (a missing key, an expected
        refusal), or raise our error for it (botocore's as the cause)."""
        from botocore.exceptions import BotoCoreError, ClientError

        settle(self.op, False)
        if isinstance(exc, ClientError):
            self.answered(exc.response)
            self._count()
            log_request(self.op, self.method, time.perf_counter() - self.started, None, False)
            saver = self.saver
            return failed(self.op, exc, bucket=saver.bucket, table=saver.table, region=self.region)
        if isinstance(exc, BotoCoreError):
            self._count()
            raise translate_transport(exc, endpoint=self.endpoint_url) from exc
        raise exc


#: The AWS service of each client a saver holds.
SERVICES = {S3: "s3", DYNAMODB: "dynamodb", HOME_S3: "s3", KMS: "kms"}


def client_region(saver: SaverCore, name: str) -> str | None:
    """The region a saver's client ``name`` is created in (the home region's bucket
    is read through a client of the home region)."""
    if name == HOME_S3:
        assert saver.cross_region is not None, "the home read policy needs CrossRegion"
        return saver.cross_region.home_region
    return saver.region_name


class Clients:
    """The S3, DynamoDB, home-region S3 and KMS clients of a saver; those it created
    itself are the only ones it closes."""

    def __init__(self, s3: Any, dynamodb: Any, home_s3: Any, kms: Any = None) -> None:
        self.by_name: dict[str, Any] = {S3: s3, DYNAMODB: dynamodb, HOME_S3: home_s3, KMS: kms}
        self.created: list[Any] = []

    def keep(self, name: str, client: Any) -> Any:
        """Use ``client``, created by the saver, for ``name``."""
        self.by_name[name] = client
        self.created.append(client)
        return client

    def forget_created(self) -> list[Any]:
        """The clients the saver created, no longer in use (for it to close)."""
        created, self.created = self.created, []
        for name, client in self.by_name.items():
            if any(client is c for c in created):
                self.by_name[name] = None
        return created
