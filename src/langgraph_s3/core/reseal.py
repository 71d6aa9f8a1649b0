"""How a thread is copied under encryption: its data re-sealed for the target thread.

Without encryption ``copy_thread`` copies blobs as they are (a chunk's SHA-256 name is
the same in every thread) and rewrites the bodies. With it, everything is bound to
its thread: a blob's name is keyed by the thread's data key and its seal names the
thread (``BlobPlace``), and so do the seals of bodies and records. So each is opened
with the source thread's key and sealed again with the target's:

* every chunk the source's values use is read (verified), named under the target
  key and stored once: a chunk item as a chunk item (in the target's partition),
  any other as a loose blob (the source's packs are not rebuilt); chunk lists are
  stored again, loose, listing the new names. So a body keeps its layout: one
  that older releases read (no chunk item) stays so;
* bodies get the renamed entries and are sealed to the target's places, then go
  into their index items (or S3) as a put would store them;
* pending-write records (and groups of them) are re-sealed to the target's write
  slots; writes items of checkpoints that never committed (garbage for ``gc``) are
  not copied.

The copy reads the whole source a batch of checkpoints at a time; nothing of the
target is visible before its index items are written (``threads.copy_thread``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from langgraph_s3 import codec
from langgraph_s3.core import groups, lists, packs, schema, values
from langgraph_s3.core.commit import prefetch_hints
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.entries import IN_INDEX, Blobs, Entry, Envelope, Inline, Listed, Record
from langgraph_s3.core.history import item_metadata
from langgraph_s3.core.index import Item
from langgraph_s3.core.objects import fetch_chunks, read_envelopes, read_lists
from langgraph_s3.core.paging import put_items
from langgraph_s3.core.schema import PK, Row, WritesRow, b, s
from langgraph_s3.core.sealed import (
    blob_frame,
    namer,
    open_writes,
    seal_record,
)
from langgraph_s3.operations import Flow, S3Put, together

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

_BATCH = 16


def copied_body(core: SaverCore, env: Envelope) -> tuple[bytes, bool]:
    """A copy's body for envelope ``env`` (renamed for its target), and whether it was
    framed trimmed: a copy keeps its source's shape (a bare body stays bare, unless
    this saver does not trim; a whole one stays whole, readable by what read it)."""
    trim = core.trim_items and env.bare
    return values.frame_body(core, env, trim), trim


def copied_item(
    core: SaverCore, row: Row, body: tuple[bytes, bool], dst: str
) -> tuple[dict[str, Any], Any]:
    """The index item of checkpoint ``row`` copied to thread ``dst`` with ``body`` (from
    :func:`copied_body`), and the S3 put of the body when it is too large for the
    index (else None)."""
    item = {k: v for k, v in row.item.items() if k not in (schema.SIZE, schema.BODY)}
    item = schema.retarget(item, core.layout.pk(dst), dst)
    if not core.ids_in_keys:  # what releases before 0.9.0 read
        item |= schema.id_attrs(dst, row.ns, row.checkpoint_id, all_ids=True)
        if schema.METADATA not in item and core.encryption is None:
            item |= schema.metadata_attr(item_metadata(core, row) or {})
    item |= values.body_attrs(core, (dst, row.ns, row.checkpoint_id), *body)
    if schema.BODY in item:
        return item, None
    key = core.layout.checkpoint_key(dst, row.ns, row.checkpoint_id, item[schema.DIGEST]["S"])
    return item, S3Put(key, body[0])


def copy_sealed(
    core: SaverCore,
    src: str,
    dst: str,
    items: Sequence[dict[str, Any]],
    each: Callable[[list[dict[str, Any]], int, int], Flow[None]] | None = None,
) -> Flow[list[dict[str, Any]]]:
    """Re-seal thread ``src``'s data for ``dst`` (under ``dst``'s newest key): store
    its chunks (uploaded, or written as chunk items) and large bodies, and return the
    index items to write (checkpoints and their writes).

    ``each``: a flow handed each batch's items and how many objects it uploaded and
    chunk items it wrote, once they are stored (the items are then not returned);
    re-encryption (``src == dst``) writes them in place.
    """
    yield from thread_key(core, src)
    yield from thread_key(core, dst, create=True)
    rows = [schema.parse_row(i) for i in items if schema.is_checkpoint_item(i)]
    by_ref = {schema.checkpoint_ref(r.item): r for r in rows}
    writes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in items:
        if schema.is_writes_item(item) and schema.checkpoint_ref(item) in by_ref:
            writes.setdefault(schema.checkpoint_ref(item), []).append(item)
    renamer = _Renamer(core, src, dst)
    out: list[dict[str, Any]] = []
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        mine = [writes.get(schema.checkpoint_ref(r.item), []) for r in batch]
        done, uploaded, chunks = yield from _copy_batch(core, renamer, batch, mine)
        if each is None:
            out += done
        else:
            yield from each(done, uploaded, chunks)
    return out


def _copy_batch(
    core: SaverCore,
    renamer: _Renamer,
    rows: Sequence[Row],
    items: Sequence[Sequence[dict[str, Any]]],
) -> Flow[tuple[list[dict[str, Any]], int, int]]:
    """One batch of checkpoints and their writes items, re-sealed (see the module),
    and how many objects were uploaded and chunk items written for it."""
    src, dst = renamer.src, renamer.dst
    parsed = [[schema.parse_writes(i, encrypted=True) for i in its] for its in items]
    for row, ws in zip(rows, parsed, strict=True):
        open_writes(core, src, row.ns, ws)
    envs = yield from read_envelopes(core, rows)
    ranges: dict[str, tuple[int, bytes]] = {}  # lists with a lead bring their chunks
    found = yield from read_lists(core, [(src, e) for e in _entries(envs, parsed)], ranges)
    for env, ws in zip(envs, parsed, strict=True):
        lists.expand_envelope(env, src, found)
        lists.expand_writes(ws, src, found)
    refs = [
        r
        for e in _entries(envs, parsed)
        if not isinstance(e, Inline)
        for r in packs.chunk_refs(core, src, e)
    ]
    renamer.payloads = yield from fetch_chunks(core, refs, None, ranges)
    out, puts = [], []
    for row, env, its, ws in zip(rows, envs, items, parsed, strict=True):
        renamed = _renamed(renamer, env)
        item, put = copied_item(core, row, copied_body(core, renamed), dst)
        # The source's read hints name its blobs, packs and chunk items (their names
        # under its key): a body in S3 gets the copy's own, as a put would give it.
        for hint in (schema.PREFETCH, schema.PACK_PREFETCH, schema.ITEM_PREFETCH):
            item.pop(hint, None)
        if put is not None:
            item.update(prefetch_hints(renamed.channels))
        out.append(item)
        puts += [] if put is None else [put]
        out += [_copied_writes(core, renamer, row, i, w) for i, w in zip(its, ws, strict=True)]
    puts += renamer.take_uploads()
    chunks = renamer.take_items()
    # The chunk items in the same round trip as the uploads, both before the items
    # that name them (written by the caller).
    yield from together(_send(puts), put_items(core, chunks))
    return out, len(puts), len(chunks)


def _send(ops: Sequence[S3Put]) -> Flow[None]:
    if ops:
        yield list(ops)


def _entries(envs: Sequence[Envelope], writes: Sequence[Sequence[WritesRow]]) -> list[Entry]:
    """Every value entry of a batch: the bodies' channels and the writes' records."""
    out = [e for env in envs for e in env.channels.values()]
    return out + [rec.entry for ws in writes for w in ws for _, rec in w.records]


def _renamed(renamer: _Renamer, env: Envelope) -> Envelope:
    channels = {name: renamer.entry(e) for name, e in env.channels.items()}
    # The layout of the renamed entries, as a put sets it: a copy without chunk items
    # (chunk_items=False) is readable by releases before layout 5.
    fmt = packs.layout_of(channels.values())
    return replace(env, thread_id=renamer.dst, channels=channels, format=fmt)


def _copied_writes(
    core: SaverCore, renamer: _Renamer, row: Row, item: Mapping[str, Any], w: WritesRow
) -> dict[str, Any]:
    """A writes item for the target thread, its records re-sealed to their new slots:
    each group as the writes it gives (``WritesRow.groups``; one by one with
    ``group_writes=False``, for older releases), the other writes one by one; a
    record another one overrides (``groups.merge``) is not copied."""
    out = {k: v for k, v in item.items() if schema.record_index(k) is None}
    out[PK] = s(core.layout.pk(renamer.dst))
    if not core.ids_in_keys:  # what releases before 0.12.0 read
        out = schema.full_writes_ids(out)
    slot = (renamer.dst, row.ns, w.checkpoint_id, w.task_id)
    records = {i: Record(rec.channel, renamer.entry(rec.entry)) for i, rec in w.records}
    level = core.compression_level
    grouped = w.groups if core.group_writes else {}
    inside = {i for members in grouped.values() for i in members}
    for index in (i for i in records if i not in inside):
        packed = codec.pack_record(records[index].wire(), level)
        out[schema.record_attr(index)] = b(seal_record(core, slot, index, packed))
    for index, members in grouped.items():
        packed = groups.pack([(i, records[i]) for i in members], level)
        out[schema.record_attr(index)] = b(seal_record(core, slot, index, packed))
    return out


@dataclass
class _Renamer:
    """Names chunks under the target key and collects what to upload or write as
    chunk items (each once)."""

    core: SaverCore
    src: str
    dst: str
    #: verified chunk payloads of the current batch, by source chunk key
    payloads: dict[str, bytes] = field(default_factory=dict)
    #: source name -> target name and whether it is a chunk item (else a loose blob),
    #: for every chunk already named (and stored)
    names: dict[bytes, tuple[bytes, bool]] = field(default_factory=dict)
    uploads: dict[str, bytes] = field(default_factory=dict)
    #: the chunk items to write, by sort key
    items: dict[str, Item] = field(default_factory=dict)

    def entry(self, entry: Entry) -> Entry:
        """``entry`` naming the target's copies of its chunks (and chunk list)."""
        if isinstance(entry, Inline):
            return entry
        if isinstance(entry, Blobs):
            return self._blobs(entry)
        inner = self._blobs(entry.resolved())
        data = lists.content(inner)
        name = self._upload(data)
        return Listed(name, len(data), None, inner)

    def _blobs(self, blobs: Blobs) -> Blobs:
        refs = packs.chunk_refs(self.core, self.src, blobs)
        named = []
        for digest, ref in zip(blobs.digests, refs, strict=True):
            if digest not in self.names:
                payload = self.payloads[ref.key]
                as_item = ref.item and self.core.chunk_items
                stored = self._item(payload) if as_item else self._upload(payload)
                self.names[digest] = (stored, as_item)
            named.append(self.names[digest])
        places = tuple(IN_INDEX if item else None for _, item in named)
        spans = places if IN_INDEX in places else None
        return replace(blobs, digests=tuple(n for n, _ in named), spans=spans, value=None)

    def _item(self, data: bytes) -> bytes:
        name = namer(self.core, self.dst)(data)
        frame = blob_frame(self.core, self.dst, name, data)
        item = schema.chunk_item(self.core.layout.pk(self.dst), name, frame, self.core.now_ms())
        self.items.setdefault(schema.chunk_sk(name), item)
        return name

    def _upload(self, data: bytes) -> bytes:
        name = namer(self.core, self.dst)(data)
        key = self.core.layout.blob_key(self.dst, name.hex())
        self.uploads.setdefault(key, blob_frame(self.core, self.dst, name, data))
        return name

    def take_uploads(self) -> list[S3Put]:
        puts = [S3Put(k, frame) for k, frame in self.uploads.items()]
        self.uploads.clear()
        return puts

    def take_items(self) -> list[Item]:
        items = list(self.items.values())
        self.items.clear()
        return items
