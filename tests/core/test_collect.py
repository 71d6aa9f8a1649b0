"""Flow tests of ``core.collect``: retention, mark, the two-phase sweep and what the
collector must never touch. Index items and objects come from real puts
(``canned.store``); :class:`Storage` plays DynamoDB and S3 for whole runs, so a test
can run the collector again later on what the previous run left."""

from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import SaverCore, collect, lists, schema
from langgraph_s3.core.collect import KEYLESS, STATE_KEY, collect_flow
from langgraph_s3.core.gcreport import GcReport
from langgraph_s3.core.index import BatchWrite, DeleteUnchanged, Page, Query, ScanSegment
from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.operations import ListPage, S3Delete, S3Get, S3List, S3Put
from tests.core.canned import T0, Stored, checkpoint, config, make_core, page, store, store_writes
from tests.core.script import Script

BIG = os.urandom(12_000).hex()  # a checkpoint value kept in a blob
HUGE = os.urandom(24_000).hex()  # a pending write kept in a blob
HOUR, DAY = 3600.0, 86400.0


def writer(prefix: str = "", at: float = T0, **settings: Any) -> SaverCore:
    """A saver state that puts checkpoint bodies in S3 (not in their items), at ``at``."""
    settings.setdefault("index_inline_limit", 0)
    return make_core(prefix=prefix, clock=lambda: at, **settings)


def garbage(thread: str = "t1", n: int = 0, prefix: str = "") -> str:
    """The key of a blob nothing references (a put that never committed)."""
    return make_core(prefix=prefix).layout.blob_key(thread, f"{n:064x}")


def item_key(item: dict[str, Any]) -> dict[str, Any]:
    return {schema.PK: item[schema.PK], schema.SK: item[schema.SK]}


def deleted_items(ops: list[Any]) -> list[dict[str, Any]]:
    """The keys a run's BatchWrite requests deleted."""
    return [
        r["DeleteRequest"]["Key"]
        for op in ops
        if isinstance(op, BatchWrite)
        for r in op.params["RequestItems"]["t"]
    ]


def deleted_objects(ops: list[Any]) -> list[str]:
    return [k for op in ops if isinstance(op, S3Delete) for k in op.keys]


class Storage:
    """An index and a bucket in memory answering a collection's requests as DynamoDB
    and S3 would: scans page by page over four segments (``scan_page`` items a page),
    listings in key order (``list_page`` keys a page, continuing after the last key
    listed, as S3 does); deletes and puts apply.

    ``rounds`` holds what the last run asked for, a round trip at a time (a list is a
    concurrent batch); ``sent`` the same, flattened.
    """

    def __init__(self, prefix: str = "", scan_page: int = 2, list_page: int = 1000) -> None:
        self.prefix = make_core(prefix=prefix).layout.prefix
        #: the collector's ``encryption=`` (tests of sealed storage)
        self.encryption: Any = None
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.objects: dict[str, tuple[bytes, float]] = {}  # key -> body, last modified
        self.scan_page, self.list_page = scan_page, list_page
        self.now = T0
        self.rounds: list[Any] = []

    def batches(self, kind: type) -> list[list[Any]]:
        """The concurrent batches of ``kind`` requests the last run sent, in order."""
        return [r for r in self.rounds if isinstance(r, list) and isinstance(r[0], kind)]

    @property
    def sent(self) -> list[Any]:
        return [o for r in self.rounds for o in (r if isinstance(r, list) else [r])]

    # ----------------------------------------------------------------- contents
    def add(self, *stored: Stored, modified: float = T0, committed: bool = True) -> None:
        """What puts wrote: their objects and (unless ``committed=False``) items."""
        for s in stored:
            for item in (s.item, s.head, *s.key_items) if committed else ():
                if item:
                    self.items[item[schema.PK]["S"], item[schema.SK]["S"]] = item
            for key, body in s.objects.items():
                self.objects[key] = (body, modified)

    def has_item(self, s: Stored) -> bool:
        return (s.item[schema.PK]["S"], s.item[schema.SK]["S"]) in self.items

    @property
    def state_key(self) -> str:
        return self.prefix + STATE_KEY

    def condemned(self) -> dict[str, float]:
        """The condemnations the state object records."""
        body, _ = self.objects[self.state_key]
        state: dict[str, float] = json.loads(
            codec.unframe(body, key=self.state_key, kind=codec.KIND_BLOB)
        )
        return state

    def condemn(self, keys: dict[str, float]) -> None:
        """Write a state object as an earlier run would have."""
        body = codec.frame(codec.KIND_BLOB, json.dumps(keys).encode(), 3)
        self.objects[self.state_key] = (body, T0)

    # ----------------------------------------------------------------- running
    def run(self, tmp_path: Path, at: float, **options: Any) -> GcReport:
        """One collection at time ``at`` (a fresh saver state, like a new process)."""
        self.now, self.rounds = at, []
        core = make_core(prefix=self.prefix, clock=lambda: at, encryption=self.encryption)
        script = Script(collect_flow(core, workdir=str(tmp_path), **options))
        while script.pending is not None:
            op = script.pending
            self.rounds.append(op)
            script.step([self.answer(o) for o in op] if isinstance(op, list) else self.answer(op))
        report = script.returns()
        assert list(tmp_path.iterdir()) == []  # the scratch file is gone
        return report

    def answer(self, op: Any) -> Any:
        if isinstance(op, Query):  # with encryption=: a thread's data key item
            assert op.prefix == schema.KEY_SK_PREFIX and op.newest_first, op
            keys = sorted(
                (
                    i
                    for (pk, sk), i in self.items.items()
                    if pk == op.pk and sk.startswith(op.prefix)
                ),
                key=lambda i: i[schema.SK]["S"],
                reverse=True,
            )
            return Page(keys[: op.limit], None)
        if isinstance(op, ScanSegment):
            ours = sorted(
                (i for (pk, _), i in self.items.items() if pk.startswith(op.prefix)),
                key=lambda i: (i[schema.PK]["S"], i[schema.SK]["S"]),
            )[op.segment :: op.segments]
            start = int(op.start["n"]["N"]) if op.start else 0
            end = start + self.scan_page
            return page(ours[start:end], {"n": {"N": str(end)}} if end < len(ours) else None)
        if isinstance(op, DeleteUnchanged):
            found = self.items.get((op.pk, op.sk))
            if found is None or found.get(schema.AT, {}).get("N") != op.at:
                return False
            del self.items[op.pk, op.sk]
            return True
        if isinstance(op, BatchWrite):
            for request in op.params["RequestItems"]["t"]:
                key = request["DeleteRequest"]["Key"]
                del self.items[key[schema.PK]["S"], key[schema.SK]["S"]]
            return []
        if isinstance(op, S3Get):  # a whole object, or a range of it (a pack)
            body = self.objects.get(op.key, (None, 0.0))[0]
            return body if body is None else body[op.start : op.end]
        if isinstance(op, S3List):
            listed = sorted(
                (k, m, len(b)) for k, (b, m) in self.objects.items() if k.startswith(op.prefix)
            )
            rest = [entry for entry in listed if op.token is None or entry[0] > op.token]
            keys = rest[: self.list_page]
            return ListPage(keys, keys[-1][0] if len(rest) > len(keys) else None)
        if isinstance(op, S3Delete):
            for key in op.keys:
                del self.objects[key]
            return None
        assert isinstance(op, S3Put), op
        self.objects[op.key] = (op.body, self.now)
        return None


