"""S3 objects: reading and verifying them, uploading blobs once, listing and deleting.

Objects are immutable and named by their content (blobs) or by the digest the index
records (checkpoint objects), so whatever a GET returns is checked against its
name before it is used or cached, and a cached object is never stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langgraph_s3 import codec
from langgraph_s3.core import chunkitems, lists, packs, replication, schema
from langgraph_s3.core.entries import (
    IN_INDEX,
    Blobs,
    ChunkRef,
    Entry,
    Envelope,
    envelope_from_wire,
)
from langgraph_s3.core.packs import Sealed
from langgraph_s3.core.schema import PK, SK, Row
from langgraph_s3.core.sealed import open_blob, open_body
from langgraph_s3.errors import (
    CorruptObjectError,
    MissingObjectError,
    NotYetReplicatedError,
    ObjectError,
    S3SaverError,
)
from langgraph_s3.operations import (
    Flow,
    ListPage,
    S3Delete,
    S3Get,
    S3List,
    S3Put,
    WaitUpload,
    perform,
    perform_all,
    together,
)

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

_S3_DELETE_BATCH = 1000


def get_objects(core: SaverCore, keys: Sequence[str | S3Get]) -> Flow[list[bytes | None]]:
    """GET objects (keys, or ranged ``S3Get``s) concurrently; in a replica region apply
    the read policy to misses.

    A replica either has an object or it does not, never an older version of it.
    """
    if not keys:
        return []
    gets = [k if isinstance(k, S3Get) else S3Get(k) for k in keys]
    bodies = yield from perform_all(gets)
    missing = [i for i, body in enumerate(bodies) if body is None]
    if not missing or not core.is_replica:
        return bodies
    assert core.cross_region is not None
    policy = core.cross_region.read_policy
    waited = 0.0
    if policy == "home":
        got = yield from perform_all([replace(gets[i], home=True) for i in missing])
        for i, body in zip(missing, got, strict=True):
            bodies[i] = body
    elif policy == "wait":
        waited, arrived = yield from replication.wait_for(
            core, missing, lambda left: perform_all([gets[i] for i in left])
        )
        for i, body in arrived.items():
            bodies[i] = body
    absent = [gets[i].key for i, body in enumerate(bodies) if body is None]
    if absent:
        raise NotYetReplicatedError(
            f"{len(absent)} object(s) named by the index are not in region "
            f"{core.region_name!r} yet (first {absent[0]!r}); read policy {policy!r} "
            f"waited {waited:.1f}s. Retry later or use read_policy='home'",
            key=absent[0],
            keys=absent,
            waited=waited,
        )
    return bodies


def check_blob(core: SaverCore, key: str, body: bytes | None) -> bytes:
    """Verify a blob read from ``key`` against its content address, and remember it."""
    if body is None:
        raise MissingObjectError(
            f"blob {key!r} is referenced by the index but missing from bucket {core.bucket!r}",
            key=key,
        )
    return _checked(core, ChunkRef(key), body, key)


def _checked(core: SaverCore, ref: ChunkRef, frame: bytes, where: str) -> bytes:
    try:
        if core.encryption is not None:  # opened and checked against its keyed name
            payload = open_blob(core, ref.key, frame, where)
        else:
            payload = codec.unframe(frame, key=where, kind=codec.KIND_BLOB)
    except ObjectError as exc:
        if ref.pack is None:
            raise
        # named by the object to repair or delete, the pack; the message says where
        raise type(exc)(str(exc), key=ref.pack) from exc
    if core.encryption is None and codec.digest(payload) != ref.key.rsplit("/", 1)[1]:
        raise CorruptObjectError(
            f"blob {where!r} does not match its content address",
            key=ref.pack or (where if ref.item else ref.key),
        )
    core.caches.objects.put(ref.key, payload, len(payload))
    core.caches.known_blobs.put(ref.key, ref.known())
    return payload


class _Reads:
    """The GETs that bring a set of chunks: one per loose blob, one ranged GET per
    pack (from its first wanted chunk to the end of its last); and the chunk items
    to read (``items``, by ``chunkitems.read`` in the same round trip)."""

    def __init__(
        self,
        core: SaverCore,
        refs: Iterable[ChunkRef],
        have: Mapping[str, bytes],
        ranges: Mapping[str, tuple[int, bytes]] | None = None,
    ):
        self.found: dict[str, bytes] = {}
        self.groups: list[list[ChunkRef]] = []
        self.gets: list[S3Get] = []
        self.items: list[ChunkRef] = []
        by_object: dict[str, list[ChunkRef]] = {}
        for ref in dict.fromkeys(refs):
            hit = have.get(ref.key)
            if hit is None:
                hit = core.caches.objects.get(ref.key)
            if hit is None and ranges and ref.pack is not None and ref.pack in ranges:
                hit = _from_range(core, ref, *ranges[ref.pack])
            if hit is not None:
                self.found[ref.key] = hit
            elif ref.item:
                self.items.append(ref)
            else:
                by_object.setdefault(ref.pack or ref.key, []).append(ref)
        # A pack is at most packs.PACK_MAX bytes, so one range per pack; large values
        # make several packs, read in parallel.
        for key, group in by_object.items():
            spans = [r.span for r in group if r.span is not None]
            start = min((s.offset for s in spans), default=None)
            end = max((s.offset + s.length for s in spans), default=None)
            self.gets.append(S3Get(key, start=start, end=end))
            self.groups.append(group)

    def fetch(self, core: SaverCore) -> Flow[None]:
        """GET this read's objects and read its chunk items, in one round trip; then
        verify the chunks (all required)."""
        bodies, frames = yield from together(
            get_objects(core, self.gets) if self.gets else _none(),
            chunkitems.read(core, [r.key for r in self.items]),
        )
        self.settle(core, bodies, frames, None)

    def settle(
        self,
        core: SaverCore,
        bodies: Sequence[bytes | None],
        frames: Mapping[str, bytes | None],
        required: Iterable[ChunkRef] | None,
    ) -> dict[str, bytes]:
        """Verify what came back (``bodies`` of the GETs, ``frames`` of the chunk
        items); a missing or damaged chunk is an error only if required (None: all)."""
        needed = None if required is None else {r.key for r in required}
        pairs: list[tuple[ChunkRef, S3Get | None, bytes | None]] = [
            (ref, get, body)
            for get, group, body in zip(self.gets, self.groups, bodies, strict=True)
            for ref in group
        ]
        pairs += [(ref, None, frames.get(ref.key)) for ref in self.items]
        for ref, get, body in pairs:
            try:
                self.found[ref.key] = _chunk(core, get, ref, body)
            except ObjectError:
                if needed is None or ref.key in needed:
                    raise
        return self.found


def _from_range(core: SaverCore, ref: ChunkRef, start: int, data: bytes) -> bytes | None:
    """A chunk cut from a prefetched range of its pack (None if not in it or damaged:
    it is then read on its own and reported there)."""
    assert ref.span is not None and ref.pack is not None
    at = ref.span.offset - start
    if at < 0 or at + ref.span.length > len(data):
        return None
    try:
        return _checked(core, ref, data[at : at + ref.span.length], ref.pack)
    except ObjectError:
        return None


def _chunk(core: SaverCore, get: S3Get | None, ref: ChunkRef, body: bytes | None) -> bytes:
    if ref.item:
        return _check_item(core, ref, body)
    if ref.span is None or get is None:
        return check_blob(core, ref.key, body)
    if body is None:
        raise MissingObjectError(
            f"pack {get.key!r} is referenced by the index but missing from bucket {core.bucket!r}",
            key=get.key,
        )
    at = ref.span.offset - (get.start or 0)
    where = f"{get.key}@{ref.span.offset}+{ref.span.length}"
    return _checked(core, ref, body[at : at + ref.span.length], where)


def _none() -> Flow[list[bytes | None]]:
    """No GETs, as a flow that asks nothing (``get_objects`` is not called for none)."""
    yield from ()
    return []


def _check_item(core: SaverCore, ref: ChunkRef, frame: bytes | None) -> bytes:
    """Verify a chunk item's frame as its blob's would be (named ``pk|sk`` in errors:
    what to repair or delete is the index item)."""
    k = chunkitems.item_key(ref.key)
    where = f"{k[PK]['S']}|{k[SK]['S']}"
    if frame is None:
        raise MissingObjectError(
            f"chunk item {where!r} is referenced by the index but missing from table "
            f"{core.table!r}",
            key=where,
        )
    return _checked(core, ref, frame, where)


def fetch_chunks(
    core: SaverCore,
    refs: Iterable[ChunkRef],
    have: Mapping[str, bytes] | None = None,
    ranges: Mapping[str, tuple[int, bytes]] | None = None,
) -> Flow[dict[str, bytes]]:
    """Chunk payloads by chunk key: from ``have``, the cache, prefetched pack
    ``ranges`` (pack key -> start, bytes), or one concurrent read (all verified)."""
    reads = _Reads(core, refs, have or {}, ranges)
    yield from reads.fetch(core)
    return reads.found


def read_lists(
    core: SaverCore,
    pairs: Sequence[tuple[str, Entry]],
    ranges: dict[str, tuple[int, bytes]] | None = None,
) -> Flow[dict[tuple[str, bytes], Blobs]]:
    """What the chunk lists among (thread id, entry) pairs hold (``lists.expand``), in
    one round trip for those not cached nor in ``ranges`` (pack key -> start, bytes). A
    list with a lead (layout 8) comes as a range of its pack holding its chunks too,
    added to ``ranges`` for the caller's ``fetch_chunks`` to cut them from."""
    ranges = {} if ranges is None else ranges
    plain, leads = lists.reads(core, pairs)
    gets = [g for g in packs.merge_ranges(leads) if g.key not in ranges]
    payloads, bodies = yield from together(
        fetch_chunks(core, plain, None, ranges), get_objects(core, gets) if gets else _none()
    )
    for get, body in zip(gets, bodies, strict=True):
        if body is not None:
            ranges[get.key] = (get.start or 0, body)
    # the lists with a lead, cut from those ranges (one read on its own if damaged)
    payloads.update((yield from fetch_chunks(core, lists.refs(core, pairs), payloads, ranges)))
    return lists.decode(core, pairs, payloads)


