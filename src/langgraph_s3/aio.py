"""``AsyncS3Saver``: the natively async saver, a thin aiobotocore shell over the shared protocol.

Needs the ``async`` extra: ``pip install 'langgraph-s3[async]'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from langgraph_s3.connection import merge_config, parse_conn_string
from langgraph_s3.core.commit import claim_thread, put
from langgraph_s3.core.history import delta_history, list_checkpoints
from langgraph_s3.core.read import get_tuple
from langgraph_s3.core.setup import setup
from langgraph_s3.core.writes import put_writes
from langgraph_s3.driving import SERVICES, Driver, Exchange, Steps, client_region
from langgraph_s3.errors import MissingDependencyError
from langgraph_s3.loopcalls import run_on_loop
from langgraph_s3.operations import WAITS, Flow, Sleep, T
from langgraph_s3.tracing import Call, Stats, span
from langgraph_s3.transport import DYNAMODB, S3

if TYPE_CHECKING:
    from langgraph_s3.core.reencrypt import Reencrypted

try:
    import aiobotocore.session as aiobotocore_session
    from aiobotocore.config import AioConfig
except ImportError:  # pragma: no cover - exercised by a test that hides the module
    aiobotocore_session = None


_SESSION: Any = None


def _default_session() -> Any:
    """One aiobotocore session per process: its loader keeps botocore's data once
    loaded (~0.1 s for our two clients), which every new saver would otherwise pay."""
    global _SESSION
    if _SESSION is None:
        _SESSION = aiobotocore_session.get_session()
    return _SESSION


def _client(session: Any, service: str, **kwargs: Any) -> Any:
    """A client context of ``session``: an aiobotocore session (``create_client``) or
    an aioboto3 one (``client``), so users' existing aioboto3 sessions keep working."""
    create = getattr(session, "create_client", None) or session.client
    return create(service, **kwargs)


#: botocore's data every client is made from (endpoint rules, retry and default
#: settings), then the DynamoDB model and endpoint rule set.
_CLIENT_DATA = ("endpoints", "partitions", "_retry", "sdk-default-configuration")
_CLIENT_MODELS = ("service-2", "endpoint-rule-set-1")


def _load_client_data(session: Any) -> None:
    """Load into ``session``'s cache what making the DynamoDB client reads from
    botocore's data files (40-70 ms, most of making an aiobotocore client): a
    session's loader keeps what it loaded, so the client made later only reads it
    back. Through botocore's public ``Session.get_component("data_loader")``; an
    aioboto3 session, which does not have it, loads on first use as before.

    S3's model and rule set (~30 ms more) are not loaded here: every call needs the
    index, but only values too large for it need S3, and a thread of small values is
    read and written without an S3 request (chunk items). The S3 client loads them
    when a call first needs it."""
    get_component = getattr(session, "get_component", None)
    if get_component is None:
        return
    loader = get_component("data_loader")
    for name in _CLIENT_DATA:
        loader.load_data(name)
    for kind in _CLIENT_MODELS:
        loader.load_service_model(SERVICES[DYNAMODB], kind)


def _plain_http(endpoint_url: str | None) -> dict[str, Any]:
    """``verify=False`` for an ``http://`` endpoint (moto, LocalStack), else nothing.

    aiobotocore builds each client an SSL context from the CA bundle on its first
    request (25-40 ms), even when no TLS connection will ever be made. Without
    certificate verification the context is a bare one; there is nothing to verify
    on plain HTTP. An ``https://`` endpoint (AWS) keeps aiobotocore's defaults.
    """
    if endpoint_url is not None and endpoint_url.lower().startswith("http://"):
        return {"verify": False}
    return {}


#: Making the S3 client starts making the DynamoDB one in the background
#: (``_prepare_partner``); not the other way round, as most calls need no S3 client.
_PARTNER = {S3: DYNAMODB}