def a_thread(thread: str = "t1", prefix: str = "", at: float = T0) -> tuple[Stored, ...]:
    """A thread's puts: c1 (a value blob, its body in S3), c2 (its body in its item)
    with a large pending write (a blob), and a small pending write."""
    c1 = store(config(thread), checkpoint("c1", {"big": BIG, "x": 1}), core=writer(prefix, at))
    values, versions = {"big": BIG, "x": 2}, {"big": "1", "x": "2"}
    inline = make_core(prefix=prefix, clock=lambda: at)
    c2 = store(config(thread, "c1"), checkpoint("c2", values, versions), core=inline)
    w2 = store_writes(config(thread, "c2"), [("out", HUGE)], "task", core=writer(prefix, at))
    w2b = store_writes(config(thread, "c2"), [("x", 3)], "small", core=writer(prefix, at))
    return c1, c2, w2, w2b


# --------------------------------------------------------------------------- one run, step by step
def test_a_first_run_scans_reads_checkpoints_lists_and_condemns_what_nothing_references(
    tmp_path: Path,
) -> None:
    c1, c2, w2, w2b = a_thread(prefix="app")
    referenced = {**c1.objects, **w2.objects}
    assert len(referenced) == 3  # object, value blob, write blob
    assert set(c2.objects) <= set(c1.objects)  # c2's body is in its item
    junk = garbage(prefix="app")
    core = make_core(prefix="app", clock=lambda: T0 + 60)
    script = Script(collect_flow(core, workdir=str(tmp_path)))
    scans = script.expect(
        [ScanSegment] * 4,
        [page([c1.item, w2.item]), page([c2.item, c2.head]), page([w2b.item]), page([])],
    )
    assert [(s.prefix, s.segment, s.segments) for s in scans] == [("app/", i, 4) for i in range(4)]
    # Only c1's body is in S3; c2's is in its item.
    body = core.layout.checkpoint_key("t1", "", "c1", c1.item[schema.DIGEST]["S"])
    script.expect([S3Get(body)], [c1.objects[body]])
    script.expect([S3Get("app/.gc/state")], [None])
    listing = sorted([(k, T0, len(b)) for k, b in referenced.items()] + [(junk, T0, 7)])
    script.expect(S3List("app/"), ListPage(listing, None))
    put = script.expect(S3Put)
    report = script.returns()

    assert put.key == "app/.gc/state"
    state = json.loads(codec.unframe(put.body, key=put.key, kind=codec.KIND_BLOB))
    assert state == {junk: T0 + 60}
    assert (report.threads, report.objects, report.objects_referenced) == (1, 4, 3)
    assert (report.objects_condemned, report.objects_deleted, report.orphan_writes) == (1, 0, 0)
    assert report.errors == [] and report.scratch_bytes > 0
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- the two-phase sweep
def test_garbage_goes_once_condemned_and_last_written_at_least_grace_ago(tmp_path: Path) -> None:
    storage = Storage()
    storage.add(*a_thread())
    kept = dict(storage.objects)
    old, fresh = garbage(n=1), garbage(n=2)
    storage.objects[old] = (b"old", T0)
    storage.objects[fresh] = (b"fresh", T0 + 2 * HOUR)  # e.g. uploaded again since

    first = storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    assert storage.condemned() == {old: T0 + HOUR, fresh: T0 + HOUR}
    assert first.objects_condemned == 2 and deleted_objects(storage.sent) == []

    # Condemned for just under grace: both stay, their condemnation times unchanged.
    storage.run(tmp_path, at=T0 + 2 * HOUR - 1, grace=HOUR)
    assert storage.condemned() == {old: T0 + HOUR, fresh: T0 + HOUR}

    # Grace is up for both condemnations, but ``fresh`` was written under grace ago.
    third = storage.run(tmp_path, at=T0 + 2 * HOUR, grace=HOUR)
    assert deleted_objects(storage.sent) == [old]
    assert (third.objects_deleted, third.bytes_deleted, third.objects_condemned) == (1, 3, 1)
    assert storage.condemned() == {fresh: T0 + HOUR}

    storage.run(tmp_path, at=T0 + 3 * HOUR, grace=HOUR)
    assert deleted_objects(storage.sent) == [fresh]
    assert storage.condemned() == {}
    assert {k: v for k, v in storage.objects.items() if k != storage.state_key} == kept


