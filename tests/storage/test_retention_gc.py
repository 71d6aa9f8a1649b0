"""Retention and garbage collection: long pauses survive, garbage goes, nothing live is lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, TypedDict

import pytest
from botocore.exceptions import ClientError
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_s3 import S3Saver, codec
from langgraph_s3.gc import collect, parse_duration
from tests.conftest import Backend
from tests.core.canned import body_versions

DAY = 86400.0
HOUR = 3600.0


class Clock:
    """A wall clock the test moves by hand (starts at the real time)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class State(TypedDict, total=False):
    request: str
    document: str
    decision: str
    outcome: str


def approval_graph(saver: S3Saver) -> Any:
    def draft(state: State) -> State:
        return {"document": state["request"] * 4000}  # ~40 KB: stored as a blob

    def approve(state: State) -> State:
        return {"decision": "yes" if interrupt("approve?") else "no"}

    def act(state: State) -> State:
        return {"outcome": f"{state['decision']}:{len(state['document'])}"}

    b = StateGraph(State)
    b.add_node("draft", draft)
    b.add_node("approve", approve)
    b.add_node("act", act)
    b.add_edge(START, "draft")
    b.add_edge("draft", "approve")
    b.add_edge("approve", "act")
    b.add_edge("act", END)
    return b.compile(checkpointer=saver)


def thread_objects(backend: Backend, saver: S3Saver, thread_id: str) -> set[str]:
    prefix = saver.layout.thread_prefix(thread_id)
    return {k for k in backend.object_keys() if k.startswith(prefix)}


def thread_storage(backend: Backend, saver: S3Saver, thread_id: str) -> set[str]:
    """A thread's objects and chunk items (layout 5: blobs kept in the index)."""
    return thread_objects(backend, saver, thread_id) | set(backend.chunk_items(thread_id))


def deleted(report: Any) -> int:
    """Objects and chunk items a collection deleted."""
    return int(report.objects_deleted + report.chunk_items_deleted)


def condemned(report: Any) -> int:
    """Objects and chunk items a collection condemned."""
    return int(report.objects_condemned + report.chunk_items_condemned)


@pytest.mark.parametrize("chunk_items", [True, False], ids=["chunk-items", "blobs"])
def test_week_long_pause_survives_then_idle_thread_is_collected(
    backend: Backend, chunk_items: bool
) -> None:
    clock = Clock()
    cfg = {"configurable": {"thread_id": "refund-7"}}
    writer = backend.saver(clock=clock, chunk_items=chunk_items)
    approval_graph(writer).invoke({"request": "refund order 7 "}, cfg)
    needed = thread_objects(backend, backend.saver(), "refund-7")
    # The document is a chunk item (layout 5, in the thread's partition), or an S3 blob.
    items = backend.chunk_items("refund-7")
    assert items if chunk_items else any("/b/" in k for k in needed), "where is the document?"

    # A week passes with the approval pending; the collector runs every day with a
    # 3.5-day idle TTL. The pending thread is kept and loses nothing.
    for day in range(1, 8):
        clock.advance(DAY)
        report = collect(backend.saver(clock=clock), grace=HOUR, idle_ttl=3.5 * DAY)
        idle = day > 3.5
        assert report.threads_kept_interrupted == (["refund-7"] if idle else [])
        assert report.threads_expired == []
        assert report.objects_deleted == 0 and report.chunk_items_deleted == 0
    assert needed <= thread_objects(backend, backend.saver(), "refund-7")
    assert backend.chunk_items("refund-7") == items

    # Approved a week later, from a brand-new saver: the graph completes.
    result = approval_graph(backend.saver(clock=clock)).invoke(Command(resume=True), cfg)
    assert result["outcome"] == f"yes:{len('refund order 7 ') * 4000}"

    # Idle past the TTL: expired at the next run, objects condemned, then deleted
    # by the first run after the grace period, not before.
    clock.advance(4 * DAY)
    report = collect(backend.saver(clock=clock), grace=HOUR, idle_ttl=3 * DAY)
    assert report.threads_expired == ["refund-7"]
    assert report.objects_deleted == 0 and report.objects_condemned >= len(needed)
    assert backend.saver().get_tuple(cfg) is None
    assert backend.chunk_items("refund-7") == {}  # gone with the thread's items
    clock.advance(HOUR / 2)
    assert collect(backend.saver(clock=clock), grace=HOUR).objects_deleted == 0
    clock.advance(HOUR)
    report = collect(backend.saver(clock=clock), grace=HOUR)
    assert report.objects_deleted >= len(needed)
    assert thread_objects(backend, backend.saver(), "refund-7") == set()


