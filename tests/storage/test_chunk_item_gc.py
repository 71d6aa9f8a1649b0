"""Chunk items (layout 5) on moto: the collector keeps those a live checkpoint names and
deletes the others after two runs, a rewrite racing its delete survives, and whole-thread
deletes (``delete_thread``, ``prune(strategy="delete")``, idle-thread expiry) leave none.
``prune`` and ``delete_for_runs`` leave theirs to the collector. A chunk item named only
from inside a chunk list is live too."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import S3Saver
from langgraph_s3.chunking import _cdc
from langgraph_s3.core import schema
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.entries import IN_INDEX, Listed
from langgraph_s3.core.lists import LIST_MIN
from langgraph_s3.core.objects import read_envelopes, read_lists
from langgraph_s3.gc import collect
from tests.conftest import Backend
from tests.storage.test_retention_gc import DAY, HOUR, Clock

#: One chunk stored as a chunk item: the body (over 4 KiB) moves it out of the index,
#: and at ~5 KB it costs 6 write units, fewer than a PUT's 8.
SIZE = 5000


def chunk_items(backend: Backend, thread: str = "t1") -> dict[str, bytes]:
    """The thread's chunk items: sort key -> the frame each holds."""
    return {k.split("|", 1)[1]: frame for k, frame in backend.chunk_items(thread).items()}


def put_steps(saver: S3Saver, n: int, thread: str = "t1", run: str = "r1") -> list[Any]:
    """``n`` checkpoints in a row, each with a new ~10 KB document (one chunk item)."""
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    configs = []
    for step in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"doc": os.urandom(SIZE).hex(), "step": step}
        cp["channel_versions"] = {"doc": str(step + 1), "step": str(step + 1)}
        config = saver.put(config, cp, {"step": step, "run_id": run}, cp["channel_versions"])
        configs.append(config)
    return configs


def pruned_thread(backend: Backend, n: int) -> tuple[Clock, S3Saver, list[Any]]:
    """``n`` checkpoints of t1 (a chunk item each), pruned to the latest: the other
    ``n - 1`` chunk items are garbage, left to the collector."""
    clock = Clock()
    saver = backend.saver(clock=clock)
    configs = put_steps(saver, n)
    assert not [k for k in backend.object_keys() if "/b/" in k]
    saver.prune(["t1"], strategy="keep_latest")
    assert len(chunk_items(backend)) == n
    return clock, saver, configs


def test_collection_keeps_the_chunk_items_live_checkpoints_name_and_deletes_the_rest(
    inproc_backend: Backend,
) -> None:
    clock, saver, configs = pruned_thread(inproc_backend, 3)
    latest = saver.get_tuple(configs[-1])
    assert latest is not None

    first = collect(inproc_backend.saver(clock=clock), grace=HOUR)
    assert (first.chunk_items, first.chunk_items_referenced) == (3, 1)
    assert first.chunk_items_condemned == 2 and first.chunk_items_deleted == 0
    clock.advance(HOUR)
    second = collect(inproc_backend.saver(clock=clock), grace=HOUR)
    assert second.chunk_items_deleted == 2 and second.chunk_item_bytes_deleted > 2 * SIZE
    assert second.chunk_items_referenced == 1 and second.chunk_items_condemned == 0
    assert len(chunk_items(inproc_backend)) == 1
    again = inproc_backend.saver().get_tuple(configs[-1])  # a cold saver reads it all
    assert again is not None and again.checkpoint == latest.checkpoint


def test_a_chunk_item_written_again_while_the_collector_deletes_it_survives(
    inproc_backend: Backend,
) -> None:
    clock, saver, configs = pruned_thread(inproc_backend, 2)
    (latest,) = [i for i in saver.list({"configurable": {"thread_id": "t1"}})]
    assert latest.config == configs[-1]
    collect(inproc_backend.saver(clock=clock), grace=HOUR)
    clock.advance(HOUR)

    # A writer stores the condemned chunk again just before the collector's delete
    # (say, a put of the same value by a saver that did not know it was stored).
    gc = inproc_backend.saver(clock=clock)
    rewrites: list[str] = []

    def rewrite(params: dict[str, Any], **_: Any) -> None:
        key = params["Key"]
        if key[schema.SK]["S"].startswith(schema.CHUNK_SK_PREFIX):
            sk = key[schema.SK]["S"]
            frame = chunk_items(inproc_backend)[sk]
            name = bytes.fromhex(sk[len(schema.CHUNK_SK_PREFIX) :])
            fresh = schema.chunk_item("t1", name, frame, int(clock() * 1000))
            inproc_backend.dynamodb().put_item(TableName=inproc_backend.table, Item=fresh)
            rewrites.append(sk)

    gc.dynamodb_client.meta.events.register("before-parameter-build.dynamodb.DeleteItem", rewrite)
    report = collect(gc, grace=HOUR)
    assert len(rewrites) == 1 and report.chunk_items_deleted == 0
    assert rewrites[0] in chunk_items(inproc_backend)
    # The next runs judge it afresh: two runs grace apart, then it goes.
    collect(inproc_backend.saver(clock=clock), grace=HOUR)
    clock.advance(HOUR)
    last = collect(inproc_backend.saver(clock=clock), grace=HOUR)
    assert last.chunk_items_deleted == 1 and rewrites[0] not in chunk_items(inproc_backend)


