"""An embedded S3/DynamoDB endpoint (moto) for the demo, tests and benchmarks.

Needs the ``demo`` extra (``pip install 'langgraph-s3[demo]'``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import moto  # noqa: F401  - fail at import with a clear ImportError if the extra is missing

_lock = threading.RLock()
_patched = False


def serialize_moto() -> None:
    """Make moto handle one request at a time (idempotent).

    moto is not thread-safe: its TransactWriteItems deep-copies the table for
    rollback while another thread may be writing it (LangGraph saves task writes
    concurrently with a checkpoint's commit), which fails with "dictionary changed
    size during iteration". Serializing moto's request handling fixes that without
    changing what it emulates; clients still send requests concurrently.
    """
    global _patched
    if _patched:
        return
    from moto.core.botocore_stubber import BotocoreStubber
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    stub_call = BotocoreStubber.__call__
    app_call = DomainDispatcherApplication.__call__

    def locked_stub(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The stubber sits on every botocore client's send path, also of clients that
        # talk to a moto *server*; only take the lock when the in-process mock answers,
        # or an event loop would wait here for a server thread that waits for it.
        if not self.enabled:
            return None
        with _lock:
            return stub_call(self, *args, **kwargs)

    def locked_app(self: Any, environ: Any, start_response: Any) -> Any:
        with _lock:
            return app_call(self, environ, start_response)

    BotocoreStubber.__call__ = locked_stub  # type: ignore[method-assign]
    DomainDispatcherApplication.__call__ = locked_app  # type: ignore[method-assign]
    _patched = True


@contextmanager
def local_endpoint() -> Iterator[str]:
    """Run a moto server on 127.0.0.1 (a free port) for the duration; yield its URL."""
    from moto.server import ThreadedMotoServer

    serialize_moto()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto logs every request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
