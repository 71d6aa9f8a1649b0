"""Flow tests of ``core.sealed`` (and of what it seals in ``commit``, ``writes``, ``read``
and ``reseal``): storage written by the real put flows on a core with ``encryption=``,
read back by the real read flows, in memory."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import read, schema, sealed, threads
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.index import BatchGet, Got, PutNew, Query
from langgraph_s3.core.sealed import Encryption, as_encryption, key_of
from langgraph_s3.errors import (
    DataKeyError,
    InvalidConfigError,
    PlaintextObjectError,
    SealedObjectError,
)
from langgraph_s3.operations import (
    GeneratedKey,
    IndexRequest,
    KmsGenerateDataKey,
    S3Get,
    S3Put,
    WaitKey,
)
from langgraph_s3.sealing import StaticKeyRing
from langgraph_s3.sealing.kms import KmsKeyRing
from tests.core.canned import (
    checkpoint,
    config,
    make_core,
    page,
    started,
    starts_key,
    store,
    store_writes,
)
from tests.core.script import Script

ARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def ring() -> StaticKeyRing:
    return StaticKeyRing({"r": os.urandom(32)}, current="r")


def sealed_core(enc: Encryption | None = None, **settings: Any) -> Any:
    return make_core(encryption=enc or Encryption(ring()), **settings)


def test_the_option_takes_a_ring_or_an_encryption_and_nothing_else() -> None:
    r = ring()
    assert as_encryption(None) is None
    assert as_encryption(r) == Encryption(r)
    enc = Encryption(r)
    assert as_encryption(enc) is enc
    with pytest.raises(InvalidConfigError, match="StaticKeyRing"):
        make_core(encryption=b"k" * 32)


def test_a_writer_creates_the_key_once_and_a_reader_never_does() -> None:
    core = sealed_core()
    reader = Script(thread_key(core, "t1"))
    reader.expect(Query, page([]))  # the thread's key item: none
    assert reader.returns() is None
    with pytest.raises(DataKeyError, match="no data key"):
        key_of(core, "t1")
    # The writer takes the reader's answer (Encryption.absent): no second Query.
    writer = Script(thread_key(core, "t1", create=True))
    put = started(writer.expect(starts_key, None))
    key = writer.returns()
    assert key is not None and key_of(core, "t1") is key
    assert put[schema.SK] == {"S": schema.key_sk(1)}
    # Loaded: the next supersteps ask nothing, until key_ttl has passed.
    assert Script(thread_key(core, "t1", create=True)).returns() is key
    assert Script(thread_key(make_core(), "t1", create=True)).returns() is None


def test_a_loaded_key_is_read_again_after_key_ttl() -> None:
    core = sealed_core(Encryption(ring(), key_ttl=0.001))
    first = Script(thread_key(core, "t1", create=True))
    first.expect(Query, page([]))
    item = started(first.expect(starts_key, None))
    key = first.returns()
    time.sleep(0.002)
    again = Script(thread_key(core, "t1"))
    again.expect(Query, page([item]))
    assert again.returns() == key
    with pytest.raises(InvalidConfigError, match="key_ttl"):
        Encryption(ring(), key_ttl=0)


def test_a_kms_ring_generates_the_key_with_one_request() -> None:
    core = sealed_core(Encryption(KmsKeyRing(ARN)))
    script = Script(thread_key(core, "t1", create=True))
    script.expect(Query, page([]))
    op = script.expect(KmsGenerateDataKey, GeneratedKey(b"k" * 32, b"wrapped", ARN))
    assert dict(op.context) == {"thread": "t1", "key-version": "1"}
    script.expect(starts_key, None)
    assert script.returns() is key_of(core, "t1")


def world(objects: dict[str, bytes], items: list[dict[str, Any]]) -> Any:
    """An answer for every request of a flow: S3 in ``objects``, the index in ``items``
    (queries answer with every item of their partition)."""

    def answer(op: Any) -> Any:
        if isinstance(op, S3Get):
            body = objects.get(op.key)
            return body if body is None else body[op.start : op.end]
        if isinstance(op, S3Put):
            objects[op.key] = op.body
            return None
        assert isinstance(op, IndexRequest), op
        if isinstance(op, PutNew):
            items.append(dict(op.item))
            return True
        if starts_key(op):
            items.append(started(op))
            return None
        if isinstance(op, BatchGet):
            wanted = [(k[schema.PK]["S"], k[schema.SK]["S"]) for k in op.keys]
            return Got([i for i in items if (i[schema.PK]["S"], _sk(i)) in wanted], [])
        if isinstance(op, Query):
            pk = op.pk
            found = sorted((i for i in items if i[schema.PK]["S"] == pk), key=_sk)
            if op.prefix is not None:
                found = [i for i in found if _sk(i).startswith(op.prefix)]
            if op.newest_first:
                found.reverse()
            return page(found[: op.limit] if op.limit else found)
        assert op.method == "batch_write_item", op
        items.extend(r["PutRequest"]["Item"] for r in op.params["RequestItems"]["t"])
        return []

    return answer


def _sk(item: dict[str, Any]) -> str:
    return str(item[schema.SK]["S"])


def test_every_kind_of_stored_data_is_sealed_and_reads_back() -> None:
    core = sealed_core(index_inline_limit=0)
    big, huge = os.urandom(300_000), os.urandom(1_300_000)  # a pack; a chunk list
    c1 = store(config(), checkpoint("c1", {"big": big, "huge": huge, "x": 1}), core=core)
    w1 = store_writes(config(cid="c1"), [("y", os.urandom(40_000)), ("z", 2)], "task", core=core)
    objects = {**c1.objects, **w1.objects}
    assert objects and all(codec.is_sealed(body) for body in objects.values())
    assert all(w1.item[a]["B"][:1] == codec.SEALED_RECORD for a in ("w0", "w1"))
    assert schema.METADATA not in c1.item
    got = Script(read.get_tuple(core, config(cid="c1"))).drain(world(objects, [c1.item, w1.item]))
    assert got is not None
    assert got.checkpoint["channel_values"] == {"big": big, "huge": huge, "x": 1}
    assert sorted(v if c == "z" else len(v) for _, c, v in got.pending_writes) == [2, 40_000]


def test_copy_reseals_everything_for_the_target_thread() -> None:
    core = sealed_core()
    big = os.urandom(1_300_000)
    c1 = store(config(), checkpoint("c1", {"big": big}), core=core)
    w1 = store_writes(config(cid="c1"), [("y", os.urandom(40_000))], "task", core=core)
    objects, items = {**c1.objects, **w1.objects}, [c1.item, w1.item, c1.head]
    Script(threads.copy_thread(core, "t1", "t2")).drain(world(objects, items))
    copied = {k: v for k, v in objects.items() if k.startswith("t2/")}
    assert copied and all(codec.is_sealed(v) and "/b/" in k for k, v in copied.items())
    assert not set(k[3:] for k in copied) & set(k[3:] for k in objects if k.startswith("t1/"))
    for k in list(objects):  # the copy needs nothing of the source
        if k.startswith("t1/"):
            del objects[k]
    target = [i for i in items if i[schema.PK]["S"] == "t2"]
    got = Script(read.get_tuple(core, config("t2", "c1"))).drain(world(objects, target))
    assert got is not None and got.checkpoint["channel_values"] == {"big": big}
    assert [len(v) for _, _, v in got.pending_writes] == [40_000]


@pytest.mark.parametrize("chunk_items", [True, False])
def test_copy_reseals_a_chunk_item_as_a_chunk_item_of_the_target(chunk_items: bool) -> None:
    """A chunk item is read (BatchGetItem), named and sealed under the target's key and
    written as the target's chunk item, not uploaded (with ``chunk_items=False``: as
    a loose blob); nothing of the source is copied as it is. The copy reads without
    the source's items."""
    core = sealed_core(inline_threshold=512)
    value = os.urandom(3_000)
    c1 = store(config(), checkpoint("c1", {"v": value}), core=core)
    (source,) = c1.chunk_items.values()
    items = [c1.item, c1.head, source]
    objects = dict(c1.objects)
    assert not [k for k in objects if "/b/" in k]
    core.chunk_items = chunk_items
    Script(threads.copy_thread(core, "t1", "t2")).drain(world(objects, items))
    copied = [i for i in items if i[schema.PK]["S"] == "t2" and schema.is_chunk_item(i)]
    blobs = [k for k in objects if k.startswith("t2/")]
    assert (len(copied), len(blobs)) == ((1, 0) if chunk_items else (0, 1))
    for item in copied:
        assert set(item) == {schema.PK, schema.SK, schema.VALUE, schema.AT}
        assert item[schema.SK] != source[schema.SK] and codec.is_sealed(item["v"]["B"])
    target = [i for i in items if i[schema.PK]["S"] == "t2"]
    got = Script(read.get_tuple(core, config("t2", "c1"))).drain(world(objects, target))
    assert got is not None and got.checkpoint["channel_values"] == {"v": value}


