"""Garbage collection and idle-thread retention.

``collect(saver)`` (or ``await acollect(async_saver)``, or ``langgraph-s3 gc``):

1. **Retention.** With ``idle_ttl``, a thread whose last write (or, with
   ``touch_on_read``, last read) is older than ``idle_ttl`` is expired: its index
   items are deleted. A thread paused on ``interrupt()`` is live work and is kept
   unless ``keep_interrupted=False``.
2. **Mark.** Every object referenced by the index: the checkpoint objects, the
   blobs their values use and the blobs of large pending writes.
3. **Sweep, in two phases.** An object that nothing references is *condemned*;
   it is deleted by a later run only if it was already condemned at least
   ``grace`` seconds earlier, is still unreferenced, and was last written more
   than ``grace`` seconds ago. Writers upload objects before they commit, and a
   saver trusts that a blob exists for ``cache_ttl`` seconds only, so with
   ``grace > 2 * (cache_ttl + longest put)`` no committed checkpoint can lose an
   object. Condemnations are kept in ``{prefix}.gc/state`` (``.`` never starts an
   encoded thread segment, so it cannot collide with a thread).

Only keys that match the saver's layout are ever considered: other objects in the
bucket, or another saver's objects under a nested prefix, are never touched.
See ``docs/retention.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph_s3 import codec
from langgraph_s3.core import SaverCore
from langgraph_s3.core.index import delete_items
from langgraph_s3.core.inventory import (
    last_activity_ms,
    scan_threads,
    thread_id_of,
    waiting_on_interrupt,
)
from langgraph_s3.core.objects import (
    delete_objects,
    get_objects,
    list_keys,
    object_key,
    read_envelopes,
)
from langgraph_s3.core.schema import (
    Row,
    checkpoint_ref,
    is_checkpoint_item,
    is_writes_item,
    keys_of,
    parse_row,
    parse_writes,
)
from langgraph_s3.core.values import entry_keys
from langgraph_s3.errors import (
    DamageFoundError,
    InvalidConfigError,
    MissingObjectError,
    ObjectError,
)
from langgraph_s3.keys import THREAD_OBJECT
from langgraph_s3.operations import Flow, S3Put

if TYPE_CHECKING:
    from langgraph_s3.aio import AsyncS3Saver
    from langgraph_s3.saver import S3Saver

STATE_KEY = ".gc/state"
DEFAULT_GRACE = 3600.0
_OBJECT_KEY = re.compile(rf"[^/]+/(?:{THREAD_OBJECT})")
#: Checkpoints whose objects are read in one round trip while marking.
_MARK_BATCH = 32

Progress = Callable[[str, int, int], None]


@dataclass
class GcReport:
    """What a collection run did (or, with ``dry_run``, would do)."""

    dry_run: bool
    threads: int = 0
    threads_expired: list[str] = field(default_factory=list)
    threads_kept_interrupted: list[str] = field(default_factory=list)
    objects: int = 0
    objects_referenced: int = 0
    objects_condemned: int = 0
    objects_deleted: int = 0
    bytes_deleted: int = 0
    orphan_writes: int = 0
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (
            f"{self.threads} thread(s), {len(self.threads_expired)} expired"
            f" ({len(self.threads_kept_interrupted)} kept: waiting on an interrupt); "
            f"{self.objects} object(s), {self.objects_referenced} referenced, "
            f"{self.objects_condemned} condemned (waiting out the grace period), "
            f"{verb} {self.objects_deleted} ({self.bytes_deleted} bytes) and "
            f"{self.orphan_writes} pending-write item(s) of checkpoints never committed"
            + (f"; {len(self.errors)} error(s)" if self.errors else "")
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def collect_flow(
    core: SaverCore,
    *,
    grace: float = DEFAULT_GRACE,
    idle_ttl: float | None = None,
    keep_interrupted: bool = True,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> Flow[GcReport]:
    """The collection run as a flow (see the module docstring)."""
    if grace < 0 or (idle_ttl is not None and idle_ttl <= 0):
        raise InvalidConfigError(
            f"grace must be >= 0 and idle_ttl > 0 seconds, got grace={grace!r}, "
            f"idle_ttl={idle_ttl!r}"
        )
    run = _Run(core, core.clock(), grace, dry_run, GcReport(dry_run=dry_run), progress)
    threads = yield from scan_threads(core)
    run.report.threads = len(threads)
    if idle_ttl is not None:
        yield from _expire(run, threads, idle_ttl, keep_interrupted)
    referenced, protected = yield from _mark(run, threads)
    yield from _sweep(run, referenced, tuple(protected))
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

    def tick(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)


def _expire(
    run: _Run, threads: dict[str, list[dict[str, Any]]], idle_ttl: float, keep_interrupted: bool
) -> Flow[None]:
    """Delete the index items of threads idle longer than ``idle_ttl`` (retention)."""
    expired = []
    for pk, items in threads.items():
        if run.now * 1000 - last_activity_ms(items) <= idle_ttl * 1000:
            continue
        thread_id = thread_id_of(items)
        if keep_interrupted and waiting_on_interrupt(items):
            run.report.threads_kept_interrupted.append(thread_id)
            continue
        run.report.threads_expired.append(thread_id)
        expired.append(pk)
    for i, pk in enumerate(expired):
        if not run.dry_run:
            yield from delete_items(run.core, keys_of(threads[pk]))
        run.tick("expire", i + 1, len(expired))
    for pk in expired:
        del threads[pk]  # its objects are now unreferenced and go through the sweep


def _mark(run: _Run, threads: dict[str, list[dict[str, Any]]]) -> Flow[tuple[set[str], list[str]]]:
    """Every object the index references, and the thread folders whose references are
    unknown (an unreadable checkpoint): both are spared by the sweep."""
    referenced: set[str] = set()
    protected: list[str] = []
    rows: list[Row] = []
    orphan_writes: list[dict[str, Any]] = []
    for items in threads.values():
        committed = {checkpoint_ref(i) for i in items if is_checkpoint_item(i)}
        thread_id = thread_id_of(items)
        for item in items:
            if is_checkpoint_item(item):
                rows.append(parse_row(item))
            elif is_writes_item(item):
                # Writes for a checkpoint that never committed (LangGraph saves task
                # writes while the checkpoint's own put is still in flight, and that
                # put may fail) are garbage once they are older than the grace period.
                written = int(item.get("at", {}).get("N", 0)) / 1000
                if checkpoint_ref(item) not in committed and run.now - written >= run.grace:
                    orphan_writes.append({"pk": item["pk"], "sk": item["sk"]})
                    continue
                for _, rec in parse_writes(item).records:
                    referenced.update(entry_keys(run.core, thread_id, rec[1]))
    run.report.orphan_writes = len(orphan_writes)
    if orphan_writes and not run.dry_run:
        yield from delete_items(run.core, orphan_writes)
    for start in range(0, len(rows), _MARK_BATCH):
        part = rows[start : start + _MARK_BATCH]
        yield from _mark_checkpoints(run, part, referenced, protected)
        run.tick("mark", min(start + _MARK_BATCH, len(rows)), len(rows))
    return referenced, protected


def _mark_checkpoints(
    run: _Run, rows: list[Row], referenced: set[str], protected: list[str]
) -> Flow[None]:
    """Add what a batch of checkpoints references (their objects and value blobs)."""
    for row in rows:
        referenced.add(object_key(run.core, row))
    try:
        envs: list[dict[str, Any] | None] = list((yield from read_envelopes(run.core, rows)))
    except ObjectError:
        envs = []
        for row in rows:  # find which ones failed
            try:
                envs.append((yield from read_envelopes(run.core, [row]))[0])
            except ObjectError as exc:
                envs.append(None)
                _note_unreadable(run.core, run.report, protected, row, exc)
    for row, env in zip(rows, envs, strict=True):
        if env is not None:
            for entry in env["ch"].values():
                referenced.update(entry_keys(run.core, row.thread_id, entry))


def _sweep(run: _Run, referenced: set[str], protected: tuple[str, ...]) -> Flow[None]:
    """Condemn unreferenced objects; delete those condemned for ``grace`` already."""
    core, report = run.core, run.report
    listing = yield from list_keys(core, core.layout.prefix)
    state_key = core.layout.prefix + STATE_KEY
    state_body = (yield from get_objects(core, [state_key]))[0]
    condemned_before: dict[str, float] = (
        json.loads(codec.unframe(state_body, key=state_key, kind=codec.KIND_BLOB))
        if state_body
        else {}
    )
    condemned_now: dict[str, float] = {}
    doomed: list[tuple[str, int]] = []
    for key, modified, size in listing:
        if not _OBJECT_KEY.fullmatch(key[len(core.layout.prefix) :]):
            continue  # not ours (or the collector's own state)
        report.objects += 1
        if key in referenced or key.startswith(protected):
            report.objects_referenced += 1
            continue
        since = condemned_before.get(key, run.now)
        if run.now - since >= run.grace and run.now - modified >= run.grace:
            doomed.append((key, size))
        else:
            condemned_now[key] = since
    report.objects_condemned = len(condemned_now)
    report.objects_deleted = len(doomed)
    report.bytes_deleted = sum(size for _, size in doomed)
    if not run.dry_run:
        keys = [k for k, _ in doomed]
        for start in range(0, len(keys), 1000):
            yield from delete_objects(core, keys[start : start + 1000])
            run.tick("sweep", min(start + 1000, len(keys)), len(keys))
        body = codec.frame(codec.KIND_BLOB, json.dumps(condemned_now).encode(), 3)
        yield S3Put(state_key, body)


def _note_unreadable(
    core: SaverCore, report: GcReport, protected: list[str], row: Row, exc: ObjectError
) -> None:
    """An unreadable checkpoint's references are unknown: spare its thread this run.

    A missing object usually means prune/delete removed the checkpoint after the
    index was read; anything else is damage worth reporting.
    """
    protected.append(core.layout.thread_prefix(row.thread_id))
    if not isinstance(exc, MissingObjectError):
        report.errors.append(str(exc))


def collect(saver: S3Saver, **kwargs: Any) -> GcReport:
    """Run a collection with a sync saver. Keyword arguments as ``collect_flow``."""
    return saver._run(collect_flow(saver, **kwargs))


async def acollect(saver: AsyncS3Saver, **kwargs: Any) -> GcReport:
    """Run a collection with an async saver. Keyword arguments as ``collect_flow``."""
    return await saver._run(collect_flow(saver, **kwargs))


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``6h``, ``7d`` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise InvalidConfigError(f"not a duration: {text!r} (use e.g. 90s, 15m, 6h, 7d)")
    factor = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return float(match.group(1)) * factor


def lambda_handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Scheduled collection in Lambda; configured by environment variables.

    ``CHECKPOINT_CONNECTION_STRING`` (``s3://bucket/prefix?table=t``, the storage
    stack's output) or ``CHECKPOINT_BUCKET``, ``CHECKPOINT_TABLE`` and
    ``CHECKPOINT_PREFIX``; ``GC_GRACE`` (default ``1h``), ``GC_IDLE_TTL`` (unset: no
    expiry), ``GC_EXPIRE_INTERRUPTED`` (``true`` to expire threads waiting on an
    interrupt), ``GC_DRY_RUN`` (``true``).

    Raises:
        DamageFoundError: the run found damaged checkpoints (after printing its
            summary), so the function's Errors metric and its alarm fire.
    """
    import os

    from langgraph_s3.saver import S3Saver, parse_conn_string

    url = os.environ.get("CHECKPOINT_CONNECTION_STRING")
    where = (
        parse_conn_string(url)
        if url
        else {
            "bucket": os.environ["CHECKPOINT_BUCKET"],
            "table": os.environ["CHECKPOINT_TABLE"],
            "prefix": os.environ.get("CHECKPOINT_PREFIX", ""),
        }
    )
    ttl = os.environ.get("GC_IDLE_TTL")
    with S3Saver(**where) as saver:
        report = collect(
            saver,
            grace=parse_duration(os.environ.get("GC_GRACE", "1h")),
            idle_ttl=parse_duration(ttl) if ttl else None,
            keep_interrupted=os.environ.get("GC_EXPIRE_INTERRUPTED", "").lower() != "true",
            dry_run=os.environ.get("GC_DRY_RUN", "").lower() == "true",
        )
    print(report.summary())
    if report.errors:
        raise DamageFoundError(
            f"garbage collection found {len(report.errors)} damaged checkpoint(s) (first: "
            f"{report.errors[0]}); their threads' objects were spared. Restore the named "
            "objects from a backup or delete those threads (saver.delete_thread); the "
            "next run collects what they leave",
            errors=report.errors,
        )
    return asdict(report)


__all__ = [
    "DEFAULT_GRACE",
    "GcReport",
    "acollect",
    "collect",
    "collect_flow",
    "lambda_handler",
    "parse_duration",
]