def test_idle_interrupted_thread_expires_when_configured(inproc_backend: Backend) -> None:
    clock = Clock()
    cfg = {"configurable": {"thread_id": "t-int"}}
    approval_graph(inproc_backend.saver(clock=clock)).invoke({"request": "x"}, cfg)
    clock.advance(10 * DAY)
    report = collect(inproc_backend.saver(clock=clock), idle_ttl=3 * DAY, keep_interrupted=False)
    assert report.threads_expired == ["t-int"]
    assert inproc_backend.saver().get_tuple(cfg) is None


def test_reads_refresh_idle_time_with_touch_on_read(inproc_backend: Backend) -> None:
    clock = Clock()
    saver = inproc_backend.saver(clock=clock, touch_on_read=True)
    cfg = {"configurable": {"thread_id": "read-often"}}
    approval_graph(saver).invoke({"request": "x"}, cfg)
    approval_graph(saver).invoke(Command(resume=False), cfg)  # finished, not interrupted
    for _ in range(5):
        clock.advance(2 * DAY)
        assert saver.get_tuple(cfg) is not None  # a read every two days
        report = collect(inproc_backend.saver(clock=clock), idle_ttl=3 * DAY)
        assert report.threads_expired == []
    clock.advance(4 * DAY)
    report = collect(inproc_backend.saver(clock=clock), idle_ttl=3 * DAY)
    assert report.threads_expired == ["read-often"]


@pytest.mark.parametrize("chunk_items", [True, False], ids=["chunk-items", "blobs"])
def test_orphans_of_a_failed_write_are_collected_after_grace_not_before(
    inproc_backend: Backend, chunk_items: bool
) -> None:
    clock = Clock()
    saver = inproc_backend.saver(clock=clock, chunk_items=chunk_items)
    cfg = {"configurable": {"thread_id": "half"}}
    graph = approval_graph(saver)
    graph.invoke({"request": "committed "}, cfg)
    committed = thread_storage(inproc_backend, saver, "half")
    head = saver.get_tuple(cfg)
    assert head is not None

    # A put uploads a new large value, then its commit fails (a crashed Lambda) ...
    failing = inproc_backend.saver(clock=clock, chunk_items=chunk_items)

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalServerError"}}, "TransactWriteItems")

    failing.dynamodb_client.meta.events.register("before-call.dynamodb.TransactWriteItems", refuse)
    doomed = empty_checkpoint()
    doomed["channel_values"] = {"document": "never committed " * 4000}
    doomed["channel_versions"] = {"document": failing.get_next_version(None, None)}
    with pytest.raises(ClientError):
        failing.put(head.config, doomed, {"step": 99}, doomed["channel_versions"])
    # ... and a task's writes were stored for that checkpoint before it failed
    # (LangGraph saves task writes while the checkpoint's own put is in flight).
    lost = {"configurable": {**head.config["configurable"], "checkpoint_id": doomed["id"]}}
    saver.put_writes(lost, [("document", "lost write " * 5000)], task_id="task-1")
    orphans = thread_storage(inproc_backend, saver, "half") - committed
    assert len(orphans) == 2, "one blob from the failed put, one from the lost write"
    assert all(("|b#" in k) == chunk_items for k in orphans)  # chunk items, or S3 blobs

    first = collect(inproc_backend.saver(clock=clock), grace=HOUR)
    # The put's blob is condemned; the writes item is young and still protects its blob.
    assert deleted(first) == 0 and condemned(first) == 1
    assert first.orphan_writes == 0
    clock.advance(HOUR - 60)
    assert deleted(collect(inproc_backend.saver(clock=clock), grace=HOUR)) == 0
    clock.advance(120)
    second = collect(inproc_backend.saver(clock=clock), grace=HOUR)
    assert deleted(second) == 1 and second.orphan_writes == 1
    assert condemned(second) == 1  # the lost write's blob, from now on
    clock.advance(HOUR - 60)
    assert deleted(collect(inproc_backend.saver(clock=clock), grace=HOUR)) == 0
    clock.advance(120)
    last = collect(inproc_backend.saver(clock=clock), grace=HOUR)
    assert deleted(last) == 1 and condemned(last) == 0
    assert thread_storage(inproc_backend, saver, "half") == committed
    fresh = approval_graph(inproc_backend.saver())
    assert fresh.get_state(cfg).next == ("approve",)
    assert fresh.invoke(Command(resume=True), cfg)["outcome"].startswith("yes:")