def test_delete_for_runs_leaves_chunk_items_to_the_collector(inproc_backend: Backend) -> None:
    clock = Clock()
    saver = inproc_backend.saver(clock=clock)
    put_steps(saver, 2, run="r1")
    put_steps(saver, 1, run="r2")
    saver.delete_for_runs(["r2"])
    assert len(chunk_items(inproc_backend)) == 3
    report = collect(inproc_backend.saver(clock=clock), grace=0)  # no grace: one run
    assert report.chunk_items_deleted == 1 and report.chunk_items_referenced == 2
    assert len(chunk_items(inproc_backend)) == 2


def test_whole_thread_deletes_leave_no_chunk_item(inproc_backend: Backend) -> None:
    clock = Clock()
    saver = inproc_backend.saver(clock=clock)
    for thread in ("gone", "pruned", "idle", "busy"):
        put_steps(saver, 2, thread=thread)
        assert len(chunk_items(inproc_backend, thread)) == 2
    saver.delete_thread("gone")
    saver.prune(["pruned"], strategy="delete")
    assert not [i for i in inproc_backend.items() if i[schema.PK]["S"] in ("gone", "pruned")]
    clock.advance(2 * DAY)
    put_steps(inproc_backend.saver(clock=clock), 1, thread="busy")
    report = collect(inproc_backend.saver(clock=clock), grace=HOUR, idle_ttl=DAY)
    assert report.threads_expired == ["idle"] and report.chunk_items == 3  # busy's
    assert not [i for i in inproc_backend.items() if i[schema.PK]["S"] == "idle"]
    assert len(chunk_items(inproc_backend, "busy")) == 3


def test_delete_tenant_leaves_no_chunk_item_of_its_threads(inproc_backend: Backend) -> None:
    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    ring = StaticKeyRing({"r": os.urandom(32)}, current="r")
    enc = Encryption(ring, tenant_of=lambda thread: thread.split(":")[0])
    saver = inproc_backend.saver(encryption=enc)
    for thread in ("acme:1", "acme:2", "beta:1"):
        put_steps(saver, 2, thread=thread)
        assert len(chunk_items(inproc_backend, thread)) == 2
    assert saver.delete_tenant("acme") == 2
    assert not [i for i in inproc_backend.items() if i[schema.PK]["S"].startswith("acme:")]
    assert len(chunk_items(inproc_backend, "beta:1")) == 2


def growing_document(saver: S3Saver, steps: int) -> tuple[Any, bytes]:
    """A document of ``LIST_MIN - 2`` chunks (one pack), then ``steps`` appends of
    700 bytes: each a new piece, stored as a chunk item until the entry has more than
    ``LIST_MIN`` chunks and becomes a chunk list, which names the earlier pieces where
    they are. The last checkpoint's config and the document."""
    data = random.Random(7).randbytes(2_000_000)  # the same chunks on every run
    doc = data[: sum(len(c) for c in _cdc(data)[: LIST_MIN - 2])]
    more = random.Random(2)  # appends in which FastCDC finds no boundary
    config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    for step in range(steps + 1):
        if step:
            doc += more.randbytes(700)
        cp = empty_checkpoint()
        cp["channel_values"] = {"doc": doc}
        cp["channel_versions"] = {"doc": str(step + 1)}
        config = saver.put(config, cp, {"step": step}, cp["channel_versions"])
    return config, doc


def listed_entry(saver: S3Saver, backend: Backend) -> Any:
    """What the chunk list of ``doc`` in t1's only checkpoint holds."""
    items = [i for i in backend.items() if i["pk"]["S"] == "t1"]
    (row,) = [schema.parse_row(i) for i in items if schema.is_checkpoint_item(i)]
    saver.run(thread_key(saver, "t1"))
    (env,) = saver.run(read_envelopes(saver, [row]))
    entry = env.channels["doc"]
    assert isinstance(entry, Listed)
    (blobs,) = saver.run(read_lists(saver, [("t1", entry)])).values()
    return blobs


@pytest.mark.parametrize("sealed", [False, True])
def test_a_chunk_item_named_only_by_a_chunk_list_is_kept(backend: Backend, sealed: bool) -> None:
    """Pieces stored as chunk items, then named by the chunk list the grown entry
    became: once prune drops the checkpoints whose own entries named them, the list is
    their only reference, and two collections ``grace`` apart keep them (also sealed,
    where the list and the items are sealed and named by keyed digests)."""
    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    options: dict[str, Any] = {}
    if sealed:
        ring = StaticKeyRing({"r": os.urandom(32)}, current="r")
        options["encryption"] = Encryption(ring)
    clock = Clock()
    saver = backend.saver(clock=clock, **options)
    config, doc = growing_document(saver, 3)
    saver.prune(["t1"], strategy="keep_latest")
    blobs = listed_entry(backend.saver(**options), backend)
    in_list = {d for d, s in zip(blobs.digests, blobs.spans or (), strict=True) if s is IN_INDEX}
    items = chunk_items(backend)
    assert len(in_list) == 2 and {schema.CHUNK_SK_PREFIX + d.hex() for d in in_list} == set(items)

    first = collect(backend.saver(clock=clock, **options), grace=HOUR)
    assert first.chunk_items == first.chunk_items_referenced == 2
    assert first.chunk_items_condemned == 0 and first.threads_protected == []
    clock.advance(HOUR)
    second = collect(backend.saver(clock=clock, **options), grace=HOUR)
    assert second.chunk_items_deleted == 0 and second.chunk_items_referenced == 2
    assert chunk_items(backend) == items
    again = backend.saver(**options).get_tuple(config)  # a cold saver reads it all
    assert again is not None and again.checkpoint["channel_values"]["doc"] == doc