def upload(core: SaverCore, sealed: Sealed, extra: Sequence[Any] = ()) -> Flow[list[str]]:
    """Upload a call's objects (``packs.seal``), wait for the chunks other flows are
    uploading, and perform ``extra``, all in one round trip.

    Returns the chunk keys whose other uploader failed: the caller places them again
    (and must not commit entries that name where that flow meant to put them).
    """
    shares = sealed.shares
    waits: dict[int, tuple[str, Future[bool]]] = {}
    for key, fut in shares.waits.items():
        waits.setdefault(id(fut), (key, fut))
    items = {k: body for k, body in shares.bodies.items() if shares.where.get(k) is IN_INDEX}
    ops: list[Any] = [
        S3Put(k, body, done=shares.done[k]) for k, body in shares.bodies.items() if k not in items
    ]
    writes = chunkitems.write_requests(core, items) if items else []
    ops += writes
    ops += [WaitUpload(key, fut) for key, fut in waits.values()]
    ops += extra
    if not ops:
        return []
    known = core.caches.known_blobs
    puts = len(shares.bodies) - len(items)
    try:
        results = yield ops
        # Stored before anything names them: what DynamoDB deferred is written now.
        yield from chunkitems.finish_writes(
            core, [r for res in results[puts : puts + len(writes)] for r in res]
        )
        for k in items:  # the driver resolves an S3Put's future; these are the core's
            shares.done[k].set_result(True)
    finally:
        # Planning cached the content of a failed upload; nothing must vouch for it.
        core.uploads.release(
            shares,
            lambda key: known.put(key, shares.where[key] or True),
            core.caches.objects.pop,
            core.caches.known_lists.put,
        )
    waited = results[puts + len(writes) : puts + len(writes) + len(waits)]
    lost = {id(fut) for (_, fut), ok in zip(waits.values(), waited, strict=True) if not ok}
    return [key for key, fut in shares.waits.items() if id(fut) in lost]