def test_a_condemned_object_referenced_again_stays_and_leaves_the_state(tmp_path: Path) -> None:
    storage = Storage()
    c1 = store(config(), checkpoint("c1", {"big": BIG}), core=writer())
    storage.add(c1, committed=False)  # uploaded; the put has not committed (yet)
    storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    assert set(storage.condemned()) == set(c1.objects)

    storage.add(c1)  # the commit lands
    report = storage.run(tmp_path, at=T0 + 3 * HOUR, grace=HOUR)
    assert deleted_objects(storage.sent) == []
    assert report.objects_referenced == 2 and storage.condemned() == {}


def test_referenced_objects_are_never_condemned_even_with_no_grace(tmp_path: Path) -> None:
    storage = Storage(prefix="app")
    stored = a_thread(prefix="app")
    storage.add(*stored)
    referenced = set(storage.objects)
    junk = garbage(prefix="app")
    storage.objects[junk] = (b"junk", T0)
    storage.condemn(dict.fromkeys([*referenced, junk], T0 - DAY))  # a stale state says so

    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert deleted_objects(storage.sent) == [junk]
    assert set(storage.objects) == {*referenced, storage.state_key}
    assert storage.condemned() == {}
    assert all(storage.has_item(s) for s in stored)
    assert (report.objects, report.objects_referenced, report.objects_deleted) == (4, 3, 1)


def test_with_no_grace_garbage_goes_in_its_first_run(tmp_path: Path) -> None:
    storage = Storage()
    storage.objects[garbage()] = (b"junk", T0)
    report = storage.run(tmp_path, at=T0, grace=0)
    assert report.objects_deleted == 1 and storage.condemned() == {}


def test_the_sweep_deletes_each_listing_page_before_reading_the_next(tmp_path: Path) -> None:
    storage = Storage(list_page=2)
    junk = [garbage(f"t{i}") for i in range(3)]
    for key in junk:
        storage.objects[key] = (b"junk", T0)
    storage.condemn(dict.fromkeys(junk, T0))
    storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    sweep = storage.rounds[-6:]
    assert sweep[0] == [S3Get(storage.state_key)]
    assert (
        sweep[1:]
        == [
            S3List(""),
            [S3Delete((junk[0],))],  # the first page also lists the state object
            S3List("", junk[0]),
            [S3Delete(tuple(junk[1:]))],
            sweep[-1],
        ]
    )
    assert isinstance(sweep[-1], S3Put) and sweep[-1].key == storage.state_key


