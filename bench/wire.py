"""Counting AWS requests at the wire, injecting latency, attributing requests to calls.

Every botocore (and aiobotocore) client created after :func:`install` gets three
handlers on its own event emitter:

* ``before-parameter-build`` opens a request record (service, operation and a
  summary of the parameters for the cost model);
* ``before-send``  counts one request on the wire, stamps its start and sleeps
  for the injected latency of the request's service (``asyncio.sleep`` on
  aiobotocore clients, so concurrent requests overlap exactly as they would
  against a remote endpoint); the latency is one figure for every service, or a
  profile per service (``catalog.LATENCY_PROFILES``);
* ``response-received`` stamps the end and keeps what the cost model needs
  (response sizes, returned DynamoDB items).

Client creation is wrapped at ``botocore.session.Session.create_client`` and
``aiobotocore.session.AioSession._create_client``, so clients a saver creates for
itself (``boto3.client``, a private ``boto3.Session``) are instrumented exactly like
clients handed to it; nothing in the savers is changed.

Requests are attributed to the checkpointer call that issued them (``put``,
``put_writes``, ``get_tuple``, ``list``...) through a context variable set by
:func:`wrap_saver`. Thread pools copy the caller's context (see
:func:`_propagate_context_to_threads`), so requests a saver fans out on worker
threads are still attributed to the call that made them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from capacity import summarize_request, summarize_response

_CALL: contextvars.ContextVar[CallRecord | None] = contextvars.ContextVar(
    "bench_call", default=None
)
_REQUEST: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar(
    "bench_request", default=None
)


@dataclass
class RequestRecord:
    """One API call (its attempts are counted in ``attempts``)."""

    service: str
    op: str
    call: CallRecord | None
    summary: dict[str, Any]
    start: float = 0.0
    end: float = 0.0
    attempts: int = 0
    bytes_out: int = 0
    bytes_in: int = 0
    status: int = 0


@dataclass
class CallRecord:
    """One checkpointer method call and the requests it made."""

    method: str
    start: float
    end: float = 0.0
    requests: list[RequestRecord] = field(default_factory=list)


class Recorder:
    """Collects every request and every checkpointer call of one process."""

    def __init__(self) -> None:
        #: Seconds before every request of a service not in ``by_service``.
        self.latency = 0.0
        #: Seconds per service name (``"s3"``, ``"dynamodb"``) when a profile is set.
        self.by_service: dict[str, float] = {}
        self.enabled = True
        self.requests: list[RequestRecord] = []
        self.calls: list[CallRecord] = []
        self._lock = threading.Lock()

    def latency_for(self, service: str) -> float:
        """Seconds injected before each request (attempt) to ``service``."""
        return self.by_service.get(service, self.latency)

    def reset(self) -> None:
        """Forget everything recorded so far (between phases of a workload)."""
        with self._lock:
            self.requests = []
            self.calls = []

    # --------------------------------------------------------------- handlers
    def _before_build(
        self, model: Any = None, params: Any = None, context: Any = None, **_: Any
    ) -> None:
        if context is None:
            return
        service = model.service_model.service_name
        record = RequestRecord(
            service=service,
            op=model.name,
            call=_CALL.get(),
            summary=summarize_request(service, model.name, params or {}),
        )
        context["bench_record"] = record
        _REQUEST.set(record)
        with self._lock:
            self.requests.append(record)
            if record.call is not None:
                record.call.requests.append(record)

    def _stamp_send(self, request: Any) -> RequestRecord | None:
        record = _REQUEST.get()
        if record is None:
            return None
        if record.attempts == 0:
            record.start = time.perf_counter()
        record.attempts += 1
        length = request.headers.get("Content-Length")
        if length is not None:
            record.bytes_out += int(length)
        elif isinstance(request.body, bytes | bytearray):
            record.bytes_out += len(request.body)
        return record

    def _before_send_sync(self, request: Any = None, **_: Any) -> None:
        record = self._stamp_send(request)
        delay = self.latency_for(record.service) if record is not None else 0.0
        if delay > 0:
            time.sleep(delay)

    async def _before_send_async(self, request: Any = None, **_: Any) -> None:
        record = self._stamp_send(request)
        delay = self.latency_for(record.service) if record is not None else 0.0
        if delay > 0:
            await asyncio.sleep(delay)

    def _response_received(
        self,
        context: Any = None,
        response_dict: Any = None,
        parsed_response: Any = None,
        **_: Any,
    ) -> None:
        record = (context or {}).get("bench_record")
        if record is None:
            return
        record.end = time.perf_counter()
        if response_dict is not None:
            record.status = int(response_dict.get("status_code") or 0)
            headers = response_dict.get("headers") or {}
            length = headers.get("content-length") or headers.get("Content-Length")
            if length is not None:
                record.bytes_in += int(length)
        if record.service == "dynamodb" and isinstance(parsed_response, dict):
            # Only what the capacity model reads: returned keys, sizes and counts.
            record.summary["response"] = summarize_response(record.op, parsed_response)

    def attach(self, client: Any, *, is_async: bool) -> None:
        """Register the handlers on one client's event emitter."""
        events = client.meta.events
        events.register(
            "before-parameter-build", self._before_build, unique_id="bench-before-build"
        )
        send = self._before_send_async if is_async else self._before_send_sync
        events.register("before-send", send, unique_id="bench-before-send")
        events.register(
            "response-received", self._response_received, unique_id="bench-response-received"
        )


RECORDER = Recorder()
_installed = False


