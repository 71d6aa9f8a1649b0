"""Content addressing: unchanged large values are stored once, small values are inlined.

Objects are counted in the bucket (what is stored) and S3 PutObject requests are
counted on the saver's client (what is sent), so both a re-upload of an existing
blob and a second copy of the same content are caught.
"""

from __future__ import annotations

import os
import random
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.graph import END, START, StateGraph

from langgraph_s3 import S3Saver
from langgraph_s3.core import DEFAULT_INLINE_THRESHOLD, objects
from langgraph_s3.keys import encode_segment
from tests.conftest import Backend, RequestLog
from tests.graphs.test_graphs import checkpoint_items


class PutKeys:
    """Records the Key of every PutObject a boto3 client sends."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def attach(self, client: Any) -> Any:
        def record(params: dict[str, Any], **_: Any) -> None:
            self.keys.append(params["Key"])

        client.meta.events.register("before-parameter-build.s3.PutObject", record)
        return client


def cfg(thread_id: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **extra}}


def blob_objects(backend: Backend, thread_id: str) -> dict[str, int]:
    """Key -> size of every object under the thread's ``b/`` prefix."""
    prefix = f"{encode_segment(thread_id)}/b/"
    s3 = backend.s3()
    out: dict[str, int] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=backend.bucket, Prefix=prefix):
        out.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
    return out


def checkpoint_objects(backend: Backend, thread_id: str) -> list[str]:
    """Checkpoint objects in S3 (small checkpoint bodies may live in the index item)."""
    prefix = f"{encode_segment(thread_id)}/c/"
    return [k for k in backend.object_keys() if k.startswith(prefix)]


def checkpoint_count(backend: Backend, thread_id: str) -> int:
    """Committed checkpoints of the thread, counted in the index."""
    return len(checkpoint_items(backend, thread_id))


def stored_bytes(backend: Backend) -> int:
    """Bytes of every S3 object plus checkpoint bodies kept inside index items."""
    in_items = sum(len(i["b"]["B"]) for i in backend.items() if "b" in i and "h" in i)
    return backend.object_bytes() + in_items


def instrumented(backend: Backend, log: RequestLog, puts: PutKeys, **kw: Any) -> S3Saver:
    """A fresh saver whose S3 and DynamoDB requests are counted and whose puts are recorded."""
    s3 = puts.attach(log.attach(backend.s3()))
    ddb = log.attach(backend.dynamodb())
    return backend.saver(s3_client=s3, dynamodb_client=ddb, **kw)  # type: ignore[no-any-return]


class DocState(TypedDict, total=False):
    doc: str
    count: int
    target: int


def build_ticker(checkpointer: Any, doc: str | None = None) -> Any:
    """``load`` sets ``doc`` (when given) once; then ``tick`` loops on itself, changing only
    ``count``, until ``count`` reaches ``target``."""

    def load(state: DocState) -> DocState:
        return {"doc": doc, "count": 0} if doc is not None else {}

    def tick(state: DocState) -> DocState:
        return {"count": state["count"] + 1}

    def again(state: DocState) -> str:
        return "tick" if state["count"] < state["target"] else END

    builder = StateGraph(DocState)
    builder.add_node("load", load)
    builder.add_node("tick", tick)
    builder.add_edge(START, "load")
    builder.add_edge("load", "tick")
    builder.add_conditional_edges("tick", again, ["tick", END])
    return builder.compile(checkpointer=checkpointer)


def manual_checkpoint(values: dict[str, Any], version: str) -> Checkpoint:
    """A checkpoint holding ``values``, every channel at ``version``."""
    cp = empty_checkpoint()
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = {name: version for name in values}
    return cp


#: per saver, the last checkpoint it put per thread: the parent of its next one, as in
#: a LangGraph run (a checkpoint without parent starts a thread, and makes the saver
#: forget what it knew of the thread: docs/retention.md)
_LAST: weakref.WeakKeyDictionary[S3Saver, dict[str, str]] = weakref.WeakKeyDictionary()


