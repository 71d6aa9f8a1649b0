"""Faults injected at the botocore layer, through client event hooks only.

* ``count``: every API call of a client increments one shared counter
  (``before-call``), so a clean run tells how many calls there are to fail.
* ``refused``: the request never reaches the server — ``before-send`` (registered
  first, ahead of moto's in-process stubber) raises ``EndpointConnectionError``, which
  botocore's standard retry mode retries like a real connection failure.
* ``lost``: the request is executed and its response is lost — after the attempt,
  the ``needs-retry`` hook (which botocore and aiobotocore emit once per attempt,
  with the response) either asks for a resend, as botocore does after a read
  timeout when retries are on, or raises ``ReadTimeoutError`` when they are off.
* ``throttle``: a seeded share of attempts is answered by a ``before-send`` handler
  with a throttling error response (HTTP 400 ``ThrottlingException`` for DynamoDB,
  503 ``SlowDown`` for S3) without reaching the server; retries answer it. On
  aiobotocore clients the response is aiobotocore's own type, whose body is awaited.

The call that a fault hits is picked in ``before-call`` and carried to the hooks of
its own attempt in a ``ContextVar`` (an attempt's hooks run in the caller's thread or
task), so concurrent calls on one client never take each other's fault.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

KINDS = ("refused", "lost")

_armed: ContextVar[str | None] = ContextVar("lgs3_fault_armed", default=None)
_losing: ContextVar[bool] = ContextVar("lgs3_fault_losing", default=False)


def client_config(retries: bool, *, attempts: int = 3) -> Config:
    """botocore retries on (standard mode, ``attempts`` in all) or off (one attempt).

    ``total_max_attempts``: botocore reads ``max_attempts`` as retries *after* the first.
    """
    return Config(
        retries={"total_max_attempts": attempts if retries else 1, "mode": "standard"},
        max_pool_connections=32,
    )


@contextmanager
def fast_backoff(scale: float = 0.01) -> Iterator[None]:
    """Scale botocore's retry backoff (rand * 2^attempt s) down so thousands of retried
    faults fit in a test run; what is retried and how often is unchanged."""
    from botocore.retries import standard

    original = standard.ExponentialBackoff.delay_amount

    def scaled(self: Any, context: Any) -> float:
        return float(original(self, context)) * scale

    standard.ExponentialBackoff.delay_amount = scaled
    try:
        yield
    finally:
        standard.ExponentialBackoff.delay_amount = original


@dataclass
class Injector:
    """Counts the API calls of every client it is attached to and fails call ``target``
    (1-based) once, in the way ``kind`` says. ``target=0`` only counts."""

    target: int = 0
    kind: str = "refused"
    retries: bool = False
    calls: int = 0
    fired: str = ""  # "service.Operation" of the call that was failed
    ops: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def disarm(self) -> None:
        self.target = 0

    def attach(self, client: Any) -> Any:
        service = client.meta.service_model.service_name
        events = client.meta.events
        events.register("before-call.*.*", lambda model, **_: self._before_call(service, model))
        events.register_first("before-send.*.*", self._before_send)
        events.register("needs-retry.*.*", self._needs_retry)
        return client

    def _before_call(self, service: str, model: Any) -> None:
        with self._lock:
            self.calls += 1
            self.ops.append(f"{service}.{model.name}")
            hit = self.calls == self.target and not self.fired
            if hit:
                self.fired = f"{service}.{model.name}"
        _armed.set(self.kind if hit else None)
        _losing.set(False)

    def _before_send(self, request: Any, **_: Any) -> None:
        kind = _armed.get()
        if kind is None:
            return
        _armed.set(None)
        if kind == "refused":
            raise EndpointConnectionError(endpoint_url=request.url)
        _losing.set(True)

    def _needs_retry(self, request_dict: Any = None, **_: Any) -> float | None:
        if not _losing.get():
            return None
        _losing.set(False)
        if self.retries:
            return 0.0  # what botocore does after a read timeout: send it again
        url = (request_dict or {}).get("url", "")
        raise ReadTimeoutError(endpoint_url=url)


class _AsyncBody:
    """A canned body that aiobotocore can ``await`` (its responses read ``raw`` async)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def read(self, *_: Any) -> bytes:
        return self.body


def _throttle_response(service: str, url: str, aio: bool) -> AWSResponse:
    from moto.core.botocore_stubber import MockRawResponse

    if service == "dynamodb":
        status, headers = 400, {"Content-Type": "application/x-amz-json-1.0"}
        body = (
            b'{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException",'
            b'"message":"Rate of requests exceeds the allowed throughput."}'
        )
    else:
        status, headers = 503, {"Content-Type": "application/xml"}
        body = b"<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>"
    if aio:
        from aiobotocore.awsrequest import AioAWSResponse

        return AioAWSResponse(url, status, headers, _AsyncBody(body))
    return AWSResponse(url, status, headers, MockRawResponse(body))


@dataclass
class Throttler:
    """Answers a seeded ``share`` of attempts with a throttling error (boto3 or
    aiobotocore clients)."""

    seed: int
    share: float = 0.3
    throttled: int = 0
    attempts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def attach(self, client: Any) -> Any:
        service = client.meta.service_model.service_name
        aio = hasattr(client, "__aenter__")  # aiobotocore clients are async context managers

        def before_send(request: Any, **_: Any) -> AWSResponse | None:
            with self._lock:
                self.attempts += 1
                hit = self._rng.random() < self.share
                self.throttled += hit
            return _throttle_response(service, request.url, aio) if hit else None

        client.meta.events.register_first("before-send.*.*", before_send)
        return client
