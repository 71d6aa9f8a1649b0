"""Flow tests of the collector and chunk items (layout 5, ``core.collect_items``): kept
while an entry names them, deleted after two runs ``grace`` apart with a delete
conditional on their ``at``, spared or gone with their thread. Chunk items come from
real puts (``canned.store`` keeps the items their BatchWriteItem writes)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import collect_items, schema, scratch
from langgraph_s3.core.collect_items import needed, ref_key
from langgraph_s3.core.entries import IN_INDEX, Blobs, Span
from langgraph_s3.core.index import BatchWrite, DeleteUnchanged
from langgraph_s3.keys import Layout
from langgraph_s3.operations import S3Delete, S3Get, S3List, S3Put
from tests.core.canned import T0, Stored, checkpoint, config, make_core, store, store_writes
from tests.core.test_collect import DAY, HOUR, Storage, a_thread, deleted_items

#: A value whose one chunk is stored as a chunk item: too large for the body in the
#: index (4 KiB), small enough to cost fewer write units than a PUT (5 KB: 6 < 8).
MID = os.urandom(5000).hex()
#: The same, of a put that never committed.
LOST = os.urandom(5000).hex()


def with_items(storage: Storage, *stored: Stored, committed: bool = True) -> None:
    """What puts wrote, their chunk items too (written before the commit, like objects)."""
    storage.add(*stored, committed=committed)
    for s in stored:
        for item in items_of(s):
            storage.items[item[schema.PK]["S"], item[schema.SK]["S"]] = item


def items_of(stored: Stored) -> list[dict[str, Any]]:
    """The chunk items a put wrote."""
    return list(stored.chunk_items.values())


def chunk_keys(storage: Storage) -> set[tuple[str, str]]:
    return {k for k in storage.items if k[1].startswith(schema.CHUNK_SK_PREFIX)}


def state_ref(item: dict[str, Any]) -> str:
    """How the state names a chunk item."""
    return ref_key(Layout.folder_of_pk(item[schema.PK]["S"]), item[schema.SK]["S"])


def a_thread_with_items(storage: Storage) -> tuple[Stored, Stored, Stored]:
    """Thread t1 in ``storage``: c1 names a chunk item (its body in the index), a
    pending write on it names another; c9 never committed: its chunk item is garbage."""
    core = make_core()
    c1 = store(config(), checkpoint("c1", {"mid": MID, "x": 1}), core=core)
    w1 = store_writes(config("t1", "c1"), [("out", os.urandom(5000).hex())], "task", core=core)
    c9 = store(config("t1", "c1"), checkpoint("c9", {"mid": LOST}), core=core)
    assert all(len(s.chunk_items) == 1 for s in (c1, w1, c9)) and not c1.objects
    with_items(storage, c1, w1)
    with_items(storage, c9, committed=False)
    return c1, w1, c9


def test_chunk_items_entries_name_are_kept_and_the_others_go_after_two_runs(
    tmp_path: Path,
) -> None:
    storage = Storage()
    c1, w1, c9 = a_thread_with_items(storage)
    (live,), (written,), (junk,) = items_of(c1), items_of(w1), items_of(c9)

    first = storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    assert storage.condemned() == {state_ref(junk): T0 + HOUR}
    assert (first.chunk_items, first.chunk_items_referenced, first.chunk_items_condemned) == (
        3,
        2,
        1,
    )
    assert first.chunk_items_deleted == 0
    assert not [op for op in storage.sent if isinstance(op, DeleteUnchanged)]
    assert "3 chunk item(s), 2 referenced, 1 condemned, deleted 0 (0 bytes)" in first.summary()

    # Condemned for just under grace: it stays.
    storage.run(tmp_path, at=T0 + 2 * HOUR - 1, grace=HOUR)
    assert state_ref(junk) in storage.condemned() and len(chunk_keys(storage)) == 3

    second = storage.run(tmp_path, at=T0 + 2 * HOUR, grace=HOUR)
    deletes = [op for op in storage.sent if isinstance(op, DeleteUnchanged)]
    assert deletes == [DeleteUnchanged("t", junk["pk"]["S"], junk["sk"]["S"], str(int(T0 * 1000)))]
    assert (second.chunk_items_deleted, second.chunk_item_bytes_deleted) == (
        1,
        len(junk[schema.VALUE]["B"]),
    )
    assert chunk_keys(storage) == {(i["pk"]["S"], i["sk"]["S"]) for i in (live, written)}
    assert storage.condemned() == {}
    assert storage.has_item(c1) and storage.has_item(w1)


def test_the_sweep_of_chunk_items_comes_after_the_listing_and_before_the_state(
    tmp_path: Path,
) -> None:
    storage = Storage()
    _, _, c9 = a_thread_with_items(storage)
    storage.condemn({state_ref(items_of(c9)[0]): T0})
    storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    tail = storage.rounds[-4:]
    assert tail[0] == [S3Get(storage.state_key)] and tail[1] == S3List("")
    assert [type(op) for op in tail[2]] == [DeleteUnchanged]
    assert isinstance(tail[3], S3Put) and tail[3].key == storage.state_key


def test_a_chunk_item_written_again_since_it_was_condemned_stays(tmp_path: Path) -> None:
    storage = Storage()
    _, _, c9 = a_thread_with_items(storage)
    storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    (junk,) = items_of(c9)
    assert state_ref(junk) in storage.condemned()

    # A writer stores the same chunk again (a put retried): ``at`` is refreshed, and the
    # item is young, so the run after grace keeps it (still condemned, not deleted).
    later = make_core(clock=lambda: T0 + 1.5 * HOUR)
    again = store(config("t1", "c1"), checkpoint("c9", {"mid": LOST}), core=later)
    assert [i[schema.SK] for i in items_of(again)] == [junk[schema.SK]]
    with_items(storage, again, committed=False)
    report = storage.run(tmp_path, at=T0 + 2 * HOUR, grace=HOUR)
    assert report.chunk_items_deleted == 0
    assert not [op for op in storage.sent if isinstance(op, DeleteUnchanged)]
    assert (junk["pk"]["S"], junk["sk"]["S"]) in storage.items


class RewrittenAfterScan(Storage):
    """A writer stores the chunk of every conditional delete again just before it
    arrives: after the collector's scan, before its delete."""

    def answer(self, op: Any) -> Any:
        if isinstance(op, DeleteUnchanged):
            item = self.items[op.pk, op.sk]
            self.items[op.pk, op.sk] = {**item, schema.AT: schema.n(int(self.now * 1000))}
        return super().answer(op)


