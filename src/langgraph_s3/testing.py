"""Savers on a local S3/DynamoDB (moto) for testing your own graphs.

Needs the ``testing`` extra (``pip install 'langgraph-s3[testing]'``). No AWS account,
credentials or network: each saver gets a bucket and table of its own.

In code::

    from langgraph_s3.testing import local_saver

    with local_saver() as saver:
        graph = builder.compile(checkpointer=saver)
        ...

With pytest, add ``pytest_plugins = ["langgraph_s3.testing"]`` to your ``conftest.py``
and take the ``s3_saver`` (S3Saver, moto in-process) or ``async_s3_saver``
(AsyncS3Saver over a local moto server; an async fixture, so it needs pytest-asyncio
in ``auto`` mode or anyio) fixture.

Our savers send requests concurrently and moto is not thread-safe, so these helpers
serialize moto's request handling (:func:`langgraph_s3.local.serialize_moto`). If you
use moto's ``mock_aws()`` yourself, call ``serialize_moto()`` first, or random
"dictionary changed size during iteration" errors follow.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from langgraph_s3.errors import MissingDependencyError
from langgraph_s3.saver import S3Saver

try:
    from langgraph_s3.local import local_endpoint, serialize_moto
except ImportError as exc:  # moto is the `testing` extra; say so, not just its module name
    raise MissingDependencyError(
        f"langgraph_s3.testing needs moto ({exc}): pip install 'langgraph-s3[testing]'"
    ) from exc

if TYPE_CHECKING:
    from langgraph_s3.aio import AsyncS3Saver

REGION = "us-east-1"
#: Credentials moto accepts; passed to the clients explicitly, the environment is untouched.
_FAKE = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _names() -> tuple[str, str]:
    tag = os.urandom(6).hex()
    return f"lgs3-test-{tag}", f"lgs3-test-{tag}"


@contextmanager
def local_saver(*, server: bool = False, **options: Any) -> Iterator[S3Saver]:
    """An :class:`S3Saver` on a fresh bucket and table of a local moto.

    Args:
        server: Run moto as a local HTTP server (requests go through real HTTP, as in
            production) instead of inside the process (faster).
        **options: Further ``S3Saver`` arguments (``prefix``, ``serde``, options).
    """
    from moto import mock_aws

    serialize_moto()
    if server:
        with local_endpoint() as url, _ready_saver({"endpoint_url": url}, options) as saver:
            yield saver
    else:
        with mock_aws(), _ready_saver({}, options) as saver:
            yield saver


@contextmanager
def _ready_saver(where: dict[str, Any], options: dict[str, Any]) -> Iterator[S3Saver]:
    import boto3

    bucket, table = _names()
    kw = {"region_name": REGION, **where, **_FAKE}
    with S3Saver(
        bucket=bucket, table=table, s3_client=boto3.client("s3", **kw),
        dynamodb_client=boto3.client("dynamodb", **kw), **options,
    ) as saver:  # fmt: skip
        saver.setup()
        yield saver


@asynccontextmanager
async def local_async_saver(**options: Any) -> AsyncIterator[AsyncS3Saver]:
    """An :class:`AsyncS3Saver` on a fresh bucket and table of a local moto server.

    Args:
        **options: Further ``AsyncS3Saver`` arguments.
    """
    from aiobotocore.session import get_session

    from langgraph_s3.aio import AsyncS3Saver

    serialize_moto()
    bucket, table = _names()
    with local_endpoint() as url:
        session = get_session()
        session.set_credentials(_FAKE["aws_access_key_id"], _FAKE["aws_secret_access_key"])
        async with AsyncS3Saver(
            bucket=bucket, table=table, region_name=REGION, endpoint_url=url, session=session,
            **options,
        ) as saver:  # fmt: skip
            await saver.setup()
            yield saver


try:
    import pytest
except ImportError:  # pragma: no cover - pytest is only needed for the fixtures
    pass
else:

    @pytest.fixture
    def s3_saver() -> Iterator[S3Saver]:
        """An S3Saver on moto in-process, with its own bucket and table."""
        with local_saver() as saver:
            yield saver

    @pytest.fixture
    async def async_s3_saver() -> AsyncIterator[AsyncS3Saver]:
        """An AsyncS3Saver on a local moto server, with its own bucket and table."""
        async with local_async_saver() as saver:
            yield saver
