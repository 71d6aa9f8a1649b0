"""Garbage collection and idle-thread retention, as a flow (:func:`collect_flow`).

``langgraph_s3.gc.collect(saver)`` (or ``acollect``, the Lambda entry point, or
``langgraph-s3 gc``) runs it:

1. **Retention.** With ``idle_ttl``, a thread whose last write (or, with
   ``touch_on_read``, last read) is older than ``idle_ttl`` is expired: its index
   items are deleted. A thread paused on ``interrupt()`` is live work and is kept
   unless ``keep_interrupted=False``. An encrypted thread's items include its data
   key items: expiring it shreds its data (no key needed), and the report says so.
   A tenant's thread holds only a reference to its tenant's key, which stays: it
   is expired, not shredded.
2. **Mark.** Every object referenced by the index: the checkpoint objects, the
   blobs their values use and the blobs of large pending writes; and every chunk
   item (layout 5, a blob kept in the index) they name.
3. **Sweep, in two phases.** An object that nothing references is *condemned*;
   it is deleted by a later run only if it was already condemned at least
   ``grace`` seconds earlier, is still unreferenced, and was last written more
   than ``grace`` seconds ago. Writers upload objects before they commit, and a
   saver trusts that a blob exists for ``cache_ttl`` seconds only, so with
   ``grace > 2 * (cache_ttl + longest put)`` no committed checkpoint can lose an
   object. Condemnations are kept in ``{prefix}.gc/state`` (``.`` never starts an
   encoded thread segment, so it cannot collide with a thread). Chunk items are
   swept the same way, from the scan (:mod:`langgraph_s3.core.collect_items`).

With encryption, a thread whose key does not load protects its folder and is
reported (:mod:`langgraph_s3.core.unopened`), except what a shred left: sealed items
in a partition without any key item (a warm saver wrote after another one deleted
the thread). Those are deleted once two runs ``grace`` apart have found them so
(recorded in the state, as condemned objects are) and they are older than ``grace``,
and their objects swept.

Only keys that match the saver's layout are ever considered: other objects in the
bucket, or another saver's objects under a nested prefix, are never touched.
See ``docs/retention.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from langgraph_s3 import codec
from langgraph_s3.core import lists, unopened
from langgraph_s3.core.collect_items import ItemSweep, needed
from langgraph_s3.core.entries import Envelope, Listed, Record
from langgraph_s3.core.gcreport import GcReport
from langgraph_s3.core.inventory import (
    last_activity_ms,
    scan_items,
    thread_id_of,
    waiting_on_interrupt,
)
from langgraph_s3.core.objects import (
    delete_objects,
    fetch_chunks,
    get_objects,
    list_pages,
    object_key,
    read_envelopes,
)
from langgraph_s3.core.paging import delete_items
from langgraph_s3.core.schema import (
    SK,
    Row,
    checkpoint_ref,
    is_checkpoint_item,
    is_key_item,
    is_tenant_ref,
    is_writes_item,
    keys_of,
    parse_row,
    parse_writes,
    pk_of,
    written_ms,
)
from langgraph_s3.core.scratch import Scratch
from langgraph_s3.core.sealed import open_writes
from langgraph_s3.errors import (
    DataKeyError,
    InvalidConfigError,
    KeyVersionError,
    MissingObjectError,
    ObjectError,
)
from langgraph_s3.keys import THREAD_OBJECT, decode_segment
from langgraph_s3.operations import Flow, S3Put

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

STATE_KEY = ".gc/state"
#: In the state, before a thread folder: a thread whose items are a shred's leftovers
#: (``.`` never starts an object key after the prefix, so no object key is one).
KEYLESS = ".keyless/"
DEFAULT_GRACE = 3600.0
_OBJECT_KEY = re.compile(rf"[^/]+/(?:{THREAD_OBJECT})")
#: Checkpoints whose objects are read in one round trip while marking.
_MARK_BATCH = 32
#: Orphaned pending-write items deleted together.
_ORPHAN_BATCH = 1000

#: ``(stage, done, total)``: stages ``scan``, ``mark``, ``sweep`` and ``sweep chunk items``
#: (:data:`collect_items.STAGE`); total 0 when not known.
Progress = Callable[[str, int, int], None]


def collect_flow(
    core: SaverCore,
    *,
    grace: float = DEFAULT_GRACE,
    idle_ttl: float | None = None,
    keep_interrupted: bool = True,
    dry_run: bool = False,
    progress: Progress | None = None,
    workdir: str | None = None,
) -> Flow[GcReport]:
    """The collection run as a flow (see the module docstring).

    The index items and the referenced keys are kept on local disk in ``workdir``
    (default: the temporary directory) while the run lasts, so its memory does not
    grow with the number of threads (see :mod:`langgraph_s3.core.scratch`).
    """
    # Written so that NaN fails too (every comparison with it is False).
    if not grace >= 0 or (idle_ttl is not None and not idle_ttl > 0):
        raise InvalidConfigError(
            f"grace must be >= 0 and idle_ttl > 0 seconds, got grace={grace!r}, "
            f"idle_ttl={idle_ttl!r}"
        )
    with Scratch(workdir) as store:
        run = _Run(core, core.clock(), grace, dry_run, GcReport(dry_run=dry_run), progress, store)
        yield from scan_items(core, run.keep)
        run.report.threads = store.thread_count()
        yield from _mark(run, idle_ttl, keep_interrupted)
        yield from _sweep(run, tuple(run.protected))
        run.report.scratch_bytes = store.size()
    return run.report


@dataclass
class _Run:
    """One collection: where, when, how, and what it found."""

    core: SaverCore
    now: float
    grace: float
    dry_run: bool
    report: GcReport
    progress: Progress | None
    store: Scratch
    scanned: int = 0
    #: Thread folders the sweep spares: something in them could not be read.
    protected: list[str] = field(default_factory=list)
    #: Chunk lists found but not read yet: (thread folder, entry).
    listed: list[tuple[str, Listed]] = field(default_factory=list)
    #: The state the previous run left (:data:`STATE_KEY`; None: not read yet), and
    #: what this run adds to it besides condemned objects: for a thread whose items are
    #: a shred's leftovers, :data:`KEYLESS` + its folder -> when first found so.
    before: dict[str, float] | None = None
    after: dict[str, float] = field(default_factory=dict)

    def state(self) -> Flow[dict[str, float]]:
        """The previous run's state, read when first needed."""
        if self.before is None:
            self.before = yield from _read_state(self.core)
        return self.before

    def tick(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)

    def keep(self, items: list[dict[str, Any]]) -> None:
        """A page of the table scan: into the store."""
        self.store.add_items(items)
        self.scanned += len(items)
        self.tick("scan", self.scanned, 0)  # 0: the total is not known


