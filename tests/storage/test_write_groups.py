"""Grouped records (``core/groups.py``) on moto: a task's fan-out stored as one record,
read back by both savers; a retry keeps the first group, a special write sits beside
it, a sealed group moved elsewhere does not open, copies and re-encryption keep the
writes, and ``gc`` keeps what a group names."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import Encryption, SealedObjectError, codec
from langgraph_s3.core import groups, schema
from langgraph_s3.core.entries import Inline
from langgraph_s3.gc import collect
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend

TOPIC = "x" * 400
SENDS = [("__pregel_tasks", {"topic": TOPIC, "worker": i}) for i in range(10)]


@pytest.fixture
def ring() -> StaticKeyRing:
    return StaticKeyRing({"r": os.urandom(32)}, current="r")


def checkpoint(saver: Any, thread: str) -> Any:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, empty_checkpoint(), {"step": 1}, {})


def writes_item(backend: Backend, thread: str, task: str = "plan") -> dict[str, Any]:
    (item,) = [
        i
        for i in backend.items()
        if i["pk"]["S"].endswith(thread) and i["sk"]["S"].endswith(f"#w#{task}")
    ]
    return item


def attrs(item: dict[str, Any]) -> set[str]:
    return {k for k in item if schema.record_index(k) is not None}


def pending(saver: Any, config: Any) -> list[tuple[str, str, Any]]:
    return list(saver.get_tuple(config).pending_writes)


def test_a_fan_out_is_one_record_read_back_by_both_savers(server_backend: Backend) -> None:
    saver = server_backend.saver()
    config = checkpoint(saver, "t")
    saver.put_writes(config, SENDS, "plan")
    item = writes_item(server_backend, "t")
    assert attrs(item) == {"w0"} and item["w0"]["B"][:1] == codec.GROUP_RECORD
    expected = [("plan", channel, value) for channel, value in SENDS]
    assert pending(server_backend.saver(), config) == expected

    async def read() -> list[Any]:
        async with server_backend.async_saver() as fresh:
            found = await fresh.aget_tuple(config)
            assert found is not None
            return list(found.pending_writes)

    assert asyncio.run(read()) == expected
    # group_writes=False: one record per write, as 0.5.0 writes and reads them.
    apart = server_backend.saver(group_writes=False)
    apart.put_writes(config, SENDS, "plan-apart")
    single = writes_item(server_backend, "t", "plan-apart")
    assert attrs(single) == {f"w{i}" for i in range(10)}
    assert len(item["w0"]["B"]) * 4 < sum(len(single[a]["B"]) for a in attrs(single))


def test_a_retry_keeps_the_first_group_and_another_call_adds_only_new_writes(
    inproc_backend: Backend,
) -> None:
    saver = inproc_backend.saver()
    config = checkpoint(saver, "t")
    saver.put_writes(config, SENDS[:3], "plan")
    first = pending(inproc_backend.saver(), config)
    saver.put_writes(config, SENDS[:3], "plan")  # a retry: the same values
    assert pending(inproc_backend.saver(), config) == first
    # Another call with other values at indices 0-2 and a new one at 3: as in
    # InMemorySaver, the first write of each index stays and index 3 is added.
    other = [("__pregel_tasks", {"topic": "other", "worker": i}) for i in range(4)]
    saver.put_writes(config, other, "plan")
    assert pending(inproc_backend.saver(), config) == [*first, ("plan", *other[3])]
    # The writes went one by one (the group's span was taken): w0 is still the group.
    item = writes_item(inproc_backend, "t")
    assert attrs(item) == {"w0", "w1", "w2", "w3"}
    assert item["w0"]["B"][:1] == codec.GROUP_RECORD


def test_the_async_saver_stores_a_retry_one_by_one_too(server_backend: Backend) -> None:
    other = [("__pregel_tasks", {"topic": "other", "worker": i}) for i in range(4)]

    async def run() -> list[Any]:
        async with server_backend.async_saver() as saver:
            config = await saver.aput(
                {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                empty_checkpoint(),
                {"step": 1},
                {},
            )
            await saver.aput_writes(config, SENDS[:3], "plan")
            await saver.aput_writes(config, other, "plan")  # its group's span is taken
            found = await saver.aget_tuple(config)
            assert found is not None
            return list(found.pending_writes)

    assert asyncio.run(run()) == [*[("plan", *w) for w in SENDS[:3]], ("plan", *other[3])]
    assert attrs(writes_item(server_backend, "t")) == {"w0", "w1", "w2", "w3"}


def test_a_special_write_sits_beside_a_group_and_is_replaced(inproc_backend: Backend) -> None:
    saver = inproc_backend.saver()
    config = checkpoint(saver, "t")
    saver.put_writes(config, [*SENDS[:2], ("__error__", "first")], "plan")
    saver.put_writes(config, [("__error__", "second")], "plan")
    assert attrs(writes_item(inproc_backend, "t")) == {"w0", "m1"}
    # in writes_sort_key order, as InMemorySaver returns them: special writes first
    assert pending(inproc_backend.saver(), config) == [
        ("plan", "__error__", "second"),
        ("plan", *SENDS[0]),
        ("plan", *SENDS[1]),
    ]


def test_a_sealed_group_moved_to_another_slot_does_not_open(
    inproc_backend: Backend, ring: StaticKeyRing
) -> None:
    saver = inproc_backend.saver(encryption=Encryption(ring))
    config = checkpoint(saver, "t")
    saver.put_writes(config, SENDS, "plan")
    saver.put_writes(config, SENDS[:2], "other")
    item, other = writes_item(inproc_backend, "t"), writes_item(inproc_backend, "t", "other")
    assert attrs(item) == {"w0"} and item["w0"]["B"][:1] == codec.SEALED_RECORD
    fresh = inproc_backend.saver(encryption=Encryption(ring))
    assert len(pending(fresh, config)) == 12
    ddb = inproc_backend.dynamodb()
    ddb.put_item(TableName=inproc_backend.table, Item={**other, "w0": item["w0"]})
    with pytest.raises(SealedObjectError, match="task 'other'"):
        inproc_backend.saver(encryption=Encryption(ring)).get_tuple(config)
    # Nor in another attribute of its own slot.
    ddb.put_item(TableName=inproc_backend.table, Item=other)
    moved = {k: v for k, v in item.items() if k != "w0"} | {"w1": item["w0"]}
    ddb.put_item(TableName=inproc_backend.table, Item=moved)
    with pytest.raises(SealedObjectError, match="pending write 1 of task 'plan'"):
        inproc_backend.saver(encryption=Encryption(ring)).get_tuple(config)


@pytest.mark.parametrize("sealed", [False, True])
def test_copies_and_reencryption_keep_a_groups_writes(
    inproc_backend: Backend, ring: StaticKeyRing, sealed: bool
) -> None:
    options: dict[str, Any] = {"encryption": Encryption(ring)} if sealed else {}
    saver = inproc_backend.saver(**options)
    config = checkpoint(saver, "src")
    saver.put_writes(config, SENDS, "plan")
    saver.copy_thread("src", "dst")
    copied = writes_item(inproc_backend, "dst")
    assert attrs(copied) == {"w0"}
    dst = {"configurable": {**config["configurable"], "thread_id": "dst"}}
    expected = pending(inproc_backend.saver(**options), config)
    assert pending(inproc_backend.saver(**options), dst) == expected
    if not sealed:
        return
    saver.reencrypt_thread("src")
    assert attrs(writes_item(inproc_backend, "src")) == {"w0"}
    assert pending(inproc_backend.saver(**options), config) == expected
    # A copy for older releases (group_writes=False) stores the writes one by one.
    inproc_backend.saver(group_writes=False, **options).copy_thread("src", "old")
    assert attrs(writes_item(inproc_backend, "old")) == {f"w{i}" for i in range(10)}


def test_gc_keeps_a_blob_named_only_inside_a_group(inproc_backend: Backend) -> None:
    """A writer groups inline values only, but a reader takes any entry from a group:
    the collector marks what a group names like what a record names."""
    saver = inproc_backend.saver(group_writes=False)
    config = checkpoint(saver, "t")
    big = os.urandom(50_000)
    saver.put_writes(config, [("doc", big), ("note", "small")], "plan")
    item = writes_item(inproc_backend, "t")
    w = schema.parse_writes(item)
    blobs = [k for k in inproc_backend.object_keys() if "/b/" in k]
    assert blobs and not isinstance(w.records[0][1].entry, Inline)
    # The same writes as one group in w0 (what a writer naming a blob would store).
    group = groups.pack(w.records, 3)
    ddb = inproc_backend.dynamodb()
    ddb.put_item(
        TableName=inproc_backend.table,
        Item={k: v for k, v in item.items() if k != "w1"} | {"w0": {"B": group}},
    )
    report = collect(inproc_backend.saver(), grace=0)
    assert report.errors == []
    assert [k for k in inproc_backend.object_keys() if "/b/" in k] == blobs
    assert pending(inproc_backend.saver(), config) == [
        ("plan", "doc", big),
        ("plan", "note", "small"),
    ]
