"""Flow tests of ``core.objects``: verified reads, replica read policies, shared
uploads, listing and deleting."""

from __future__ import annotations

import os
from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import objects, schema
from langgraph_s3.core.packs import ChunkRef
from langgraph_s3.errors import (
    CorruptObjectError,
    MissingObjectError,
    NotYetReplicatedError,
    S3SaverError,
)
from langgraph_s3.operations import ListPage, S3Delete, S3Get, S3List, S3Put, Sleep, WaitUpload
from langgraph_s3.regions import CrossRegion
from tests.core.canned import checkpoint, config, make_core, store
from tests.core.script import Script


def blob(core: Any, payload: bytes, thread_id: str = "t1") -> tuple[str, bytes]:
    """A blob's key and stored body, as the saver writes them."""
    key = core.layout.blob_key(thread_id, codec.digest(payload))
    return key, codec.frame(codec.KIND_BLOB, payload, 3)


def replica(policy: str, **kw: Any) -> Any:
    cross = CrossRegion("us-east-1", read_policy=policy, home_bucket="home", **kw)  # type: ignore[arg-type]
    return make_core(region_name="eu-west-1", cross_region=cross)


# --------------------------------------------------------------------------- reads
def test_objects_are_read_at_once_and_a_missing_one_is_none_in_the_home_region() -> None:
    assert Script(objects.get_objects(make_core(), [])).returns() == []
    script = Script(objects.get_objects(make_core(), ["a", "b"]))
    script.expect([S3Get("a"), S3Get("b")], [b"A", None])
    assert script.returns() == [b"A", None]


def test_a_replica_with_policy_fail_reports_what_has_not_replicated() -> None:
    script = Script(objects.get_objects(replica("fail"), ["a", "b", "c"]))
    script.expect([S3Get, S3Get, S3Get], [b"A", None, None])
    err = script.raises(NotYetReplicatedError)
    assert (err.key, err.keys, err.waited) == ("b", ["b", "c"], 0.0)


def test_a_replica_with_policy_home_reads_what_is_missing_from_the_home_bucket() -> None:
    script = Script(objects.get_objects(replica("home"), ["a", "b"]))
    script.expect([S3Get("a"), S3Get("b")], [b"A", None])
    script.expect([S3Get("b", home=True)], [b"B"])
    assert script.returns() == [b"A", b"B"]

    missing = Script(objects.get_objects(replica("home"), ["a"]))
    missing.expect([S3Get("a")], [None])
    missing.expect([S3Get("a", home=True)], [None])
    assert missing.raises(NotYetReplicatedError).keys == ["a"]


def test_a_replica_with_policy_wait_polls_with_growing_backoff_until_objects_arrive() -> None:
    script = Script(objects.get_objects(replica("wait"), ["a", "b"]))
    script.expect([S3Get("a"), S3Get("b")], [None, None])
    script.expect(Sleep(0.05))
    script.expect([S3Get("a"), S3Get("b")], [b"A", None])
    script.expect(Sleep(0.1))
    script.expect([S3Get("b")], [b"B"])  # only what is still missing
    assert script.returns() == [b"A", b"B"]


def test_a_replica_with_policy_wait_gives_up_after_max_wait() -> None:
    script = Script(objects.get_objects(replica("wait", max_wait=0.12), ["a"]))
    script.expect([S3Get("a")], [None])
    script.expect(Sleep(0.05))
    script.expect([S3Get("a")], [None])
    last = script.expect(Sleep)
    assert last.seconds == pytest.approx(0.07)  # the last sleep stops at max_wait
    script.expect([S3Get("a")], [None])
    err = script.raises(NotYetReplicatedError)
    assert err.waited == pytest.approx(0.12) and "0.1s" in str(err)


def refs(*keys: str) -> list[ChunkRef]:
    return [ChunkRef(k) for k in keys]