def _expired(
    run: _Run, items: list[dict[str, Any]], idle_ttl: float, keep_interrupted: bool
) -> bool:
    """Whether retention expires this thread (and records the decision)."""
    if run.now * 1000 - last_activity_ms(items) <= idle_ttl * 1000:
        return False
    thread_id = thread_id_of(run.core.layout, items)
    if keep_interrupted and waiting_on_interrupt(items):
        run.report.threads_kept_interrupted.append(thread_id)
        return False
    run.report.threads_expired.append(thread_id)
    # Only a thread's own data key versions shred it; a tenant thread holds a
    # reference to its tenant's key (which stays), so its data is merely expired.
    if any(is_key_item(i) and not is_tenant_ref(i) for i in items):
        run.report.threads_shredded.append(thread_id)
    return True


def _mark(run: _Run, idle_ttl: float | None, keep_interrupted: bool) -> Flow[None]:
    """Thread by thread: expire it (retention), or record every object it references.

    Thread folders whose references are unknown (something unreadable) go to
    ``run.protected``; the sweep spares them. An expired thread's index items are deleted
    and its objects are left unreferenced, so the sweep treats them as garbage.
    """
    rows: list[Row] = []
    orphans: list[dict[str, Any]] = []
    total = run.report.threads
    for done, items in enumerate(run.store.threads(), 1):
        if idle_ttl is not None and _expired(run, items, idle_ttl, keep_interrupted):
            run.store.forget(pk_of(items[0]))  # its chunk items go with it
            if not run.dry_run:
                yield from delete_items(run.core, keys_of(items))
        else:
            # With encryption the collector opens bodies, records and chunk lists to
            # find what they reference: it needs the thread's key. A key it cannot
            # load (refused, or KMS denies its use) protects the thread's folder.
            thread_id = thread_id_of(run.core.layout, items)
            reason = yield from unopened.reason(run.core, thread_id, items)
            if reason is unopened.UNSEALED and (yield from _left_by_shred(run, thread_id, items)):
                continue
            if reason is not None:
                run.protected.append(run.core.layout.thread_prefix(thread_id))
                run.report.threads_protected.append({"thread_id": thread_id, "reason": reason})
                continue
            rows.extend(_mark_thread(run, items, orphans))
        while len(rows) >= _MARK_BATCH:  # a long history is read a batch at a time too
            yield from _mark_checkpoints(run, rows[:_MARK_BATCH])
            rows = rows[_MARK_BATCH:]
        if len(orphans) >= _ORPHAN_BATCH:
            yield from _drop_orphans(run, orphans)
            orphans = []
        run.tick("mark", done, total)
    yield from _mark_checkpoints(run, rows)
    yield from _mark_lists(run)
    yield from _drop_orphans(run, orphans)


