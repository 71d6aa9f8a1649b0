"""Records every attempt of the Agent Server's process to reach a host other than
loopback, for ``tests/deploy/test_agent_server.py``.

Python imports ``sitecustomize`` at start-up from ``sys.path``; the test puts this
folder on the server's ``PYTHONPATH`` and names a file in ``LGS3_NETGUARD_LOG``. An
audit hook appends one line per lookup or connection to an outside host; the test
asserts the file stays empty. This machine has no route out, so such an attempt would
otherwise fail quietly (the server swallows its version check's errors) and pass
unnoticed; a user's server would make it. Connections that uvloop opens itself (the
server's event loops) bypass Python's socket module and are not seen here.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_LOG = os.environ.get("LGS3_NETGUARD_LOG")
_LOOPBACK = {None, "", "127.0.0.1", "::1", "localhost", b"127.0.0.1", b"localhost"}


def _host(event: str, args: tuple[Any, ...]) -> Any:
    if event == "socket.getaddrinfo":
        return args[0]
    address = args[1]  # socket.connect: (socket, address)
    return address[0] if isinstance(address, tuple) else None  # a str is a Unix socket


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event not in ("socket.connect", "socket.getaddrinfo"):
        return
    host = _host(event, args)
    if host in _LOOPBACK or not _LOG:
        return
    with open(_LOG, "a", encoding="utf-8") as f:
        f.write(f"{event} {host!r} (pid {os.getpid()})\n")


if _LOG:
    sys.addaudithook(_audit)
