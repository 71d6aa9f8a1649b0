"""S3Saver and AsyncS3Saver read and continue each other's threads, and write the same bytes.

Graph runs switch saver at the interrupt (write with one, inspect and resume with the
other) and are compared with the same run on InMemorySaver. Byte identity is checked
on a hand-built checkpoint put by each saver into its own bucket and table.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_s3 import AsyncS3Saver, S3Saver
from langgraph_s3.core import schema
from tests.conftest import Backend
from tests.graphs.test_graphs import (
    Calls,
    build_approval,
    build_nested,
    cfg,
    history_summary,
    snapshot_summary,
)

# ~30 KB of text: the request, the draft and the outcome are stored as blobs.
BIG_REQUEST = "#77 " + " ".join(f"line-{i:05d}" for i in range(2_800))
# Attributes that record when an item was written, not what it holds.
#: What two savers writing the same checkpoints write differently: times, and the
#: thread's incarnation (random; checked apart).
TIME_ATTRIBUTES = frozenset({"at", "rd", "expires_at", schema.INCARNATION})


async def ahistory(graph: Any, config: RunnableConfig) -> list[Any]:
    return [s async for s in graph.aget_state_history(config)]


def reference_run() -> dict[str, Any]:
    """The approval scenario on InMemorySaver: interrupt, inspect, resume, read back."""
    calls = Calls()
    saver = InMemorySaver()
    graph = build_approval(saver, calls)
    graph.invoke({"request": BIG_REQUEST}, cfg("x"))
    paused = snapshot_summary(graph.get_state(cfg("x")))
    final = graph.invoke(Command(resume=True), cfg("x"))
    return {
        "paused": paused,
        "final": final,
        "history": history_summary(graph.get_state_history(cfg("x"))),
        "calls": dict(calls.counts),
    }


async def test_sync_writes_async_continues(server_backend: Backend) -> None:
    """A thread interrupted through S3Saver is inspected and resumed through AsyncS3Saver,
    then read back through a new S3Saver; every view equals the InMemorySaver run."""
    expected = reference_run()
    calls = Calls()
    first = build_approval(server_backend.saver(), calls)
    await asyncio.to_thread(first.invoke, {"request": BIG_REQUEST}, cfg("x"))

    async with server_backend.async_saver() as saver:
        graph = build_approval(saver, calls)
        paused = snapshot_summary(await graph.aget_state(cfg("x")))
        final = await graph.ainvoke(Command(resume=True), cfg("x"))
        async_history = history_summary(await ahistory(graph, cfg("x")))

    reader = build_approval(server_backend.saver(), calls)
    sync_history = await asyncio.to_thread(
        lambda: history_summary(reader.get_state_history(cfg("x")))
    )
    assert paused == expected["paused"]
    assert final == expected["final"]
    assert async_history == sync_history == expected["history"]
    assert dict(calls.counts) == expected["calls"]


async def test_async_writes_sync_continues(server_backend: Backend) -> None:
    """A thread interrupted through AsyncS3Saver is inspected and resumed through S3Saver,
    then read back through a new AsyncS3Saver; every view equals the InMemorySaver run."""
    expected = reference_run()
    calls = Calls()
    async with server_backend.async_saver() as saver:
        await build_approval(saver, calls).ainvoke({"request": BIG_REQUEST}, cfg("x"))

    def continue_sync() -> tuple[Any, Any, Any]:
        graph = build_approval(server_backend.saver(), calls)
        paused = snapshot_summary(graph.get_state(cfg("x")))
        final = graph.invoke(Command(resume=True), cfg("x"))
        return paused, final, history_summary(graph.get_state_history(cfg("x")))

    paused, final, sync_history = await asyncio.to_thread(continue_sync)
    async with server_backend.async_saver() as saver:
        async_history = history_summary(await ahistory(build_approval(saver, calls), cfg("x")))
    assert paused == expected["paused"]
    assert final == expected["final"]
    assert sync_history == async_history == expected["history"]
    assert dict(calls.counts) == expected["calls"]


async def test_subgraph_interrupt_crosses_savers(server_backend: Backend) -> None:
    """An interrupt inside a subgraph written by AsyncS3Saver is resumed by S3Saver (child
    namespaces are read the same way by both)."""
    calls = Calls()
    reference = build_nested(InMemorySaver(), Calls())
    reference.invoke({"topic": "tides", "notes": []}, cfg("s"))
    expected = reference.invoke(Command(resume="deep"), cfg("s"))

    async with server_backend.async_saver() as saver:
        await build_nested(saver, calls).ainvoke({"topic": "tides", "notes": []}, cfg("s"))

    def resume() -> Any:
        graph = build_nested(server_backend.saver(), calls)
        paused = graph.get_state(cfg("s"), subgraphs=True)
        assert paused.tasks[0].state.next == ("s2",)
        return graph.invoke(Command(resume="deep"), cfg("s"))

    assert await asyncio.to_thread(resume) == expected
    assert calls["s2"] == 2 and calls["s3"] == 1 and calls["finish"] == 1


# --------------------------------------------------------------------------- bytes
def fixed_checkpoints() -> list[tuple[Checkpoint, CheckpointMetadata]]:
    """Two checkpoints (ids and timestamps fixed) with inline, blob and chunked values: the
    first has a small body, the second 12 KB of incompressible inline values too small to
    move to blobs, so its body is large enough for an S3 object of its own."""
    text = " ".join(f"word{i}" for i in range(40_000))  # ~350 KB: chunked
    out = []
    noise = {f"noise{i}": os.urandom(400) for i in range(30)}
    for step, extra in ((3, {}), (4, noise)):
        cp = empty_checkpoint()
        cp["channel_values"] = {
            "small": {"n": step, "tags": ["a", "b"]},
            "blob": os.urandom(30_000),
            "doc": text,
            "empty_list": [],
            **extra,
        }
        cp["channel_versions"] = {
            name: f"{step:032}.{i:016}" for i, name in enumerate(cp["channel_values"])
        }
        metadata: CheckpointMetadata = {"source": "loop", "step": step, "run_id": "run-1"}
        metadata["note"] = "ünï"  # type: ignore[typeddict-unknown-key]
        out.append((cp, metadata))
    return out


def snapshot_storage(backend: Backend) -> tuple[dict[str, bytes], list[dict[str, Any]]]:
    """Every object (key -> bytes) and every index item without its time attributes."""
    s3 = backend.s3()
    objects = {
        key: s3.get_object(Bucket=backend.bucket, Key=key)["Body"].read()
        for key in backend.object_keys()
    }
    items = sorted(
        ({k: v for k, v in item.items() if k not in TIME_ATTRIBUTES} for item in backend.items()),
        key=lambda i: (i["pk"]["S"], i["sk"]["S"]),
    )
    return objects, items


async def test_both_savers_write_identical_bytes(moto_server: str) -> None:
    """The same checkpoints and pending writes put by S3Saver into one bucket/table and by
    AsyncS3Saver into another produce the same S3 keys with byte-identical objects and the
    same index items (digests, sizes, bodies kept in the index, metadata index, write
    records, heads), apart from the time each item was written."""
    sync_backend = Backend("server", moto_server)
    async_backend = Backend("server", moto_server)
    for b in (sync_backend, async_backend):
        b.saver().setup()
    checkpoints = fixed_checkpoints()
    writes = [("small", {"n": 2}), ("blob", os.urandom(60_000)), ("doc", "edited")]
    root: RunnableConfig = {"configurable": {"thread_id": "same", "checkpoint_ns": ""}}

    def write_sync() -> list[RunnableConfig]:
        saver: S3Saver = sync_backend.saver()
        configs: list[RunnableConfig] = []
        parent = root
        for cp, metadata in checkpoints:
            parent = saver.put(parent, cp, metadata, dict(cp["channel_versions"]))
            saver.put_writes(parent, writes, "task-1", "path")
            configs.append(parent)
        return configs

    sync_configs = await asyncio.to_thread(write_sync)
    async with AsyncS3Saver(
        async_backend.bucket,
        async_backend.table,
        region_name="us-east-1",
        endpoint_url=moto_server,
    ) as async_saver:
        async_configs: list[RunnableConfig] = []
        parent = root
        for cp, metadata in checkpoints:
            parent = await async_saver.aput(parent, cp, metadata, dict(cp["channel_versions"]))
            await async_saver.aput_writes(parent, writes, "task-1", "path")
            async_configs.append(parent)
    assert sync_configs == async_configs

    sync_objects, sync_items = snapshot_storage(sync_backend)
    async_objects, async_items = snapshot_storage(async_backend)
    assert [k for k in sync_objects if "/b/" in k], "expected blob objects"
    assert [k for k in sync_objects if "/c/" in k], "expected a checkpoint object in S3"
    assert sorted(sync_objects) == sorted(async_objects)
    for key, body in sync_objects.items():
        assert body == async_objects[key], key
    assert sync_items == async_items
    for backend in (sync_backend, async_backend):  # one incarnation per thread, 4 bytes
        marks = {i[schema.INCARNATION]["B"] for i in backend.items() if "h" in i}
        assert len(marks) == 1 and len(next(iter(marks))) == 4

    # And each saver reads what the other wrote.
    for sync_config, async_config, (cp, metadata) in zip(
        sync_configs, async_configs, checkpoints, strict=True
    ):
        by_async = await asyncio.to_thread(async_backend.saver().get_tuple, async_config)
        async with sync_backend.async_saver() as reader:
            by_sync = await reader.aget_tuple(sync_config)
        assert by_async is not None and by_sync is not None
        assert by_async.checkpoint == by_sync.checkpoint
        assert by_sync.checkpoint["channel_values"] == cp["channel_values"]
        assert by_async.metadata == by_sync.metadata == metadata
        assert by_async.pending_writes == by_sync.pending_writes
        assert [(t, c) for t, c, _ in by_sync.pending_writes] == [
            ("task-1", "small"),
            ("task-1", "blob"),
            ("task-1", "doc"),
        ]
