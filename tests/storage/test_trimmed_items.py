"""Trimmed checkpoint items (layout 6) on moto, with both savers: a thread written
trimmed, then continued with ``trim_items=False`` (what 0.5.x reads), reads as it
does on ``InMemorySaver``; a body swapped into another item is refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_s3 import CorruptObjectError, codec
from langgraph_s3.core import schema
from langgraph_s3.keys import Layout
from tests.conftest import Backend
from tests.graphs.test_graphs import Calls, build_approval, cfg, history_summary, writes_summary


def reference() -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    memory = InMemorySaver()
    graph = build_approval(memory, Calls())
    graph.invoke({"request": "r-1"}, cfg("t"))
    final = graph.invoke(Command(resume=True), cfg("t"))
    return (
        final,
        history_summary(graph.get_state_history(cfg("t"))),
        writes_summary(memory, cfg("t")),
    )


def checkpoint_items(backend: Backend) -> list[dict[str, Any]]:
    return [i for i in backend.items() if schema.is_checkpoint_item(i)]


def shapes(backend: Backend) -> list[bool]:
    """Per checkpoint item, oldest first: whether it is trimmed (checked whole)."""
    out = []
    for item in sorted(checkpoint_items(backend), key=lambda i: i[schema.SK]["S"]):
        row = schema.parse_row(item)
        assert row.body is not None
        trimmed = schema.binds_place(row.digest)
        assert (schema.SIZE in item) is not trimmed
        # a trimmed body holds a compact checkpoint record too (layout 7)
        assert (row.body[len(codec.MAGIC)] == codec.LAYOUT_RECORDS) is trimmed
        out.append(trimmed)
    return out


def test_a_trimmed_thread_continued_by_an_untrimmed_saver_reads_as_in_memory(
    inproc_backend: Backend,
) -> None:
    want_final, want_history, want_writes = reference()
    build_approval(inproc_backend.saver(), Calls()).invoke({"request": "r-1"}, cfg("t"))
    written = shapes(inproc_backend)
    assert written and all(written)
    old = inproc_backend.saver(trim_items=False)
    final = build_approval(old, Calls()).invoke(Command(resume=True), cfg("t"))
    assert final == want_final
    after = shapes(inproc_backend)
    assert after[: len(written)] == written and after[len(written) :] == [False, False, False]
    for saver in (inproc_backend.saver(), inproc_backend.saver(trim_items=False)):
        graph = build_approval(saver, Calls())
        assert history_summary(graph.get_state_history(cfg("t"))) == want_history
        assert writes_summary(saver, cfg("t")) == want_writes


def test_a_tasks_writes_item_written_by_both_shapes_reads_whole(inproc_backend: Backend) -> None:
    # A rolling upgrade: one call of a task by a saver writing both ids, the next by
    # one leaving them to the key (or the other way round); every write is read back,
    # and an item a saver writing both ids touched keeps both (what 0.11.0 reads).
    full, bare = ("task-1", True), ("", False)
    for first, then, shapes, thread in (
        (False, True, (full, full), "up"),
        (True, False, (bare, full), "down"),
        (True, True, (bare, bare), "trimmed"),
    ):
        a, b = inproc_backend.saver(trim_items=first), inproc_backend.saver(trim_items=then)
        config = a.put(cfg(thread), empty_checkpoint(), {"step": -1}, {})
        for saver, writes, shape in zip((a, b), (1, 2), shapes, strict=True):
            saver.put_writes(config, [("x", 1), ("y", 2)][:writes], "task-1", "~p")
            item = next(
                i for i in inproc_backend.items()
                if schema.is_writes_item(i) and i[schema.PK]["S"] == thread
            )  # fmt: skip
            assert (item[schema.TASK_ID]["S"], schema.CID in item) == shape, thread
        for reader in (a, b):
            got = reader.get_tuple(config)
            assert got is not None
            assert got.pending_writes == [("task-1", "x", 1), ("task-1", "y", 2)]


def test_the_async_saver_writes_and_reads_trimmed_items(server_backend: Backend) -> None:
    want_final, want_history, want_writes = reference()

    async def run() -> Any:
        async with server_backend.async_saver() as saver:
            graph = build_approval(saver, Calls())
            await graph.ainvoke({"request": "r-1"}, cfg("t"))
            final = await graph.ainvoke(Command(resume=True), cfg("t"))
        async with server_backend.async_saver(trim_items=False) as fresh:
            history = [s async for s in build_approval(fresh, Calls()).aget_state_history(cfg("t"))]
        return final, history_summary(history)

    final, history = asyncio.run(run())
    assert (final, history) == (want_final, want_history)
    assert all(shapes(server_backend))
    assert writes_summary(server_backend.saver(), cfg("t")) == want_writes


def test_a_body_swapped_into_another_item_is_refused(inproc_backend: Backend) -> None:
    saver = inproc_backend.saver()
    graph = build_approval(saver, Calls())
    graph.invoke({"request": "r-1"}, cfg("t"))
    first, latest = sorted(checkpoint_items(inproc_backend), key=lambda i: i[schema.SK]["S"])[-2:]
    inproc_backend.dynamodb().put_item(
        TableName=inproc_backend.table, Item={**latest, schema.BODY: first[schema.BODY]}
    )
    with pytest.raises(CorruptObjectError, match="moved from another checkpoint"):
        inproc_backend.saver().get_tuple(cfg("t"))


def test_a_copy_keeps_its_sources_shape_unless_the_copier_does_not_trim(
    inproc_backend: Backend,
) -> None:
    build_approval(inproc_backend.saver(trim_items=False), Calls()).invoke(
        {"request": "r-1"}, cfg("whole")
    )
    build_approval(inproc_backend.saver(), Calls()).invoke({"request": "r-1"}, cfg("bare"))
    saver, untrimmed = inproc_backend.saver(), inproc_backend.saver(trim_items=False)
    saver.copy_thread("whole", "whole-copy")  # stays readable by 0.5.x
    saver.copy_thread("bare", "bare-copy")
    untrimmed.copy_thread("bare", "bare-untrimmed")  # a rolling upgrade's copier
    by_thread: dict[str, set[bool]] = {}
    for item in checkpoint_items(inproc_backend):
        trimmed = schema.binds_place(item[schema.DIGEST]["S"])
        assert (schema.SIZE in item) is not trimmed
        by_thread.setdefault(schema.parse_row(item).thread_id, set()).add(trimmed)
    assert by_thread == {
        "whole": {False},
        "whole-copy": {False},
        "bare": {True},
        "bare-copy": {True},
        "bare-untrimmed": {False},
    }
    # writes items: layout 10 leaves out cid and empties tid
    ids: dict[str, set[tuple[bool, bool]]] = {}
    for item in inproc_backend.items():
        if schema.is_writes_item(item):
            thread = Layout.ids_of_keys(item[schema.PK]["S"], "")[0]
            held = (bool(item[schema.TASK_ID]["S"]), schema.CID in item)
            ids.setdefault(str(thread), set()).add(held)
    full, bare = {(True, True)}, {(False, False)}
    assert ids == {
        "whole": full,
        "whole-copy": full,
        "bare": bare,
        "bare-copy": bare,
        "bare-untrimmed": full,
    }
    want = history_summary(build_approval(saver, Calls()).get_state_history(cfg("bare")))
    for thread in ("whole", "whole-copy", "bare-copy", "bare-untrimmed"):
        graph = build_approval(inproc_backend.saver(), Calls())
        assert history_summary(graph.get_state_history(cfg(thread))) == want
