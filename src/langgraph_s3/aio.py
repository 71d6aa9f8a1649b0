"""``AsyncS3Saver``: the natively async saver, a thin aiobotocore shell over the shared protocol.

Needs the ``async`` extra: ``pip install 'langgraph-s3[async]'``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from typing_extensions import Unpack

from langgraph_s3.core import Emit, SaverCore, SaverOptions, check_options
from langgraph_s3.core.commit import claim_thread, put
from langgraph_s3.core.history import delta_history, list_checkpoints
from langgraph_s3.core.read import get_tuple
from langgraph_s3.core.setup import setup
from langgraph_s3.core.threads import copy_thread, delete_for_runs, delete_thread, prune
from langgraph_s3.core.writes import put_writes
from langgraph_s3.errors import MissingDependencyError
from langgraph_s3.operations import Flow, S3Get, Sleep, T, WaitUpload
from langgraph_s3.connection import merge_config, parse_conn_string
from langgraph_s3.transport import (
    DYNAMODB,
    S3,
    call_spec,
    failed,
    finish,
    log_request,
    settle,
    translate_transport,
)

try:
    import aiobotocore.session as aiobotocore_session
    from aiobotocore.config import AioConfig
except ImportError:  # pragma: no cover - exercised by a test that hides the module
    aiobotocore_session = None


_SESSION: Any = None


def _default_session() -> Any:
    """One aiobotocore session per process: creating one costs ~0.2 s (it loads
    botocore's data), which every new saver would otherwise pay on its first call."""
    global _SESSION
    if _SESSION is None:
        _SESSION = aiobotocore_session.get_session()
    return _SESSION


def _client(session: Any, service: str, **kwargs: Any) -> Any:
    """A client context of ``session``: an aiobotocore session (``create_client``) or
    an aioboto3 one (``client``), so users' existing aioboto3 sessions keep working."""
    create = getattr(session, "create_client", None) or session.client
    return create(service, **kwargs)


class AsyncS3Saver(SaverCore):
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
        **options: See ``SaverOptions`` (the same options as ``S3Saver``).
    """

    def __init__(
        self,
        # Defaults only so that a misspelt name (tabel=, table_name=) reaches
        # check_options, which names the right one; empty ones are refused there.
        bucket: str = "",
        table: str = "",
        prefix: str = "",
        s3_client: Any = None,
        dynamodb_client: Any = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        serde: SerializerProtocol | None = None,
        compression_level: int = 3,
        *,
        session: Any = None,
        home_s3_client: Any = None,
        boto_config: Any = None,
        **options: Unpack[SaverOptions],
    ) -> None:
        if aiobotocore_session is None:
            raise MissingDependencyError(
                "AsyncS3Saver needs aiobotocore, which is not installed: "
                "pip install 'langgraph-s3[async]'"
            )
        check_options(AsyncS3Saver, options)
        super().__init__(
            bucket=bucket,
            table=table,
            prefix=prefix,
            serde=serde,
            compression_level=compression_level,
            region_name=region_name,
            **options,
        )
        self.endpoint_url = endpoint_url
        self._session = session
        self._boto_config = boto_config
        self._created: list[Any] = []  # the clients aclose() closes: only ours
        self._s3 = s3_client
        self._ddb = dynamodb_client
        self._home_s3 = home_s3_client
        self._stack: AsyncExitStack | None = None
        self._lock: asyncio.Lock | None = None
        self._sem: asyncio.Semaphore | None = None
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
        if self._stack is not None:
            stack, self._stack = self._stack, None
            created, self._created = self._created, []
            for attr in ("_s3", "_ddb", "_home_s3"):
                if any(getattr(self, attr) is c for c in created):
                    setattr(self, attr, None)
            await stack.aclose()

    async def _clients(self) -> tuple[Any, Any]:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        if self._s3 is not None and self._ddb is not None:
            return self._s3, self._ddb
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._s3 is None or self._ddb is None:
                session = self._session or _default_session()
                config = self._client_config()
                kw = {"region_name": self.region_name, "endpoint_url": self.endpoint_url}
                stack = self._stack or AsyncExitStack()
                self._stack = stack
                if self._s3 is None:
                    self._s3 = await stack.enter_async_context(
                        _client(session, "s3", config=config, **kw)
                    )
                    self._created.append(self._s3)
                if self._ddb is None:
                    self._ddb = await stack.enter_async_context(
                        _client(session, "dynamodb", config=config, **kw)
                    )
                    self._created.append(self._ddb)
        return self._s3, self._ddb

    def _client_config(self) -> Any:
        from langgraph_s3.version import USER_AGENT

        config = AioConfig(
            max_pool_connections=max(10, self.max_concurrency),
            retries={"mode": "standard"},
            user_agent_extra=USER_AGENT,
        )
        return merge_config(config, self._boto_config)

    async def _home_client(self) -> Any:
        if self._home_s3 is None:
            assert self.cross_region is not None
            await self._clients()
            assert self._stack is not None
            session = self._session or _default_session()
            self._home_s3 = await self._stack.enter_async_context(
                _client(
                    session,
                    "s3",
                    config=self._client_config(),
                    region_name=self.cross_region.home_region,
                    endpoint_url=self.endpoint_url,
                )
            )
            self._created.append(self._home_s3)
        return self._home_s3

    # -------------------------------------------------------------- driving
    async def _perform(self, op: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(op, Sleep):
            await asyncio.sleep(op.seconds)
            return None
        if isinstance(op, WaitUpload):
            return await asyncio.wrap_future(op.pending)
        home_bucket = self.cross_region.home_bucket if self.cross_region else None
        target, method, params = call_spec(op, self.bucket, home_bucket)
        started = time.perf_counter()
        try:
            s3, ddb = await self._clients()
            client = {S3: s3, DYNAMODB: ddb}.get(target) or await self._home_client()
            response = await getattr(client, method)(**params)
            if isinstance(op, S3Get):
                async with response["Body"] as body:
                    response = await body.read()
        except ClientError as exc:
            settle(op, False)
            log_request(op, method, time.perf_counter() - started, None, False)
            return failed(
                op, exc, bucket=self.bucket, table=self.table, region=self.request_region()
            )
        except BotoCoreError as exc:
            settle(op, False)
            raise translate_transport(exc, endpoint=self.endpoint_url) from exc
        except BaseException:
            settle(op, False)
            raise
        settle(op, True)
        log_request(op, method, time.perf_counter() - started, response, True)
        return finish(op, response)

    async def _bounded(self, op: Any) -> Any:
        if isinstance(op, WaitUpload):
            # A wait holds no request slot: the upload it waits for may need one.
            return await self._perform(op)
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_concurrency)
        async with self._sem:
            return await self._perform(op)

    async def _perform_many(self, ops: list[Any]) -> list[Any]:
        if len(ops) == 1:
            return [await self._perform(ops[0])]
        return list(await asyncio.gather(*(self._bounded(op) for op in ops)))

    async def run(self, flow: Flow[T]) -> T:
        """Run a core flow to its end on this saver's clients; its result (see ``S3Saver.run``)."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                op = flow.throw(error) if error is not None else flow.send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            value = None  # the flow has it: do not hold it through the next request
            value, error = await self._outcome(op)

    async def _outcome(self, op: Any) -> tuple[Any, BaseException | None]:
        # Errors go back into the flow, so its cleanup (finally) runs at once.
        try:
            result = (
                await self._perform_many(op) if isinstance(op, list) else await self._perform(op)
            )
        except Exception as exc:
            return None, exc
        return result, None

    async def iterate(self, flow: Flow[Any]) -> AsyncIterator[Any]:
        """Run a core flow that emits results (``Emit``), yielding each one as it comes."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                op = flow.throw(error) if error is not None else flow.send(value)
            except StopIteration:
                return
            if isinstance(op, Emit):
                value, error = None, None
                yield op.value
            else:
                value, error = await self._outcome(op)

    # ----------------------------------------------------------- async API
    async def setup(self) -> None:
        """Create the bucket and the table if they do not exist (idempotent)."""
        s3, _ = await self._clients()
        await self.run(setup(self, region=self.region_name or s3.meta.region_name))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch the latest checkpoint of a thread, or the one named by ``checkpoint_id``."""
        return await self.run(get_tuple(self, config))

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
            list_checkpoints(self, config, filter=filter, before=before, limit=limit)
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
        return await self.run(put(self, config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes in one DynamoDB request."""
        await self.run(put_writes(self, config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and object of a thread."""
        await self.run(delete_thread(self, thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) created by the given runs."""
        await self.run(delete_for_runs(self, run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's whole history to a new thread id."""
        await self.run(copy_thread(self, source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads (see ``S3Saver.prune``)."""
        await self.run(prune(self, thread_ids, strategy))

    async def aclaim_thread(self, thread_id: str) -> str:
        """Make this saver's region the owner of a thread (see ``S3Saver.claim_thread``)."""
        return await self.run(claim_thread(self, thread_id))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed of delta channels along the parent chain."""
        return await self.run(delta_history(self, config, channels))

    # ------------------------------------------- sync API (other threads only)
    def _sync(self, coro: Any) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is self.loop:
            coro.close()
            raise asyncio.InvalidStateError(
                "synchronous calls to AsyncS3Saver are only allowed from a thread other than "
                "its event loop's; on the loop use the async API (await saver.aget_tuple(...), "
                "await graph.ainvoke(...)), or use S3Saver for sync code"
            )
        if self.loop is None or not self.loop.is_running():
            coro.close()
            raise asyncio.InvalidStateError(
                "AsyncS3Saver's event loop is not running: sync calls are served by the loop "
                "the saver was created or first used on"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

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

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Sync ``adelete_for_runs`` for other threads."""
        self._sync(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Sync ``acopy_thread`` for other threads."""
        self._sync(self.acopy_thread(source_thread_id, target_thread_id))

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
