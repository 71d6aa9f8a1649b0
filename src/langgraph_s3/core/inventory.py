"""What is stored, thread by thread: the index scanned in parallel, objects listed.

Operators' questions (which threads exist, how active, paused on an interrupt, how
large; does every object the index names exist) are answered from the index items
and one listing of the bucket prefix, without loading any value. Scanning reads every
item under the prefix, so it needs the admin policy (``dynamodb:Scan``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph_s3 import codec
from langgraph_s3.core import lists, schema, sealed
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.entries import Envelope, envelope_from_wire
from langgraph_s3.core.history import item_metadata
from langgraph_s3.core.index import Page, ScanSegment
from langgraph_s3.core.objects import get_objects, list_keys, list_pages, object_key, read_lists
from langgraph_s3.core.paging import thread_items
from langgraph_s3.core.schema import Row, parse_row, pk_of
from langgraph_s3.core.scratch import Scratch
from langgraph_s3.errors import ObjectError
from langgraph_s3.keys import Layout
from langgraph_s3.operations import Flow, perform_all

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: Objects ``thread_figures`` reads at once.
_FIGURES_BATCH = 64
#: Segments of the parallel table scan, read concurrently.
SEGMENTS = 4
#: Pending write index of ``__interrupt__`` (``WRITES_IDX_MAP``) as its attribute.
INTERRUPT_ATTR = schema.record_attr(-3)

Items = list[dict[str, Any]]


def scan_items(core: SaverCore, handle: Callable[[Items], None]) -> Flow[int]:
    """Every index item under the saver's prefix, page by page to ``handle``.

    A parallel scan: ``SEGMENTS`` segments read concurrently, page after page. The
    items of one page need not be a thread's complete set, nor come in any order.
    Returns how many items were handled.
    """
    pending = [ScanSegment(core.table, core.layout.prefix, i, SEGMENTS) for i in range(SEGMENTS)]
    count = 0
    while pending:
        pages = yield from perform_all(pending)
        pending, handled = _take_round(core, pending, pages, handle)
        count += handled
        del pages  # one round of pages in memory at a time
    return count


def _take_round(
    core: SaverCore,
    requests: list[ScanSegment],
    pages: list[Page],
    handle: Callable[[Items], None],
) -> tuple[list[ScanSegment], int]:
    """Hand one round of scan pages over; the requests for the next round."""
    following, count = [], 0
    for request, page in zip(requests, pages, strict=True):
        items = [i for i in page.items if core.layout.owns_pk(pk_of(i))]
        count += len(items)
        handle(items)
        after = request.following(page)
        if after is not None:
            following.append(after)
    return following, count


def take_inventory(core: SaverCore, scratch: Scratch, with_objects: bool = True) -> Flow[int]:
    """Every index item under the prefix into ``scratch`` (by thread) and, with
    ``with_objects``, each thread folder's object count and bytes from one listing of
    the prefix. Returns the number of threads; read them with :func:`summaries` or
    ``scratch.threads()``. Memory stays flat whatever the number of threads."""
    yield from scan_items(core, scratch.add_items)
    if with_objects:

        def count(listing: list[tuple[str, float, int]]) -> Flow[None]:
            scratch.add_objects(_folder_sizes(core, listing))
            yield from ()

        yield from list_pages(core, core.layout.prefix, count)
    return scratch.thread_count()


def _folder_sizes(
    core: SaverCore, listing: list[tuple[str, float, int]]
) -> Iterator[tuple[str, int]]:
    """(thread folder, size) of each listed object in a thread's folder."""
    prefix = core.layout.prefix
    for key, _, size in listing:
        rest = key[len(prefix) :]
        if "/" in rest and not rest.startswith("."):
            yield prefix + rest.split("/", 1)[0] + "/", size


def summaries(core: SaverCore, scratch: Scratch) -> Iterator[ThreadSummary]:
    """Each thread's summary, with its folder's objects, one at a time (in partition
    key order) from a scratch file :func:`take_inventory` filled."""
    for items in scratch.threads():
        summary = summarize(core.layout, items, _body_metadata(core))
        folder = core.layout.thread_prefix(summary.thread_id)
        summary.objects, summary.object_bytes = scratch.folder(folder)
        yield summary