# --------------------------------------------------------------------------- dry run
def test_a_dry_run_reports_what_it_would_delete_and_changes_nothing(tmp_path: Path) -> None:
    storage = Storage()
    idle = a_thread("idle")
    orphan = store_writes(config("t1", "c9"), [("x", 1)], "task")
    storage.add(*a_thread("t1", at=T0 + 2 * DAY), orphan, *idle)
    junk = garbage(n=1)
    storage.objects[junk] = (b"junk", T0)
    storage.condemn({junk: T0})
    before = (dict(storage.items), dict(storage.objects))

    report = storage.run(tmp_path, at=T0 + 2 * DAY, grace=HOUR, idle_ttl=DAY, dry_run=True)
    assert not [op for op in storage.sent if isinstance(op, BatchWrite | S3Delete | S3Put)]
    assert (storage.items, storage.objects) == before
    assert report.dry_run and report.threads_expired == ["idle"]
    assert report.orphan_writes == 1
    # The idle thread's objects are unreferenced: condemned, not yet due.
    assert (report.objects_deleted, report.bytes_deleted) == (1, 4)
    assert report.objects_condemned == len({k for s in idle for k in s.objects})
    assert report.summary().startswith("2 thread(s), 1 expired (0 kept")
    assert "would delete 1 (4 bytes) and 1 pending-write item(s)" in report.summary()


# --------------------------------------------------------------------------- retention
def test_an_idle_thread_is_expired_then_its_objects_are_swept_as_garbage(tmp_path: Path) -> None:
    storage = Storage(prefix="app")
    idle = a_thread("idle", prefix="app")
    active = a_thread("active", prefix="app", at=T0 + 2 * DAY - 1)
    storage.add(*idle, *active)
    idle_objects = {k for s in idle for k in s.objects}

    first = storage.run(tmp_path, at=T0 + 2 * DAY, grace=HOUR, idle_ttl=DAY)
    assert first.threads == 2 and first.threads_expired == ["idle"]
    assert first.threads_kept_interrupted == []
    expected = [
        item_key(i) for i in (idle[0].item, idle[1].item, idle[1].head, idle[2].item, idle[3].item)
    ]
    assert sorted(deleted_items(storage.sent), key=str) == sorted(expected, key=str)
    assert not any(storage.has_item(s) for s in idle) and all(storage.has_item(s) for s in active)
    assert set(storage.condemned()) == idle_objects  # garbage now, in two phases
    assert deleted_objects(storage.sent) == []

    second = storage.run(tmp_path, at=T0 + 2 * DAY + HOUR, grace=HOUR, idle_ttl=DAY)
    assert second.threads == 1 and second.threads_expired == []
    assert sorted(deleted_objects(storage.sent)) == sorted(idle_objects)
    assert set(storage.objects) == {*(k for s in active for k in s.objects), storage.state_key}


def test_a_thread_idle_for_exactly_the_ttl_is_kept(tmp_path: Path) -> None:
    storage = Storage()
    storage.add(*a_thread())
    report = storage.run(tmp_path, at=T0 + DAY, idle_ttl=DAY)
    assert report.threads_expired == [] and deleted_items(storage.sent) == []


def test_a_read_recorded_on_the_head_keeps_a_thread_whatever_scan_page_it_is_on(
    tmp_path: Path,
) -> None:
    """touch_on_read stamps the head only: the thread's items are judged together."""
    storage = Storage(scan_page=1)
    stored = a_thread()
    head = {**stored[1].head, schema.READ_AT: schema.n(int((T0 + 2 * DAY) * 1000))}
    storage.add(*stored)
    storage.items[head[schema.PK]["S"], head[schema.SK]["S"]] = head
    report = storage.run(tmp_path, at=T0 + 2 * DAY + 1, idle_ttl=DAY)
    assert len(storage.batches(ScanSegment)) > 1
    assert report.threads == 1 and report.threads_expired == []


@pytest.mark.parametrize("keep_interrupted", [True, False])
def test_an_idle_thread_waiting_on_an_interrupt_is_kept_unless_told_otherwise(
    tmp_path: Path, keep_interrupted: bool
) -> None:
    storage = Storage()
    waiting = a_thread("waiting")
    ask = store_writes(config("waiting", "c2"), [("__interrupt__", ["approve?"])], "ask")
    # An interrupt on an older checkpoint was answered: that thread is not waiting.
    resumed = a_thread("resumed")
    answered = store_writes(config("resumed", "c1"), [("__interrupt__", ["ok?"])], "ask")
    storage.add(*waiting, ask, *resumed, answered)

    report = storage.run(
        tmp_path, at=T0 + 2 * DAY, grace=HOUR, idle_ttl=DAY, keep_interrupted=keep_interrupted
    )
    gone = {item[schema.PK]["S"] for item in deleted_items(storage.sent)}
    if keep_interrupted:
        assert report.threads_expired == ["resumed"]
        assert report.threads_kept_interrupted == ["waiting"]
        assert gone == {"resumed"}
        assert all(storage.has_item(s) for s in (*waiting, ask))
        assert not {k for s in waiting for k in s.objects} & set(storage.condemned())
        assert "(1 kept: waiting on an interrupt)" in report.summary()
    else:
        assert report.threads_expired == ["resumed", "waiting"]
        assert report.threads_kept_interrupted == []
        assert gone == {"resumed", "waiting"}