def test_plaintext_is_refused_and_a_plain_core_cannot_read_sealed_data() -> None:
    plain = make_core()
    c1 = store(config(), checkpoint("c1", {"x": 1}), core=plain)
    core = sealed_core()
    Script(thread_key(core, "t1", create=True)).drain(world({}, []))
    flow = read.get_tuple(core, config(cid="c1"))
    with pytest.raises(PlaintextObjectError, match="without encryption"):
        Script(flow).drain(world({}, [c1.item]))
    s1 = store(config(), checkpoint("c1", {"x": 1}), core=core)
    with pytest.raises(SealedObjectError, match="encryption="):
        Script(read.get_tuple(plain, config(cid="c1"))).drain(world({}, [s1.item]))


def test_a_record_opens_only_at_its_own_slot() -> None:
    core = sealed_core(group_writes=False)
    c1 = store(config(), checkpoint("c1", {"x": 1}), core=core)
    w1 = store_writes(config(cid="c1"), [("a", 1), ("b", 2)], "task", core=core)
    w = schema.parse_writes(w1.item, encrypted=True)
    assert not w.records and len(w.sealed) == 2
    with pytest.raises(SealedObjectError, match="pending write 0 of task 'task'"):
        sealed.open_writes(core, "t1", "other-ns", [w])
    w = schema.parse_writes({**w1.item, "w0": w1.item["w1"]}, encrypted=True)
    with pytest.raises(SealedObjectError) as info:
        sealed.open_writes(core, "t1", "", [w])
    assert info.value.key.endswith("|w0")
    w = schema.parse_writes(w1.item, encrypted=True)
    sealed.open_writes(core, "t1", "", [w])
    assert [(i, r.channel) for i, r in w.records] == [(0, "a"), (1, "b")]
    assert c1.item