def thread_id_of(layout: Layout, items: Items) -> str:
    """The raw thread id of a thread's items (from its partition key if none says)."""
    named = next((i[schema.THREAD]["S"] for i in items if schema.THREAD in i), None)
    return str(named) if named is not None else layout.thread_of_pk(pk_of(items[0]))


def last_activity_ms(items: Items) -> int:
    """A thread's last write or (with touch_on_read) read, ms: from its heads, else
    from its newest item."""
    heads = [
        max(int(i.get(schema.AT, {}).get("N", 0)), int(i.get(schema.READ_AT, {}).get("N", 0)))
        for i in items
        if Layout.is_head_sk(i[schema.SK]["S"])
    ]
    if heads:
        return max(heads)
    return max((int(i[schema.AT]["N"]) for i in items if schema.AT in i), default=0)


def waiting_on_interrupt(items: Items) -> bool:
    """True if the root namespace's latest checkpoint has a pending ``__interrupt__``."""
    root = [r for r in map(parse_row, filter(schema.is_checkpoint_item, items)) if r.ns == ""]
    if not root:
        return False
    latest = max(root, key=lambda r: r.checkpoint_id)
    prefix = latest.item[schema.SK]["S"] + schema.WRITES_MARK
    return any(i[schema.SK]["S"].startswith(prefix) and INTERRUPT_ATTR in i for i in items)


@dataclass
class ThreadSummary:
    """One thread, as ``langgraph-s3 threads`` lists it."""

    thread_id: str
    last_activity_ms: int
    checkpoints: int
    namespaces: list[str]
    latest_checkpoint_id: str | None
    step: int | None
    interrupted: bool
    index_bytes: int  # checkpoint bodies kept in the index
    object_bytes: int = 0  # objects in S3 (checkpoint bodies and value blobs)
    objects: int = 0
    chunk_items: int = 0  # value chunks kept in the index (layout 5)
    chunk_item_bytes: int = 0  # their frames' bytes
    extra: dict[str, Any] = field(default_factory=dict)


def no_md(row: Row) -> None:
    """No metadata read beyond what the index holds."""


def summarize(
    layout: Layout, items: Items, metadata_of: Callable[[Row], Mapping[str, Any] | None] = no_md
) -> ThreadSummary:
    """A thread's summary from its index items; ``metadata_of`` reads the metadata of a
    checkpoint whose item does not index it (layout 9), for its step."""
    rows = [parse_row(i) for i in items if schema.is_checkpoint_item(i)]
    root = [r for r in rows if r.ns == ""]
    latest = max(root or rows, key=lambda r: r.checkpoint_id) if rows else None
    chunks = [i[schema.VALUE]["B"] for i in items if schema.is_chunk_item(i)]
    return ThreadSummary(
        thread_id=thread_id_of(layout, items),
        last_activity_ms=last_activity_ms(items),
        checkpoints=len(rows),
        namespaces=sorted({r.ns for r in rows}),
        latest_checkpoint_id=latest.checkpoint_id if latest else None,
        step=_step(latest, metadata_of) if latest else None,
        interrupted=waiting_on_interrupt(items),
        index_bytes=sum(len(r.body) for r in rows if r.body is not None),
        chunk_items=len(chunks),
        chunk_item_bytes=sum(len(c) for c in chunks),
    )


def _step(row: Row, metadata_of: Callable[[Row], Mapping[str, Any] | None]) -> int | None:
    if schema.METADATA not in row.item:
        step = (metadata_of(row) or {}).get("step")
        return step if isinstance(step, int) and not isinstance(step, bool) else None
    indexed = row.item[schema.METADATA].get("M", {}).get("step", {}).get("S", "")
    return (
        int(indexed[2:]) if indexed.startswith("n:") and indexed[2:].lstrip("-").isdigit() else None
    )


def _body_metadata(core: SaverCore) -> Callable[[Row], Mapping[str, Any] | None]:
    def read(row: Row) -> Mapping[str, Any] | None:
        try:
            return item_metadata(core, row)
        except ObjectError:  # a listing shows no step for it; `verify` reports damage
            return None

    return read