# --------------------------------------------------------------------------- orphaned writes
def test_writes_of_a_checkpoint_never_committed_go_once_older_than_grace(tmp_path: Path) -> None:
    storage = Storage()
    committed = a_thread()
    old = store_writes(config("t1", "c9"), [("out", HUGE + "old")], "task", core=writer())
    other_ns = store_writes(config("t1", "c1", ns="sub"), [("x", 1)], "task")  # no c1 in "sub"
    young = store_writes(
        config("t1", "c8"), [("out", HUGE + "young")], "task", core=writer(at=T0 + 1)
    )
    storage.add(*committed, old, other_ns, young)

    report = storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    assert report.orphan_writes == 2
    assert sorted(deleted_items(storage.sent), key=str) == sorted(
        [item_key(old.item), item_key(other_ns.item)], key=str
    )
    assert storage.has_item(young) and all(storage.has_item(s) for s in committed)
    # The old orphan's blob is garbage now; the young one's is still referenced.
    assert set(storage.condemned()) == set(old.objects)
    assert "2 pending-write item(s) of checkpoints never committed" in report.summary()


def test_orphaned_writes_are_deleted_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collect, "_ORPHAN_BATCH", 2)
    storage = Storage()
    for thread, cid in [("t1", "c1"), ("t1", "c2"), ("t2", "c1")]:
        storage.add(store_writes(config(thread, cid), [("x", 1)], "task"))
    report = storage.run(tmp_path, at=T0 + HOUR, grace=HOUR)
    batches = storage.batches(BatchWrite)
    assert [len(deleted_items(b)) for b in batches] == [2, 1]  # after t1, then at the end
    assert report.orphan_writes == 3 and storage.items == {}


# --------------------------------------------------------------------------- unreadable checkpoints
@pytest.mark.parametrize("damage", ["altered", "missing"])
def test_an_unreadable_checkpoint_protects_its_threads_folder(tmp_path: Path, damage: str) -> None:
    storage = Storage()
    broken, fine = a_thread("broken"), a_thread("fine")
    storage.add(*broken, *fine)
    core = make_core()
    key = core.layout.checkpoint_key("broken", "", "c1", broken[0].item[schema.DIGEST]["S"])
    if damage == "missing":  # e.g. pruned after the scan
        del storage.objects[key]
    else:
        body, modified = storage.objects[key]
        storage.objects[key] = (body[:-1] + bytes([body[-1] ^ 1]), modified)
    junk_broken, junk_fine = garbage("broken"), garbage("fine")
    for junk in (junk_broken, junk_fine):
        storage.objects[junk] = (b"junk", T0)

    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert deleted_objects(storage.sent) == [junk_fine]
    assert junk_broken in storage.objects
    if damage == "missing":
        assert report.errors == []
    else:
        [error] = report.errors
        assert key in error and "digest" in error
        assert "; 1 error(s)" in report.summary()
    # The batch failed, so each checkpoint was read again on its own.
    gets = storage.batches(S3Get)
    checkpoints = sorted(op.key for op in gets[0])
    assert [sorted(op.key for op in r) for r in gets[1:3]] == [[k] for k in checkpoints]


def test_an_item_that_does_not_say_which_checkpoint_it_is_protects_its_thread(
    tmp_path: Path,
) -> None:
    """Layout 9 leaves ``th`` to a key that spells it; a long thread id's key holds it
    hashed, so its items keep ``th``. Without it the thread is protected and reported."""
    storage = Storage()
    long_id = "t" * 200
    broken, fine = a_thread(long_id), a_thread("fine")
    storage.add(*broken, *fine)
    item = storage.items[(broken[1].item[schema.PK]["S"], broken[1].item[schema.SK]["S"])]
    del item[schema.THREAD]
    junk_broken, junk_fine = garbage(long_id), garbage("fine")
    for junk in (junk_broken, junk_fine):
        storage.objects[junk] = (b"junk", T0)

    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert deleted_objects(storage.sent) == [junk_fine]
    assert junk_broken in storage.objects and all(k in storage.objects for k in broken[0].objects)
    [error] = report.errors
    assert "names no thread" in error and item[schema.SK]["S"] in error


def test_checkpoints_are_read_in_batches_across_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collect, "_MARK_BATCH", 2)
    storage = Storage()
    for thread in ("t1", "t2", "t3"):
        storage.add(store(config(thread), checkpoint("c1", {"x": 1}), core=writer()))
    storage.run(tmp_path, at=T0, grace=HOUR)
    gets = storage.batches(S3Get)
    assert [len(r) for r in gets] == [2, 1, 1]  # t1+t2, t3, then the state object


def test_no_round_trip_reads_more_than_32_checkpoints(tmp_path: Path) -> None:
    storage = Storage()
    parent = None
    for i in range(40):  # one long-lived thread keeps its history
        cid = f"c{i:02}"
        storage.add(store(config("t1", parent), checkpoint(cid, {"x": i}), core=writer()))
        parent = cid
    storage.run(tmp_path, at=T0, grace=HOUR)
    gets = storage.batches(S3Get)
    assert max(len(r) for r in gets) <= 32


