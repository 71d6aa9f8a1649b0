"""The collector and chunk items (layout 5): blobs kept in the index.

A chunk item (``sk`` ``b#{hex}`` in its thread's partition, ``docs/layout.md``) is a
blob stored as an index item. The collector (:mod:`langgraph_s3.core.collect`) treats it
as it treats a loose blob in S3:

* **Mark.** It is kept while a live entry names it: a checkpoint body, a pending-write
  record or a chunk list. The mark records it under :func:`ref_key`, its thread folder
  followed by its sort key: no object key of the layout looks like that (``b#`` is no
  folder), so a chunk item never keeps an object alive, nor an object a chunk item.
* **Sweep, in two phases**, with the same state as condemned objects: an unreferenced
  chunk item is condemned (its :func:`ref_key` and the time go into
  ``{prefix}.gc/state``), and a later run deletes it only if it is still unreferenced,
  was condemned at least ``grace`` seconds earlier, and was written (``at``) at least
  ``grace`` ago. The delete is conditional on ``at`` unchanged since the scan
  (:class:`~langgraph_s3.core.index.DeleteUnchanged`): a writer storing the same chunk
  again refreshes ``at`` (chunk items are content-addressed and written
  unconditionally), and the item stays.

Chunk items of a thread whose folder is protected are spared with it; those of a thread
whose items retention or a shred's cleanup deleted went with them (:meth:`Scratch.forget`).
A table without chunk items costs no request here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph_s3.core.entries import Entry, Listed
from langgraph_s3.core.gcreport import GcReport
from langgraph_s3.core.index import DeleteUnchanged
from langgraph_s3.core.packs import chunk_refs_in, objects_in
from langgraph_s3.core.schema import AT, CHUNK_SK_PREFIX, PK, SK, VALUE, written_ms
from langgraph_s3.core.scratch import Scratch
from langgraph_s3.keys import Layout
from langgraph_s3.operations import Flow, perform_all

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: Conditional deletes sent at once.
_DELETE_BATCH = 32
#: The collector's progress stage of this sweep (``collect.Progress``).
STAGE = "sweep chunk items"


def ref_key(folder: str, sk: str) -> str:
    """How the mark and the state name the chunk item ``sk`` of the thread whose
    folder is ``folder``."""
    return folder + sk


def needed(folder: str, entry: Entry) -> list[str]:
    """What a value entry needs to exist: its S3 objects (:func:`packs.objects_in`)
    and its chunk items (:func:`ref_key`). A chunk list must have been read, unless
    it has a lead (layout 8: its pack holds every chunk it names, none is an item)."""
    if isinstance(entry, Listed) and entry.lead is not None:
        return objects_in(folder, entry)
    items = [
        ref_key(folder, CHUNK_SK_PREFIX + ref.key.rsplit("/", 1)[1])
        for ref in chunk_refs_in(folder, entry)
        if ref.item
    ]
    return objects_in(folder, entry) + items


@dataclass
class ItemSweep:
    """The sweep of chunk items of one collection run (see the module docstring)."""

    core: SaverCore
    store: Scratch
    report: GcReport
    now: float
    grace: float
    dry_run: bool
    #: The collector's ``(stage, done, total)`` progress callback: :data:`STAGE`, the
    #: chunk items judged so far, 0 (the total is not known), after each page.
    tick: Callable[[str, int, int], None] | None = None
    #: The chunk items this run condemns, by ref_key: into the state it leaves.
    condemned: dict[str, float] = field(default_factory=dict)

    def run(self, protected: tuple[str, ...], before: Mapping[str, float]) -> Flow[None]:
        """Judge every chunk item the scan found, but those in the thread folders
        ``protected`` spares, against the previous run's state ``before``; delete those
        whose time has come."""
        doomed: list[dict[str, Any]] = []
        for page in self.store.chunk_items():
            doomed += self._judge(page, protected, before)
            if len(doomed) >= _DELETE_BATCH:
                yield from self._delete(doomed)
                doomed = []
            if self.tick is not None:
                self.tick(STAGE, self.report.chunk_items, 0)
        yield from self._delete(doomed)
        self.report.chunk_items_condemned = len(self.condemned)

    def _judge(
        self,
        page: Sequence[dict[str, Any]],
        protected: tuple[str, ...],
        before: Mapping[str, float],
    ) -> list[dict[str, Any]]:
        """Count a page of chunk items, condemn the unreferenced ones and return those
        whose grace has run out."""
        report = self.report
        keys = [ref_key(Layout.folder_of_pk(i[PK]["S"]), i[SK]["S"]) for i in page]
        referenced = self.store.referenced(keys)
        doomed = []
        for key, item in zip(keys, page, strict=True):
            report.chunk_items += 1
            if key in referenced or key.startswith(protected):
                report.chunk_items_referenced += 1
                continue
            since = before.get(key, self.now)
            old = self.now * 1000 - written_ms(item) >= self.grace * 1000
            if self.now - since >= self.grace and old:
                doomed.append(item)
            else:
                self.condemned[key] = since
        return doomed

    def _delete(self, doomed: Sequence[dict[str, Any]]) -> Flow[None]:
        """Delete chunk items unless written again since the scan (then they stay, and
        a later run judges them afresh)."""
        report = self.report
        if self.dry_run:
            report.chunk_items_deleted += len(doomed)
            report.chunk_item_bytes_deleted += sum(_size(i) for i in doomed)
            return
        for start in range(0, len(doomed), _DELETE_BATCH):
            part = doomed[start : start + _DELETE_BATCH]
            done = yield from perform_all(
                [
                    DeleteUnchanged(
                        self.core.table, i[PK]["S"], i[SK]["S"], i[AT]["N"] if AT in i else None
                    )
                    for i in part
                ]
            )
            for item, deleted in zip(part, done, strict=True):
                if deleted:
                    report.chunk_items_deleted += 1
                    report.chunk_item_bytes_deleted += _size(item)


def _size(item: Mapping[str, Any]) -> int:
    """The bytes of the chunk frame a chunk item holds."""
    return len(item.get(VALUE, {}).get("B", b""))
