"""What a collection run reports (:mod:`langgraph_s3.core.collect`): the counts the
command line prints as a summary or JSON and the Lambda entry point returns."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass
class GcReport:
    """What a collection run did (or, with ``dry_run``, would do)."""

    dry_run: bool
    threads: int = 0
    threads_expired: list[str] = field(default_factory=list)
    threads_kept_interrupted: list[str] = field(default_factory=list)
    #: Expired threads whose data key items were deleted with them (shredded).
    threads_shredded: list[str] = field(default_factory=list)
    #: Threads whose folders were spared because their data key did not load, or
    #: their data is sealed and the run has no ``encryption=``: thread_id, reason.
    threads_protected: list[dict[str, str]] = field(default_factory=list)
    #: Threads whose data key was shredded (no key item left) while sealed items of
    #: theirs remained: those were deleted, and their objects left to the sweep.
    threads_orphaned: list[str] = field(default_factory=list)
    #: The same, written less than ``grace`` ago: nothing of them deleted yet.
    threads_orphaned_waiting: list[str] = field(default_factory=list)
    objects: int = 0
    objects_referenced: int = 0
    objects_condemned: int = 0
    objects_deleted: int = 0
    bytes_deleted: int = 0
    orphan_writes: int = 0
    #: Chunk items (layout 5: chunks kept in the index), judged as objects are.
    chunk_items: int = 0
    chunk_items_referenced: int = 0
    chunk_items_condemned: int = 0
    chunk_items_deleted: int = 0
    chunk_item_bytes_deleted: int = 0
    errors: list[str] = field(default_factory=list)
    #: Size of the run's scratch file on local disk at its end (size ``/tmp`` by it).
    scratch_bytes: int = 0

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        shredded = (
            f", {len(self.threads_shredded)} of them {'would be ' if self.dry_run else ''}"
            "shredded (data keys deleted)"
            if self.threads_shredded
            else ""
        )
        protected = (
            f"; {len(self.threads_protected)} thread(s) protected, their objects spared "
            f"(first, thread {self.threads_protected[0]['thread_id']!r}: "
            f"{self.threads_protected[0]['reason']})"
            if self.threads_protected
            else ""
        )
        orphaned = (
            f"; {len(self.threads_orphaned)} thread(s) whose data key was shredded: their "
            f"leftovers {'would be ' if self.dry_run else ''}deleted "
            f"({len(self.threads_orphaned_waiting)} more waiting out the "
            "grace period)"
            if self.threads_orphaned or self.threads_orphaned_waiting
            else ""
        )
        return (
            f"{self.threads} thread(s), {len(self.threads_expired)} expired"
            f" ({len(self.threads_kept_interrupted)} kept: waiting on an interrupt{shredded}); "
            f"{self.objects} object(s), {self.objects_referenced} referenced, "
            f"{self.objects_condemned} condemned (waiting out the grace period), "
            f"{verb} {self.objects_deleted} ({self.bytes_deleted} bytes) and "
            f"{self.orphan_writes} pending-write item(s) of checkpoints never committed"
            + orphaned
            + (
                f"; {self.chunk_items} chunk item(s), {self.chunk_items_referenced} referenced, "
                f"{self.chunk_items_condemned} condemned, {verb} {self.chunk_items_deleted} "
                f"({self.chunk_item_bytes_deleted} bytes)"
                if self.chunk_items
                else ""
            )
            + (f"; {len(self.errors)} error(s)" if self.errors else "")
            + protected
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)
