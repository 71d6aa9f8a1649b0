"""Cross-region resume: a replica whose index is ahead of its objects never returns an
older or partial state, and two regions cannot fork one thread.

Two regions run in moto (a bucket and a table in each). ``Replicator`` plays S3
replication and DynamoDB global tables, copying what the test says when it says so,
so the lag is under the test's control: index before objects, objects out of order,
one object late by minutes.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any, TypedDict

import boto3
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from moto import mock_aws

from langgraph_s3 import (
    CrossRegion,
    NotYetReplicatedError,
    S3Saver,
    ThreadOwnedElsewhereError,
)

HOME, REPLICA = "us-east-1", "eu-west-1"


class Replicator:
    """Copies index items and objects from the home region to the replica on demand."""

    def __init__(self, home: dict[str, Any], replica: dict[str, Any]) -> None:
        self.home = home
        self.replica = replica

    def _items(self, region: dict[str, Any]) -> list[dict[str, Any]]:
        pages = region["ddb"].get_paginator("scan").paginate(TableName=region["table"])
        return [i for p in pages for i in p["Items"]]

    def index(self, back: bool = False) -> None:
        """Replicate the index (``back``: replica to home), like a global table."""
        src, dst = (self.replica, self.home) if back else (self.home, self.replica)
        for item in self._items(src):
            dst["ddb"].put_item(TableName=dst["table"], Item=item)

    def missing_objects(self) -> list[str]:
        """Objects the replica lacks, newest first (the latest checkpoint needs the first)."""
        listed = [
            (o["LastModified"], o["Key"])
            for p in self.home["s3"]
            .get_paginator("list_objects_v2")
            .paginate(Bucket=self.home["bucket"])
            for o in p.get("Contents", [])
        ]
        have = set(self._keys(self.replica))
        return [k for _, k in sorted(listed, reverse=True) if k not in have]

    def _keys(self, region: dict[str, Any]) -> list[str]:
        pages = region["s3"].get_paginator("list_objects_v2").paginate(Bucket=region["bucket"])
        return [o["Key"] for p in pages for o in p.get("Contents", [])]

    def copy(self, key: str) -> None:
        body = self.home["s3"].get_object(Bucket=self.home["bucket"], Key=key)["Body"].read()
        self.replica["s3"].put_object(Bucket=self.replica["bucket"], Key=key, Body=body)


@pytest.fixture
def regions() -> Iterator[tuple[dict[str, Any], dict[str, Any], Replicator]]:
    with mock_aws():
        table = f"agents-{uuid.uuid4().hex[:8]}"
        made = []
        for region in (HOME, REPLICA):
            info = {
                "region": region,
                "bucket": f"agents-{region}-{uuid.uuid4().hex[:8]}",
                "table": table,
                "s3": boto3.client("s3", region_name=region),
                "ddb": boto3.client("dynamodb", region_name=region),
            }
            S3Saver(
                bucket=info["bucket"],
                table=table,
                region_name=region,
                s3_client=info["s3"],
                dynamodb_client=info["ddb"],
            ).setup()
            made.append(info)
        yield made[0], made[1], Replicator(made[0], made[1])


def saver_in(region: dict[str, Any], home: dict[str, Any], **cross: Any) -> S3Saver:
    return S3Saver(
        bucket=region["bucket"],
        table=region["table"],
        region_name=region["region"],
        s3_client=region["s3"],
        dynamodb_client=region["ddb"],
        home_s3_client=home["s3"],
        cross_region=CrossRegion(home_region=HOME, home_bucket=home["bucket"], **cross),
    )


class State(TypedDict, total=False):
    notes: str
    steps: int
    decision: str


def graph(saver: S3Saver) -> Any:
    def work(state: State) -> State:
        # ~40 KB of hex: stored as a blob, so it travels by S3 replication
        return {
            "notes": state["notes"] + os.urandom(20_000).hex(),
            "steps": state.get("steps", 0) + 1,
        }

    def approve(state: State) -> State:
        return {"decision": "yes" if interrupt("ok?") else "no"}

    b = StateGraph(State)
    b.add_node("work", work)
    b.add_node("approve", approve)
    b.add_edge(START, "work")
    b.add_edge("work", "approve")
    b.add_edge("approve", END)
    return b.compile(checkpointer=saver)


CFG = {"configurable": {"thread_id": "order-99"}}


def paused_thread(home: dict[str, Any]) -> Any:
    """Run in the home region until the approval; return the committed latest tuple."""
    home_saver = saver_in(home, home)
    g = graph(home_saver)
    g.invoke({"notes": "draft"}, CFG)
    g.invoke({"notes": "second draft"}, CFG)  # the thread has an older state too
    return S3Saver(
        bucket=home["bucket"],
        table=home["table"],
        s3_client=home["s3"],
        dynamodb_client=home["ddb"],
    ).get_tuple(CFG)


def needed_objects(home: dict[str, Any]) -> list[str]:
    """The S3 keys a fresh reader in the home region GETs to load the latest checkpoint."""
    s3 = boto3.client("s3", region_name=HOME)
    keys: list[str] = []
    s3.meta.events.register(
        "before-parameter-build.s3.GetObject", lambda params, **_: keys.append(params["Key"])
    )
    reader = S3Saver(
        bucket=home["bucket"], table=home["table"], s3_client=s3, dynamodb_client=home["ddb"]
    )
    assert reader.get_tuple(CFG) is not None
    assert keys, "the latest checkpoint should need at least one blob"
    return keys


def test_index_before_objects_fail_policy_raises_typed_error(regions: Any) -> None:
    home, replica, rep = regions
    paused_thread(home)
    rep.index()
    with pytest.raises(NotYetReplicatedError) as err:
        saver_in(replica, home, read_policy="fail").get_tuple(CFG)
    assert err.value.waited == 0 and err.value.key in rep.missing_objects()
    assert "not in region 'eu-west-1' yet" in str(err.value)


def test_index_before_objects_home_policy_reads_exact_state(regions: Any) -> None:
    home, replica, rep = regions
    committed = paused_thread(home)
    rep.index()
    got = saver_in(replica, home, read_policy="home").get_tuple(CFG)
    assert got is not None
    assert got.checkpoint["id"] == committed.checkpoint["id"]
    assert got.checkpoint["channel_values"] == committed.checkpoint["channel_values"]
    assert got.pending_writes == committed.pending_writes


def test_wait_policy_gets_exact_state_when_objects_arrive_out_of_order(regions: Any) -> None:
    home, replica, rep = regions
    committed = paused_thread(home)
    rep.index()
    # None of the blobs has arrived; the older state's are needed by nothing the
    # reader asks for, the latest state's arrive out of order.
    late = rep.missing_objects()
    assert len(late) >= 2

    def deliver() -> None:
        for key in reversed(late):  # out of order, newest first
            time.sleep(0.15)
            rep.copy(key)

    courier = threading.Thread(target=deliver)
    courier.start()
    got = saver_in(replica, home, read_policy="wait", max_wait=30).get_tuple(CFG)
    courier.join()
    assert got is not None
    assert got.checkpoint["id"] == committed.checkpoint["id"]
    assert got.checkpoint["channel_values"] == committed.checkpoint["channel_values"]


def test_wait_policy_gives_up_on_an_object_late_by_minutes(regions: Any) -> None:
    home, replica, rep = regions
    paused_thread(home)
    rep.index()
    # Everything arrives except one object the latest checkpoint needs.
    stuck = needed_objects(home)[0]
    for key in rep.missing_objects():
        if key != stuck:
            rep.copy(key)
    started = time.monotonic()
    with pytest.raises(NotYetReplicatedError) as err:
        saver_in(replica, home, read_policy="wait", max_wait=0.6).get_tuple(CFG)
    assert 0.6 <= err.value.waited <= 0.7
    assert time.monotonic() - started >= 0.6
    assert err.value.keys == [stuck]
    assert "waited 0.6s" in str(err.value)


def test_resume_in_replica_after_handover_continues_exact_state(regions: Any) -> None:
    home, replica, rep = regions
    committed = paused_thread(home)
    rep.index()
    for key in rep.missing_objects():
        rep.copy(key)
    replica_saver = saver_in(replica, home)
    assert replica_saver.claim_thread("order-99") == HOME
    result = graph(replica_saver).invoke(Command(resume=True), CFG)
    assert result["decision"] == "yes"
    assert result["notes"] == committed.checkpoint["channel_values"]["notes"]
    assert result["steps"] == committed.checkpoint["channel_values"]["steps"]


def test_two_regions_cannot_fork_a_thread(regions: Any) -> None:
    home, replica, rep = regions
    paused_thread(home)
    rep.index()
    for key in rep.missing_objects():
        rep.copy(key)

    # The replica does not own the thread: its resume is refused and writes nothing.
    before = {i["sk"]["S"] for i in rep._items(replica)}
    with pytest.raises(ThreadOwnedElsewhereError) as err:
        graph(saver_in(replica, home)).invoke(Command(resume=True), CFG)
    assert err.value.owner == HOME
    assert {i["sk"]["S"] for i in rep._items(replica)} == before

    # The home region resumes fine.
    assert graph(saver_in(home, home)).invoke(Command(resume=True), CFG)["decision"] == "yes"

    # Hand-over: the replica claims the thread; once the claim has replicated, the
    # home region is refused instead.
    rep.index()
    for key in rep.missing_objects():
        rep.copy(key)
    assert saver_in(replica, home).claim_thread("order-99") == HOME
    rep.index(back=True)
    with pytest.raises(ThreadOwnedElsewhereError) as err:
        graph(saver_in(home, home)).invoke({"notes": "home again"}, CFG)
    assert err.value.owner == REPLICA
    out = graph(saver_in(replica, home)).invoke({"notes": "replica now"}, CFG)
    assert out["notes"].startswith("replica now")


async def test_claim_thread_through_the_async_api(regions: Any) -> None:
    """``aclaim_thread`` (S3Saver's, on a worker thread) hands a thread over exactly as
    ``claim_thread`` does; both savers offer both names."""
    home, replica, rep = regions
    paused_thread(home)
    rep.index()
    for key in rep.missing_objects():
        rep.copy(key)
    assert await saver_in(replica, home).aclaim_thread("order-99") == HOME
    rep.index(back=True)
    with pytest.raises(ThreadOwnedElsewhereError) as err:
        graph(saver_in(home, home)).invoke({"notes": "home again"}, CFG)
    assert err.value.owner == REPLICA
    from langgraph_s3 import AsyncS3Saver

    for name in ("claim_thread", "aclaim_thread"):
        assert callable(getattr(S3Saver, name)) and callable(getattr(AsyncS3Saver, name))