class AsyncS3Saver(Driver):
    """The async twin of :class:`~langgraph_s3.S3Saver`, built on aiobotocore.

    Independent requests (every blob of a checkpoint, every checkpoint of a
    ``list`` page) go out at once, bounded by ``max_concurrency``. It reads and
    writes exactly the bytes ``S3Saver`` does, so a thread written by one is read by
    the other.

    Sync methods (``get_tuple``, ``put``, ...) work from *other* threads: they run on
    the saver's event loop. Called from the loop's own thread they raise
    ``asyncio.InvalidStateError`` instead of deadlocking.

    Args:
        bucket: S3 bucket holding checkpoint objects and value blobs.
        table: DynamoDB table holding the index.
        prefix: Key prefix inside the bucket and the table's partition keys.
        s3_client: An entered aiobotocore S3 client (also one made with aioboto3), used
            as it is.
        dynamodb_client: An entered aiobotocore DynamoDB client, used as it is.
        region_name: Region for clients the saver creates itself.
        endpoint_url: Endpoint for clients the saver creates itself.
        serde: Serializer for values and metadata; pickle fallback is refused.
        compression_level: zstd level for objects.
        session: An aiobotocore session (``aiobotocore.session.get_session()``) or an
            ``aioboto3.Session`` to create clients from.
        boto_config: A ``botocore.config.Config`` (or ``AioConfig``) merged over the
            saver's own for the clients it creates (timeouts, retries).
        home_s3_client: An entered aiobotocore S3 client for the home region's bucket
            (cross-region ``"home"`` read policy); created on first use if not given.
        kms_client: An entered aiobotocore KMS client for data keys (client-side
            encryption); created on first use if not given.
        **options: See ``SaverOptions`` (the same options as ``S3Saver``).
    """

    def _start(self) -> None:
        if aiobotocore_session is None:
            raise MissingDependencyError(
                "AsyncS3Saver needs aiobotocore, which is not installed: "
                "pip install 'langgraph-s3[async]'"
            )
        self._stack: AsyncExitStack | None = None
        self._lock: asyncio.Lock | None = None
        self._sem: asyncio.Semaphore | None = None
        self._preparing: asyncio.Future[None] | None = None
        # aiobotocore makes clients on an event loop, so they wait for the first call;
        # the session and the data the DynamoDB client is made from are loaded now, so
        # that a Lambda's init phase pays for them rather than its first invocation.
        if self._session is None:
            self._session = _default_session()
        _load_client_data(self._session)
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    # ----------------------------------------------------------- construction
    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, **kwargs: Any) -> AsyncIterator[AsyncS3Saver]:
        """Create a saver from ``s3://bucket/prefix?table=t&region=r``; owns and closes its clients.

        Args:
            conn_string: ``s3://BUCKET[/PREFIX]?table=TABLE[&region=R][&endpoint_url=U]``.
            **kwargs: Further ``AsyncS3Saver`` arguments.
        """
        saver = cls(**{**parse_conn_string(conn_string), **kwargs})
        try:
            yield saver
        finally:
            await saver.aclose()

    async def __aenter__(self) -> AsyncS3Saver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the clients this saver created (clients passed in are left open)."""
        if self._preparing is not None:
            preparing, self._preparing = self._preparing, None
            if not preparing.done():
                await asyncio.gather(preparing, return_exceptions=True)
        if self._stack is not None:
            stack, self._stack = self._stack, None
            self._clients.forget_created()
            await stack.aclose()

    async def _client(self, name: str) -> Any:
        """The client called ``name`` (``transport.S3``, ...), created on first use."""
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        client = self._clients.by_name[name]
        if client is not None:
            return client
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            client = self._clients.by_name[name]
            if client is None:
                self._stack = self._stack or AsyncExitStack()
                client = await self._stack.enter_async_context(
                    _client(
                        self._session,
                        SERVICES[name],
                        config=self._client_config(),
                        region_name=client_region(self, name),
                        endpoint_url=self.endpoint_url,
                        **_plain_http(self.endpoint_url),
                    )
                )
                self._clients.keep(name, client)
                self._prepare_partner(name)
        return client

    def _prepare_partner(self, name: str) -> None:
        """Start making the DynamoDB client in the background when the S3 one is made.

        Making an aiobotocore client is 5-10 ms of CPU. A call whose first request
        goes to S3 (the upload of a large value in ``put``) waits for the network at
        least that long, so the DynamoDB client, made during that wait, is ready when
        the flow's next request needs it. A call that starts with DynamoDB makes no
        S3 client until a request needs one: most never do (a small thread is read
        and written in DynamoDB alone), and making it would load S3's model (~30 ms).
        """
        partner = _PARTNER.get(name)
        if partner is None or self._preparing is not None:
            return
        if self._clients.by_name[partner] is None:
            self._preparing = asyncio.ensure_future(self._prepare(partner))

    async def _prepare(self, name: str) -> None:
        # A client that cannot be made is tried again when first needed, and fails there.
        with suppress(Exception):
            await self._client(name)

    async def clients(self) -> tuple[Any, Any]:
        """The aiobotocore S3 and DynamoDB clients in use (created on first use if
        none were given; they belong to this saver's event loop)."""
        return await self._client(S3), await self._client(DYNAMODB)

    def _client_config(self) -> Any:
        from langgraph_s3.version import USER_AGENT

        config = AioConfig(
            max_pool_connections=max(10, self.max_concurrency),
            retries={"mode": "standard"},
            user_agent_extra=USER_AGENT,
        )
        return merge_config(config, self._boto_config)

    # -------------------------------------------------------------- driving
    async def _perform(self, op: Any, stats: Stats | None = None) -> Any:
        if isinstance(op, Sleep):
            await asyncio.sleep(op.seconds)
            return None
        if isinstance(op, WAITS):
            # Shielded: cancelling this call must not cancel the shared future (which
            # wrap_future would), or every other call waiting on it is cancelled too.
            return await asyncio.shield(asyncio.wrap_future(op.pending))
        exchange = Exchange(self, op, self.endpoint_url, stats)
        try:
            client = exchange.on(await self._client(exchange.client_name))
            response = exchange.answered(await getattr(client, exchange.method)(**exchange.params))
            if exchange.reads_body:
                async with response["Body"] as body:
                    response = await body.read()
        except BaseException as exc:
            return exchange.failed(exc)
        return exchange.done(response)

    async def _bounded(self, op: Any, stats: Stats | None) -> Any:
        if isinstance(op, WAITS):
            # A wait holds no request slot: the upload it waits for may need one.
            return await self._perform(op, stats)
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_concurrency)
        async with self._sem:
            return await self._perform(op, stats)

    async def _perform_many(self, ops: list[Any], stats: Stats | None) -> list[Any]:
        if len(ops) == 1:
            return [await self._perform(ops[0], stats)]
        return list(await asyncio.gather(*(self._bounded(op, stats) for op in ops)))

    async def _outcome(self, op: Any, stats: Stats | None) -> tuple[Any, BaseException | None]:
        try:
            if isinstance(op, list):
                return await self._perform_many(op, stats), None
            return await self._perform(op, stats), None
        except Exception as exc:
            return None, exc

    async def run(self, flow: Flow[T], call: Call | None = None) -> T:
        """Run a core flow to its end on this saver's clients; its result (see ``S3Saver.run``)."""
        with span(self, call) as stats, Steps(flow) as steps:
            for op in steps:
                steps.answer(*await self._outcome(op, stats))
            return steps.result  # type: ignore[return-value]

    async def iterate(self, flow: Flow[Any], call: Call | None = None) -> AsyncIterator[Any]:
        """Run a core flow that emits results (``Emit``), yielding each one as it comes."""
        with span(self, call) as stats, Steps(flow) as steps:
            for op in steps:
                for value in steps.emitted():
                    yield value
                steps.answer(*await self._outcome(op, stats))
            for value in steps.emitted():
                yield value

    # ----------------------------------------------------------- async API
    async def setup(self) -> None:
        """Create the bucket and the table if they do not exist (idempotent)."""
        s3, _ = await self.clients()
        await self.run(setup(self, region=self.region_name or s3.meta.region_name), Call("setup"))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch the latest checkpoint of a thread, or the one named by ``checkpoint_id``."""
        return await self.run(get_tuple(self, config), Call.of("get_tuple", config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """List checkpoints newest first (see ``S3Saver.list``)."""
        async for tup in self.iterate(
            list_checkpoints(self, config, filter=filter, before=before, limit=limit),
            Call.of("list", config),
        ):
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint (see ``S3Saver.put``)."""
        return await self.run(
            put(self, config, checkpoint, metadata, new_versions), Call.of("put", config)
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes in one DynamoDB request."""
        # LangGraph starts this in the background from a task's done callback, then
        # wakes what waits for the task (the caller, the stream). Yield once so that
        # runs first: building and signing the request is ~2 ms on this loop.
        await asyncio.sleep(0)
        await self.run(
            put_writes(self, config, writes, task_id, task_path), Call.of("put_writes", config)
        )

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and object of a thread."""
        from langgraph_s3.core import threads

        await self.run(
            threads.delete_thread(self, thread_id), Call("delete_thread", str(thread_id))
        )

    async def adelete_tenant(self, tenant_id: str) -> int:
        """Erase a tenant: its threads, then its data key (see ``S3Saver.delete_tenant``,
        which has the same argument, result and errors: the number of threads deleted;
        ``InvalidConfigError`` for a tenant id that is not a non-empty string)."""
        from langgraph_s3.core import tenants

        erased = await self.run(tenants.shred_tenant(self, tenant_id), Call("delete_tenant"))
        return len(erased.threads)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) created by the given runs."""
        from langgraph_s3.core import threads

        await self.run(threads.delete_for_runs(self, run_ids), Call("delete_for_runs"))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's whole history to a new thread id."""
        from langgraph_s3.core import threads

        await self.run(
            threads.copy_thread(self, source_thread_id, target_thread_id),
            Call("copy_thread", str(source_thread_id)),
        )

    async def areencrypt_thread(self, thread_id: str) -> Reencrypted:
        """Seal a thread under a new data key and shred the old one (see
        ``S3Saver.reencrypt_thread``, which has the same arguments, result and errors:
        ``Reencrypted(version=None)`` for a thread with nothing stored; raises
        ``InvalidConfigError`` without ``encryption=``, ``KeyScopeError`` for a tenant's
        thread, ``ReencryptionError`` when runs kept writing under the old key)."""
        from langgraph_s3.core import reencrypt

        return await self.run(
            reencrypt.reencrypt_thread(self, thread_id), Call("reencrypt_thread", str(thread_id))
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads (see ``S3Saver.prune``)."""
        from langgraph_s3.core import threads

        await self.run(threads.prune(self, thread_ids, strategy), Call("prune"))

    async def aclaim_thread(self, thread_id: str) -> str:
        """Make this saver's region the owner of a thread (see ``S3Saver.claim_thread``)."""
        return await self.run(claim_thread(self, thread_id), Call("claim_thread", str(thread_id)))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed of delta channels along the parent chain."""
        return await self.run(
            delta_history(self, config, channels), Call.of("get_delta_channel_history", config)
        )

    # ------------------------------------------- sync API (other threads only)
    def _sync(self, coro: Any) -> Any:
        return run_on_loop(self.loop, coro)

    def claim_thread(self, thread_id: str) -> str:
        """Sync ``aclaim_thread`` for other threads (runs on the saver's loop)."""
        return self._sync(self.aclaim_thread(thread_id))  # type: ignore[no-any-return]

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Sync ``aget_tuple`` for other threads (runs on the saver's loop)."""
        return self._sync(self.aget_tuple(config))  # type: ignore[no-any-return]

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Sync ``alist`` for other threads (runs on the saver's loop)."""

        async def collect() -> list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        return iter(self._sync(collect()))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Sync ``aput`` for other threads (runs on the saver's loop)."""
        return self._sync(self.aput(config, checkpoint, metadata, new_versions))  # type: ignore[no-any-return]

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Sync ``aput_writes`` for other threads (runs on the saver's loop)."""
        self._sync(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Sync ``adelete_thread`` for other threads."""
        self._sync(self.adelete_thread(thread_id))

    def delete_tenant(self, tenant_id: str) -> int:
        """Sync ``adelete_tenant`` for other threads."""
        return self._sync(self.adelete_tenant(tenant_id))  # type: ignore[no-any-return]

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Sync ``adelete_for_runs`` for other threads."""
        self._sync(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Sync ``acopy_thread`` for other threads."""
        self._sync(self.acopy_thread(source_thread_id, target_thread_id))

    def reencrypt_thread(self, thread_id: str) -> Reencrypted:
        """Sync ``areencrypt_thread`` for other threads."""
        done: Reencrypted = self._sync(self.areencrypt_thread(thread_id))
        return done

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Sync ``aprune`` for other threads."""
        self._sync(self.aprune(thread_ids, strategy=strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Sync ``aget_delta_channel_history`` for other threads."""
        return self._sync(  # type: ignore[no-any-return]
            self.aget_delta_channel_history(config=config, channels=channels)
        )
