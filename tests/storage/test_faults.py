"""The fault-injection suite's quick profile (issue 12), in CI.

Every sampled AWS call of a realistic graph's run (see tests/faults/graph.py) is failed
once — refused before the server, or executed with its response lost — with botocore
retries on and off, and the thread is resumed by a fresh saver (the process died) or
by the same one (a warm Lambda container), on S3Saver (moto in-process) and on
AsyncS3Saver (moto server). Then, on both savers: throttling, racing resumes, damaged
storage (chunk lists included) and ``kill -9``. The suite stores the graph's document
as a chunk list (tests/faults/env.py, ``LIST_MIN``), so every case covers lists too.
Every case has a bucket and table of its own, deleted when it ends. Clock skew is
covered by tests/storage/test_clock_skew.py. The full profile (every call, every fault)
is ``python -m tests.faults --profile full``; its figures are in docs/reliability.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

from tests.conftest import Backend
from tests.faults import env
from tests.faults.env import async_saver, sync_clients
from tests.faults.inject import KINDS, Injector, client_config
from tests.faults.sweep import PROFILES, run


def test_quick_fault_profile(moto_server: str, record_property: Callable[[str, Any], None]) -> None:
    figures = run(PROFILES["quick"], server_url=moto_server)
    s = figures["sweep"]
    record_property(
        "faults",
        {
            "injected": s["faults_injected"],
            "resumed": s["resumed"],
            "absorbed": s["absorbed_by_retries"],
            "identical": s["identical_final_state"],
            "torn": s["torn"],
            "forks": s["forks"],
            "lost_writes": s["lost_writes"],
            "double_side_effects_sync": s["double_side_effects_sync"],
        },
    )
    assert figures["same_reference"], "S3Saver and AsyncS3Saver ended in different states"
    # The document really is stored as a chunk list (env.LIST_MIN), by both savers.
    for saver, kinds in figures["entries"].items():
        assert kinds["lists_packed"] + kinds["lists_loose"] > 0, (saver, kinds)

    # The sweep: every planned case injected its fault (unless its run ended before the
    # call: see sweep.summarize, which counts that as failed otherwise), and every
    # invariant held.
    assert s["cases"] == s["planned"] and s["faults_injected"] + s["not_injected"] == s["cases"], s
    assert s["resumed"] > 0 and s["absorbed_by_retries"] > 0, s
    assert not s["failed"], "\n".join(s["failed"])
    assert s["identical_final_state"] == s["faults_injected"]
    assert (s["torn"], s["forks"], s["lost_writes"]) == (0, 0, 0)
    assert (s["double_side_effects_sync"], s["missing_side_effects"]) == (0, 0)

    # Throttling, on both savers: every thread completes with the clean run's state.
    for t in (figures["throttle"], figures["throttle_async"]):
        assert t["throttled"] > 0 and not t["errors"], t
        assert t["completed"] == t["identical"] == t["threads"] and t["bad"] == 0, t

    # N resumes of one interrupted thread at once: one commit, one side effect.
    for race in (figures["race_sync"], figures["race_async"]):
        assert race["commits"] == 1 and race["refused"] == race["racers"] - 1, race
        assert race["side_effects"] == 1 and race["forks"] == 0 and race["identical"], race
        assert not race["other_errors"], race

    # Damaged storage of every kind, on both savers: a typed error naming the key,
    # never a wrong value.
    assert [d["kind"] for d in figures["damage_async"]] == list(PROFILES["quick"].damages)
    for d in figures["damage"] + figures["damage_async"]:
        assert not d["problems"], d
        if d["kind"] == "missing-head":  # the head only guards commits; a missing one
            assert d["resume"] == "completed", d  # is recreated by the next commit
        else:
            missing = d["kind"] in ("missing-blob", "missing-list")
            expected = "MissingObjectError" if missing else "CorruptObjectError"
            assert d["resume"] == expected, d
            assert d["kind"] == "head" or d["refused_reads"] > 0, d

    # kill -9 at seeded calls, then a fresh saver of the same kind resumes.
    for k in (figures["kill9"], figures["kill9_async"]):
        assert k["runs"] == k["killed"] == k["identical"] == PROFILES["quick"].kills, k
        assert k["lists_by_children"] > 0, k  # the children store the document as a list
        assert not k["bad"], k


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("retries", [False, True], ids=["retries-off", "retries-on"])
def test_injected_faults_mean_what_they_say(backend: Backend, kind: str, retries: bool) -> None:
    """The suite's own control: a refused PutObject never reaches storage, a lost one
    is stored although the caller is told it failed; with retries on, botocore sends
    it again and the caller sees success."""
    injector = Injector(target=1, kind=kind, retries=retries)
    s3, _ = sync_clients(backend, client_config(retries), injector)
    key = f"probe-{kind}-{retries}"
    try:
        s3.put_object(Bucket=backend.bucket, Key=key, Body=b"x")
        raised = None
    except Exception as exc:
        raised = exc
    assert injector.fired == "s3.PutObject"
    stored = key in backend.object_keys()
    if retries:
        assert raised is None and stored
    elif kind == "refused":
        assert isinstance(raised, EndpointConnectionError) and not stored
    else:
        assert isinstance(raised, ReadTimeoutError) and stored


@pytest.mark.parametrize("kind", KINDS)
async def test_injected_faults_mean_what_they_say_async(server_backend: Backend, kind: str) -> None:
    """The same control on aiobotocore clients (retries off)."""
    injector = Injector(target=1, kind=kind, retries=False)
    key = f"probe-async-{kind}"
    async with async_saver(server_backend, client_config(False), injector) as saver:
        s3, _ = await saver.clients()
        with pytest.raises(EndpointConnectionError if kind == "refused" else ReadTimeoutError):
            await s3.put_object(Bucket=server_backend.bucket, Key=key, Body=b"x")
    assert injector.fired == "s3.PutObject"
    assert (key in server_backend.object_keys()) == (kind == "lost")


def test_a_case_storage_is_deleted_and_forgotten_when_it_fails(backend: Backend) -> None:
    """env.scratch deletes a case's bucket and table when the case ends, here by raising,
    and moto keeps no copy of what they held: a full sweep grew to 21 GB when it did
    (issue 22). Pins the moto internal env.forget_moto_instances relies on."""
    from moto.dynamodb.models.dynamo_type import Item
    from moto.s3.models import FakeKey

    with pytest.raises(RuntimeError, match="the case failed"), env.scratch(backend) as b:
        b.s3().put_object(Bucket=b.bucket, Key="thread/c/1", Body=b"x" * 1000)
        b.dynamodb().put_item(TableName=b.table, Item={"pk": {"S": "t"}, "sk": {"S": "c#1"}})
        assert b.dynamodb().get_item(TableName=b.table, Key={"pk": {"S": "t"}, "sk": {"S": "c#1"}})
        assert Item.instances_tracked and FakeKey.instances_tracked  # what made sweeps grow
        raise RuntimeError("the case failed")
    s3, ddb = backend.s3(), backend.dynamodb()
    with pytest.raises(s3.exceptions.ClientError, match="404"):
        s3.head_bucket(Bucket=b.bucket)
    with pytest.raises(ddb.exceptions.ResourceNotFoundException):
        ddb.describe_table(TableName=b.table)
    assert (Item.instances_tracked, FakeKey.instances_tracked) == ([], [])
