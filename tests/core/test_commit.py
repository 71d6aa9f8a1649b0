"""Flow tests of ``core.commit``: what a put uploads and commits, and every way the
commit transaction can fail (docs/concurrency.md)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6

from langgraph_s3 import codec, guard
from langgraph_s3.core import commit, incarnations, schema
from langgraph_s3.core.index import IDEMPOTENT_MISMATCH, TXN_CANCELLED, Cancelled, Transact, key
from langgraph_s3.errors import (
    CheckpointConflictError,
    ClockSkewError,
    CorruptObjectError,
    InvalidConfigError,
    S3SaverError,
    ThreadOwnedElsewhereError,
)
from langgraph_s3.operations import IndexRequest, S3Put, Sleep
from langgraph_s3.regions import CrossRegion
from tests.core.canned import T0, checkpoint, config, make_core, page, store
from tests.core.script import Script

BIG = os.urandom(12_000).hex()  # 24 KB of incompressible text: above the inline threshold


def cancelled(script: Script[Any], *codes: str, **items: dict[str, Any]) -> Cancelled | None:
    """The answer to the pending transaction when DynamoDB cancels it, decoded as the
    transport does (``refused``); ``items`` gives the old item of a part by position
    (``p1={...}``)."""
    assert is_txn(script.pending), script.pending
    reasons = []
    for i, code in enumerate(codes):
        reason: dict[str, Any] = {"Code": code}
        if f"p{i}" in items:
            reason["Item"] = items[f"p{i}"]
        reasons.append(reason)
    txn: Transact = script.pending
    return txn.refused(TXN_CANCELLED, {"CancellationReasons": reasons})


def is_txn(op: Any) -> bool:
    return isinstance(op, IndexRequest) and op.method == "transact_write_items"


def roles(op: IndexRequest[Any]) -> list[str]:
    return [next(iter(part)) for part in op.params["TransactItems"]]


def head_item(cid: str) -> dict[str, Any]:
    return {schema.CID: schema.s(cid)}


def an_item(cid: str = "c02", parent: str | None = "c01") -> dict[str, Any]:
    """The index item the real put builds for a small checkpoint ``cid``."""
    return store(config(cid=parent), checkpoint(cid, {"x": 1})).item


# --------------------------------------------------------------------------- put
def test_a_small_checkpoint_lives_in_its_index_item_and_commits_once() -> None:
    core = make_core()
    script = Script(
        commit.put(core, config(), checkpoint("c01", {"x": 1}), {"step": 0}, {"x": "1"})
    )
    # Nothing goes to S3, not even on a saver's first put: the body is not uploaded,
    # and the bucket is not checked (a wrong one shows at the first S3 request).
    txn = script.expect(is_txn, None)
    assert script.returns() == {
        "configurable": {"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": "c01"}
    }
    assert roles(txn) == ["Put", "Update"]
    item = txn.params["TransactItems"][0]["Put"]["Item"]
    assert schema.BODY in item and schema.PARENT not in item
    assert item[schema.AT] == schema.n(int(T0 * 1000))
    # The head may only move forward (an unguarded put: no read of the latest).
    head = txn.params["TransactItems"][1]["Update"]
    assert head["ConditionExpression"] == "attribute_not_exists(#c) OR #c <= :c"
    # The idempotency token is derived from the checkpoint, so a resend repeats it.
    assert txn.params["ClientRequestToken"] == commit.commit_token(item)


def test_a_large_value_goes_to_blobs_and_the_body_to_s3_with_a_prefetch_list() -> None:
    core = make_core(index_inline_limit=0)
    script = Script(
        commit.put(core, config(), checkpoint("c01", {"big": BIG, "x": 1}), {}, {"big": "1"})
    )
    batch = script.expect(lambda ops: isinstance(ops, list), [None] * len(script.pending))
    puts = [op for op in batch if isinstance(op, S3Put)]
    blob_keys = [op.key for op in puts if "/b/" in op.key]
    body_keys = [op.key for op in puts if "/c/" in op.key]
    assert blob_keys and len(body_keys) == 1 and len(puts) == len(batch)
    txn = script.expect(is_txn, None)
    script.returns()
    item = txn.params["TransactItems"][0]["Put"]["Item"]
    assert schema.BODY not in item
    assert body_keys[0].endswith(item[schema.DIGEST]["S"][:32])
    prefetch = schema.parse_row(item).prefetch
    assert sorted(core.layout.blob_key("t1", d.hex()) for d in prefetch) == sorted(blob_keys)

    # The next put of the same value at the same version re-uses the entry and its
    # blobs, now known to exist: only the new body goes up.
    nxt = Script(
        commit.put(core, config(cid="c01"), checkpoint("c02", {"big": BIG, "x": 1}), {}, {})
    )
    [body] = nxt.expect([S3Put], [None])
    assert "/c/" in body.key
    nxt.expect(is_txn, None)
    nxt.returns()


def test_a_body_too_large_for_the_index_moves_its_largest_values_to_blobs() -> None:
    core = make_core(chunk_items=False)  # index limit 4 KiB, inline threshold 16 KiB
    values = {"a": os.urandom(3000).hex(), "b": os.urandom(2500).hex(), "c": "small"}
    script = Script(
        commit.put(core, config(), checkpoint("c01", values), {}, dict.fromkeys(values, "1"))
    )
    batch = script.expect(lambda ops: isinstance(ops, list), [None] * len(script.pending))
    blobs = [op for op in batch if isinstance(op, S3Put)]
    assert blobs and all("/b/" in op.key for op in blobs)  # the body itself stays in the index
    txn = script.expect(is_txn, None)
    script.returns()
    item = txn.params["TransactItems"][0]["Put"]["Item"]
    assert schema.BODY in item and len(item[schema.BODY]["B"]) <= core.index_inline_limit


@pytest.mark.parametrize(
    ("settings", "indexed"),
    [
        ({}, False),  # layout 9: the body is in the item, its metadata is filtered there
        ({"index_inline_limit": 0}, True),  # a body in S3: the index filters on md
        ({"trim_items": False}, True),  # what releases before 0.9.0 read
    ],
)
def test_the_item_indexes_run_id_metadata_and_unstored_channels(
    settings: dict[str, Any], indexed: bool
) -> None:
    cp = checkpoint("c02", {"x": 1}, versions={"x": "1", "delta": "3", "__start__": "2"})
    md = {"run_id": "r1", "step": 2, "source": "loop", "blob": {"no": "index"}, "flag": None}
    md["counters_since_delta_snapshot"] = {"delta": (0, 1)}
    item = store(config(cid="c01"), cp, md, core=make_core(**settings)).item
    assert item[schema.PARENT] == schema.s("c01")
    assert item[schema.RUN] == schema.s("r1")
    # ``__start__`` has a version and no value too, but is no delta channel.
    assert item[schema.UNSTORED] == {"SS": ["delta"]}
    expected = {
        "M": {
            "run_id": schema.s("s:r1"),
            "step": schema.s("n:2"),
            "source": schema.s("s:loop"),
            "flag": schema.s("z"),
        }
    }
    assert item.get(schema.METADATA) == (expected if indexed else None)
    assert (schema.BODY in item) is not bool(settings.get("index_inline_limit", 1) == 0)


def test_only_delta_channels_are_named_unstored() -> None:
    versions = {"x": "1", "__start__": "2", "branch:to:a": "2"}
    cp = checkpoint("c02", {"x": 1}, versions=versions)
    assert schema.UNSTORED not in store(config(cid="c01"), cp, {"step": 1}).item
    older = {"step": 1, "delta_writes_versioned": True}
    item = store(config(cid="c01"), cp, older).item
    assert item[schema.UNSTORED] == {"SS": ["__start__", "branch:to:a"]}


def test_unversioned_channel_values_are_not_stored() -> None:
    cp = checkpoint("c01", {"x": 1, "stray": 2}, versions={"x": "1"})
    assert store(config(), cp).row.unstored == frozenset()
    item = store(config(), cp).item
    assert schema.UNSTORED not in item


def test_a_guarded_put_whose_id_sorts_before_its_parent_is_refused_before_any_io() -> None:
    older, newer = str(uuid6(clock_seq=1)), str(uuid6(clock_seq=2))
    cfg = config(cid=newer)
    cfg["configurable"]["thread_id"] = guard.read_latest("t1", "", newer)
    script = Script(commit.put(make_core(), cfg, checkpoint(older, {"x": 1}), {}, {"x": "1"}))
    err = script.raises(ClockSkewError)
    assert err.retry_after is not None and err.retry_after >= 0
    assert "retry in" in str(err)


def test_clock_skew_without_uuid6_ids_says_retry_later() -> None:
    err = commit.clock_skew("t1", "", "b", "a")
    assert err.retry_after is None and "retry later" in str(err)
    uuid4 = "9b2d9c3e-7a51-4c7e-9d1a-0f6a4f1e2b3c"
    assert commit.clock_skew("t1", "", uuid4, uuid4).retry_after is None


# --------------------------------------------------------------------------- commit
def test_a_transaction_conflict_is_retried_after_a_backoff() -> None:
    item = an_item()
    script = Script(commit.commit(make_core(), item, "c01", guarded=True))
    first = script.expect(is_txn, cancelled(script, "None", "TransactionConflict"))
    script.expect(Sleep(0.05))
    second = script.expect(is_txn, cancelled(script, "TransactionConflict", "None"))
    script.expect(Sleep(0.1))
    assert script.expect(is_txn, None) == first == second
    script.returns()


def test_a_transaction_that_keeps_conflicting_gives_up_after_five_attempts() -> None:
    script = Script(commit.commit(make_core(), an_item(), "c01", guarded=False))
    for _ in range(5):
        script.expect(is_txn, cancelled(script, "TransactionConflict", "None"))
        if script.pending is not None:
            script.expect(Sleep)
    err = script.raises(S3SaverError)
    assert "kept colliding" in str(err)


def test_an_unexplained_cancellation_is_an_error_naming_its_codes() -> None:
    script = Script(commit.commit(make_core(), an_item(), "c01", guarded=False))
    script.expect(is_txn, cancelled(script, "ValidationError", "None"))
    assert "ValidationError" in str(script.raises(S3SaverError))


@pytest.mark.parametrize(("found", "committed"), [("same", True), ("other", False), (None, False)])
def test_an_idempotency_mismatch_is_resolved_by_reading_the_item(
    found: str | None, committed: bool
) -> None:
    """The same checkpoint resent within 10 minutes with another timestamp: DynamoDB
    refuses the token; the item tells whether the first attempt committed."""
    item = an_item()
    script = Script(commit.commit(make_core(), item, "c01", guarded=True))
    txn = script.pending
    assert is_txn(txn) and IDEMPOTENT_MISMATCH in txn.expect
    script.expect(is_txn, txn.refused(IDEMPOTENT_MISMATCH, {}))
    answer: list[dict[str, Any]] = []
    if found is not None:
        digest = item[schema.DIGEST] if found == "same" else schema.s("0" * 64)
        answer = [{**item, schema.DIGEST: digest}]
    # A Query, not a GetItem: infra/storage.yaml's runtime policy grants no GetItem.
    read = script.expect(
        lambda op: isinstance(op, IndexRequest) and op.method == "query", page(answer)
    )
    values = read.params["ExpressionAttributeValues"]
    assert values[":pk"] == item[schema.PK]
    assert values[":lo"] == values[":hi"] == item[schema.SK]
    assert read.params["ConsistentRead"] is True
    if committed:
        script.returns()
    else:
        assert "not committed" in str(script.raises(S3SaverError))


def test_a_guarded_commit_that_finds_the_head_moved_is_a_conflict() -> None:
    script = Script(commit.commit(make_core(), an_item(), "c01", guarded=True))
    txn = script.expect(
        is_txn, cancelled(script, "None", "ConditionalCheckFailed", p1=head_item("c09"))
    )
    head = txn.params["TransactItems"][1]["Update"]
    assert head["ConditionExpression"] == "attribute_not_exists(#c) OR #c = :p"
    err = script.raises(CheckpointConflictError)
    assert (err.expected, err.actual) == ("c01", "c09")


def test_a_guarded_commit_that_finds_no_head_is_a_conflict() -> None:
    """The thread was deleted (or its latest checkpoint dropped) meanwhile."""
    script = Script(commit.commit(make_core(), an_item(), "c01", guarded=True))
    script.expect(is_txn, cancelled(script, "None", "ConditionalCheckFailed", p1={}))
    err = script.raises(CheckpointConflictError)
    assert (err.expected, err.actual) == ("c01", None)


def test_a_guarded_first_put_expects_no_head() -> None:
    script = Script(commit.commit(make_core(), an_item("c01", None), None, guarded=True))
    txn = script.expect(
        is_txn, cancelled(script, "None", "ConditionalCheckFailed", p1=head_item("c00"))
    )
    assert txn.params["TransactItems"][1]["Update"]["ConditionExpression"] == (
        "attribute_not_exists(#c)"
    )
    err = script.raises(CheckpointConflictError)
    assert (err.expected, err.actual) == (None, "c00")


def test_a_commit_that_finds_itself_as_the_head_was_already_done() -> None:
    script = Script(commit.commit(make_core(), an_item("c02"), "c01", guarded=True))
    script.expect(is_txn, cancelled(script, "None", "ConditionalCheckFailed", p1=head_item("c02")))
    script.returns()


def test_a_fork_below_the_head_is_committed_without_moving_it() -> None:
    item = an_item("c02")
    script = Script(commit.commit(make_core(), item, "c01", guarded=False))
    first = script.expect(
        is_txn, cancelled(script, "None", "ConditionalCheckFailed", p1=head_item("c05"))
    )
    retry = script.expect(is_txn, None)
    script.returns()
    assert roles(first) == ["Put", "Update"] and roles(retry) == ["Put"]
    assert retry.params["TransactItems"][0] == first.params["TransactItems"][0]
    assert retry.params["ClientRequestToken"] == commit.commit_token(item, "below-head")
    assert retry.params["ClientRequestToken"] != first.params["ClientRequestToken"]


def test_a_damaged_head_item_is_reported_as_corrupt() -> None:
    script = Script(commit.commit(make_core(), an_item(), "c01", guarded=True))
    script.expect(
        is_txn, cancelled(script, "None", "ConditionalCheckFailed", p1={schema.CID: {"N": "1"}})
    )
    err = script.raises(CorruptObjectError)
    assert err.key == "t1|h#~|cid"


# --------------------------------------------------------------------------- regions
def replica(**kw: Any) -> Any:
    return make_core(
        region_name="eu-west-1", cross_region=CrossRegion("us-east-1", read_policy="fail"), **kw
    )


@pytest.mark.parametrize(("owner_item", "owner"), [({}, "us-east-1"), (None, "ap-south-1")])
def test_a_commit_in_a_region_that_does_not_own_the_thread_is_refused(
    owner_item: dict[str, Any] | None, owner: str
) -> None:
    core = replica()
    script = Script(commit.commit(core, an_item(), "c01", guarded=False))
    reasons: dict[str, Any] = {}
    if owner_item is None:
        reasons["p2"] = {schema.REGION: schema.s(owner)}
    txn = script.expect(
        is_txn, cancelled(script, "None", "None", "ConditionalCheckFailed", **reasons)
    )
    check = txn.params["TransactItems"][2]["ConditionCheck"]
    assert check["Key"][schema.SK] == schema.s(schema.OWNER_SK)
    assert check["ConditionExpression"] == "#r = :me"  # a replica owns only what it claimed
    err = script.raises(ThreadOwnedElsewhereError)
    assert (err.thread_id, err.owner) == ("t1", owner)


def test_the_home_region_owns_every_unclaimed_thread() -> None:
    core = make_core(region_name="us-east-1", cross_region=CrossRegion("us-east-1"))
    [(role, part)] = commit.ownership_parts(core, "t1")
    assert role == "owner"
    assert part["ConditionCheck"]["Key"] == key("t1", schema.OWNER_SK)
    assert part["ConditionCheck"]["ConditionExpression"] == ("attribute_not_exists(#r) OR #r = :me")
    assert commit.ownership_parts(make_core(), "t1") == ()


@pytest.mark.parametrize(
    ("before", "previous"), [("ap-south-1", "ap-south-1"), (None, "us-east-1")]
)
def test_claim_thread_makes_this_region_the_owner(before: str | None, previous: str) -> None:
    script = Script(commit.claim_thread(replica(), "t1"))
    update = script.expect(IndexRequest, before)  # the owner before, if any
    assert update.method == "update_item"
    assert update.params["ExpressionAttributeValues"][":me"] == schema.s("eu-west-1")
    assert update.params["ReturnValues"] == "ALL_OLD"
    assert script.returns() == previous


def test_claim_thread_needs_a_cross_region_configuration() -> None:
    Script(commit.claim_thread(make_core(), "t1")).raises(InvalidConfigError)


def stored_value(core: Any, item: dict[str, Any], channel: str) -> Any:
    env = codec.unpack(
        codec.unframe(item[schema.BODY]["B"], key="", kind=codec.KIND_CHECKPOINT), key=""
    )
    _, type_, data = env["ch"][channel]
    return core.serde.loads_typed((type_, data))


@pytest.mark.parametrize(("version", "second_value"), [("5.25", "fork one"), (5, "fork two")])
def test_only_versions_with_a_random_tail_name_a_cached_value(
    version: str | int, second_value: str
) -> None:
    # Two forks that both hold channel x at version 5, with different values. A
    # version from get_next_version names one value, so the second put re-uses the
    # entry cached for it (x did not move); integer versions (a thread migrated from
    # DynamoDBSaver) repeat across forks and must be encoded afresh.
    core = make_core()
    parent = config(cid="c00")
    store(parent, checkpoint("c01", {"x": "fork one"}, {"x": version}), core=core)
    fork = checkpoint("c02", {"x": "fork two"}, {"x": version})
    second = store(parent, fork, new_versions={}, core=core)
    assert stored_value(core, second.item, "x") == second_value


def test_a_thread_started_again_carries_a_new_incarnation() -> None:
    """Every checkpoint item names the thread's incarnation (``g``): drawn by the put
    that starts the thread, kept by the puts after it (a subgraph's too), new when a
    run starts the thread again; what a saver cached under another one it forgets."""
    core = make_core()
    first = store(config(), checkpoint("c01", {"x": "a"}), core=core)
    mark = first.item[schema.INCARNATION]["B"]
    assert len(mark) == 4
    after = store(config(cid="c01"), checkpoint("c02", {"x": "b"}), core=core)
    sub = store(config(cid=None, ns="sub:1"), checkpoint("c03", {"y": "c"}), core=core)
    assert after.item[schema.INCARNATION]["B"] == sub.item[schema.INCARNATION]["B"] == mark
    again = store(config(), checkpoint("c04", {"x": "d"}), core=core)  # no parent
    assert again.item[schema.INCARNATION]["B"] != mark
    # Another saver's item with yet another incarnation: what this one cached goes.
    core.caches.known_blobs.put("t1/b/" + "0" * 64, True)
    assert incarnations.incarnation(core, "t1", again.item[schema.INCARNATION]["B"]) is False
    assert core.caches.known_blobs.get("t1/b/" + "0" * 64) is True
    assert incarnations.incarnation(core, "t1", b"\x00\x01\x02\x03") is True
    assert core.caches.known_blobs.get("t1/b/" + "0" * 64) is None
    assert incarnations.incarnation(core, "t1", None) is False  # before 0.4.1: nothing said