def thread_figures(core: SaverCore, thread_id: str) -> Flow[dict[str, Any]]:
    """Objects, bytes, compression ratio and blob reuse of one thread: each of its
    objects and checkpoint bodies read back once (the bucket's and the index's view)."""
    yield from thread_key(core, thread_id)
    listing = yield from list_keys(core, core.layout.thread_prefix(thread_id))
    keys = [k for k, _, _ in listing if core.layout.owns_object(thread_id, k)]
    items = yield from thread_items(core, thread_id)
    rows = [parse_row(i) for i in items if schema.is_checkpoint_item(i)]
    by_key = {object_key(core, r): r for r in rows}
    references = checkpoints = 0
    blobs, stored, raw = _chunk_items(core, thread_id, items)
    envs: list[Envelope] = []
    read_packs: dict[str, tuple[int, bytes]] = {}  # the chunk lists in them are read
    for start in range(0, len(keys), _FIGURES_BATCH):
        part = keys[start : start + _FIGURES_BATCH]
        bodies = yield from get_objects(core, part)
        for key, body in zip(part, bodies, strict=True):
            if body is None:
                continue  # deleted since the listing
            stored += len(body)
            if core.layout.is_blob_key(thread_id, key):
                chunks = _chunks(core, key, body)
                if key.endswith(".pack"):
                    read_packs[key] = (0, body)
                blobs += len(chunks)
                raw += sum(len(c) for c in chunks)
                continue
            if key not in by_key and core.encryption is not None:
                continue  # not in the index (garbage): no place to open it at
            size, env = open_body(core, body, key, by_key.get(key))
            raw, checkpoints = raw + size, checkpoints + 1
            envs.append(env)
    in_index = [r.body for r in rows]
    for row in (r for r in rows if r.body is not None):
        assert row.body is not None
        size, env = open_body(core, row.body, "index", row)
        stored, raw, checkpoints = stored + len(row.body), raw + size, checkpoints + 1
        envs.append(env)
    # A chunk list counts as a blob reference, and so does each chunk it names.
    pairs = [(thread_id, e) for v in envs for e in v.channels.values()]
    found = yield from read_lists(core, pairs, read_packs)
    for env in envs:
        lists.expand_envelope(env, thread_id, found)
        references += env.blob_references()
    return {
        "checkpoints": checkpoints,
        "checkpoint_bodies_in_index": sum(b is not None for b in in_index),
        "s3_objects": len(keys),
        "index_items": len(items),
        "chunk_items": sum(schema.is_chunk_item(i) for i in items),
        "bytes_stored": stored,
        "bytes_uncompressed": raw,
        "compression_ratio": round(raw / stored, 2) if stored else None,
        "blobs": blobs,
        "blob_references": references,
        "blob_writes_saved_by_dedup": max(references - blobs, 0),
    }


def _chunk_items(core: SaverCore, thread_id: str, items: Items) -> tuple[int, int, int]:
    """How many chunk items a thread's items hold, their bytes, and their chunks'
    bytes unframed (each opened as its loose blob would be)."""
    count = stored = raw = 0
    for item in (i for i in items if schema.is_chunk_item(i)):
        frame = item[schema.VALUE]["B"]
        key = core.layout.blob_key(thread_id, schema.chunk_name(item).hex())
        count, stored = count + 1, stored + len(frame)
        raw += sum(len(c) for c in _chunks(core, key, frame))
    return count, stored, raw


def _chunks(core: SaverCore, key: str, body: bytes) -> list[bytes]:
    """The chunks of a pack or loose blob; with encryption a pack's chunks are their
    sealed bytes (which chunk a frame holds is known only to the entries naming it)."""
    if key.endswith(".pack"):
        return codec.frames(body, key=key)
    if core.encryption is not None:
        return [sealed.open_blob(core, key, body, key)]
    return [codec.unframe(body, key=key, kind=codec.KIND_BLOB)]


def open_body(core: SaverCore, body: bytes, key: str, row: Row | None) -> tuple[int, Envelope]:
    """A checkpoint body's size unframed, and its envelope (``row``: its index item's,
    which a sealed body needs)."""
    place = None
    if row is not None:
        if schema.binds_place(row.digest):  # a body it holds may leave its ids out
            place = (row.thread_id, row.ns, row.checkpoint_id, row.parent_id)
        body = sealed.open_body(core, (row.thread_id, row.ns, row.checkpoint_id), body, key)
    payload = codec.unframe(body, key=key, kind=codec.KIND_CHECKPOINT)
    return len(payload), envelope_from_wire(codec.unpack(payload, key=key), key, place)