#: How many times a call places its chunks again after another flow's upload it
#: was waiting for failed.
_SHARE_ATTEMPTS = 3


def store_chunks(
    core: SaverCore,
    thread_id: str,
    uploads: Mapping[str, bytes],
    extra: Callable[[Sealed], Sequence[Any]] = lambda _: (),
    todo: Sequence[Blobs] = (),
) -> Flow[Sealed]:
    """Place and upload a call's new chunks and chunk lists (``todo``: ``packs.seal``,
    ``upload``); ``extra``
    gives what else goes out in the same round trip once they are placed (a
    checkpoint object, which names where they are).

    If another flow's upload this call was waiting for failed, its chunks are placed
    again, here, and ``extra`` asked again: nothing that names the failed upload's
    objects is committed.
    """
    for _ in range(_SHARE_ATTEMPTS):
        sealed = packs.seal(core, thread_id, uploads, todo)
        try:
            also = list(extra(sealed))
        except BaseException:
            # Placed but never sent: release, or those waiting on them would hang.
            core.uploads.release(sealed.shares, lambda key: None, core.caches.objects.pop)
            raise
        lost = yield from upload(core, sealed, also)
        if not lost:
            return sealed
    raise S3SaverError(
        f"uploading {len(uploads)} chunk(s) of thread {thread_id!r} kept failing in "
        "another call that was storing them too; retry"
    )