# --------------------------------------------------------------------------- outside the layout
def test_objects_outside_the_layout_are_never_touched(tmp_path: Path) -> None:
    storage = Storage(prefix="app")
    mine = a_thread(prefix="app")
    nested = a_thread("t9", prefix="app/x")  # another saver, under a longer prefix
    outside = a_thread(prefix="other")
    storage.add(*mine, *nested, *outside)
    strangers = [
        "app/notes.txt",
        "app/t1/notes.txt",
        "app/t1/b/not-a-digest",
        "app/t1/c/~/c1.short",
        "app/t1/b/" + "0" * 64 + "/x",
        "app/.gc/other",
        "other/t1/b/" + "0" * 64,
    ]
    for key in strangers:
        storage.objects[key] = (b"?", T0)
    untouchable = set(storage.objects) - {k for s in mine for k in s.objects}
    storage.condemn(dict.fromkeys(untouchable, T0 - DAY))

    report = storage.run(tmp_path, at=T0 + DAY, grace=0, idle_ttl=HOUR)
    assert report.threads == 1 and report.threads_expired == ["t1"]  # not t9
    assert {i[schema.PK]["S"] for i in deleted_items(storage.sent)} == {"app/t1"}
    assert all(storage.has_item(s) for s in (*nested, *outside))
    assert next(r for r in storage.rounds if isinstance(r, S3List)).prefix == "app/"
    # With no grace, t1's objects go at once; nothing else does.
    assert set(deleted_objects(storage.sent)) == {k for s in mine for k in s.objects}
    assert untouchable <= set(storage.objects)
    assert report.objects == 3 and storage.condemned() == {}


