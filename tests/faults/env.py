"""Storage and clients for the fault suite: moto in-process or a moto server, clients
built from one shared botocore session (cheap to create per case), and the suite's
one change to the saver's defaults: a lower chunk-list threshold (``chunk_lists``)."""

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

#: The chunk-list threshold of every process the suite runs (``langgraph_s3.core.lists.
#: LIST_MIN`` is 64). The graph's ~200 KB document is cut into 10-12 chunks, so with the
#: default it would never be stored as a chunk list; at 8 every version of it is (in a
#: pack, or a loose blob when its call had no new chunk), and every case, damage kind
#: and kill also covers the lists. Values of at most 8 chunks keep plain entries.
LIST_MIN = 8


@contextmanager
def chunk_lists(limit: int = LIST_MIN) -> Iterator[None]:
    """Store values of more than ``limit`` chunks as chunk lists while it lasts: the
    sweep (``sweep.run``) and each ``kill -9`` child (``child.main``) run inside it."""
    from langgraph_s3.core import lists

    original = lists.LIST_MIN
    lists.LIST_MIN = limit
    try:
        yield
    finally:
        lists.LIST_MIN = original


_lock = threading.Lock()
_session: Any = None


def _boto_session() -> Any:
    global _session
    with _lock:
        if _session is None:
            import boto3

            _session = boto3.session.Session(region_name=REGION)
        return _session


_aio_session: Any = None


def _aiobotocore_session() -> Any:
    """One aiobotocore session for the process: a new one loads botocore's data again
    (~60 ms a saver, and a fault sweep makes dozens); clients stay per saver."""
    global _aio_session
    if _aio_session is None:
        from aiobotocore.session import get_session

        _aio_session = get_session()
    return _aio_session


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
    backend: Backend, config: Config, *hooks: Any, acks: Acks | None = None, **options: Any
) -> AsyncIterator[Any]:
    """A brand-new AsyncS3Saver over HTTP whose aiobotocore clients carry ``hooks``."""
    from aiobotocore.config import AioConfig

    assert backend.endpoint_url
    aio_config = AioConfig(retries=config.retries, max_pool_connections=32)
    session = _aiobotocore_session()
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
            backend.bucket,
            backend.table,
            s3_client=clients[0],
            dynamodb_client=clients[1],
            **options,
        )
        yield acks.track(saver) if acks is not None else saver


@contextmanager
def scratch(base: Backend) -> Iterator[Backend]:
    """A bucket and table of their own for one case, on ``base``'s moto, deleted when the
    case ends, pass or fail, so a sweep of hundreds of cases keeps a flat footprint."""
    backend = Backend(base.mode, base.endpoint_url)
    backend.saver().setup()
    try:
        yield backend
    finally:
        drop(backend)


def drop(backend: Backend) -> None:
    """Delete ``backend``'s bucket (emptied first, as S3 requires) and table, then let
    moto forget them."""
    s3 = backend.s3()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=backend.bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=backend.bucket, Delete={"Objects": keys, "Quiet": True})
    s3.delete_bucket(Bucket=backend.bucket)
    backend.dynamodb().delete_table(TableName=backend.table)
    forget_moto_instances()


def forget_moto_instances() -> None:
    """Drop moto's list of every model instance it ever made.

    moto appends each instance of its models (``BaseModel.__new__``) to a class-level
    list that only its dashboard reads, and DynamoDB deep-copies items on every read, so
    deleted buckets and tables stay in memory and a sweep grew to 21 GB (issue 22).
    moto's own reset clears these lists the same way; this clears them without
    resetting the storage other tests in the process may be using. Covers moto
    in-process and a moto server started in this process (``local_endpoint``), not a
    server in another process.
    """
    from moto.core.model_instances import reset_model_data

    reset_model_data()


@contextmanager
def inproc() -> Iterator[Backend]:
    """A bucket and table in moto in-process for the sweep's clean run; each case makes
    its own with ``scratch``."""
    from moto import mock_aws

    with mock_aws():
        backend = Backend("inproc", None)
        backend.saver().setup()
        try:
            yield backend
        finally:
            drop(backend)


@contextmanager
def server(url: str | None = None) -> Iterator[Backend]:
    """A bucket and table in a moto server (``url``, or one started for the duration),
    deleted at the end; each case makes its own with ``scratch``."""
    if url is not None:
        with scratch(Backend("server", url)) as backend:
            yield backend
        return
    with local_endpoint() as started, scratch(Backend("server", started)) as backend:
        yield backend