def put_values(saver: S3Saver, thread_id: str, values: dict[str, Any], version: str) -> str:
    """Put a checkpoint whose every channel is new at ``version``, after the one this
    saver put last on the thread; return its id."""
    cp = manual_checkpoint(values, version)
    config = cfg(thread_id)
    last = _LAST.setdefault(saver, {})
    if thread_id in last:
        config["configurable"]["checkpoint_id"] = last[thread_id]
    saver.put(config, cp, {"source": "loop", "step": 0}, dict(cp["channel_versions"]))
    last[thread_id] = cp["id"]
    return cp["id"]


# --------------------------------------------------------------------------- tests
def test_unchanged_large_channel_is_stored_once_across_steps(
    backend: Backend, request_log: RequestLog
) -> None:
    """A 200 KB channel set once and carried through ~60 more checkpoints, by a new saver
    (cold cache, as a new container) and then by the same warm saver, is never uploaded
    again: the blob objects and their bytes do not change, the only PutObject requests are
    the steps' own checkpoint objects (small ones may live in the index instead), and each
    step adds a small fraction of the document."""
    doc = os.urandom(100_000).hex()  # 200 KB, only ~2x compressible
    thread = "dedup"
    # durability="exit": the first run stores one checkpoint holding the document.
    build_ticker(backend.saver(), doc).invoke({"target": 2}, cfg(thread), durability="exit")
    blobs = blob_objects(backend, thread)
    assert blobs, "a 200 KB value should be stored as blob(s)"
    assert sum(blobs.values()) < len(doc)  # compressed
    checkpoints_before = checkpoint_count(backend, thread)
    objects_before = set(checkpoint_objects(backend, thread))
    bytes_before = stored_bytes(backend)

    puts = PutKeys()
    saver = instrumented(backend, request_log, puts)  # cold cache: a new container
    final = build_ticker(saver).invoke({"target": 30}, cfg(thread))
    assert (final["count"], final["doc"] == doc) == (30, True)
    final = build_ticker(saver).invoke({"target": 60}, cfg(thread), durability="sync")
    assert (final["count"], final["doc"] == doc) == (60, True)

    new_checkpoints = checkpoint_count(backend, thread) - checkpoints_before
    assert new_checkpoints >= 58
    assert blob_objects(backend, thread) == blobs
    assert [k for k in puts.keys if "/b/" in k] == []
    new_objects = set(checkpoint_objects(backend, thread)) - objects_before
    assert sorted(puts.keys) == sorted(new_objects)
    assert request_log.counts()[("s3", "PutObject")] == len(new_objects) <= new_checkpoints
    growth_per_step = (stored_bytes(backend) - bytes_before) / new_checkpoints
    assert growth_per_step < len(doc) / 50, growth_per_step

    state = build_ticker(backend.saver()).get_state(cfg(thread))
    assert state.values == {"doc": doc, "count": 60, "target": 60}


@pytest.mark.parametrize("source", ["node", "input"])
def test_new_large_value_is_uploaded_once(
    server_backend: Backend, request_log: RequestLog, source: str
) -> None:
    """A new 200 KB value reaches the saver twice at about the same time: as the pending
    write of the task (or input) that produced it and inside the next checkpoint. Its
    chunks must be sent once each: blob PutObject requests == distinct blob objects.
    """
    doc = os.urandom(100_000).hex()
    puts = PutKeys()
    saver = instrumented(server_backend, request_log, puts)
    if source == "node":
        graph = build_ticker(saver, doc)
        graph.invoke({"target": 3}, cfg("fresh"), durability="sync")
    else:
        graph = build_ticker(saver)
        graph.invoke({"doc": doc, "count": 0, "target": 3}, cfg("fresh"))
    blobs = blob_objects(server_backend, "fresh")
    blob_puts = Counter(k for k in puts.keys if "/b/" in k)
    assert set(blob_puts) == set(blobs)
    duplicated = {k: n for k, n in blob_puts.items() if n > 1}
    assert not duplicated, (
        f"{len(duplicated)} of {len(blobs)} blobs were sent more than once "
        f"({sum(blob_puts.values())} PutObject for {len(blobs)} objects)"
    )