# --------------------------------------------------------------------------- settings, progress
@pytest.mark.parametrize(
    "options", [{"grace": -1}, {"idle_ttl": 0}, {"idle_ttl": -1.0}, {"grace": -0.5, "idle_ttl": 1}]
)
def test_bad_grace_or_idle_ttl_is_refused_before_any_request(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    script = Script(collect_flow(make_core(), workdir=str(tmp_path), **options))
    assert "grace must be >= 0 and idle_ttl > 0" in str(script.raises(InvalidConfigError))
    assert list(tmp_path.iterdir()) == []  # not even a scratch file


def test_an_idle_ttl_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    storage = Storage()
    storage.add(*a_thread())
    with pytest.raises(InvalidConfigError):
        storage.run(tmp_path, at=T0, idle_ttl=math.nan)


def test_progress_goes_through_scan_mark_and_sweep(tmp_path: Path) -> None:
    storage = Storage(scan_page=2, list_page=2)
    storage.add(*a_thread("t1"), *a_thread("t2"))
    ticks: list[tuple[str, int, int]] = []
    storage.run(tmp_path, at=T0, progress=lambda *tick: ticks.append(tick))
    assert [stage for stage, _ in itertools.groupby(t[0] for t in ticks)] == [
        "scan",
        "mark",
        "sweep",
    ]
    scan = [t for t in ticks if t[0] == "scan"]
    assert scan[-1] == ("scan", len(storage.items), 0)
    assert [d for _, d, _ in scan] == sorted(d for _, d, _ in scan)
    assert [t for t in ticks if t[0] == "mark"] == [("mark", 1, 2), ("mark", 2, 2)]
    assert [t for t in ticks if t[0] == "sweep"] == [("sweep", n, 0) for n in (2, 4, 6)]


def test_a_report_says_what_it_did_as_json() -> None:
    report = GcReport(dry_run=False, threads=3, objects_deleted=2, bytes_deleted=10)
    assert "deleted 2 (10 bytes)" in report.summary()
    assert json.loads(report.to_json())["threads"] == 3


# ----------------------------------------------------- found by these tests, fixed
@pytest.mark.parametrize(("prefix", "thread"), [("app", "t1"), ("", "user@example")])
def test_the_blob_of_a_young_write_with_no_checkpoint_yet_is_not_condemned(
    tmp_path: Path, prefix: str, thread: str
) -> None:
    storage = Storage(prefix=prefix)
    first = store_writes(config(thread, "c1"), [("out", HUGE)], "task", core=writer(prefix))
    storage.add(first)  # the writes of the first checkpoint, whose put is in flight
    report = storage.run(tmp_path, at=T0 + 60, grace=HOUR)
    assert report.orphan_writes == 0 and storage.has_item(first)
    assert storage.condemned() == {}


def test_a_damaged_pending_write_protects_its_thread_and_is_reported(tmp_path: Path) -> None:
    storage = Storage()
    stored = a_thread("broken")
    storage.add(*stored, *a_thread("fine"))
    item = dict(stored[3].item)
    record = item["w0"]["B"]
    item["w0"] = schema.b(record[:-1] + bytes([record[-1] ^ 1]))
    storage.items[item[schema.PK]["S"], item[schema.SK]["S"]] = item
    junk_broken, junk_fine = garbage("broken"), garbage("fine")
    for junk in (junk_broken, junk_fine):
        storage.objects[junk] = (b"junk", T0)
    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert deleted_objects(storage.sent) == [junk_fine]
    [error] = report.errors
    assert "broken" in error


# --------------------------------------------------------------------------- chunk lists
DOC = os.urandom(200_000).hex()  # ~20 chunks: a chunk list with LIST_MIN lowered to 8


def a_listed_thread(monkeypatch: pytest.MonkeyPatch) -> tuple[Stored, Stored, Stored]:
    """c1 holds DOC (its chunks and list in pack P1); c2 an edit of it (a new chunk
    and a new list in pack P2, naming the rest in P1), and a pending write of c2 holds
    the edit too. Once c1 is gone, most of P1 is named only through P2's list."""
    monkeypatch.setattr(lists, "LIST_MIN", 8)
    core = make_core()
    c1 = store(config(), checkpoint("c1", {"doc": DOC}, {"doc": "1.a"}), core=core)
    edited = DOC[:-10] + "0123456789"
    c2 = store(config(cid="c1"), checkpoint("c2", {"doc": edited}, {"doc": "2.a"}), core=core)
    w2 = store_writes(config(cid="c2"), [("doc", edited)], "task", core=make_core())
    assert len(c1.objects) == len(c2.objects) == 1 and w2.objects
    return c1, c2, w2


def test_chunks_named_only_through_a_chunk_list_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = Storage()
    c1, c2, w2 = a_listed_thread(monkeypatch)
    storage.add(c2, w2)
    storage.add(c1, committed=False)  # pruned: its objects stay, its item is gone
    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert report.errors == [] and deleted_objects(storage.sent) == []
    assert set(c1.objects) | set(c2.objects) | set(w2.objects) <= set(storage.objects)


def test_an_unreadable_chunk_list_protects_its_threads_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = Storage()
    c1, c2, _ = a_listed_thread(monkeypatch)
    storage.add(c2)
    storage.add(c1, committed=False)
    ((pack, body),) = c2.objects.items()
    storage.objects[pack] = (body[:-1] + bytes([body[-1] ^ 1]), T0)  # the list's frame
    junk = garbage()
    storage.objects[junk] = (b"junk", T0)
    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert deleted_objects(storage.sent) == []  # P1, P2 and the junk: all spared
    [error] = report.errors
    assert pack in error


# --------------------------------------------------------------------------- encryption
def sealed_writer(enc: Any, at: float = T0) -> SaverCore:
    return writer(at=at, encryption=enc)


@pytest.mark.parametrize("ns", ["", "n" * 200])  # the second one's key segment is a hash
def test_with_encryption_young_writes_are_opened_or_their_folder_spared(
    tmp_path: Path, ns: str
) -> None:
    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    enc = Encryption(StaticKeyRing({"r": os.urandom(32)}, current="r"))
    storage = Storage()
    storage.encryption = enc
    first = store_writes(config("t1", "c1", ns), [("out", HUGE)], "task", core=sealed_writer(enc))
    storage.add(first)
    storage.objects[garbage()] = (b"junk", T0)
    report = storage.run(tmp_path, at=T0 + 60, grace=HOUR)
    assert not report.errors and storage.has_item(first)
    condemned = storage.condemned()
    assert first.objects and not set(first.objects) & set(condemned)
    assert (garbage() in condemned) == (ns == "")  # a hashed namespace spares the folder


def sealed_thread(storage: Storage) -> tuple[Any, Stored, Stored]:
    """A sealed thread t1 (a checkpoint with a value blob, a large pending write) in
    ``storage``: its ``Encryption``, checkpoint and writes."""
    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    enc = Encryption(StaticKeyRing({"r": os.urandom(32)}, current="r"))
    c1 = store(config(), checkpoint("c1", {"big": BIG}), core=sealed_writer(enc))
    w1 = store_writes(config("t1", "c1"), [("out", HUGE)], "task", core=sealed_writer(enc))
    storage.add(c1, w1)
    return enc, c1, w1


def test_with_encryption_the_collector_opens_with_the_keys_or_spares_the_thread(
    tmp_path: Path,
) -> None:
    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    storage = Storage()
    enc, c1, w1 = sealed_thread(storage)
    storage.objects[garbage()] = (b"junk", T0)
    # Without the thread's key (a ring that does not unwrap it): nothing of its
    # folder goes, and the run says why.
    storage.encryption = Encryption(StaticKeyRing({"r": os.urandom(32)}, current="r"))
    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert garbage() in storage.objects and not report.errors
    [protected] = report.threads_protected
    assert protected["thread_id"] == "t1" and "does not unwrap" in protected["reason"]
    storage.encryption = enc
    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert not report.errors and garbage() not in storage.objects
    assert all(k in storage.objects for k in (*c1.objects, *w1.objects))
    # A thread stored without encryption: spared, once, with the reason.
    plain = a_thread("plain")
    storage.add(*plain)
    storage.objects[garbage("plain")] = (b"junk", T0)
    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert not report.errors and garbage("plain") in storage.objects
    [protected] = report.threads_protected
    assert (
        protected["thread_id"] == "plain" and "stored without encryption" in (protected["reason"])
    )


def test_without_encryption_a_sealed_thread_is_protected_once_and_its_expiry_shreds_it(
    tmp_path: Path,
) -> None:
    storage = Storage()
    _, c1, _ = sealed_thread(storage)
    storage.add(*a_thread("plain", at=T0 + DAY))
    assert c1.key_items  # what marks the thread sealed, readable without its key
    storage.objects[garbage()] = (b"junk", T0)
    # A run without encryption= reads nothing of the sealed thread and spares it,
    # saying why once (not once per object).
    report = storage.run(tmp_path, at=T0 + DAY, grace=0)
    assert report.errors == [] and garbage() in storage.objects
    [protected] = report.threads_protected
    assert protected["thread_id"] == "t1" and "sealed" in protected["reason"]
    assert (
        "; 1 thread(s) protected, their objects spared (first, thread 't1': its data is sealed"
        in (report.summary())
    )
    assert not any(isinstance(op, S3Get) and op.key.startswith("t1/") for op in storage.sent)
    # Expiring it needs no key: its items go, its key items with them.
    dry = storage.run(tmp_path, at=T0 + 3 * DAY, grace=0, idle_ttl=DAY, dry_run=True)
    assert dry.threads_shredded == ["t1"] and "1 of them would be shredded" in dry.summary()
    report = storage.run(tmp_path, at=T0 + 3 * DAY, grace=0, idle_ttl=DAY)
    assert set(report.threads_expired) == {"t1", "plain"}
    assert report.threads_shredded == ["t1"] and report.threads_protected == []
    assert not [k for k in storage.items if k[1].startswith(schema.KEY_SK_PREFIX)]
    assert json.loads(report.to_json())["threads_shredded"] == ["t1"]


def test_with_encryption_a_sealed_thread_without_key_items_is_collected_after_grace(
    tmp_path: Path,
) -> None:
    """What a shred left (sealed items, no key item: a warm saver wrote after a
    delete): spared while younger than grace, then its items deleted one by one on
    their ``at``, and its objects swept like any garbage."""
    from langgraph_s3 import Encryption

    storage = Storage()
    enc, c1, w1 = sealed_thread(storage)
    for key in [k for k in storage.items if k[1].startswith(schema.KEY_SK_PREFIX)]:
        del storage.items[key]
    storage.encryption = Encryption(enc.ring)  # a new process: no key cached
    report = storage.run(tmp_path, at=T0 + 60, grace=HOUR)
    assert report.threads_orphaned_waiting == ["t1"] and not report.threads_protected, report
    assert not [op for op in storage.sent if isinstance(op, (DeleteUnchanged, S3Delete))]
    # Found once: recorded in the state, as a condemned object is, not deleted.
    assert storage.condemned() == {KEYLESS + "t1/": T0 + 60}
    assert storage.has_item(c1) and storage.has_item(w1)
    # What it asked: the key items (the loader's query, then one that also sees a
    # tenant reference), the state (read once: when first needed), and the
    # checkpoint's body, whose object says it is sealed.
    queries = [op for op in storage.sent if isinstance(op, Query)]
    assert [(q.limit, q.keys_only) for q in queries] == [(None, False), (1, True)]
    assert [op.key for op in storage.sent if isinstance(op, S3Get)] == [
        STATE_KEY,
        *[k for k in c1.objects if "/c/" in k],
    ]
    # A run sooner than grace after the first finding waits, though the items are
    # older than grace by then.
    report = storage.run(tmp_path, at=T0 + 60 + HOUR - 1, grace=HOUR)
    assert report.threads_orphaned_waiting == ["t1"] and storage.has_item(c1)
    assert storage.condemned() == {KEYLESS + "t1/": T0 + 60}  # since the first

    report = storage.run(tmp_path, at=T0 + DAY, grace=HOUR, dry_run=True)
    assert report.threads_orphaned == ["t1"] and "leftovers would be deleted" in report.summary()
    assert storage.has_item(c1)
    report = storage.run(tmp_path, at=T0 + DAY, grace=HOUR)
    deletes = [op for op in storage.sent if isinstance(op, DeleteUnchanged)]
    assert len(deletes) == 3 and not [k for k in storage.items if k[0] == "t1"]  # c1, head, w1
    assert "1 thread(s) whose data key was shredded: their leftovers deleted" in report.summary()
    assert set(storage.condemned()) == {*c1.objects, *w1.objects}  # and t1 no longer
    storage.run(tmp_path, at=T0 + 2 * DAY, grace=HOUR)
    assert not [k for k in storage.objects if k.startswith("t1/")]
