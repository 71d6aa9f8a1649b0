"""The AWS clients a saver creates: session, configuration, user agent, closing."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import S3Saver, __version__
from tests.conftest import REGION, Backend

CONFIG = {"configurable": {"thread_id": "clients", "checkpoint_ns": ""}}


def _user_agents(client: Any) -> list[str]:
    seen: list[str] = []

    def record(request: Any, **_: Any) -> None:
        agent = request.headers["User-Agent"]
        seen.append(agent.decode() if isinstance(agent, bytes) else agent)

    client.meta.events.register("before-send.*.*", record)
    return seen


def test_clients_come_from_the_session_with_the_config_merged(inproc_backend: Backend) -> None:
    session = boto3.Session(region_name=REGION)
    saver = S3Saver(
        bucket=inproc_backend.bucket,
        table=inproc_backend.table,
        session=session,
        boto_config=Config(connect_timeout=2, read_timeout=7, retries={"max_attempts": 4}),
    )
    s3, ddb = saver.s3_client, saver.dynamodb_client
    for client in (s3, ddb):
        assert client.meta.region_name == REGION  # from the session: none given to the saver
        config = client.meta.config
        assert (config.connect_timeout, config.read_timeout) == (2, 7)
        assert config.retries["total_max_attempts"] == 5  # 4 retries
        assert config.retries["mode"] == "standard"  # the saver's, kept
        assert config.max_pool_connections >= 10  # the saver's own settings stay
    agents = _user_agents(ddb)
    assert saver.get_tuple(CONFIG) is None
    assert agents and all(f"langgraph-s3/{__version__}" in a for a in agents)


class CountingSession:
    """A real boto3 session that counts the clients made from it."""

    def __init__(self) -> None:
        self.session = boto3.Session(region_name=REGION)
        self.made: list[str] = []

    def client(self, service: str, **kwargs: Any) -> Any:
        self.made.append(service)
        return self.session.client(service, **kwargs)


def test_clients_are_made_with_the_saver_not_by_its_first_call(inproc_backend: Backend) -> None:
    """A Lambda's init phase (where the saver is constructed) pays for the clients, and
    its first invocation does not; a client passed in is used as it is."""
    session = CountingSession()
    saver = S3Saver(bucket=inproc_backend.bucket, table=inproc_backend.table, session=session)
    assert sorted(session.made) == ["dynamodb", "s3"]
    assert saver.get_tuple(CONFIG) is None
    assert sorted(session.made) == ["dynamodb", "s3"]
    mine = inproc_backend.s3()
    given = CountingSession()
    saver = S3Saver(
        bucket=inproc_backend.bucket, table=inproc_backend.table, session=given, s3_client=mine
    )
    assert given.made == ["dynamodb"] and saver.s3_client is mine


def test_close_closes_only_the_clients_the_saver_created(inproc_backend: Backend) -> None:
    mine = inproc_backend.s3()
    with inproc_backend.saver(s3_client=mine, dynamodb_client=None, region_name=REGION) as saver:
        assert saver.get_tuple(CONFIG) is None
        created = saver.dynamodb_client
    assert saver.s3_client is mine  # passed in: left as it was
    assert saver.dynamodb_client is not created  # created: closed and forgotten
    mine.head_bucket(Bucket=inproc_backend.bucket)  # still usable
    assert saver.get_tuple(CONFIG) is None  # a closed saver makes new clients


async def test_async_clients_take_the_config_and_user_agent(server_backend: Backend) -> None:
    async with server_backend.async_saver(boto_config=Config(read_timeout=9)) as saver:
        s3, ddb = await saver.clients()
        assert s3.meta.config.read_timeout == 9 and ddb.meta.config.read_timeout == 9
        agents = _user_agents(ddb)
        assert await saver.aget_tuple(CONFIG) is None
        assert agents and all(f"langgraph-s3/{__version__}" in a for a in agents)
    assert not any(saver._clients.by_name.values())  # closed and forgotten


async def test_an_http_endpoint_reads_no_ca_bundle(
    server_backend: Backend, monkeypatch: Any
) -> None:
    """aiobotocore loads the CA bundle into a new SSL context for each client's first
    request (25-40 ms), even on plain HTTP; the saver's clients of an http:// endpoint
    skip it. The control client pins the assumption: if aiobotocore stops reading the
    bundle through ``get_cert_path``, this test says so instead of passing vacuously."""
    import aiobotocore.httpsession
    from aiobotocore.session import get_session

    reads: list[Any] = []
    real = aiobotocore.httpsession.get_cert_path
    monkeypatch.setattr(
        aiobotocore.httpsession, "get_cert_path", lambda v: reads.append(v) or real(v)
    )
    assert server_backend.endpoint_url and server_backend.endpoint_url.startswith("http://")
    async with server_backend.async_saver() as saver:
        assert await saver.aget_tuple(CONFIG) is None  # the DynamoDB client's first request
        s3, _ = await saver.clients()
        await s3.list_objects_v2(Bucket=server_backend.bucket, MaxKeys=1)
    assert reads == []
    async with get_session().create_client(
        "dynamodb", region_name=REGION, endpoint_url=server_backend.endpoint_url
    ) as control:
        await control.list_tables()
    assert reads


class RecordingSession:
    """A real aiobotocore session that records the clients made from it, and whose
    clients of ``failing`` (a service name) cannot be made."""

    def __init__(self, failing: str | None = None) -> None:
        from aiobotocore.session import get_session

        self.session = get_session()
        self.failing = failing
        self.made: list[str] = []
        self.models: list[str] = []  # the service models its loader was asked for
        loader = self.session.get_component("data_loader")
        load = loader.load_service_model

        def recorded(service: str, kind: str, *args: Any, **kwargs: Any) -> Any:
            self.models.append(f"{service}/{kind}")
            return load(service, kind, *args, **kwargs)

        loader.load_service_model = recorded

    def get_component(self, name: str) -> Any:
        return self.session.get_component(name)

    def create_client(self, service: str, **kwargs: Any) -> Any:
        self.made.append(service)
        if service == self.failing:
            raise RuntimeError(f"no {service} client today")
        return self.session.create_client(service, **kwargs)


async def test_a_call_without_s3_requests_makes_no_s3_client(server_backend: Backend) -> None:
    """Every call needs the index; only large values need S3. A saver loads no S3 model
    when constructed, and a call whose requests all go to DynamoDB makes no S3 client."""
    session = RecordingSession()
    async with server_backend.async_saver(session=session) as saver:
        assert not any(m.startswith("s3/") for m in session.models)  # construction
        assert await saver.aget_tuple(CONFIG) is None  # one Query, no S3 request
        assert saver._preparing is None  # nor made in the background
        config = await saver.aput(CONFIG, empty_checkpoint(), {}, {})
        await saver.aput_writes(config, [("channel", "a small value")], "task")
        assert (await saver.aget_tuple(config)) is not None
    assert session.made == ["dynamodb"]
    assert not any(m.startswith("s3/") for m in session.models)


async def test_the_s3_client_makes_the_dynamodb_client_meanwhile(server_backend: Backend) -> None:
    """A call that starts with S3 (a large value's upload) makes the DynamoDB client in
    the background while the S3 request waits for the network."""
    session = RecordingSession()
    async with server_backend.async_saver(session=session) as saver:
        await saver._client("s3")
        assert saver._preparing is not None
        await saver._preparing
        ddb = saver._clients.by_name["dynamodb"]
        assert ddb is not None and ddb in saver._clients.created
        assert (await saver.clients())[1] is ddb  # used, not made again
    assert session.made == ["s3", "dynamodb"]
    assert not any(saver._clients.by_name.values())  # both closed and forgotten
    async with server_backend.async_saver(dynamodb_client=object()) as given:
        await given._client("s3")
        assert given._preparing is None  # nothing to make: the DynamoDB client was given


async def test_an_async_client_that_fails_in_the_background_fails_where_needed(
    server_backend: Backend,
) -> None:
    session = RecordingSession(failing="dynamodb")
    async with server_backend.async_saver(session=session) as saver:
        await saver._client("s3")  # unaffected
        assert saver._preparing is not None
        await saver._preparing  # its error is not raised here ...
        with pytest.raises(RuntimeError, match="no dynamodb client today"):
            await saver.aget_tuple(CONFIG)  # ... but by the call that needs the client
    assert session.made == ["s3", "dynamodb", "dynamodb"]
