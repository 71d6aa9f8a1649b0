"""Storage and clients for the fault suite: moto in-process or a moto server, and
clients built from one shared botocore session (cheap to create per case)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any

# tests.conftest sets moto's fake credentials and region (and drops profile and
# endpoint overrides) when imported, before any client is made.
from tests.conftest import REGION, Backend  # isort: skip

from botocore.config import Config

from langgraph_s3 import AsyncS3Saver, S3Saver
from langgraph_s3.local import local_endpoint, serialize_moto
from tests.faults.checks import Acks

serialize_moto()
_lock = threading.Lock()
_session: Any = None


def _boto_session() -> Any:
    global _session
    with _lock:
        if _session is None:
            import boto3

            _session = boto3.session.Session(region_name=REGION)
        return _session


def sync_clients(backend: Backend, config: Config, *hooks: Any) -> tuple[Any, Any]:
    """An S3 and a DynamoDB client for ``backend``; each hook's ``attach`` is applied."""
    session = _boto_session()
    with _lock:  # creating clients from one session is not thread-safe
        s3 = session.client("s3", endpoint_url=backend.endpoint_url, config=config)
        ddb = session.client("dynamodb", endpoint_url=backend.endpoint_url, config=config)
    for hook in hooks:
        hook.attach(s3)
        hook.attach(ddb)
    return s3, ddb


def sync_saver(
    backend: Backend, config: Config, *hooks: Any, acks: Acks | None = None, **options: Any
) -> Any:
    """A brand-new S3Saver (a new container) whose clients carry ``hooks``."""
    s3, ddb = sync_clients(backend, config, *hooks)
    saver = S3Saver(backend.bucket, backend.table, s3_client=s3, dynamodb_client=ddb, **options)
    return acks.track(saver) if acks is not None else saver


@asynccontextmanager
async def async_saver(
    backend: Backend, config: Config, *hooks: Any, acks: Acks | None = None
) -> AsyncIterator[Any]:
    """A brand-new AsyncS3Saver over HTTP whose aiobotocore clients carry ``hooks``."""
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    assert backend.endpoint_url
    aio_config = AioConfig(retries=config.retries, max_pool_connections=32)
    session = get_session()
    async with AsyncExitStack() as stack:
        clients = []
        for service in ("s3", "dynamodb"):
            client = await stack.enter_async_context(
                session.create_client(
                    service,
                    region_name=REGION,
                    endpoint_url=backend.endpoint_url,
                    config=aio_config,
                )
            )
            for hook in hooks:
                hook.attach(client)
            clients.append(client)
        saver = AsyncS3Saver(
            backend.bucket, backend.table, s3_client=clients[0], dynamodb_client=clients[1]
        )
        yield acks.track(saver) if acks is not None else saver


@contextmanager
def inproc() -> Iterator[Backend]:
    """A bucket and table in moto in-process (one per sweep; cases use their own threads)."""
    from moto import mock_aws

    with mock_aws():
        backend = Backend("inproc", None)
        backend.saver().setup()
        yield backend


@contextmanager
def server(url: str | None = None) -> Iterator[Backend]:
    """A bucket and table in a moto server (``url``, or one started for the duration)."""
    if url is not None:
        backend = Backend("server", url)
        backend.saver().setup()
        yield backend
        return
    with local_endpoint() as started:
        backend = Backend("server", started)
        backend.saver().setup()
        yield backend