def test_same_content_twice_is_one_object(backend: Backend, request_log: RequestLog) -> None:
    """The same large value written again (new channel version, another channel, or by
    another saver with an empty cache) maps to the same blob keys and adds no object;
    the same saver does not even send it again."""
    thread = "same"
    value = os.urandom(40_000)  # above the inline threshold, below the chunking threshold
    puts = PutKeys()
    saver = instrumented(backend, request_log, puts)
    put_values(saver, thread, {"a": value}, "1")
    blobs = blob_objects(backend, thread)
    assert len(blobs) == 1
    uploads_first = [k for k in puts.keys if "/b/" in k]
    assert uploads_first == list(blobs)

    # Same saver: a new version of the same channel, and a second channel, same bytes.
    put_values(saver, thread, {"a": value, "b": value}, "2")
    assert blob_objects(backend, thread) == blobs
    assert [k for k in puts.keys if "/b/" in k] == uploads_first

    # Another saver (a new container): it may send the blob again but it stays one object.
    other = backend.saver()
    put_values(other, thread, {"c": value}, "3")
    assert blob_objects(backend, thread) == blobs
    assert checkpoint_count(backend, thread) == 3
    tup = backend.saver().get_tuple(cfg(thread))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"c": value}


def test_blobs_are_per_thread(backend: Backend) -> None:
    """Equal content in two threads is stored under each thread's own prefix, so deleting
    one thread never removes data another thread references."""
    value = os.urandom(30_000)
    saver = backend.saver()
    put_values(saver, "one", {"v": value}, "1")
    put_values(saver, "two", {"v": value}, "1")
    one, two = blob_objects(backend, "one"), blob_objects(backend, "two")
    assert len(one) == len(two) == 1
    assert [k.rsplit("/", 1)[1] for k in one] == [k.rsplit("/", 1)[1] for k in two]
    saver.delete_thread("one")
    tup = backend.saver().get_tuple(cfg("two"))
    assert tup is not None
    assert tup.checkpoint["channel_values"]["v"] == value