def object_key(core: SaverCore, row: Row) -> str:
    """The S3 key of a checkpoint's object."""
    return core.layout.checkpoint_key(row.thread_id, row.ns, row.checkpoint_id, row.digest)


def read_envelope(core: SaverCore, row: Row) -> Flow[Envelope]:
    """One checkpoint's envelope (see :func:`read_envelopes`)."""
    envs = yield from read_envelopes(core, [row])
    return envs[0]


def read_envelopes(
    core: SaverCore,
    rows: Sequence[Row],
    extra: Sequence[ChunkRef] = (),
    optional: Sequence[ChunkRef] = (),
    into: dict[str, bytes] | None = None,
    ranges: Sequence[S3Get] = (),
    into_ranges: dict[str, tuple[int, bytes]] | None = None,
    opened: Mapping[int, Envelope] | None = None,
) -> Flow[list[Envelope]]:
    """Checkpoint envelopes: from the index item, the cache, or S3 (all at once).

    ``extra`` chunks (pending-write values) and ``optional`` ones (value chunks the
    index names ahead of the object) are fetched in the same round trip, verified,
    and put in ``into``. A missing or damaged optional chunk is skipped: the value
    entries that really need it fetch it again and report it. ``ranges`` of packs
    the index names ahead of the object come back unverified in ``into_ranges``
    (pack key -> start, bytes): their chunks are checked when they are cut out.
    ``opened``: envelopes the caller has opened already, by position in ``rows``.
    """
    keys = [object_key(core, r) for r in rows]
    bodies: list[bytes | None] = [
        r.body if r.body is not None else core.caches.objects.get(k)
        for r, k in zip(rows, keys, strict=True)
    ]
    wanted = [k for k, body in zip(keys, bodies, strict=True) if body is None]
    reads = _Reads(core, [*extra, *optional], {})
    if wanted or reads.gets or ranges or reads.items:
        gets: list[str | S3Get] = [*wanted, *reads.gets, *ranges]
        fetched, frames = yield from together(
            get_objects(core, gets) if gets else _none(),
            chunkitems.read(core, [r.key for r in reads.items]),
        )
        got = dict(zip(wanted, fetched[: len(wanted)], strict=True))
        bodies = [got[k] if body is None else body for k, body in zip(keys, bodies, strict=True)]
        chunks = fetched[len(wanted) : len(wanted) + len(reads.gets)]
        reads.settle(core, chunks, frames, extra)
        for get, data in zip(ranges, fetched[len(wanted) + len(reads.gets) :], strict=True):
            if into_ranges is not None and data is not None:
                into_ranges[get.key] = (get.start or 0, data)
    if into is not None:
        into.update(reads.found)
    opened = opened or {}
    envs = [
        opened[i] if i in opened else open_envelope(core, r, body)
        for i, (r, body) in enumerate(zip(rows, bodies, strict=True))
    ]
    for row, key, body in zip(rows, keys, bodies, strict=True):
        if row.body is None and body is not None:
            # Immutable (its digest is in the key): safe to keep for warm reads.
            core.caches.objects.put(key, body, len(body))
    return envs