def _left_by_shred(run: _Run, thread_id: str, items: list[dict[str, Any]]) -> Flow[bool]:
    """Whether a thread without key items holds what a shred left; deleted once older
    than grace (:func:`langgraph_s3.core.unopened.settle`), its objects, unmarked, go
    through the sweep. Until then its folder waits with them."""
    core, report = run.core, run.report
    folder = core.layout.thread_prefix(thread_id)
    since = (yield from run.state()).get(KEYLESS + folder, run.now)
    left = yield from unopened.settle(
        core, thread_id, items, now=run.now, since=since, grace=run.grace, dry_run=run.dry_run
    )
    if left == "waiting":
        run.protected.append(folder)
        run.after[KEYLESS + folder] = since
    elif left == "deleted":
        run.store.forget(pk_of(items[0]))  # its chunk items went with it
    if left is not None:
        (report.threads_orphaned if left == "deleted" else report.threads_orphaned_waiting).append(
            thread_id
        )
    return left is not None


def _drop_orphans(run: _Run, orphans: list[dict[str, Any]]) -> Flow[None]:
    """Count (and unless dry-running, delete) pending-write items of checkpoints that
    never committed."""
    run.report.orphan_writes += len(orphans)
    if orphans and not run.dry_run:
        yield from delete_items(run.core, orphans)


def _mark_thread(
    run: _Run, items: list[dict[str, Any]], orphans: list[dict[str, Any]]
) -> list[Row]:
    """Record what a thread's pending writes reference; its checkpoint rows (whose
    objects are read in batches); orphaned writes items go to ``orphans``."""
    # The folder from the partition key: a thread with only writes items so far has
    # no item naming its raw id, and a long id's key segment is a hash of it.
    folder = run.core.layout.folder_of_pk(pk_of(items[0]))
    try:
        committed = {checkpoint_ref(i): parse_row(i) for i in items if is_checkpoint_item(i)}
    except ObjectError as exc:  # an item without the ids its keys cannot give
        _protect(run, folder, exc)
        return []
    rows, referenced = [], []
    for item in items:
        if is_checkpoint_item(item):
            rows.append(committed[checkpoint_ref(item)])
        elif is_writes_item(item):
            # Writes for a checkpoint that never committed (LangGraph saves task
            # writes while the checkpoint's own put is still in flight, and that
            # put may fail) are garbage once they are older than the grace period.
            written = written_ms(item) / 1000
            if checkpoint_ref(item) not in committed and run.now - written >= run.grace:
                orphans.extend(keys_of([item]))
                continue
            try:
                records = _records(run, item, committed.get(checkpoint_ref(item)), items)
            except KeyVersionError as exc:
                # Sealed under a version re-encryption shredded, for a checkpoint that
                # never committed: garbage once older than grace (above), and so are
                # its blobs, sealed under that version too. Not damage.
                if exc.newer or checkpoint_ref(item) in committed:
                    _protect(run, folder, exc)
                continue
            except (ObjectError, DataKeyError) as exc:
                _protect(run, folder, exc)  # what it references is unknown
                continue
            if records is None:
                run.protected.append(folder)
                continue
            for _, rec in records:
                if isinstance(rec.entry, Listed) and rec.entry.lead is None:
                    run.listed.append((folder, rec.entry))  # read it: what it lists
                else:
                    referenced.extend(needed(folder, rec.entry))
    run.store.reference(referenced)  # one transaction per thread
    return rows


def _records(
    run: _Run, item: dict[str, Any], row: Row | None, items: list[dict[str, Any]]
) -> list[tuple[int, Record]] | None:
    """The records of a writes item (opened with the thread key, with encryption), or
    None if they cannot be opened yet: sealed records of a checkpoint not committed
    yet, in a namespace whose key segment is a hash (its raw id, part of their
    place, is known only once its checkpoint item exists)."""
    w = parse_writes(item, encrypted=run.core.encryption is not None)
    if row is not None:
        open_writes(run.core, row.thread_id, row.ns, [w])
    elif w.sealed or w.plain:
        segment = item[SK]["S"].split("#", 2)[1]
        if segment.startswith("~") and segment != "~":  # a hash: not decodable
            return None
        ns = decode_segment(segment)
        open_writes(run.core, thread_id_of(run.core.layout, items), ns, [w])
    return w.records