def test_a_chunk_item_written_again_after_the_scan_survives_its_delete(tmp_path: Path) -> None:
    storage = RewrittenAfterScan()
    _, _, c9 = a_thread_with_items(storage)
    (junk,) = items_of(c9)
    storage.condemn({state_ref(junk): T0})

    report = storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    assert [op.sk for op in storage.sent if isinstance(op, DeleteUnchanged)] == [junk["sk"]["S"]]
    assert report.chunk_items_deleted == 0 and report.chunk_item_bytes_deleted == 0
    assert (junk["pk"]["S"], junk["sk"]["S"]) in storage.items
    # Not condemned any more: the next run judges it afresh (two runs again).
    assert storage.condemned() == {}


def test_a_dry_run_counts_the_chunk_items_it_would_delete_and_deletes_none(
    tmp_path: Path,
) -> None:
    storage = Storage()
    _, _, c9 = a_thread_with_items(storage)
    (junk,) = items_of(c9)
    storage.condemn({state_ref(junk): T0})
    report = storage.run(tmp_path, at=T0 + HOUR, grace=HOUR, dry_run=True)
    assert (report.chunk_items_deleted, report.chunk_item_bytes_deleted) == (
        1,
        len(junk[schema.VALUE]["B"]),
    )
    assert not [op for op in storage.sent if isinstance(op, DeleteUnchanged | S3Put)]
    assert len(chunk_keys(storage)) == 3
    assert "would delete 1" in report.summary().split("chunk item(s)")[1]