def install(
    latency: float, by_service: dict[str, float] | None = None, *, aio: bool = True
) -> Recorder:
    """Instrument every client created from now on; returns the process recorder.

    ``latency`` (seconds) goes before every request; ``by_service`` overrides it
    per service (a latency profile). ``aio=False`` leaves aiobotocore alone (and
    unimported: a cold-start sample of a sync saver must not pay for it).
    """
    global _installed
    RECORDER.latency = latency
    RECORDER.by_service = dict(by_service or {})
    if _installed:
        return RECORDER
    _installed = True
    _propagate_context_to_threads()

    import botocore.session

    original = botocore.session.Session.create_client

    @functools.wraps(original)
    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        if RECORDER.enabled:
            RECORDER.attach(client, is_async=False)
        return client

    botocore.session.Session.create_client = create_client

    if not aio:
        return RECORDER
    try:
        import aiobotocore.session
    except ImportError:  # the langgraph-checkpoint-aws venv has no aiobotocore
        return RECORDER
    aio_original = aiobotocore.session.AioSession._create_client

    @functools.wraps(aio_original)
    async def aio_create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = await aio_original(self, *args, **kwargs)
        if RECORDER.enabled:
            RECORDER.attach(client, is_async=True)
        return client

    aiobotocore.session.AioSession._create_client = aio_create_client
    return RECORDER


class uninstrumented:
    """Clients created inside this block are not counted and get no latency."""

    def __enter__(self) -> None:
        RECORDER.enabled = False

    def __exit__(self, *exc: object) -> None:
        RECORDER.enabled = True


def _propagate_context_to_threads() -> None:
    """Make ThreadPoolExecutor tasks run in a copy of the submitter's context.

    The stdlib does not do this (asyncio's ``to_thread`` and langchain's executor
    helpers do); without it, requests a saver issues from its own pool threads
    could not be attributed to the checkpointer call that issued them.
    """
    original = concurrent.futures.ThreadPoolExecutor.submit
    if getattr(original, "_bench", False):
        return

    def submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        ctx = contextvars.copy_context()
        return original(self, ctx.run, fn, *args, **kwargs)

    submit._bench = True  # type: ignore[attr-defined]
    concurrent.futures.ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]


# ----------------------------------------------------------------- attribution
SYNC_METHODS = (
    "put",
    "put_writes",
    "get_tuple",
    "list",
    "get_delta_channel_history",
    "delete_thread",
)
ASYNC_METHODS = tuple("a" + m for m in SYNC_METHODS)


def _open_call(method: str) -> tuple[CallRecord | None, contextvars.Token[Any] | None]:
    if _CALL.get() is not None:  # nested call (e.g. aget_tuple -> get_tuple): outer owns it
        return None, None
    record = CallRecord(method=method, start=time.perf_counter())
    with RECORDER._lock:
        RECORDER.calls.append(record)
    return record, _CALL.set(record)


def _close_call(record: CallRecord | None, token: contextvars.Token[Any] | None) -> None:
    if record is not None and token is not None:
        record.end = time.perf_counter()
        _CALL.reset(token)


def _wrap(method: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    name = method[1:] if method in ASYNC_METHODS else method
    if inspect.isasyncgenfunction(fn):

        @functools.wraps(fn)
        async def agen(*args: Any, **kwargs: Any) -> Any:
            record, token = _open_call(name)
            try:
                async for item in fn(*args, **kwargs):
                    yield item
            finally:
                _close_call(record, token)

        return agen
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def coro(*args: Any, **kwargs: Any) -> Any:
            record, token = _open_call(name)
            try:
                return await fn(*args, **kwargs)
            finally:
                _close_call(record, token)

        return coro

    @functools.wraps(fn)
    def sync(*args: Any, **kwargs: Any) -> Any:
        record, token = _open_call(name)
        try:
            result = fn(*args, **kwargs)
            if name == "list":
                # list() is lazy: drain it inside the call so its requests are attributed.
                result = iter(list(result))
            return result
        finally:
            _close_call(record, token)

    return sync


def wrap_saver(saver: Any) -> Any:
    """Shadow the saver's checkpointer methods with attributing wrappers (in place)."""
    for method in SYNC_METHODS + ASYNC_METHODS:
        fn = getattr(saver, method, None)
        if fn is not None:
            setattr(saver, method, _wrap(method, fn))
    return saver


# ---------------------------------------------------------------- analysis
def critical_chain(requests: Iterable[RequestRecord]) -> list[RequestRecord]:
    """The longest chain of requests that did not overlap in time.

    Requests sent concurrently overlap (each spends the injected latency in flight
    together); requests that depend on one another do not. Picking greedily by
    earliest end gives the maximum number of pairwise non-overlapping intervals,
    which is the length of the longest dependent chain: the sequential round trips.
    """
    chain: list[RequestRecord] = []
    last_end = float("-inf")
    for record in sorted((r for r in requests if r.end > 0), key=lambda r: r.end):
        if record.start >= last_end:
            chain.append(record)
            last_end = record.end
    return chain


def critical_path(requests: Iterable[RequestRecord]) -> int:
    """Sequential round trips (see :func:`critical_chain`)."""
    return len(critical_chain(requests))


def service_seconds(record: RequestRecord) -> float:
    """Time a request spent beyond the injected latency: moto's work plus transfer."""
    injected = RECORDER.latency_for(record.service) * record.attempts
    return max(0.0, record.end - record.start - injected)


def is_chunk_upload(record: RequestRecord) -> bool:
    """A DynamoDB write of chunk items only (layout 5): a blob upload that went to the
    index instead of S3, not the call's own index request."""
    writes = record.summary.get("writes") or []
    return (
        record.service == "dynamodb"
        and record.op == "BatchWriteItem"
        and bool(writes)
        and all((w.get("key") or ["", ""])[1].startswith("b#") for w in writes)
    )


def kind(record: RequestRecord) -> str:
    """``"s3:PutObject"``-style label of a request."""
    return f"{record.service}:{record.op}"