def open_envelope(core: SaverCore, row: Row, body: bytes | None) -> Envelope:
    """Check a checkpoint object against its index item and unpack it."""
    key = object_key(core, row)
    if body is None:
        raise MissingObjectError(
            f"checkpoint object {key!r} is referenced by the index but missing from "
            f"bucket {core.bucket!r}",
            key=key,
        )
    place = check_digest(row, body, key)
    ids = (row.thread_id, row.ns, row.checkpoint_id)
    frame = open_body(core, ids, body, key)
    raw = codec.unpack(codec.unframe(frame, key=key, kind=codec.KIND_CHECKPOINT), key=key)
    env = envelope_from_wire(raw, key, place)
    if (env.thread_id, env.ns, env.checkpoint_id) != ids:
        raise CorruptObjectError(
            f"checkpoint object {key!r} belongs to another checkpoint", key=key
        )
    return env


def check_digest(row: Row, body: bytes, key: str) -> tuple[str, str, str, str | None] | None:
    """Check a checkpoint body against its item's ``h``; the ids ``h`` binds it to
    (a place digest, layout 6: the body may leave them out), else None (the SHA-256
    of the body: the body must hold its ids)."""
    ids = (row.thread_id, row.ns, row.checkpoint_id)
    if schema.binds_place(row.digest):
        if schema.place_digest(ids, body) == row.digest:
            return (*ids, row.parent_id)
    elif codec.digest(body) == row.digest:
        return None
    # A newer release may bind a body to its item another way: say so, not damage.
    codec.check_version(body, key=key)
    raise CorruptObjectError(
        f"checkpoint object {key!r} does not match the digest recorded in the index; "
        "it was altered, truncated or moved from another checkpoint",
        key=key,
    )


def list_keys(core: SaverCore, prefix: str) -> Flow[list[tuple[str, float, int]]]:
    """Every object under ``prefix``: (key, last-modified epoch seconds, size)."""
    out: list[tuple[str, float, int]] = []

    def keep(keys: list[tuple[str, float, int]]) -> Flow[None]:
        out.extend(keys)
        yield from ()

    yield from list_pages(core, prefix, keep)
    return out


def list_pages(
    core: SaverCore, prefix: str, handle: Callable[[list[tuple[str, float, int]]], Flow[None]]
) -> Flow[None]:
    """The objects under ``prefix`` a listing page (up to 1000) at a time, in key
    order, each page handed to the flow ``handle`` before the next is requested."""
    token = None
    while True:
        page: ListPage = yield from perform(S3List(prefix, token))
        yield from handle(list(page.keys))
        if page.token is None:
            return
        token = page.token


def delete_objects(core: SaverCore, keys: Sequence[str]) -> Flow[None]:
    """Delete objects, 1000 per request, all requests at once."""
    keys = list(dict.fromkeys(keys))
    if keys:
        yield [
            S3Delete(tuple(keys[i : i + _S3_DELETE_BATCH]))
            for i in range(0, len(keys), _S3_DELETE_BATCH)
        ]