def test_a_protected_threads_chunk_items_are_spared(tmp_path: Path) -> None:
    storage = Storage()
    _, _, c9 = a_thread_with_items(storage)
    # A checkpoint of the thread whose object is gone: what it references is unknown.
    lost = store(
        config("t1", "c1"), checkpoint("c5", {"big": os.urandom(12_000).hex()}), core=writer0()
    )
    storage.add(lost)
    for key in lost.objects:
        del storage.objects[key]
    storage.condemn({state_ref(items_of(c9)[0]): T0 - DAY})

    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert report.chunk_items == 3 and report.chunk_items_referenced == 3
    assert not [op for op in storage.sent if isinstance(op, DeleteUnchanged)]
    assert len(chunk_keys(storage)) == 3 and storage.condemned() == {}


def writer0() -> Any:
    """A saver state that puts checkpoint bodies in S3."""
    return make_core(index_inline_limit=0)


def test_an_expired_threads_chunk_items_go_with_its_items_and_are_not_judged(
    tmp_path: Path,
) -> None:
    storage = Storage()
    c1, w1, c9 = a_thread_with_items(storage)
    storage.add(*a_thread("busy", at=T0 + 2 * DAY))
    report = storage.run(tmp_path, at=T0 + 2 * DAY, grace=HOUR, idle_ttl=DAY)
    assert report.threads_expired == ["t1"]
    expired = {(k["pk"]["S"], k["sk"]["S"]) for k in deleted_items(storage.sent)}
    assert {(i["pk"]["S"], i["sk"]["S"]) for s in (c1, w1, c9) for i in items_of(s)} <= expired
    assert chunk_keys(storage) == set()
    assert report.chunk_items == 0 and report.chunk_items_condemned == 0
    assert not [op for op in storage.sent if isinstance(op, DeleteUnchanged)]
    assert storage.condemned() == {}


def test_a_table_without_chunk_items_sends_no_request_for_them(tmp_path: Path) -> None:
    storage = Storage()
    storage.add(*a_thread())
    report = storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    assert report.chunk_items == 0 and "chunk item" not in report.summary()
    assert not [op for op in storage.sent if isinstance(op, DeleteUnchanged | BatchWrite)]
    assert [type(op) for op in storage.rounds[-3:]] == [list, S3List, S3Put]
    assert not [op for op in storage.sent if isinstance(op, S3Delete)]


def test_the_sweep_of_chunk_items_ticks_progress_page_by_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own stage after the object sweep's, a tick per page of chunk items (one item
    a page here) with the items judged so far, each after that page's deletes."""
    monkeypatch.setattr(scratch, "_FETCH", 1)
    monkeypatch.setattr(collect_items, "_DELETE_BATCH", 1)
    storage = Storage()
    _, _, c9 = a_thread_with_items(storage)
    storage.condemn({state_ref(items_of(c9)[0]): T0})
    ticks: list[tuple[str, int, int, int]] = []

    def progress(stage: str, done: int, total: int) -> None:
        deletes = sum(isinstance(op, DeleteUnchanged) for op in storage.sent)
        ticks.append((stage, done, total, deletes))

    report = storage.run(tmp_path, at=T0 + HOUR, grace=HOUR, progress=progress)
    assert report.chunk_items_deleted == 1
    stages = [stage for stage, _ in itertools.groupby(t[0] for t in ticks)]
    assert stages == ["scan", "mark", "sweep", collect_items.STAGE]
    # Pages come in key order; the condemned item's page ticks after its delete.
    (junk,) = items_of(c9)
    at = sorted(sk for _, sk in chunk_keys(storage) | {("t1", junk["sk"]["S"])}).index(
        junk["sk"]["S"]
    )
    assert [t for t in ticks if t[0] == collect_items.STAGE] == [
        (collect_items.STAGE, n, 0, int(n > at)) for n in (1, 2, 3)
    ]


