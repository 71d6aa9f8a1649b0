"""``S3Saver``: the synchronous saver, a thin boto3 shell over the shared protocol."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError
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
from langgraph_s3.operations import WAITS, Flow, Sleep, T
from langgraph_s3.tracing import Call, Stats, span
from langgraph_s3.transport import DYNAMODB, KMS, S3, translate_transport

if TYPE_CHECKING:
    from langgraph_s3.core.reencrypt import Reencrypted


class S3Saver(Driver):
    """A LangGraph checkpointer that stores threads in S3 with a DynamoDB index.

    Drop-in for ``InMemorySaver``: pass it as ``checkpointer=`` to
    ``StateGraph.compile``. Constructing it creates the boto3 clients it was not
    given but makes no AWS request; call :meth:`setup` once to create the bucket and
    table in development.

    Args:
        bucket: S3 bucket holding checkpoint objects and value blobs.
        table: DynamoDB table holding the index (see ``infra/storage.yaml``).
        prefix: Key prefix inside the bucket (and inside the table's partition keys),
            so several applications can share one bucket and table.
        s3_client: A boto3 S3 client to use as it is.
        dynamodb_client: A boto3 DynamoDB client to use as it is.
        region_name: Region for clients the saver creates itself.
        endpoint_url: Endpoint for clients the saver creates itself (moto, LocalStack).
        serde: Serializer for values and metadata; pickle fallback is refused.
        compression_level: zstd level for objects (1-22; 3 is fast and compact).
        home_s3_client: S3 client for the home region's bucket (cross-region ``"home"``
            read policy); created on first use if not given.
        kms_client: A boto3 KMS client for data keys (client-side encryption); created
            on first use if not given.
        session: A ``boto3.Session`` to create clients from (a named profile, assumed
            role credentials); boto3's default session if not given.
        boto_config: A ``botocore.config.Config`` merged over the saver's own for the
            clients it creates (timeouts, retries; see the README for Lambda).
        **options: See ``SaverOptions``: ``inline_threshold``, ``max_concurrency``,
            ``cache_bytes``, ``cache_ttl``, ``touch_on_read``,
            ``cross_region``, ``clock``, ``encryption`` (client-side encryption),
            ``chunk_items``, ``group_writes``, ``trim_items``.
    """

    def _start(self) -> None:
        self._clients_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        # The clients are made now rather than by the first call: each costs 50-100 ms
        # of botocore loading models and endpoint rules, which a Lambda's init phase
        # should pay, not its first invocation. The home region's client, needed only
        # for objects not replicated yet, is still made on first use.
        try:
            for name in (S3, DYNAMODB):
                self._client(name)
        except BotoCoreError as exc:
            error = translate_transport(exc, endpoint=self.endpoint_url)
            if error is exc:
                raise
            raise error from exc

    # ----------------------------------------------------------- construction
    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> Iterator[S3Saver]:
        """Create a saver from ``s3://bucket/prefix?table=t&region=r``; closes its clients.

        Args:
            conn_string: ``s3://BUCKET[/PREFIX]?table=TABLE[&region=R][&endpoint_url=U]``.
            **kwargs: Further ``S3Saver`` arguments.
        """
        saver = cls(**{**parse_conn_string(conn_string), **kwargs})
        try:
            yield saver
        finally:
            saver.close()

    def __enter__(self) -> S3Saver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the clients this saver created and its thread pool.

        Clients passed in are left open. A closed saver creates new clients if it is
        used again.
        """
        with self._clients_lock:
            pool, self._pool = self._pool, None
            created = self._clients.forget_created()
        if pool is not None:
            pool.shutdown(wait=False)
        for client in created:
            client.close()

    def _client(self, name: str) -> Any:
        """The client called ``name`` (``transport.S3``, ...), created if there is none
        (the home region's on first use; any after ``close``)."""
        client = self._clients.by_name[name]
        if client is None:
            with self._clients_lock:
                client = self._clients.by_name[name]
                if client is None:
                    client = self._clients.keep(name, self._new_client(name))
        return client

    def _new_client(self, name: str) -> Any:
        import boto3
        from botocore.config import Config

        from langgraph_s3.version import USER_AGENT

        config = Config(
            max_pool_connections=max(10, self.max_concurrency),
            retries={"mode": "standard"},
            user_agent_extra=USER_AGENT,
        )
        config = merge_config(config, self._boto_config)
        factory = self._session if self._session is not None else boto3
        return factory.client(
            SERVICES[name],
            config=config,
            region_name=client_region(self, name),
            endpoint_url=self.endpoint_url,
        )

    @property
    def s3_client(self) -> Any:
        """The boto3 S3 client in use (created with the saver if none was given)."""
        return self._client(S3)

    @property
    def dynamodb_client(self) -> Any:
        """The boto3 DynamoDB client in use (created with the saver if none was given)."""
        return self._client(DYNAMODB)

    @property
    def kms_client(self) -> Any:
        """The boto3 KMS client in use (created on first use if none was given)."""
        return self._client(KMS)

    # -------------------------------------------------------------- driving
    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._clients_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        self.max_concurrency, thread_name_prefix="langgraph-s3"
                    )
        return self._pool

    def _perform(self, op: Any, stats: Stats | None = None) -> Any:
        if isinstance(op, Sleep):
            time.sleep(op.seconds)
            return None
        if isinstance(op, WAITS):
            return op.pending.result()
        exchange = Exchange(self, op, self.endpoint_url, stats)
        try:
            client = exchange.on(self._client(exchange.client_name))
            response = exchange.answered(getattr(client, exchange.method)(**exchange.params))
            if exchange.reads_body:
                response = response["Body"].read()
        except BaseException as exc:
            return exchange.failed(exc)
        return exchange.done(response)

    def _perform_many(self, ops: list[Any], stats: Stats | None) -> list[Any]:
        if len(ops) == 1:
            return [self._perform(ops[0], stats)]
        if not ops:
            return []
        # Waits for another flow's upload run here, never on a pool worker: a worker
        # blocked on an upload queued behind it in the same pool would never wake.
        pool = self._executor()
        futures = {
            i: pool.submit(self._perform, op, stats)
            for i, op in enumerate(ops)
            if not isinstance(op, WAITS)
        }
        results: list[Any] = [None] * len(ops)
        for i, op in enumerate(ops):
            if isinstance(op, WAITS):
                results[i] = self._perform(op)
        for i, fut in futures.items():
            results[i] = fut.result()
        return results

    def _outcome(self, op: Any, stats: Stats | None) -> tuple[Any, BaseException | None]:
        try:
            if isinstance(op, list):
                return self._perform_many(op, stats), None
            return self._perform(op, stats), None
        except Exception as exc:
            return None, exc

    def run(self, flow: Flow[T], call: Call | None = None) -> T:
        """Run a core flow to its end, performing each request it yields; its result.

        This is how the collector, the command line and tools run a flow of
        :mod:`langgraph_s3.core` on this saver's clients. ``call`` names it for
        tracing (:mod:`langgraph_s3.tracing`): one span per call.
        """
        with span(self, call) as stats, Steps(flow) as steps:
            for op in steps:
                steps.answer(*self._outcome(op, stats))
            return steps.result  # type: ignore[return-value]

    def iterate(self, flow: Flow[Any], call: Call | None = None) -> Iterator[Any]:
        """Run a core flow that emits results (``Emit``), yielding each one as it comes."""
        with span(self, call) as stats, Steps(flow) as steps:
            for op in steps:
                yield from steps.emitted()
                steps.answer(*self._outcome(op, stats))
            yield from steps.emitted()

    # ----------------------------------------------------------------- public
    def setup(self) -> None:
        """Create the bucket and the table if they do not exist (idempotent).

        Meant for development and tests; production deploys ``infra/storage.yaml``.
        """
        self.run(
            setup(self, region=self.region_name or self.s3_client.meta.region_name), Call("setup")
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple: the latest of the thread, or the one named by
        ``checkpoint_id``; ``None`` if there is none.

        Args:
            config: ``{"configurable": {"thread_id": ..., "checkpoint_ns": ...,
                "checkpoint_id": ...}}``; ``checkpoint_ns`` and ``checkpoint_id`` are optional.
        """
        return self.run(get_tuple(self, config), Call.of("get_tuple", config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoints, newest first.

        Args:
            config: Thread (and optionally namespace / checkpoint) to list; ``None`` lists
                every thread under this saver's prefix (a table scan: for admin use).
            filter: Metadata key/values that must all be equal.
            before: Only checkpoints older than this config's ``checkpoint_id``.
            limit: At most this many results.
        """
        return self.iterate(
            list_checkpoints(self, config, filter=filter, before=before, limit=limit),
            Call.of("list", config),
        )

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; the DynamoDB index item written last is the commit.

        Raises:
            CheckpointConflictError: another run committed on this thread after this run
                read the latest checkpoint. Nothing was committed.
        """
        return self.run(
            put(self, config, checkpoint, metadata, new_versions), Call.of("put", config)
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes in one DynamoDB request."""
        self.run(
            put_writes(self, config, writes, task_id, task_path), Call.of("put_writes", config)
        )

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and object of a thread."""
        from langgraph_s3.core import threads

        self.run(threads.delete_thread(self, thread_id), Call("delete_thread", str(thread_id)))

    def delete_tenant(self, tenant_id: str) -> int:
        """Erase a tenant: delete every thread whose data key is the tenant's (see
        ``Encryption.tenant_of``), then every version of the tenant's data key.

        Deleting one thread of a tenant shreds nothing (the tenant's other threads use
        the key); this does. It scans the index for the tenant's threads: an
        administrator's operation, which needs ``dynamodb:Scan`` besides the rights of
        ``delete_thread`` (docs/security.md). Stop the tenant's writers first.

        Args:
            tenant_id: The tenant, as ``tenant_of`` names it.

        Returns:
            How many threads it deleted.

        Raises:
            InvalidConfigError: ``tenant_id`` is not a non-empty string.
        """
        from langgraph_s3.core import tenants

        erased = self.run(tenants.shred_tenant(self, tenant_id), Call("delete_tenant"))
        return len(erased.threads)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) created by the given runs."""
        from langgraph_s3.core import threads

        self.run(threads.delete_for_runs(self, run_ids), Call("delete_for_runs"))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's whole history to a new thread id."""
        from langgraph_s3.core import threads

        self.run(
            threads.copy_thread(self, source_thread_id, target_thread_id),
            Call("copy_thread", str(source_thread_id)),
        )

    def reencrypt_thread(self, thread_id: str) -> Reencrypted:
        """Seal a thread's whole history under a new data key and shred the old one.

        For a data key that may have leaked: the thread keeps its id, every
        checkpoint, pending write, metadata and parent link, and stays readable
        throughout. Run it while no run writes to the thread (as ``delete_thread``);
        a run that stopped midway is finished by running it again. See
        docs/security.md, "Re-encrypting a thread".

        Args:
            thread_id: The thread to re-encrypt.

        Returns:
            What was done: the new key version, checkpoints re-sealed, objects
            uploaded, old versions shredded. For a thread with nothing stored,
            ``Reencrypted(version=None)`` (nothing is done).

        Raises:
            InvalidConfigError: The saver has no ``encryption=``.
            DataKeyError: The thread has data but no data key.
            KeyScopeError: The thread is under its tenant's data key, which the
                tenant's other threads share; re-encrypting a tenant is not built.
            ReencryptionError: Runs kept writing under the old key; nothing was
                shredded. Stop them and run it again.
        """
        from langgraph_s3.core import reencrypt

        return self.run(
            reencrypt.reencrypt_thread(self, thread_id), Call("reencrypt_thread", str(thread_id))
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads: ``"keep_latest"`` (per namespace, delta-channel aware) or ``"delete"``."""
        from langgraph_s3.core import threads

        self.run(threads.prune(self, thread_ids, strategy), Call("prune"))

    def claim_thread(self, thread_id: str) -> str:
        """Make this saver's region the owner of a thread (cross-region hand-over).

        Call it only once the previous owner has stopped writing the thread and its
        last writes have replicated (see docs/cross-region.md).

        Returns:
            The region that owned the thread before.
        """
        return self.run(claim_thread(self, thread_id), Call("claim_thread", str(thread_id)))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed of delta channels along the parent chain, read in index pages."""
        return self.run(
            delta_history(self, config, channels), Call.of("get_delta_channel_history", config)
        )

    # ---------------------------------------------- async API (on a thread)
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``get_tuple`` on a worker thread. For native async use ``AsyncS3Saver``."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``list`` on a worker thread."""
        it = self.list(config, filter=filter, before=before, limit=limit)
        done = object()
        while True:
            item = await asyncio.to_thread(next, it, done)
            if item is done:
                return
            yield item  # type: ignore[misc]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``put`` on a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aclaim_thread(self, thread_id: str) -> str:
        """``claim_thread`` on a worker thread."""
        return await asyncio.to_thread(self.claim_thread, thread_id)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes`` on a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread`` on a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_tenant(self, tenant_id: str) -> int:
        """``delete_tenant`` on a worker thread."""
        return await asyncio.to_thread(self.delete_tenant, tenant_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``delete_for_runs`` on a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``copy_thread`` on a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def areencrypt_thread(self, thread_id: str) -> Reencrypted:
        """``reencrypt_thread`` on a worker thread."""
        return await asyncio.to_thread(self.reencrypt_thread, thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``prune`` on a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """``get_delta_channel_history`` on a worker thread."""
        return await asyncio.to_thread(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )
