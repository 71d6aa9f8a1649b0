"""S3 objects: reading and verifying them, uploading blobs once, listing and deleting.

Objects are immutable and named by their content (blobs) or by the digest the index
records (checkpoint objects), so whatever a GET returns is checked against its
name before it is used or cached, and a cached object is never stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph_s3 import codec
from langgraph_s3.core.entries import Envelope, envelope_from_wire
from langgraph_s3.core.schema import Row
from langgraph_s3.errors import (
    CorruptObjectError,
    MissingObjectError,
    NotYetReplicatedError,
    ObjectError,
)
from langgraph_s3.operations import (
    Flow,
    ListPage,
    S3Delete,
    S3Get,
    S3List,
    S3Put,
    Sleep,
    WaitUpload,
    perform,
    perform_all,
)

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

_S3_DELETE_BATCH = 1000


def get_objects(core: SaverCore, keys: Sequence[str]) -> Flow[list[bytes | None]]:
    """GET objects concurrently; in a replica region apply the read policy to misses.

    A replica either has an object or it does not, never an older version of it.
    """
    if not keys:
        return []
    bodies = yield from perform_all([S3Get(k) for k in keys])
    missing = [i for i, body in enumerate(bodies) if body is None]
    if not missing or not core.is_replica:
        return bodies
    assert core.cross_region is not None
    policy = core.cross_region.read_policy
    waited = 0.0
    if policy == "home":
        got = yield from perform_all([S3Get(keys[i], home=True) for i in missing])
        for i, body in zip(missing, got, strict=True):
            bodies[i] = body
    elif policy == "wait":
        waited = yield from _wait_for_replication(core, keys, bodies, missing)
    absent = [keys[i] for i, body in enumerate(bodies) if body is None]
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


def _wait_for_replication(
    core: SaverCore, keys: Sequence[str], bodies: list[bytes | None], missing: list[int]
) -> Flow[float]:
    """Read the missing objects again with backoff until they arrive or time runs out."""
    assert core.cross_region is not None
    max_wait = core.cross_region.max_wait
    waited = 0.0
    delay = 0.05
    while missing and waited < max_wait:
        step = min(delay, max_wait - waited)
        yield from perform(Sleep(step))
        waited += step
        delay = min(delay * 2, 5.0)
        got = yield from perform_all([S3Get(keys[i]) for i in missing])
        for i, body in zip(missing, got, strict=True):
            bodies[i] = body
        missing = [i for i in missing if bodies[i] is None]
    return waited


def check_blob(core: SaverCore, key: str, body: bytes | None) -> bytes:
    """Verify a blob read from ``key`` against its content address, and remember it."""
    if body is None:
        raise MissingObjectError(
            f"blob {key!r} is referenced by the index but missing from bucket {core.bucket!r}",
            key=key,
        )
    payload = codec.unframe(body, key=key, kind=codec.KIND_BLOB)
    if codec.digest(payload) != key.rsplit("/", 1)[1]:
        raise CorruptObjectError(f"blob {key!r} does not match its content address", key=key)
    core.caches.objects.put(key, payload, len(payload))
    core.caches.known_blobs.put(key, True)
    return payload


def fetch_blobs(
    core: SaverCore, keys: Iterable[str], have: Mapping[str, bytes] | None = None
) -> Flow[dict[str, bytes]]:
    """Blob payloads by key: from ``have``, the cache, or one concurrent read (verified)."""
    out: dict[str, bytes] = {}
    wanted: list[str] = []
    for key in dict.fromkeys(keys):
        hit = have.get(key) if have else None
        if hit is None:
            hit = core.caches.objects.get(key)
        if hit is None:
            wanted.append(key)
        else:
            out[key] = hit
    if wanted:
        bodies = yield from get_objects(core, wanted)
        for key, body in zip(wanted, bodies, strict=True):
            out[key] = check_blob(core, key, body)
    return out


def upload(
    core: SaverCore, uploads: Mapping[str, bytes], extra: Sequence[Any] = ()
) -> Flow[list[Any]]:
    """Upload blobs nobody has, wait for those another flow is uploading, plus ``extra``.

    Returns the results of ``extra``. All of it is one round trip; a blob whose
    other uploader failed is uploaded here in a second one.
    """
    known = core.caches.known_blobs
    mine, theirs = core.uploads.claim(uploads, lambda key: key in known)
    ops: list[Any] = [S3Put(k, uploads[k], done=f) for k, f in mine.items()]
    ops += [WaitUpload(k, f) for k, f in theirs.items()]
    ops += extra
    if not ops:
        return []
    try:
        results = yield ops
    finally:
        # Planning cached the content of a failed upload; nothing must vouch for it.
        core.uploads.release(mine, lambda key: known.put(key, True), core.caches.objects.pop)
    waited = results[len(mine) : len(mine) + len(theirs)]
    retry = {k: uploads[k] for k, ok in zip(theirs, waited, strict=True) if not ok}
    if retry:
        yield from upload(core, retry)
    return list(results[len(mine) + len(theirs) :])


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
    extra: Sequence[str] = (),
    optional: Sequence[str] = (),
    into: dict[str, bytes] | None = None,
) -> Flow[list[Envelope]]:
    """Checkpoint envelopes: from the index item, the cache, or S3 (all at once).

    ``extra`` blob keys (pending-write blobs) and ``optional`` ones (value blobs the
    index names ahead of the object) are fetched in the same round trip, verified,
    and put in ``into``. A missing or damaged optional blob is skipped: the value
    entries that really need it fetch it again and report it.
    """
    keys = [object_key(core, r) for r in rows]
    bodies: list[bytes | None] = [
        r.body if r.body is not None else core.caches.objects.get(k)
        for r, k in zip(rows, keys, strict=True)
    ]
    wanted = [k for k, body in zip(keys, bodies, strict=True) if body is None]
    required = set(extra)
    blobs = [k for k in dict.fromkeys([*extra, *optional]) if core.caches.objects.get(k) is None]
    if wanted or blobs:
        fetched = yield from get_objects(core, wanted + blobs)
        got = dict(zip(wanted, fetched[: len(wanted)], strict=True))
        bodies = [got[k] if body is None else body for k, body in zip(keys, bodies, strict=True)]
        for key, body in zip(blobs, fetched[len(wanted) :], strict=True):
            try:
                payload = check_blob(core, key, body)
            except ObjectError:
                if key in required:
                    raise
                continue
            if into is not None:
                into[key] = payload
    envs = [open_envelope(core, r, body) for r, body in zip(rows, bodies, strict=True)]
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
    if codec.digest(body) != row.digest:
        raise CorruptObjectError(
            f"checkpoint object {key!r} does not match the digest recorded in the index; "
            "it was altered or truncated",
            key=key,
        )
    raw = codec.unpack(codec.unframe(body, key=key, kind=codec.KIND_CHECKPOINT), key=key)
    if not isinstance(raw, dict) or (raw.get("th"), raw.get("ns"), raw.get("id")) != (
        row.thread_id,
        row.ns,
        row.checkpoint_id,
    ):
        raise CorruptObjectError(
            f"checkpoint object {key!r} belongs to another checkpoint", key=key
        )
    return envelope_from_wire(raw, key)


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
