"""The benchmark's one S3 + DynamoDB endpoint: a moto server on 127.0.0.1, port 0.

Prints ``{"endpoint": "http://127.0.0.1:PORT"}`` on one line once it listens, then
serves until its standard input closes (the launcher holds it open), so the server
can never outlive the benchmark that started it.

moto is not thread-safe: its ``TransactWriteItems`` deep-copies the whole table
(for rollback) while another request thread may be writing to it, which fails
with "dictionary changed size during iteration" and makes the client retry. The
server therefore handles one request at a time. The injected latency is spent on
the client before a request is sent, so concurrent requests still overlap.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any


def serialize(app_class: Any) -> None:
    """Wrap the WSGI app's ``__call__`` in one lock."""
    lock = threading.Lock()
    call = app_class.__call__

    def locked(self: Any, environ: Any, start_response: Any) -> Any:
        with lock:
            return call(self, environ, start_response)

    app_class.__call__ = locked


def main() -> int:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    from moto.server import ThreadedMotoServer

    serialize(DomainDispatcherApplication)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto logs every request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    print(json.dumps({"endpoint": f"http://{host}:{port}"}), flush=True)
    try:
        sys.stdin.read()  # returns when the launcher closes the pipe (or exits)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