def test_collector_never_removes_what_a_committed_checkpoint_needs(
    server_backend: Backend,
) -> None:
    """Writers, a pruner and the collector run at once; afterwards every committed
    checkpoint loads completely."""
    grace, ttl = 1.0, 0.1  # grace > 2 * (cache_ttl + a put)
    stop = threading.Event()
    errors: list[BaseException] = []
    threads = [f"w{i}" for i in range(3)]

    def writer(thread_id: str) -> None:
        saver = server_backend.saver(cache_ttl=ttl, chunk_items=False)  # S3 blobs
        graph = approval_graph(saver)
        cfg = {"configurable": {"thread_id": thread_id}}
        n = 0
        # w0 cycles through three documents, so blobs that pruning orphaned come back
        # into use (the race the grace period exists for); the others always write new
        # documents, so pruning leaves real garbage for the collector.
        cycle = 3 if thread_id == "w0" else 10**9
        try:
            while not stop.is_set():
                graph.invoke({"request": f"{thread_id}-{n % cycle} "}, cfg)
                graph.invoke(Command(resume=n % 2 == 0), cfg)
                n += 1
        except BaseException as exc:
            errors.append(exc)

    def pruner() -> None:
        saver = server_backend.saver(cache_ttl=ttl)
        try:
            while not stop.is_set():
                saver.prune(threads, strategy="keep_latest")
                time.sleep(0.15)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(t,)) for t in threads]
    workers.append(threading.Thread(target=pruner))
    for w in workers:
        w.start()
    removed = 0
    deadline = time.time() + 8
    while time.time() < deadline:
        report = collect(server_backend.saver(), grace=grace)
        assert not report.errors, report.errors
        removed += deleted(report)
        time.sleep(0.1)
    stop.set()
    for w in workers:
        w.join()
    assert not errors, errors
    # Pruning left garbage; on a slow machine the collector may not have seen it
    # twice a grace period apart while the writers ran, so give it that chance now.
    for _ in range(3):
        if removed:
            break
        time.sleep(grace)
        removed += deleted(collect(server_backend.saver(), grace=grace))
    assert removed > 0, "the collector should have had garbage to delete"

    reader = server_backend.saver()
    loaded = 0
    for thread_id in threads:
        for tup in reader.list({"configurable": {"thread_id": thread_id}}):
            full = server_backend.saver().get_tuple(tup.config)
            assert full is not None and full.checkpoint["id"] == tup.checkpoint["id"]
            loaded += 1
    assert loaded >= len(threads)


def test_chunks_named_only_by_a_chunk_list_are_kept_then_collected(
    inproc_backend: Backend,
) -> None:
    """A 1.6 MB document (about 100 chunks) is named through its chunk list by the
    task's write and by the checkpoints (layout 3). After an edit and a prune, most
    of its chunks are in the first pack and named only by the new list, in another
    pack: the collector reads the list and keeps them, and collects everything once
    the thread has expired."""
    doc = os.urandom(800_000).hex()
    edited = doc[:1000] + "x" * 2000 + doc[3000:]

    def draft(state: State) -> State:
        return {"document": doc if state["request"] == "first" else edited}

    b = StateGraph(State)
    b.add_node("draft", draft)
    b.add_edge(START, "draft")
    b.add_edge("draft", END)
    cfg = {"configurable": {"thread_id": "doc-1"}}
    for request in ("first", "edit"):
        b.compile(checkpointer=inproc_backend.saver()).invoke({"request": request}, cfg)
    saver = inproc_backend.saver()
    saver.prune(["doc-1"], strategy="keep_latest")
    stored = thread_objects(inproc_backend, saver, "doc-1")
    assert any(k.endswith(".pack") for k in stored)
    assert not any("/c/" in k for k in stored)
    bodies = [i["b"]["B"] for i in inproc_backend.items() if "b" in i]
    # trimmed (layout 7), naming a list without a lead: its chunks are in two packs
    lists = (codec.LAYOUT_RECORDS, codec.LAYOUT_LISTS)
    assert bodies and all(body_versions(body) == lists for body in bodies)

    deleted = 0
    for _ in range(2):  # with no grace, a second run deletes whatever the first condemned
        report = collect(inproc_backend.saver(), grace=0)
        assert not report.errors
        deleted += report.objects_deleted
    got = inproc_backend.saver().get_tuple(cfg)
    assert got is not None and got.checkpoint["channel_values"]["document"] == edited
    assert deleted == len(stored - thread_objects(inproc_backend, saver, "doc-1"))

    clock = Clock()
    clock.advance(2 * DAY)  # idle past its TTL: the index goes, the objects are garbage
    report = collect(inproc_backend.saver(clock=clock), grace=0, idle_ttl=DAY)
    assert report.threads_expired == ["doc-1"]
    collect(inproc_backend.saver(clock=clock), grace=0)
    assert not thread_objects(inproc_backend, saver, "doc-1")


