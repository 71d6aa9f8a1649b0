"""Chunk lists shared between calls (core.uploads, core.packs): across threads, after
a failed upload, and how long a stored value is trusted."""

from __future__ import annotations

from typing import Any

from langgraph_s3.core import read
from langgraph_s3.core.writes import put_writes
from langgraph_s3.errors import S3SaverError
from langgraph_s3.operations import S3Put, WaitUpload
from tests.core.canned import (
    applied,
    checkpoint,
    config,
    from_bucket,
    is_query,
    make_core,
    page,
    store,
)
from tests.core.script import Script
from tests.core.test_lists import BIG


def _answer(bucket: dict[str, bytes], item: dict[str, Any]) -> Any:
    def answer(op: Any) -> Any:
        if isinstance(op, S3Put):
            bucket[op.key] = op.body
            return None
        if isinstance(op, WaitUpload):
            return op.pending.result()
        item.update(op.update()["Key"])  # the writes item: kept by the test below
        return None

    return answer


def test_a_list_shared_from_another_flow_is_not_used_when_a_pack_it_names_failed() -> None:
    """Flow A's list names chunks A waits for in flow C's pack. C's upload fails; flow
    B, storing the same value, re-uploads those chunks itself but takes A's list as it
    is, and waits only for A's pack: B's committed record names a list naming C's pack,
    which was never stored."""
    core = make_core()
    cfg = config(cid="c01")
    edited = BIG[:-10] + "0123456789"  # all chunks of BIG but the last
    c = Script(put_writes(core, cfg, [("doc", edited)], "taskC"))
    a = Script(put_writes(core, cfg, [("doc", BIG)], "taskA"))
    assert any(isinstance(op, WaitUpload) for op in a.pending)  # A waits for C's pack
    c.throw(S3SaverError("PUT failed"))
    c.raises(S3SaverError)
    b = Script(put_writes(core, cfg, [("doc", BIG)], "taskB"))
    bucket: dict[str, bytes] = {}
    a_item: dict[str, Any] = {}
    # A's pack goes up; the chunks it waited for in C's pack are lost: A will retry
    a.step([_answer(bucket, a_item)(op) if isinstance(op, S3Put) else False for op in a.pending])
    # B's own round trip: its upload and A's pack (done now)
    b_ops = b.pending
    b.step([_answer(bucket, {})(op) for op in b_ops])
    update = b.pending
    b_item = update.update()
    b.step(None)
    b.returns()
    a.drain(_answer(bucket, a_item))
    writes_item = applied(b_item, {})
    cp = store(config(), checkpoint("c01", {"x": 1}), core=make_core())
    script = Script(read.get_tuple(make_core(), cfg))
    script.expect(is_query, page([cp.item, writes_item]))
    tup = script.drain(from_bucket({**cp.objects, **bucket}))
    assert tup is not None and tup.pending_writes == [("taskB", "doc", BIG)]


def test_re_using_a_remembered_value_does_not_extend_how_long_it_is_trusted() -> None:
    """The collector's rule (docs/retention.md) bounds how long a saver trusts that an
    object exists by ``cache_ttl`` from when it last saw it. Re-using the value cache's
    entry put it back with a new time, so a value written every few minutes was trusted
    for ever without its objects being uploaded or read again."""
    now = [0.0]
    core = make_core(cache_ttl=100.0)
    for cache in vars(core.caches).values():
        cache._clock = lambda: now[0]
    cfg = config(cid="c01")
    first = Script(put_writes(core, cfg, [("doc", BIG)], "t0"))
    bucket: dict[str, bytes] = {}
    first.drain(_answer(bucket, {}))
    assert bucket  # the chunks and their list went up
    stored_at = 0.0
    for step in range(1, 5):
        now[0] = step * 60.0  # each re-use within cache_ttl of the previous one
        again: dict[str, bytes] = {}
        Script(put_writes(core, cfg, [("doc", BIG)], f"t{step}")).drain(_answer(again, {}))
        if now[0] - stored_at > 100.0:  # no longer trusted, so stored again
            assert again, f"at {now[0]}s the objects were trusted, stored at {stored_at}s"
            stored_at = now[0]
        else:
            assert not again


def test_two_threads_storing_the_same_value_at_once_each_store_their_own_list() -> None:
    """Chunk lists were shared between flows by what they list alone: a flow of thread
    t2 took the list a flow of thread t1 was uploading, into t1's folder, and its record
    named a list t2's folder does not have."""
    core = make_core()
    first = Script(put_writes(core, config("t1", cid="c01"), [("doc", BIG)], "task"))
    second = Script(put_writes(core, config("t2", cid="c01"), [("doc", BIG)], "task"))
    bucket: dict[str, bytes] = {}
    first.drain(_answer(bucket, {}))
    second.step([_answer(bucket, {})(op) for op in second.pending])
    writes_item = applied(second.pending.update(), {})
    second.step(None)
    second.returns()
    cp = store(config("t2"), checkpoint("c01", {"x": 1}), core=make_core())
    script = Script(read.get_tuple(make_core(), config("t2", cid="c01")))
    script.expect(is_query, page([cp.item, writes_item]))
    tup = script.drain(from_bucket({**cp.objects, **bucket}))
    assert tup is not None and tup.pending_writes == [("task", "doc", BIG)]
