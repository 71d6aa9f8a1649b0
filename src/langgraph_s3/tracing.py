"""Each saver call as an OpenTelemetry span, with what explains its cost and latency.

With ``opentelemetry-api`` installed (``pip install 'langgraph-s3[otel]'``) and a
tracer provider configured by the application (the AWS Distro for OpenTelemetry
Lambda layer does this for X-Ray), every call of a saver's public API (``put``,
``put_writes``, ``get_tuple``, ``list``, the thread operations, the collector) is a
span named ``langgraph_s3.<call>`` (``setup`` too) with these attributes:

=================================  =====================================================
``langgraph_s3.thread_id``         the thread (absent for calls across threads)
``langgraph_s3.checkpoint_ns``     the namespace, when the call names one
``langgraph_s3.requests.s3``       S3 requests the call made
``langgraph_s3.requests.dynamodb`` DynamoDB requests the call made
``langgraph_s3.requests.kms``      KMS requests the call made (only when there were any)
``langgraph_s3.s3.bytes_sent``     object bytes uploaded (checkpoint bodies and blobs)
``langgraph_s3.s3.bytes_received`` object bytes downloaded
``langgraph_s3.retries``           retries botocore made inside those requests
``langgraph_s3.cache_hits``        lookups the saver answered from memory meanwhile
                                   (saver-wide: approximate when calls overlap)
``langgraph_s3.conflict``          true when the call failed on a concurrent writer
=================================  =====================================================

Without the package nothing is imported and nothing changes: a call then only
checks a module flag. The spans are made with ``start_span`` (not made current), so a
``list`` abandoned half-way ends its span when it is closed, in whatever context.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph_s3.errors import CheckpointConflictError

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

_tracer: Any = None  # None: not looked up yet; False: opentelemetry is not installed


def _get_tracer() -> Any:
    global _tracer
    if _tracer is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _tracer = False
        else:
            from langgraph_s3.version import __version__

            _tracer = trace.get_tracer("langgraph_s3", __version__)
    return _tracer


@dataclass(frozen=True)
class Call:
    """Which saver call a flow runs for: its name, and the thread it is about."""

    name: str
    thread_id: str | None = None
    checkpoint_ns: str | None = None

    @classmethod
    def of(cls, name: str, config: Mapping[str, Any] | None = None) -> Call:
        """The call ``name`` on the thread a LangGraph config names (if any)."""
        # The flow checks the config; a malformed one is named here as no thread.
        conf = config.get("configurable") if isinstance(config, Mapping) else None
        if not isinstance(conf, Mapping):
            return cls(name)
        thread, ns = conf.get("thread_id"), conf.get("checkpoint_ns")
        return cls(name, None if thread is None else str(thread), None if ns is None else str(ns))


@dataclass
class Stats:
    """What one call's requests cost (filled in by ``driving.Exchange``)."""

    requests: dict[str, int] = field(default_factory=lambda: {"s3": 0, "dynamodb": 0})
    bytes_sent: int = 0
    bytes_received: int = 0
    retries: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, service: str, sent: int, received: int, retries: int) -> None:
        """One request (S3Saver records from its pool threads at once)."""
        with self._lock:
            self.requests[service] = self.requests.get(service, 0) + 1
            self.bytes_sent += sent
            self.bytes_received += received
            self.retries += retries


@contextmanager
def span(core: SaverCore, call: Call | None) -> Iterator[Stats | None]:
    """A span for ``call`` around the block, and the stats its requests fill in
    (None, and no span, when tracing is off or the call is not a public one)."""
    tracer: Any = _get_tracer() if call is not None else False
    if not tracer or call is None:
        yield None
        return
    stats = Stats()
    hits = core.caches.hits()
    current = tracer.start_span(f"langgraph_s3.{call.name}")
    conflict = False
    try:
        yield stats
    except CheckpointConflictError:
        conflict = True
        raise
    except GeneratorExit:  # a list closed before its end: not an error
        raise
    except BaseException as exc:
        current.record_exception(exc)
        raise
    finally:
        current.set_attributes(_attributes(call, stats, core.caches.hits() - hits, conflict))
        current.end()


def _attributes(call: Call, stats: Stats, hits: int, conflict: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "langgraph_s3.requests.s3": stats.requests.get("s3", 0),
        "langgraph_s3.requests.dynamodb": stats.requests.get("dynamodb", 0),
        "langgraph_s3.s3.bytes_sent": stats.bytes_sent,
        "langgraph_s3.s3.bytes_received": stats.bytes_received,
        "langgraph_s3.retries": stats.retries,
        "langgraph_s3.cache_hits": hits,
        "langgraph_s3.conflict": conflict,
    }
    if stats.requests.get("kms"):  # only with client-side encryption
        out["langgraph_s3.requests.kms"] = stats.requests["kms"]
    if call.thread_id is not None:
        out["langgraph_s3.thread_id"] = call.thread_id
    if call.checkpoint_ns is not None:
        out["langgraph_s3.checkpoint_ns"] = call.checkpoint_ns
    return out