def test_needed_names_the_objects_and_the_chunk_items_of_an_entry() -> None:
    loose, packed, item = (bytes([n]) * 32 for n in (1, 2, 3))
    pack = bytes([9]) * 32
    entry = Blobs("json", (loose, packed, item), (1, 2, 3), b"", 3,
                  (None, Span(pack, 0, 10), IN_INDEX))  # fmt: skip
    folder = "app/t1/"
    assert needed(folder, entry) == [
        f"app/t1/b/{loose.hex()}",
        f"app/t1/b/{pack.hex()}.pack",
        f"app/t1/b#{item.hex()}",
    ]
    assert ref_key(Layout.folder_of_pk("app/t1"), schema.chunk_sk(item)) == needed(folder, entry)[2]


# --------------------------------------------------------------------------- with encryption
def sealed_thread_with_items(storage: Storage) -> tuple[Any, Stored, Stored]:
    """A sealed thread t1 in ``storage``: c1 names a sealed chunk item; c9, never
    committed, left one. Returns its ``Encryption``, c1 and c9."""
    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    enc = Encryption(StaticKeyRing({"r": os.urandom(32)}, current="r"))
    core = make_core(encryption=enc)
    c1 = store(config(), checkpoint("c1", {"mid": MID}), core=core)
    c9 = store(config("t1", "c1"), checkpoint("c9", {"mid": LOST}), core=core)
    assert codec.is_sealed(items_of(c1)[0][schema.VALUE]["B"])
    with_items(storage, c1)
    with_items(storage, c9, committed=False)
    return enc, c1, c9


def test_with_encryption_sealed_chunk_items_are_marked_by_their_keyed_names(
    tmp_path: Path,
) -> None:
    storage = Storage()
    storage.encryption, c1, _ = sealed_thread_with_items(storage)
    report = storage.run(tmp_path, at=T0 + HOUR, grace=0)
    assert not report.errors and not report.threads_protected
    assert (report.chunk_items_referenced, report.chunk_items_deleted) == (1, 1)
    assert chunk_keys(storage) == {(i["pk"]["S"], i["sk"]["S"]) for i in items_of(c1)}


def shredded_thread_with_items(storage: Storage) -> tuple[Stored, Stored]:
    """What a shred left of :func:`sealed_thread_with_items` (its key items deleted),
    met by a new process with the key ring: c1 and c9."""
    from langgraph_s3 import Encryption

    enc, c1, c9 = sealed_thread_with_items(storage)
    for key in [k for k in storage.items if k[1].startswith(schema.KEY_SK_PREFIX)]:
        del storage.items[key]
    storage.encryption = Encryption(enc.ring)
    return c1, c9


def test_a_shreds_leftovers_lose_their_chunk_items_with_their_other_items(
    tmp_path: Path,
) -> None:
    storage = Storage()
    c1, c9 = shredded_thread_with_items(storage)
    first = storage.run(tmp_path, at=T0 + 60, grace=HOUR)
    assert first.threads_orphaned_waiting == ["t1"] and first.chunk_items_referenced == 2
    report = storage.run(tmp_path, at=T0 + DAY, grace=HOUR)
    assert report.threads_orphaned == ["t1"] and not storage.items
    deleted = {op.sk for op in storage.sent if isinstance(op, DeleteUnchanged)}
    assert {i["sk"]["S"] for s in (c1, c9) for i in items_of(s)} <= deleted
    # Deleted as the leftovers' items, once: the sweep of chunk items does not judge them.
    assert report.chunk_items == 0 and storage.condemned() == {}


def test_a_keyless_thread_holding_a_chunk_item_stored_without_encryption_is_protected(
    tmp_path: Path,
) -> None:
    storage = Storage()
    c1, _ = shredded_thread_with_items(storage)
    plain = store(config(), checkpoint("c1", {"mid": os.urandom(5000).hex()}))
    with_items(storage, plain, committed=False)  # a chunk item written without encryption
    report = storage.run(tmp_path, at=T0 + DAY, grace=HOUR)
    assert report.threads_orphaned == [] and report.threads_orphaned_waiting == []
    [protected] = report.threads_protected
    assert "stored without encryption" in protected["reason"]
    assert storage.has_item(c1) and len(chunk_keys(storage)) == 3