def test_blobs_come_from_what_the_caller_has_the_cache_or_one_verified_read() -> None:
    core = make_core()
    (k1, b1), (k2, _), (k3, _) = (blob(core, p) for p in (b"one", b"two", b"three"))
    core.caches.objects.put(k2, b"two", 3)
    script = Script(objects.fetch_chunks(core, refs(k1, k2, k3, k1), have={k3: b"three"}))
    script.expect([S3Get(k1)], [b1])
    assert script.returns() == {k1: b"one", k2: b"two", k3: b"three"}
    assert k1 in core.caches.known_blobs and core.caches.objects.get(k1) == b"one"
    assert Script(objects.fetch_chunks(core, refs(k1))).returns() == {k1: b"one"}  # now cached


def test_a_blob_that_is_missing_or_does_not_match_its_address_is_refused() -> None:
    core = make_core()
    key, _ = blob(core, b"one")
    _, other = blob(core, b"two")
    with pytest.raises(MissingObjectError):
        objects.check_blob(core, key, None)
    with pytest.raises(CorruptObjectError, match="content address"):
        objects.check_blob(core, key, other)
    assert core.caches.objects.get(key) is None and key not in core.caches.known_blobs


# --------------------------------------------------------------------------- envelopes
def in_s3(values: dict[str, Any] | None = None) -> Any:
    return store(
        config(), checkpoint("c01", values or {"x": 1}), core=make_core(index_inline_limit=0)
    )


def test_an_envelope_is_read_verified_and_cached() -> None:
    stored, core = in_s3(), make_core()
    [key] = stored.objects
    script = Script(objects.read_envelope(core, stored.row))
    script.expect([S3Get(key)], [stored.objects[key]])
    env = script.returns()
    assert (env.thread_id, env.checkpoint_id, env.key) == ("t1", "c01", key)
    assert Script(objects.read_envelope(core, stored.row)).returns().checkpoint_id == "c01"


def test_an_envelope_in_the_index_item_needs_no_read() -> None:
    stored = store(config(), checkpoint("c01", {"x": 1}))
    assert Script(objects.read_envelope(make_core(), stored.row)).returns().checkpoint_id == "c01"


def test_a_checkpoint_object_that_is_missing_altered_or_misplaced_is_refused() -> None:
    stored = in_s3()
    [(key, body)] = stored.objects.items()
    script = Script(objects.read_envelope(make_core(), stored.row))
    script.expect([S3Get(key)], [None])
    assert script.raises(MissingObjectError).key == key

    script = Script(objects.read_envelope(make_core(), stored.row))
    script.expect([S3Get(key)], [body[:-1] + bytes([body[-1] ^ 1])])
    assert "digest" in str(script.raises(CorruptObjectError))

    # An intact object filed under another checkpoint's item.
    row = stored.row
    row.checkpoint_id = "c02"
    script = Script(objects.read_envelope(make_core(), row))
    script.expect([S3Get], [body])
    assert "another checkpoint" in str(script.raises(CorruptObjectError))


def test_write_blobs_must_load_but_prefetched_value_blobs_may_fail() -> None:
    core = make_core()
    stored = in_s3()
    [(key, body)] = stored.objects.items()
    (needed, needed_body), (hint, _) = blob(core, b"write"), blob(core, b"hint")
    into: dict[str, bytes] = {}
    script = Script(objects.read_envelopes(core, [stored.row], refs(needed), refs(hint), into))
    script.expect([S3Get(key), S3Get(needed), S3Get(hint)], [body, needed_body, None])
    assert [e.checkpoint_id for e in script.returns()] == ["c01"]
    assert into == {needed: b"write"}

    script = Script(objects.read_envelopes(make_core(), [stored.row], refs(needed), refs(hint), {}))
    script.expect([S3Get, S3Get, S3Get], [body, None, None])
    assert script.raises(MissingObjectError).key == needed


# --------------------------------------------------------------------------- uploads
def test_an_upload_claims_its_blobs_and_marks_them_known_once_done() -> None:
    core = make_core(chunk_items=False)
    key, body = blob(core, b"payload")
    script = Script(objects.store_chunks(core, "t1", {key: body}, lambda _: [S3Get("extra")]))
    put, _ = script.expect([S3Put, S3Get("extra")], [None, b"E"])
    assert (put.key, put.body) == (key, body) and put.done is not None
    assert script.returns().placed == {bytes.fromhex(key.rsplit("/", 1)[1]): None}
    assert core.caches.known_blobs.get(key) is True
    # Known blobs are not uploaded again.
    assert Script(objects.store_chunks(core, "t1", {key: body})).returns().shares.bodies == {}