def test_dry_run_deletes_nothing_and_cli_reports(server_backend: Backend) -> None:
    saver = server_backend.saver()
    approval_graph(saver).invoke({"request": "x "}, {"configurable": {"thread_id": "cli"}})
    saver.delete_thread("cli")  # index gone: everything is garbage now
    before = server_backend.object_keys()
    env = {"AWS_ENDPOINT_URL": server_backend.endpoint_url or ""}
    cmd = [
        sys.executable,
        "-m",
        "langgraph_s3",
        "--bucket",
        server_backend.bucket,
        "--table",
        server_backend.table,
        "--region",
        "us-east-1",
        "--endpoint-url",
        server_backend.endpoint_url or "",
        "gc",
        "--grace",
        "0s",
        "--json",
        "--quiet",
    ]
    out = subprocess.run(
        [*cmd, "--dry-run"],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, **env},
    )
    report = json.loads(out.stdout)
    assert report["dry_run"] is True and report["objects_deleted"] == 0
    assert server_backend.object_keys() == before
    # delete_thread already removed the objects: nothing of ours is left to collect
    assert report["objects"] == 0


def test_foreign_objects_under_the_prefix_are_never_touched(inproc_backend: Backend) -> None:
    saver = inproc_backend.saver(prefix="app/")
    s3 = inproc_backend.s3()
    foreign = ["app/readme.txt", "app/t1/b/not-a-digest", "app/nested/t2/b/" + "a" * 64]
    for key in foreign:
        s3.put_object(Bucket=inproc_backend.bucket, Key=key, Body=b"keep me")
    clock = Clock()
    for _ in range(3):
        collect(inproc_backend.saver(prefix="app/", clock=clock), grace=0)
        clock.advance(DAY)
    assert set(foreign) <= set(inproc_backend.object_keys())
    assert saver.layout.prefix == "app/"


def test_garbage_over_many_listing_pages_goes_and_the_scratch_store_is_removed(
    inproc_backend: Backend, tmp_path: Any
) -> None:
    # The sweep lists and deletes a page (1000 keys) at a time; the index items and
    # referenced keys live in a scratch file under workdir during the run.
    clock = Clock()
    saver = inproc_backend.saver(clock=clock)
    for n in range(3):
        approval_graph(saver).invoke({"request": f"{n} "}, {"configurable": {"thread_id": f"t{n}"}})
    live = set(inproc_backend.object_keys())
    s3 = inproc_backend.s3()
    garbage = [f"{saver.layout.thread_prefix('t1')}b/{n:064x}" for n in range(1500)]
    for key in garbage:
        s3.put_object(Bucket=inproc_backend.bucket, Key=key, Body=b"LGS3")
    first = collect(saver, grace=HOUR, workdir=str(tmp_path))
    assert (first.objects, first.objects_condemned, first.objects_deleted) == (
        len(live) + 1500,
        1500,
        0,
    )
    assert list(tmp_path.iterdir()) == []
    clock.advance(2 * HOUR)
    second = collect(saver, grace=HOUR, workdir=str(tmp_path), dry_run=True)
    assert second.objects_deleted == 1500 and len(inproc_backend.object_keys()) == len(live) + 1501
    third = collect(saver, grace=HOUR, workdir=str(tmp_path))
    assert third.objects_deleted == 1500 and third.threads == 3
    assert third.scratch_bytes > 0
    assert set(inproc_backend.object_keys()) == live | {saver.layout.prefix + ".gc/state"}
    assert list(tmp_path.iterdir()) == []
    for n in range(3):  # every thread still resumes
        out = approval_graph(saver).invoke(
            Command(resume=True), {"configurable": {"thread_id": f"t{n}"}}
        )
        assert out["outcome"] == f"yes:{len(f'{n} ') * 4000}"


def test_parse_duration() -> None:
    assert parse_duration("90") == 90
    assert parse_duration("15m") == 900
    assert parse_duration("7d") == 7 * DAY
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")