def test_a_group_opens_only_at_its_own_slot_and_attribute() -> None:
    core = sealed_core()
    store(config(), checkpoint("c1", {"x": 1}), core=core)
    topic = "the same topic " * 30
    w1 = store_writes(config(cid="c1"), [("x", 0), ("a", topic), ("b", topic)], "task", core=core)
    assert {k for k in w1.item if schema.record_index(k) is not None} == {"w0"}
    assert w1.item["w0"]["B"][:1] == codec.SEALED_RECORD
    w = schema.parse_writes(w1.item, encrypted=True)
    assert not w.records and len(w.sealed) == 1
    with pytest.raises(SealedObjectError, match="pending write 0 of task 'task'"):
        sealed.open_writes(core, "t1", "other-ns", [w])
    # Moved to another attribute, or another task's slot, it does not open.
    moved = {k: v for k, v in w1.item.items() if k != "w0"}
    w = schema.parse_writes({**moved, "w2": w1.item["w0"]}, encrypted=True)
    with pytest.raises(SealedObjectError, match="pending write 2 of task 'task'") as info:
        sealed.open_writes(core, "t1", "", [w])
    assert info.value.key.endswith("|w2")
    w = schema.parse_writes({**w1.item, schema.TASK_ID: schema.s("other")}, encrypted=True)
    with pytest.raises(SealedObjectError, match="task 'other'"):
        sealed.open_writes(core, "t1", "", [w])
    w = schema.parse_writes(w1.item, encrypted=True)
    sealed.open_writes(core, "t1", "", [w])
    assert [(i, r.channel) for i, r in w.records] == [(0, "x"), (1, "a"), (2, "b")]
    assert w.groups == {0: (0, 1, 2)}


def test_a_pack_of_sealed_frames_still_cuts_into_frames() -> None:
    core = sealed_core()
    c1 = store(config(), checkpoint("c1", {"big": os.urandom(300_000)}), core=core)
    (pack,) = [k for k in c1.objects if k.endswith(".pack")]
    frames = codec.frames(c1.objects[pack], key=pack)
    assert len(frames) >= 3 and all(f.startswith(b"LGSE") for f in frames)
    with pytest.raises(codec.CorruptObjectError, match="truncated"):
        codec.frames(c1.objects[pack][:-1], key=pack)


def test_calls_that_start_a_thread_at_once_load_its_key_once() -> None:
    """LangGraph's first superstep stores a checkpoint and pending writes at once:
    the second call waits for the first one's key instead of creating another."""
    core = sealed_core()
    first = Script(thread_key(core, "t1", create=True))
    second = Script(thread_key(core, "t1", create=True))
    first.expect(Query, page([]))
    wait = second.pending
    assert isinstance(wait, WaitKey) and not wait.pending.done()
    first.expect(starts_key, None)
    key = first.returns()
    assert wait.pending.result() is True
    second.step(True)
    assert second.returns() is key


def test_a_waiter_loads_the_key_itself_when_the_first_call_found_none() -> None:
    core = sealed_core()
    reader = Script(thread_key(core, "t1"))
    writer = Script(thread_key(core, "t1", create=True))
    reader.expect(Query, page([]))
    wait = writer.pending
    assert isinstance(wait, WaitKey)
    assert reader.returns() is None and wait.pending.result() is False
    writer.step(False)
    writer.expect(starts_key, None)  # the reader's answer, none, taken: no Query again
    assert writer.returns() is key_of(core, "t1")
