"""A checkpointer for LangGraph's Agent Server (``langgraph dev``, ``langgraph up``).

Name it in ``langgraph.json``::

    "checkpointer": {"path": "langgraph_s3.server.checkpointer"}

and give the server the storage in its environment, not in code::

    CHECKPOINT_CONNECTION_STRING=s3://BUCKET/PREFIX?table=TABLE&region=REGION

plus the usual AWS variables (``AWS_PROFILE`` or keys, or the role of the machine),
and ``AWS_ENDPOINT_URL`` (or ``&endpoint_url=`` in the string) for a local endpoint.

How the server uses it (langgraph-api 0.16.7, ``langgraph_api/_checkpointer``): it
imports the object the path names once, and enters it once per OS thread that needs a
checkpointer, keeping what it yields for that thread's event loop. An
``AsyncS3Saver`` belongs to the event loop it first ran on, so :func:`checkpointer` is
a factory, an async context manager function, that makes a new saver each time it is
entered and closes that saver's clients when the server shuts down. A saver instance
in ``langgraph.json`` would be shared across those loops.

The module path is written with dots only: langgraph-api 0.16.7 splits a path without
``/`` or ``.py:`` at its last dot, so ``langgraph_s3.server:checkpointer`` is not
found. A file of your own (``"./checkpointer.py:checkpointer"``) can build the saver
with other arguments through :func:`saver_from_env`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from langgraph_s3.connection import parse_conn_string
from langgraph_s3.errors import InvalidConfigError

if TYPE_CHECKING:
    from langgraph_s3.aio import AsyncS3Saver

#: The environment variable holding the connection string; the same one the garbage
#: collector's Lambda reads, so one value of the storage stack's ``ConnectionString``
#: output configures both.
CONNECTION_STRING_VAR = "CHECKPOINT_CONNECTION_STRING"

_EXAMPLE = "s3://BUCKET/PREFIX?table=TABLE&region=REGION"


def saver_from_env(environ: Mapping[str, str] | None = None, **kwargs: Any) -> AsyncS3Saver:
    """A new ``AsyncS3Saver`` on the storage named by ``CHECKPOINT_CONNECTION_STRING``.

    Makes no AWS request: credentials and region are found by aiobotocore as usual
    (``AWS_PROFILE``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, the machine's
    role; ``AWS_REGION`` when the string has no ``region=``), and a wrong bucket or
    table is reported by the first checkpoint read or write.

    Args:
        environ: Where to read the variable (default ``os.environ``).
        **kwargs: Further ``AsyncS3Saver`` arguments (``boto_config``, ``serde``,
            options); they win over what the connection string says.

    Returns:
        A saver that owns its clients: enter it (``async with``) or ``await
        saver.aclose()`` when done.

    Raises:
        InvalidConfigError: the variable is unset, empty or not a connection string;
            the message says what to set.
        MissingDependencyError: the ``async`` extra is not installed.
    """
    from langgraph_s3.aio import AsyncS3Saver

    env = os.environ if environ is None else environ
    value = env.get(CONNECTION_STRING_VAR, "").strip()
    if not value:
        raise InvalidConfigError(
            f"{CONNECTION_STRING_VAR} is not set: set it in the server's environment to "
            f"{_EXAMPLE} (the storage stack's ConnectionString output)"
        )
    try:
        where = parse_conn_string(value)
    except InvalidConfigError as exc:
        raise InvalidConfigError(f"{CONNECTION_STRING_VAR} is not valid: {exc}") from exc
    return AsyncS3Saver(**{**where, **kwargs})


@asynccontextmanager
async def checkpointer() -> AsyncIterator[AsyncS3Saver]:
    """The Agent Server's checkpointer factory: a new saver per entry, closed on exit.

    ``langgraph.json``: ``"checkpointer": {"path": "langgraph_s3.server.checkpointer"}``;
    the storage comes from ``CHECKPOINT_CONNECTION_STRING`` (see :func:`saver_from_env`).

    Yields:
        An ``AsyncS3Saver`` for the event loop that entered the factory.

    Raises:
        InvalidConfigError: ``CHECKPOINT_CONNECTION_STRING`` is missing or malformed;
            the server fails at start-up with this message.
    """
    async with saver_from_env() as saver:
        yield saver