def _mark_checkpoints(run: _Run, rows: list[Row]) -> Flow[None]:
    """Record what a batch of checkpoints references (their objects and value blobs)."""
    if not rows:
        return
    try:
        envs: list[Envelope | None] = list((yield from read_envelopes(run.core, rows)))
    except (ObjectError, DataKeyError):
        envs = []
        for row in rows:  # find which ones failed
            try:
                envs.append((yield from read_envelopes(run.core, [row]))[0])
            except (ObjectError, DataKeyError) as exc:
                envs.append(None)
                _protect(run, run.core.layout.thread_prefix(row.thread_id), exc)
    referenced = [object_key(run.core, row) for row in rows]
    for row, env in zip(rows, envs, strict=True):
        if env is not None:
            folder = run.core.layout.thread_prefix(row.thread_id)
            for entry in env.channels.values():
                if isinstance(entry, Listed) and entry.lead is None:
                    run.listed.append((folder, entry))  # read it: what it lists
                else:
                    referenced.extend(needed(folder, entry))
    run.store.reference(referenced)  # one transaction per batch
    yield from _mark_lists(run)


def _mark_lists(run: _Run) -> Flow[None]:
    """Read the chunk lists found so far and record them and what they list."""
    listed = list(dict.fromkeys(run.listed))
    run.listed.clear()
    if not listed:
        return
    refs = [lists.ref_in(folder, entry) for folder, entry in listed]
    payloads: dict[str, bytes] | None
    try:
        payloads = yield from fetch_chunks(run.core, refs)
    except (ObjectError, DataKeyError):
        payloads = None  # read them one by one, to find which failed
    referenced = []
    for (folder, entry), ref in zip(listed, refs, strict=True):
        try:
            got = payloads if payloads is not None else (yield from fetch_chunks(run.core, [ref]))
            blobs = lists.open_list(entry, got[ref.key], ref)
        except (ObjectError, DataKeyError) as exc:
            _protect(run, folder, exc)  # what it lists is unknown
            continue
        referenced.extend(needed(folder, replace(entry, blobs=blobs)))
    run.store.reference(referenced)


def _sweep(run: _Run, protected: tuple[str, ...]) -> Flow[None]:
    """Condemn unreferenced objects; delete those condemned for ``grace`` already.

    The prefix is listed a page at a time; each page's doomed objects are deleted
    before the next page is read.
    """
    core = run.core
    before = yield from run.state()
    now: dict[str, float] = {}

    def sweep_page(listing: list[tuple[str, float, int]]) -> Flow[None]:
        doomed = _judge(run, listing, protected, before, now)
        if doomed and not run.dry_run:
            yield from delete_objects(core, doomed)
        run.tick("sweep", run.report.objects, 0)

    yield from list_pages(core, core.layout.prefix, sweep_page)
    run.report.objects_condemned = len(now)
    items = ItemSweep(core, run.store, run.report, run.now, run.grace, run.dry_run, run.tick)
    yield from items.run(protected, before)
    if not run.dry_run:
        state = json.dumps({**now, **items.condemned, **run.after}).encode()
        yield S3Put(core.layout.prefix + STATE_KEY, codec.frame(codec.KIND_BLOB, state, 3))


def _read_state(core: SaverCore) -> Flow[dict[str, float]]:
    """What the previous run left in :data:`STATE_KEY` (nothing: an empty state)."""
    state_key = core.layout.prefix + STATE_KEY
    body = (yield from get_objects(core, [state_key]))[0]
    if body is None:
        return {}
    state: dict[str, float] = json.loads(codec.unframe(body, key=state_key, kind=codec.KIND_BLOB))
    return state


def _judge(
    run: _Run,
    listing: list[tuple[str, float, int]],
    protected: tuple[str, ...],
    before: dict[str, float],
    now: dict[str, float],
) -> list[str]:
    """One listing page: count its objects, condemn the unreferenced ones (into
    ``now``) and return those whose grace has run out."""
    report, prefix = run.report, run.core.layout.prefix
    ours = [(k, m, z) for k, m, z in listing if _OBJECT_KEY.fullmatch(k[len(prefix) :])]
    referenced = run.store.referenced([k for k, _, _ in ours])
    doomed = []
    for key, modified, size in ours:
        report.objects += 1
        if key in referenced or key.startswith(protected):
            report.objects_referenced += 1
            continue
        since = before.get(key, run.now)
        if run.now - since >= run.grace and run.now - modified >= run.grace:
            doomed.append(key)
            report.objects_deleted += 1
            report.bytes_deleted += size
        else:
            now[key] = since
    return doomed


def _protect(run: _Run, folder: str, exc: ObjectError | DataKeyError) -> None:
    """Something a thread stores is unreadable, so its references are unknown: spare
    its folder this run.

    A missing object usually means prune/delete removed the checkpoint after the
    index was read; anything else is damage worth reporting.
    """
    run.protected.append(folder)
    if not isinstance(exc, MissingObjectError):
        run.report.errors.append(str(exc))