def test_a_second_flow_waits_for_the_blob_another_flow_is_uploading() -> None:
    core = make_core(chunk_items=False)
    key, body = blob(core, b"shared")
    first = Script(objects.store_chunks(core, "t1", {key: body}))
    [put] = first.pending
    second = Script(objects.store_chunks(core, "t1", {key: body}))
    [wait] = second.pending
    assert isinstance(wait, WaitUpload) and wait.pending is put.done
    first.step([None])
    assert wait.pending.result() is True
    second.step([True])
    assert second.returns().shares.bodies == {} and first.returns().shares.bodies == {key: body}


def test_a_failed_upload_is_placed_again_by_the_flow_that_waited_for_it() -> None:
    core = make_core(chunk_items=False)
    key, body = blob(core, b"shared")
    asked: list[int] = []
    other = Script(objects.store_chunks(core, "t1", {key: body}))
    waiting = Script(
        objects.store_chunks(core, "t1", {key: body}, lambda s: [S3Get(f"extra{len(asked)}")])
    )
    asked.append(1)
    other.throw(S3SaverError("PUT failed"))
    other.raises(S3SaverError)
    # The failed upload was released: nothing vouches for the blob any more.
    assert key not in core.caches.known_blobs and core.caches.objects.get(key) is None
    waiting.step([False, b"E"])
    # placed again: its own upload, and what goes with it asked for again
    retry, _ = waiting.expect([S3Put, S3Get("extra1")], [None, b"E"])
    assert retry.key == key
    waiting.returns()
    assert core.caches.known_blobs.get(key) is True


def test_a_flow_stopped_before_its_upload_finished_releases_the_blob() -> None:
    core = make_core(chunk_items=False)
    key, body = blob(core, b"abandoned")
    core.caches.objects.put(key, b"abandoned", 9)  # as planning a blob caches its content
    flow = objects.store_chunks(core, "t1", {key: body})
    [put] = next(flow)
    flow.close()  # the caller went away before the driver resolved the upload
    assert put.done.result() is False
    assert core.caches.objects.get(key) is None
    # Nobody waits on a dead upload: the next flow owns the blob.
    [again] = Script(objects.store_chunks(core, "t1", {key: body})).pending
    assert isinstance(again, S3Put)


# --------------------------------------------------------------------------- listing
def test_listing_follows_continuation_tokens() -> None:
    script = Script(objects.list_keys(make_core(), "t1/"))
    script.expect(S3List("t1/"), ListPage([("t1/a", 1.0, 3)], "tok"))
    script.expect(S3List("t1/", "tok"), ListPage([("t1/b", 2.0, 4)], None))
    assert script.returns() == [("t1/a", 1.0, 3), ("t1/b", 2.0, 4)]


def test_deletes_go_1000_keys_a_request_all_at_once() -> None:
    assert Script(objects.delete_objects(make_core(), [])).returns() is None
    keys = [f"k{i}" for i in range(2500)]
    script = Script(objects.delete_objects(make_core(), keys + keys[:10]))
    batch = script.expect([S3Delete, S3Delete, S3Delete], [None, None, None])
    assert [len(op.keys) for op in batch] == [1000, 1000, 500]
    assert [k for op in batch for k in op.keys] == keys
    script.returns()


def test_the_object_key_of_a_row_is_its_checkpoint_key() -> None:
    row = in_s3().row
    assert objects.object_key(make_core(), row) == make_core().layout.checkpoint_key(
        "t1", "", "c01", row.digest
    )
    assert schema.is_checkpoint_item(row.item)


def test_random_payloads_round_trip_through_check_blob() -> None:
    core = make_core()
    payload = os.urandom(100)
    key, body = blob(core, payload)
    assert objects.check_blob(core, key, body) == payload