def test_small_values_are_inlined(backend: Backend, request_log: RequestLog) -> None:
    """Values of at most ``inline_threshold`` serialized bytes live inside the checkpoint
    body (no blob object) while the body fits in the index item; one byte more gets a
    blob. Small pending writes cost no S3 request at all."""
    at_limit = b"abcd" * (DEFAULT_INLINE_THRESHOLD // 4)  # compressible: the body stays small
    over_limit = at_limit + b"e"
    saver = backend.saver()

    put_values(saver, "small", {"x": at_limit, "n": 7, "s": "text"}, "1")
    assert blob_objects(backend, "small") == {}
    assert checkpoint_objects(backend, "small") == []
    assert checkpoint_count(backend, "small") == 1

    put_values(saver, "big", {"x": over_limit}, "1")
    # compressible: a chunk of ~100 bytes, stored as a chunk item (layout 5)
    assert blob_objects(backend, "big") == {} and len(backend.chunk_items("big")) == 1

    puts = PutKeys()
    logged = instrumented(backend, request_log, puts)
    cid = put_values(logged, "w", {"n": 1}, "1")
    request_log.clear()
    logged.put_writes(cfg("w", checkpoint_id=cid), [("n", 2), ("msg", "hi" * 100)], "task-1")
    assert [op for service, op in request_log.calls if service == "s3"] == []
    assert blob_objects(backend, "w") == {}

    fresh = backend.saver()
    small = fresh.get_tuple(cfg("small"))
    big = fresh.get_tuple(cfg("big"))
    writes = fresh.get_tuple(cfg("w"))
    assert small is not None and big is not None and writes is not None
    assert small.checkpoint["channel_values"] == {"x": at_limit, "n": 7, "s": "text"}
    assert big.checkpoint["channel_values"] == {"x": over_limit}
    assert writes.pending_writes == [("task-1", "n", 2), ("task-1", "msg", "hi" * 100)]


def test_inline_threshold_is_configurable(backend: Backend) -> None:
    """With ``inline_threshold=0`` even a tiny value becomes a blob, and it still reads back."""
    make: Callable[..., S3Saver] = backend.saver
    put_values(make(inline_threshold=0), "zero", {"x": b"tiny"}, "1")
    put_values(make(inline_threshold=0, chunk_items=False), "blob", {"x": b"tiny"}, "1")
    assert len(backend.chunk_items("zero")) == 1 and blob_objects(backend, "zero") == {}
    assert len(blob_objects(backend, "blob")) == 1 and backend.chunk_items("blob") == {}
    tup = make().get_tuple(cfg("zero"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"x": b"tiny"}
    tup = make().get_tuple(cfg("blob"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"x": b"tiny"}


def test_value_too_large_for_the_index_body_moves_to_a_blob_once(
    backend: Backend, request_log: RequestLog
) -> None:
    """An incompressible 10 KB value is under the inline threshold, but inlined it would push
    every checkpoint body out of the index and into an S3 object of its own. It is stored
    as a blob instead, once: the steps that carry it unchanged make no S3 request, and a new
    saver reads it back."""
    context = os.urandom(10_000)
    puts = PutKeys()
    saver = instrumented(backend, request_log, puts)
    put_values(saver, "ctx", {"context": context, "n": 0}, "1")
    assert len(blob_objects(backend, "ctx")) == 1
    assert checkpoint_objects(backend, "ctx") == []  # the body is in the index item

    request_log.clear()
    for step in range(2, 5):  # context unchanged: its version stays "1"
        tup = saver.get_tuple(cfg("ctx"))
        assert tup is not None
        cp = manual_checkpoint({"context": context, "n": step}, "1")
        cp["channel_versions"]["n"] = str(step)
        saver.put(tup.config, cp, {"source": "loop", "step": step}, {"n": str(step)})
    assert [op for service, op in request_log.calls if service == "s3"] == []
    assert len(blob_objects(backend, "ctx")) == 1
    assert checkpoint_objects(backend, "ctx") == []
    tup = backend.saver().get_tuple(cfg("ctx"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"context": context, "n": 4}


def test_nothing_moves_when_the_body_cannot_fit_the_index(backend: Backend) -> None:
    """When moving the large inline values would still leave the body too large for the index
    (here 12 KB of values too small to be worth a blob each), nothing moves: the body goes to
    S3 as one object and no blob is added."""
    values: dict[str, Any] = {f"p{i}": os.urandom(400) for i in range(30)}
    values["mid"] = os.urandom(3_000)
    put_values(backend.saver(), "nofit", values, "1")
    assert blob_objects(backend, "nofit") == {}
    assert len(checkpoint_objects(backend, "nofit")) == 1
    tup = backend.saver().get_tuple(cfg("nofit"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == values


def test_appended_list_stores_only_what_was_appended(
    backend: Backend, request_log: RequestLog
) -> None:
    """A 300 KB list that grows by a ~1 KB item per step re-uses every chunk it already has,
    also from a saver that only read the thread (a new container): over 40 appends the blob
    bytes sent stay within a small multiple of the bytes appended, far below one re-written
    16 KiB chunk per step, and every version reads back exactly."""
    rng = random.Random(7)
    words = [f"w{rng.randrange(5000)}" for _ in range(200_000)]

    def item(i: int) -> str:
        return " ".join(words[i * 150 : (i + 1) * 150])  # ~1 KB, compresses like prose

    items = [item(i) for i in range(300)]
    saver = backend.saver()
    put_values(saver, "grow", {"messages": list(items)}, "1")
    sent: list[int] = []

    def blob_bytes_sent(s3: Any) -> None:
        def record(params: dict[str, Any], **_: Any) -> None:
            if "/b/" in params["Key"]:
                sent.append(len(params["Body"]))

        s3.meta.events.register("before-parameter-build.s3.PutObject", record)

    appended = 0
    for step in range(2, 42):
        if step in (2, 22):  # a new saver (a new container) that has only read the thread
            s3 = backend.s3()
            blob_bytes_sent(s3)
            saver = backend.saver(s3_client=s3)
        tup = saver.get_tuple(cfg("grow"))
        assert tup is not None
        assert tup.checkpoint["channel_values"]["messages"] == items
        new = item(300 + step)
        items.append(new)
        appended += len(new)
        cp = manual_checkpoint({"messages": list(items)}, str(step))
        saver.put(tup.config, cp, {"source": "loop", "step": step}, {"messages": str(step)})
    assert sum(sent) < 3 * appended, (sum(sent), appended)
    # The old scheme (re-writing the last chunk on every append) sends ~16 KiB raw per step.
    assert sum(sent) < 40 * 4_000
    tup = backend.saver().get_tuple(cfg("grow"))
    assert tup is not None
    assert tup.checkpoint["channel_values"]["messages"] == items


def test_edited_value_does_not_trust_a_stale_chunk_hint(backend: Backend) -> None:
    """The chunks a saver remembers from the previous version are only a hint: a new version
    that changes bytes inside them (not an append), or shrinks, or is replaced outright, is
    stored and read back exactly."""
    rng = random.Random(3)
    doc = bytearray(rng.randbytes(200_000))
    saver = backend.saver()
    put_values(saver, "edit", {"doc": bytes(doc)}, "1")
    versions = []
    doc[1000:1010] = b"0123456789"  # inside the first chunk
    versions.append(bytes(doc))
    versions.append(bytes(doc[:150_000]))  # shrunk
    versions.append(bytes(doc[:150_000]) + b"tail" * 10)  # shrunk, then appended
    versions.append(rng.randbytes(70_000))  # replaced
    for i, value in enumerate(versions, start=2):
        tup = saver.get_tuple(cfg("edit"))
        assert tup is not None
        cp = manual_checkpoint({"doc": value}, str(i))
        saver.put(tup.config, cp, {"source": "loop", "step": i}, {"doc": str(i)})
        fresh = backend.saver().get_tuple(cfg("edit"))
        assert fresh is not None
        assert fresh.checkpoint["channel_values"]["doc"] == value


@pytest.mark.parametrize("cache_bytes", [None, 50_000], ids=["cache", "tiny-cache"])
def test_blobs_of_a_checkpoint_in_s3_are_fetched_with_it(
    backend: Backend,
    request_log: RequestLog,
    cache_bytes: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the checkpoint body is an S3 object, its index item names the value blobs
    (``pf``) and the pack ranges (``pp``), so a cold get_tuple sends the object and every
    chunk GET in one concurrent batch instead of reading the object first: resume stays
    at 2 round trips (Query, then one batch). Each object is fetched once even when the
    saver's cache is too small to hold them all. The first 20 values are loose blobs
    (each put alone), the last 20 one pack (put together)."""
    values: dict[str, Any] = {f"p{i}": os.urandom(400) for i in range(30)}  # body -> S3
    loose = {f"v{i}": os.urandom(20_000) for i in range(20)}
    saver = backend.saver()
    for i in range(len(loose)):
        put_values(saver, "wide", {**values, **dict(list(loose.items())[: i + 1])}, str(i))
    values.update(loose)
    values.update({f"w{i}": os.urandom(20_000) for i in range(20)})  # one pack
    put_values(saver, "wide", values, "99")
    assert len(checkpoint_objects(backend, "wide")) == 21
    stored = blob_objects(backend, "wide")
    assert len(stored) == 21 and sum(k.endswith(".pack") for k in stored) == 1

    kw = {} if cache_bytes is None else {"cache_bytes": cache_bytes}
    reader = instrumented(backend, request_log, PutKeys(), **kw)
    batches: list[list[str]] = []
    get_objects = objects.get_objects

    def recording(core: Any, keys: Any) -> Any:
        batches.append(list(keys))
        return get_objects(core, keys)

    monkeypatch.setattr(objects, "get_objects", recording)
    tup = reader.get_tuple(cfg("wide"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == values
    assert [len(b) for b in batches] == [22]  # object, 20 blobs, 1 pack range
    assert request_log.counts()[("s3", "GetObject")] == 22


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda pf, size: {"B": pf + os.urandom(size)}, id="unknown-digest"),
        pytest.param(lambda pf, size: {"B": pf[:-5]}, id="truncated"),
        pytest.param(lambda pf, size: {"S": "not bytes"}, id="wrong-type"),
        pytest.param(lambda pf, size: {"B": pf[:-8] + bytes(8)}, id="empty-range"),
    ],
)
@pytest.mark.parametrize("attr", ["pf", "pp"])
def test_a_damaged_prefetch_list_does_not_break_the_read(
    backend: Backend, damage: Callable[[bytes, int], dict[str, Any]], attr: str
) -> None:
    """The value-blob list (``pf``) and pack ranges (``pp``) of an index item are only
    hints for fetching early: a digest no value uses, a truncated list, a wrong attribute
    type or an empty range is ignored, and the checkpoint reads back exactly from what its
    own entries reference."""
    values: dict[str, Any] = {f"p{i}": os.urandom(400) for i in range(30)}
    saver = backend.saver()
    for i in range(3):  # pf: three loose blobs, one per put; pp: one pack of three
        if attr == "pf":
            values[f"v{i}"] = os.urandom(20_000)
            put_values(saver, "pf", values, str(i))
    if attr == "pp":
        values.update({f"v{i}": os.urandom(20_000) for i in range(3)})
        put_values(saver, "pf", values, "1")
    item = max(checkpoint_items(backend, "pf"), key=lambda i: i["sk"]["S"])
    assert len(item[attr]["B"]) == (3 * 32 if attr == "pf" else 40)
    ddb = backend.dynamodb()
    ddb.update_item(
        TableName=backend.table,
        Key={"pk": item["pk"], "sk": item["sk"]},
        UpdateExpression=f"SET {attr} = :v",
        ExpressionAttributeValues={":v": damage(item[attr]["B"], 32 if attr == "pf" else 40)},
    )
    tup = backend.saver().get_tuple(cfg("pf"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == values


def test_sealed_blobs_dedupe_within_a_thread_and_differ_across_threads(
    backend: Backend,
) -> None:
    """With ``encryption=``, blob names are keyed by the thread's data key: the same
    value written again in a thread (by another cold saver too) is still one object,
    and the same value in another thread gets an unrelated name, so equality across
    threads is not visible in the bucket."""
    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    ring = StaticKeyRing({"r": os.urandom(32)}, current="r")
    value = os.urandom(40_000)
    put_values(backend.saver(encryption=Encryption(ring)), "one", {"a": value}, "1")
    blobs = blob_objects(backend, "one")
    assert len(blobs) == 1
    put_values(backend.saver(encryption=Encryption(ring)), "one", {"a": value, "b": value}, "2")
    assert blob_objects(backend, "one") == blobs
    put_values(backend.saver(encryption=Encryption(ring)), "two", {"a": value}, "1")
    (one,), (two,) = blob_objects(backend, "one"), blob_objects(backend, "two")
    assert one.rsplit("/", 1)[1] != two.rsplit("/", 1)[1]
    tup = backend.saver(encryption=Encryption(ring)).get_tuple(cfg("one"))
    assert tup is not None and tup.checkpoint["channel_values"] == {"a": value, "b": value}
