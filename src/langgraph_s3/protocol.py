"""The saver's read and write protocol, free of I/O.

Every public operation is a generator ("flow") that yields the I/O it needs as
:mod:`langgraph_s3.operations` values and receives their results. ``S3Saver``
and ``AsyncS3Saver`` only run flows, so both savers make the same requests in
the same order and read and write exactly the same bytes.

The storage layout is described in ``docs/layout.md`` and the commit and
conflict rules in ``docs/concurrency.md``.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3 import chunking, codec, guard
from langgraph_s3.cache import LRU
from langgraph_s3.errors import (
    CheckpointConflictError,
    ClockSkewError,
    CorruptObjectError,
    InvalidConfigError,
    MissingObjectError,
    NotYetReplicatedError,
    ObjectError,
    S3SaverError,
    SerializationError,
    ThreadExistsError,
    ThreadOwnedElsewhereError,
)
from langgraph_s3.keys import Layout, check_checkpoint_id, normalize_prefix
from langgraph_s3.operations import (
    CreateBucket,
    Ddb,
    DdbFailure,
    ListPage,
    S3Copy,
    S3Delete,
    S3Get,
    S3HeadBucket,
    S3List,
    S3Put,
    Sleep,
    WaitUpload,
    log,
)
from langgraph_s3.regions import CrossRegion

T = TypeVar("T")
Flow = Generator[Any, Any, T]

#: Values whose serialized form is at most this many bytes are stored inside the
#: checkpoint object; larger ones get content-addressed objects of their own.
#: See docs/layout.md ("Inline or blob") for the measurement behind the number.
DEFAULT_INLINE_THRESHOLD = 16 * 1024
#: Checkpoint objects (framed and compressed) up to this size are stored inside their
#: index item instead of S3: the commit writes them anyway, so a step costs no S3
#: PUT and a resume no GET. See docs/layout.md ("Where the checkpoint body lives").
INDEX_INLINE_LIMIT = 4 * 1024
#: Inline values smaller than this stay in the body even when it is too large for the
#: index: moving them would save less than the PUT they cost.
_MIN_MOVED = 512
#: A checkpoint item whose object is in S3 names up to this many value blobs (32 bytes
#: each), so get_tuple fetches them in the same round trip as the object.
_PREFETCH_MAX = 64
#: Pending-write values above this size go to a blob instead of the index item.
WRITE_INLINE_THRESHOLD = 32 * 1024
#: DynamoDB items are limited to 400 KB; stay well clear of it.
_ITEM_BUDGET = 300 * 1024
#: DynamoDB caps an update expression at 4 KB.
_EXPR_BUDGET = 3800
_GSI_RUN = "by_run"
#: Sort key of the item naming the region that owns a thread (cross-region setups).
OWNER_SK = "o"
_QUERY_PAGE = 50
_TXN_RETRIES = 5
_BATCH_WRITE = 25
_S3_DELETE_BATCH = 1000
_LOAD_BATCH = 16


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int | float) -> dict[str, str]:
    return {"N": str(value)}


def _b(value: bytes) -> dict[str, bytes]:
    return {"B": value}


def _str(item: Mapping[str, Any], name: str) -> str | None:
    attr = item.get(name)
    return None if attr is None else cast(str, attr["S"])


def metadata_index_value(value: Any) -> str | None:
    """The string the index stores for a metadata value, or None if it is not indexed.

    Equal Python values get equal strings (``1 == 1.0 == True``), so a server-side
    equality filter never drops a checkpoint that Python equality would keep.
    """
    if isinstance(value, bool | int):
        return f"n:{int(value)}"
    if isinstance(value, float):
        return f"n:{int(value)}" if value.is_integer() else f"n:{value!r}"
    if isinstance(value, str):
        return f"s:{value}" if len(value) <= 512 else None
    if value is None:
        return "z"
    return None


@dataclass
class _Row:
    """A checkpoint item of the index."""

    thread_id: str
    ns: str
    checkpoint_id: str
    parent_id: str | None
    digest: str
    empty: frozenset[str]
    item: dict[str, Any]
    body: bytes | None = None  # the checkpoint object, when stored in the index item
    # Digests of the value blobs of a checkpoint whose object is in S3, so a reader
    # can fetch them together with the object instead of after it.
    prefetch: tuple[bytes, ...] = ()


@dataclass
class _WritesRow:
    task_id: str
    task_path: str
    checkpoint_id: str
    records: list[tuple[int, Any]]  # (idx, [channel, value entry])
    sk: str


def _parse_row(item: dict[str, Any]) -> _Row:
    return _Row(
        thread_id=item["th"]["S"],
        ns=item["ns"]["S"],
        checkpoint_id=item["cid"]["S"],
        parent_id=_str(item, "p"),
        digest=item["h"]["S"],
        empty=frozenset(item.get("e", {}).get("SS", ())),
        item=item,
        body=item["b"]["B"] if "b" in item else None,
        prefetch=_split_digests(item.get("pf", {}).get("B")),
    )


def _split_digests(data: object) -> tuple[bytes, ...]:
    # A hint only: the object's own entries say what is read, so a malformed
    # attribute is ignored rather than failing the read.
    if not isinstance(data, bytes) or len(data) % 32:
        return ()
    return tuple(data[i : i + 32] for i in range(0, len(data), 32))


def _is_checkpoint_item(item: Mapping[str, Any]) -> bool:
    return "h" in item


def _is_writes_item(item: Mapping[str, Any]) -> bool:
    return "tid" in item


def _write_attr(idx: int) -> str:
    return f"w{idx}" if idx >= 0 else f"m{-idx}"


def _attr_idx(name: str) -> int | None:
    if len(name) > 1 and name[1:].isdigit():
        if name[0] == "w":
            return int(name[1:])
        if name[0] == "m":
            return -int(name[1:])
    return None


class SaverOptions(TypedDict, total=False):
    """Keyword options shared by ``S3Saver`` and ``AsyncS3Saver``.

    Attributes:
        inline_threshold: Values whose serialized size is at most this many bytes are
            kept inside the checkpoint object (default 16 KiB; see docs/layout.md).
        index_inline_limit: Checkpoint objects up to this many bytes (compressed) are
            stored in their DynamoDB index item instead of S3 (default 4 KiB; 0 keeps
            every checkpoint object in S3).
        max_concurrency: Most requests in flight at once for one call (default 64, so
            the blobs of one checkpoint are fetched in one round trip).
        cache_bytes: Memory bound of each cache of content-addressed data (64 MiB).
        cache_ttl: Seconds for which the saver trusts that a blob it saw still exists
            (1200). Garbage collection's grace period must be longer.
        touch_on_read: Record reads of the latest checkpoint on the head item so
            idle-thread retention counts them as activity (one extra write per read).
        cross_region: Multi-region behaviour (see ``CrossRegion``).
        clock: Wall clock in seconds (tests simulate long pauses with it).
    """

    inline_threshold: int
    index_inline_limit: int
    max_concurrency: int
    cache_bytes: int
    cache_ttl: float
    touch_on_read: bool
    cross_region: CrossRegion | None
    clock: Callable[[], float]


def check_options(saver: type, options: Mapping[str, Any]) -> None:
    """Refuse keyword arguments ``saver`` does not take, naming the closest valid one."""
    unknown = [name for name in options if name not in SaverOptions.__annotations__]
    if not unknown:
        return
    import difflib
    import inspect

    valid = [
        name
        for name, param in inspect.signature(saver).parameters.items()
        if param.kind is not inspect.Parameter.VAR_KEYWORD
    ] + list(SaverOptions.__annotations__)
    name = unknown[0]
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise InvalidConfigError(
        f"{saver.__name__} got an unknown option {name!r}: {hint}"
        f"valid options are {', '.join(sorted(valid))}"
    )


class SaverCore(BaseCheckpointSaver[str]):
    """Everything ``S3Saver`` and ``AsyncS3Saver`` share: configuration, caches, flows."""

    def __init__(
        self,
        *,
        bucket: str,
        table: str,
        prefix: str = "",
        serde: SerializerProtocol | None = None,
        compression_level: int = 3,
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        index_inline_limit: int = INDEX_INLINE_LIMIT,
        max_concurrency: int = 64,
        cache_bytes: int = 64 * 1024 * 1024,
        cache_ttl: float = 1200.0,
        touch_on_read: bool = False,
        region: str | None = None,
        cross_region: CrossRegion | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise InvalidConfigError("bucket is required: pass S3Saver(bucket='my-bucket', ...)")
        if not isinstance(table, str) or not table:
            raise InvalidConfigError("table is required: pass S3Saver(table='my-table', ...)")
        if not isinstance(compression_level, int) or not -7 <= compression_level <= 22:
            raise InvalidConfigError(
                f"compression_level must be an int from -7 to 22, got {compression_level!r}"
            )
        if not isinstance(inline_threshold, int) or inline_threshold < 0:
            raise InvalidConfigError("inline_threshold must be a non-negative int (bytes)")
        if not isinstance(index_inline_limit, int) or not 0 <= index_inline_limit <= 64 * 1024:
            raise InvalidConfigError("index_inline_limit must be an int from 0 to 65536 (bytes)")
        if not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise InvalidConfigError("max_concurrency must be a positive int")
        if cross_region is not None and not region:
            raise InvalidConfigError(
                "cross_region needs the saver's own region: pass region_name='eu-west-1'"
            )
        super().__init__(serde=serde or JsonPlusSerializer())
        if getattr(self.serde, "pickle_fallback", False) or getattr(
            getattr(self.serde, "serde", None), "pickle_fallback", False
        ):
            raise InvalidConfigError(
                "serializers with pickle_fallback=True are refused: loading pickled data "
                "executes code. Pass a serde without pickle fallback"
            )
        self.bucket = bucket
        self.table = table
        self.layout = Layout(normalize_prefix(prefix))
        self.compression_level = compression_level
        self.inline_threshold = inline_threshold
        self.index_inline_limit = index_inline_limit
        self.max_concurrency = max_concurrency
        self.clock = clock
        self.touch_on_read = touch_on_read
        self.region = region
        self.cross_region = cross_region
        # (thread, ns, channel, version) -> value entry; lets put() skip serializing
        # channels whose version did not move. Like _known_blobs it implies the
        # blobs exist, so it is trusted for cache_ttl seconds only (garbage
        # collection's grace period must be longer; see docs/retention.md).
        self._entries: LRU[tuple[str, str, str, str], list[Any]] = LRU(
            50_000, cache_bytes, ttl=cache_ttl
        )
        # blob key -> payload; content-addressed, so never stale.
        self._blob_cache: LRU[str, bytes] = LRU(100_000, cache_bytes)
        # blob keys known to exist, so put() does not upload them again.
        self._known_blobs: LRU[str, bool] = LRU(200_000, ttl=cache_ttl)
        # (thread, ns, channel) -> the blob entry of the channel's latest version this
        # saver wrote or read: the next version usually extends it (a message list),
        # so its blobs are re-used after verification. Trusted for cache_ttl like above.
        self._latest_entries: LRU[tuple[str, str, str], list[Any]] = LRU(
            50_000, cache_bytes, ttl=cache_ttl
        )
        # blob key -> the upload in progress: LangGraph hands a new value to the saver
        # twice at once (the task's pending write and the next checkpoint), and the
        # second flow waits for the first instead of sending the same bytes again.
        self._inflight: dict[str, Future[bool]] = {}
        self._inflight_lock = threading.Lock()
        self._bucket_checked = False

    # ------------------------------------------------------------------ input
    @staticmethod
    def _thread_ns(config: RunnableConfig | None) -> tuple[str, str]:
        if not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
            raise InvalidConfigError(
                "config must be a dict with a 'configurable' dict holding 'thread_id', "
                "e.g. {'configurable': {'thread_id': 'my-thread'}}"
            )
        conf = config["configurable"]
        if conf.get("thread_id") is None:
            raise InvalidConfigError(
                "config['configurable']['thread_id'] is required: pass "
                "{'configurable': {'thread_id': ...}}"
            )
        return _thread_value(conf["thread_id"]), _ns_value(conf.get("checkpoint_ns", ""))

    @staticmethod
    def _checkpoint_id(config: RunnableConfig) -> str | None:
        cid = get_checkpoint_id(config)
        return None if cid is None else check_checkpoint_id(cid)

    def _serialize(self, value: Any, what: str) -> tuple[str, bytes]:
        try:
            type_, data = self.serde.dumps_typed(value)
        except Exception as exc:
            raise SerializationError(
                f"{what} could not be serialized by {type(self.serde).__name__}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if type_ == "pickle":
            raise SerializationError(
                f"{what} would be stored as pickle, which this saver refuses to store or load"
            )
        return type_, bytes(data)

    def _deserialize(self, type_: str, data: bytes, what: str, key: str) -> Any:
        if type_ == "pickle":
            raise CorruptObjectError(
                f"{what} in {key!r} is pickled; this saver never loads pickle (it executes code)",
                key=key,
            )
        try:
            return self.serde.loads_typed((type_, data))
        except Exception as exc:
            raise CorruptObjectError(
                f"{what} in {key!r} could not be deserialized ({type(exc).__name__}: {exc})",
                key=key,
            ) from exc

    # ------------------------------------------------------------ value codec
    def _encode_value(
        self,
        thread_id: str,
        value: Any,
        what: str,
        inline_limit: int,
        previous: Sequence[Any] | None = None,
    ) -> tuple[list[Any], dict[str, bytes]]:
        """A value entry for an envelope, and the blobs it needs uploaded.

        Entries are ``["i", type, bytes]`` (inline) or ``["r", type, digests, sizes,
        head, stable]``: the value's bytes are ``head`` followed by the blobs, in
        order, and the first ``stable`` blobs end at content boundaries
        (:func:`chunking.plan`). ``previous`` is the entry this value probably
        extends; it only saves work, every re-used blob is verified.
        """
        type_, data = self._serialize(value, what)
        if len(data) <= inline_limit:
            return ["i", type_, data], {}
        return self._blob_entry(thread_id, type_, data, previous)

    def _blob_entry(
        self, thread_id: str, type_: str, data: bytes, previous: Sequence[Any] | None
    ) -> tuple[list[Any], dict[str, bytes]]:
        head, body = chunking.split_head(type_, data)
        hint = None
        if previous is not None and previous[0] == "r" and previous[1] == type_:
            hint = chunking.Previous(previous[2], previous[3], _stable_count(previous))
        planned, stable = chunking.plan(body, hint)
        uploads: dict[str, bytes] = {}
        for chunk in planned:
            if chunk.data is None:
                continue
            key = self.layout.blob_key(thread_id, chunk.digest.hex())
            if key not in self._known_blobs and key not in uploads:
                uploads[key] = codec.frame(codec.KIND_BLOB, chunk.data, self.compression_level)
                self._blob_cache.put(key, chunk.data, chunk.size)
        digests = [c.digest for c in planned]
        sizes = [c.size for c in planned]
        return ["r", type_, digests, sizes, head, stable], uploads

    def _entry_keys(self, thread_id: str, entry: Sequence[Any]) -> list[str]:
        if entry[0] == "r":
            return [self.layout.blob_key(thread_id, d.hex()) for d in entry[2]]
        return []

    def _decode_value(
        self,
        thread_id: str,
        entry: Sequence[Any],
        payloads: Mapping[str, bytes],
        what: str,
        key: str,
    ) -> Any:
        try:
            kind = entry[0]
            if kind == "i":
                return self._deserialize(entry[1], entry[2], what, key)
            if kind == "r":
                data = entry[4] + b"".join(payloads[k] for k in self._entry_keys(thread_id, entry))
                if len(data) != len(entry[4]) + sum(entry[3]):
                    raise CorruptObjectError(
                        f"{what} in {key!r}: blob sizes do not add up", key=key
                    )
                return self._deserialize(entry[1], data, what, key)
        except (IndexError, TypeError, KeyError) as exc:
            raise CorruptObjectError(f"{what} in {key!r} has a malformed entry", key=key) from exc
        raise CorruptObjectError(f"{what} in {key!r} has unknown entry kind {kind!r}", key=key)

    @property
    def is_replica(self) -> bool:
        """True when this saver runs outside the home region of a cross-region setup."""
        return self.cross_region is not None and self.region != self.cross_region.home_region

    def _get_objects(self, keys: Sequence[str]) -> Flow[list[bytes | None]]:
        """GET objects concurrently; in a replica region apply the read policy to misses.

        Objects are immutable and named by the index (checkpoint digest, content
        address), so whatever comes back is exactly what the home region committed:
        a replica either has the object or it does not, never an older version.
        """
        if not keys:
            return []
        bodies: list[bytes | None] = list((yield [S3Get(k) for k in keys]))
        missing = [i for i, b in enumerate(bodies) if b is None]
        if not missing or not self.is_replica:
            return bodies
        assert self.cross_region is not None
        policy = self.cross_region.read_policy
        waited = 0.0
        if policy == "home":
            got = yield [S3Get(keys[i], home=True) for i in missing]
            for i, body in zip(missing, got, strict=True):
                bodies[i] = body
        elif policy == "wait":
            delay = 0.05
            while missing and waited < self.cross_region.max_wait:
                step = min(delay, self.cross_region.max_wait - waited)
                yield Sleep(step)
                waited += step
                delay = min(delay * 2, 5.0)
                got = yield [S3Get(keys[i]) for i in missing]
                for i, body in zip(missing, got, strict=True):
                    bodies[i] = body
                missing = [i for i in missing if bodies[i] is None]
        missing = [i for i, b in enumerate(bodies) if b is None]
        if missing:
            absent = [keys[i] for i in missing]
            raise NotYetReplicatedError(
                f"{len(absent)} object(s) named by the index are not in region "
                f"{self.region!r} yet (first {absent[0]!r}); read policy {policy!r} "
                f"waited {waited:.1f}s. Retry later or use read_policy='home'",
                key=absent[0],
                keys=absent,
                waited=waited,
            )
        return bodies

    def _fetch_blobs(
        self, keys: Iterable[str], have: Mapping[str, bytes] | None = None
    ) -> Flow[dict[str, bytes]]:
        """Read blobs not in ``have`` or the cache, all at once, verifying each address."""
        out: dict[str, bytes] = {}
        wanted: list[str] = []
        for key in dict.fromkeys(keys):
            hit = have.get(key) if have else None
            if hit is None:
                hit = self._blob_cache.get(key)
            if hit is None:
                wanted.append(key)
            else:
                out[key] = hit
        if wanted:
            bodies = yield from self._get_objects(wanted)
            for key, body in zip(wanted, bodies, strict=True):
                out[key] = self._check_blob(key, body)
        return out

    def _region(self) -> str | None:
        """The region requests go to, for messages: as configured, else the client's."""
        ddb = getattr(self, "_ddb", None)
        return self.region or getattr(getattr(ddb, "meta", None), "region_name", None)

    def _upload_flow(
        self, uploads: Mapping[str, bytes], extra: Sequence[Any] = ()
    ) -> Flow[list[Any]]:
        """Upload blobs nobody has, wait for those another flow is uploading, plus ``extra``.

        Returns the results of ``extra``. All of it is one round trip; a blob whose
        other uploader failed is uploaded here in a second one.
        """
        mine: dict[str, Future[bool]] = {}
        theirs: dict[str, Future[bool]] = {}
        with self._inflight_lock:
            for key in uploads:
                if key in self._known_blobs:
                    continue
                if key in self._inflight:
                    theirs[key] = self._inflight[key]
                else:
                    mine[key] = self._inflight[key] = Future()
        ops: list[Any] = [S3Put(k, uploads[k], done=f) for k, f in mine.items()]
        ops += [WaitUpload(k, f) for k, f in theirs.items()]
        ops += extra
        if not ops:
            return []
        try:
            results = yield ops
        finally:
            with self._inflight_lock:
                for key, fut in mine.items():
                    if self._inflight.get(key) is fut:
                        del self._inflight[key]
                    if not fut.done():
                        fut.set_result(False)
                    if fut.result():
                        self._known_blobs.put(key, True)
                    else:
                        # Planning cached the content; nothing must vouch for it now.
                        self._blob_cache.pop(key)
        waited = results[len(mine) : len(mine) + len(theirs)]
        retry = {k: uploads[k] for k, ok in zip(theirs, waited, strict=True) if not ok}
        if retry:
            yield from self._upload_flow(retry)
        return list(results[len(mine) + len(theirs) :])

    def _check_blob(self, key: str, body: bytes | None) -> bytes:
        """Verify a blob read from ``key`` and remember it."""
        if body is None:
            raise MissingObjectError(
                f"blob {key!r} is referenced by the index but missing from bucket {self.bucket!r}",
                key=key,
            )
        payload = codec.unframe(body, key=key, kind=codec.KIND_BLOB)
        if codec.digest(payload) != key.rsplit("/", 1)[1]:
            raise CorruptObjectError(f"blob {key!r} does not match its content address", key=key)
        self._blob_cache.put(key, payload, len(payload))
        self._known_blobs.put(key, True)
        return payload

    # ------------------------------------------------------------------ put
    def put_flow(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Flow[RunnableConfig]:
        thread_id, ns = self._thread_ns(config)
        parent_id = self._checkpoint_id(config)
        cid = check_checkpoint_id(checkpoint.get("id"))
        guarded = guard.is_continuation(config, ns, parent_id)
        if guarded and parent_id is not None and cid <= parent_id:
            raise _clock_skew(thread_id, ns, parent_id, cid)
        body_cp: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = body_cp.pop("channel_values", {}) or {}
        versions: ChannelVersions = body_cp.get("channel_versions", {})

        entries: dict[str, list[Any]] = {}
        uploads: dict[str, bytes] = {}
        fresh: dict[str, list[Any]] = {}
        for name, value in values.items():
            if name not in versions:
                continue  # like InMemorySaver: only versioned channels are stored
            cache_key = (thread_id, ns, name, str(versions[name]))
            entry = None if name in new_versions else self._entries.get(cache_key)
            if entry is None:
                entry, blobs = self._encode_value(
                    thread_id,
                    value,
                    f"channel {name!r}",
                    self.inline_threshold,
                    self._latest_entries.get((thread_id, ns, name)),
                )
                uploads.update(blobs)
                fresh[name] = entry
            entries[name] = entry
        empty = sorted(ch for ch in versions if ch not in entries)

        md = get_checkpoint_metadata(config, metadata)
        envelope = {
            "f": codec.FORMAT_VERSION,
            "th": thread_id,
            "ns": ns,
            "id": cid,
            "p": parent_id,
            "cp": list(self._serialize(body_cp, "checkpoint (without values)")),
            "md": list(self._serialize_metadata(md)),
            "ch": entries,
        }
        body = self._frame_body(envelope)
        if len(body) > self.index_inline_limit:
            body = self._fit_in_index(thread_id, ns, envelope, body, uploads, fresh)
        digest = codec.digest(body)
        key = self.layout.checkpoint_key(thread_id, ns, cid, digest)
        in_index = len(body) <= self.index_inline_limit

        # Blobs and the checkpoint object go up together: neither is reachable
        # until the index item below exists, so their mutual order does not matter.
        # A saver's first put also checks the bucket (unless its first read did),
        # which a step whose checkpoint fits in the index would otherwise never touch.
        extra: list[Any] = [] if in_index else [S3Put(key, body)]
        if not self._bucket_checked:
            extra.append(S3HeadBucket())
        yield from self._upload_flow(uploads, extra)
        self._bucket_checked = True

        item: dict[str, Any] = {
            "pk": _s(self.layout.pk(thread_id)),
            "sk": _s(self.layout.checkpoint_sk(ns, cid)),
            "th": _s(thread_id),
            "ns": _s(ns),
            "cid": _s(cid),
            "h": _s(digest),
            "sz": _n(len(body)),
            "at": _n(int(self.clock() * 1000)),
        }
        if in_index:
            item["b"] = _b(body)
        else:
            refs = list(dict.fromkeys(d for e in entries.values() if e[0] == "r" for d in e[2]))
            if refs and len(refs) <= _PREFETCH_MAX:
                item["pf"] = _b(b"".join(refs))
        if parent_id is not None:
            item["p"] = _s(parent_id)
        if isinstance(md.get("run_id"), str) and md["run_id"]:
            item["run"] = _s(md["run_id"])
        if empty:
            item["e"] = {"SS": empty}
        index = {k: v for k, v in ((k, metadata_index_value(v)) for k, v in md.items()) if v}
        if index:
            item["md"] = {"M": {k: _s(v) for k, v in index.items() if k}}

        yield from self._commit(thread_id, ns, cid, parent_id, item, guarded)
        for name, entry in fresh.items():
            cache_key = (thread_id, ns, name, str(versions[name]))
            self._entries.put(cache_key, entry, _entry_size(entry))
            self._remember_latest(thread_id, ns, name, entry)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": cid,
            }
        }

    def _frame_body(self, envelope: Mapping[str, Any]) -> bytes:
        return codec.frame(codec.KIND_CHECKPOINT, codec.pack(envelope), self.compression_level)

    def _remember_latest(self, thread_id: str, ns: str, name: str, entry: list[Any]) -> None:
        if entry[0] == "r":
            self._latest_entries.put((thread_id, ns, name), entry, _entry_size(entry))

    def _fit_in_index(
        self,
        thread_id: str,
        ns: str,
        envelope: dict[str, Any],
        body: bytes,
        uploads: dict[str, bytes],
        fresh: dict[str, list[Any]],
    ) -> bytes:
        """Move the largest inline values to blobs until the body fits in the index.

        A body in the index costs no S3 PUT now and no GET on resume, while a value
        moved to a blob is uploaded once and then only referenced by every later
        checkpoint that carries it unchanged (a retrieved context, a long prompt).
        If moving every candidate would still not make the body fit, nothing moves:
        the body goes to S3 either way, and moved values would only add PUTs.
        """
        entries: dict[str, list[Any]] = envelope["ch"]
        movable = sorted(
            (n for n, e in entries.items() if e[0] == "i" and len(e[2]) >= _MIN_MOVED),
            key=lambda n: -len(entries[n][2]),
        )
        if not movable or self.index_inline_limit == 0:
            return body
        # First, cheaply, the body with every candidate moved (each as the one-blob
        # reference it would get without a hint): if even that does not fit, stop.
        shapes = {n: _blob_shape(entries[n][1], entries[n][2]) for n in movable}
        if (
            len(self._frame_body({**envelope, "ch": {**entries, **shapes}}))
            > self.index_inline_limit
        ):
            return body
        moved: dict[str, list[Any]] = {}
        added: dict[str, bytes] = {}
        candidate = body
        for name in movable:
            type_, data = entries[name][1], entries[name][2]
            entry, blobs = self._blob_entry(
                thread_id, type_, data, self._latest_entries.get((thread_id, ns, name))
            )
            moved[name] = entry
            added.update(blobs)
            trial = {**envelope, "ch": {**entries, **moved}}
            candidate = self._frame_body(trial)
            if len(candidate) <= self.index_inline_limit:
                entries.update(moved)
                fresh.update(moved)
                uploads.update(added)
                return candidate
        return body

    def _serialize_metadata(self, md: Mapping[str, Any]) -> tuple[str, bytes]:
        try:
            return self._serialize(dict(md), "metadata")
        except SerializationError:
            for k, v in md.items():  # name the key that is at fault
                self._serialize(v, f"metadata key {k!r}")
            raise

    def _commit(
        self,
        thread_id: str,
        ns: str,
        cid: str,
        parent_id: str | None,
        item: dict[str, Any],
        guarded: bool,
    ) -> Flow[None]:
        """Write the index item and move the head in one transaction: the commit point.

        The head always names the greatest checkpoint id of the namespace, the one a
        read of the latest finds. A guarded continuation moves it from its parent; a
        fork moves it only forward, and a fork whose id sorts below the head (made
        on a clock behind the head's) is committed beside it without moving it, as
        ``InMemorySaver`` would not make it the latest either.
        """
        head: dict[str, Any] = {
            "TableName": self.table,
            "Key": {"pk": item["pk"], "sk": _s(self.layout.head_sk(ns))},
            "UpdateExpression": "SET #c = :c, #th = :th, #ns = :ns, #at = :at",
            "ExpressionAttributeNames": {"#c": "cid", "#th": "th", "#ns": "ns", "#at": "at"},
            "ExpressionAttributeValues": {
                ":c": _s(cid),
                ":th": _s(thread_id),
                ":ns": _s(ns),
                ":at": item["at"],
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if guarded and parent_id is None:
            head["ConditionExpression"] = "attribute_not_exists(#c)"
        elif guarded:
            head["ConditionExpression"] = "attribute_not_exists(#c) OR #c = :p"
            head["ExpressionAttributeValues"][":p"] = _s(cast(str, parent_id))
        else:
            head["ConditionExpression"] = "attribute_not_exists(#c) OR #c <= :c"
        put = {"Put": {"TableName": self.table, "Item": item}}
        owner = self._ownership_check(item["pk"])
        roles = ["put", "head"] + ["owner"] * len(owner)
        request = {
            "TransactItems": [put, {"Update": head}, *owner],
            # botocore would fill in a random uuid4: one derived from the checkpoint lets
            # DynamoDB recognise a commit resent after a lost response (for 10 minutes).
            "ClientRequestToken": _commit_token(item),
        }
        for attempt in range(_TXN_RETRIES):
            result = yield Ddb(
                "transact_write_items",
                request,
                expect=frozenset({"TransactionCanceledException", _IDEMPOTENT_MISMATCH}),
            )
            if not isinstance(result, DdbFailure):
                return
            if result.code == _IDEMPOTENT_MISMATCH:
                # The same checkpoint (same id and digest) was sent within 10 minutes by
                # an earlier put() that differed only in its timestamp: committed or not?
                yield from self._confirm_committed(item)
                return
            reasons = result.response.get("CancellationReasons") or []
            failed = {
                role: reason
                for role, reason in zip(roles, reasons, strict=False)
                if reason.get("Code") == "ConditionalCheckFailed"
            }
            if "owner" in failed:
                raise self._not_owner(thread_id, failed["owner"])
            if "head" in failed:
                actual = self._head_cid(failed["head"].get("Item", {}), item["pk"]["S"], ns)
                if actual == cid:
                    return  # the same checkpoint was committed before: a retried put
                if guarded:
                    raise _conflict(thread_id, ns, parent_id, actual)
                # A fork older than the head: commit it where it sorts, head unmoved.
                roles = ["put"] + ["owner"] * len(owner)
                request = {
                    "TransactItems": [put, *owner],
                    "ClientRequestToken": _commit_token(item, "below-head"),
                }
                continue
            if any(r.get("Code") == "TransactionConflict" for r in reasons):
                log.warning(
                    "commit of checkpoint %s collided with a concurrent transaction; "
                    "retrying (attempt %d)", cid, attempt + 1,
                )  # fmt: skip
                yield Sleep(0.05 * (2**attempt))
                continue
            codes = [r.get("Code") for r in reasons]
            raise S3SaverError(f"committing checkpoint {cid!r} failed: {codes}")
        raise S3SaverError(
            f"committing checkpoint {cid!r} kept colliding with concurrent transactions"
        )

    def _head_cid(self, head: Mapping[str, Any], pk: str, ns: str) -> str | None:
        """The checkpoint id a head item names; a damaged one is a CorruptObjectError
        naming the item (it used to escape as a KeyError)."""
        attr = head.get("cid")
        if attr is None:
            return None
        if not isinstance(attr, Mapping) or not isinstance(attr.get("S"), str):
            key = f"{pk}|{self.layout.head_sk(ns)}|cid"
            raise CorruptObjectError(
                f"head item {key!r} does not hold a checkpoint id ({attr!r}); set it to the "
                "namespace's latest checkpoint id to repair it",
                key=key,
            )
        return cast(str, attr["S"])

    def _confirm_committed(self, item: Mapping[str, Any]) -> Flow[None]:
        found = yield Ddb(
            "get_item",
            {
                "TableName": self.table,
                "Key": {"pk": item["pk"], "sk": item["sk"]},
                "ConsistentRead": True,
                "ProjectionExpression": "h",
            },
        )
        if _str(found.get("Item", {}), "h") != item["h"]["S"]:
            raise S3SaverError(
                f"checkpoint {item['cid']['S']!r} was sent twice within 10 minutes with "
                "different timestamps and is not committed; retry the put()"
            )

    # ------------------------------------------------------------- regions
    def _ownership_check(self, pk: dict[str, str]) -> list[dict[str, Any]]:
        """A ConditionCheck that this region owns the thread (cross-region setups only)."""
        if self.cross_region is None:
            return []
        home = self.region == self.cross_region.home_region
        return [
            {
                "ConditionCheck": {
                    "TableName": self.table,
                    "Key": {"pk": pk, "sk": _s(OWNER_SK)},
                    "ConditionExpression": (
                        "attribute_not_exists(#r) OR #r = :me" if home else "#r = :me"
                    ),
                    "ExpressionAttributeNames": {"#r": "region"},
                    "ExpressionAttributeValues": {":me": _s(cast(str, self.region))},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        ]

    def _not_owner(self, thread_id: str, reason: Mapping[str, Any]) -> ThreadOwnedElsewhereError:
        assert self.cross_region is not None
        owner = _str(reason.get("Item", {}), "region") or self.cross_region.home_region
        return ThreadOwnedElsewhereError(
            f"thread {thread_id!r} is owned by region {owner!r}; this saver runs in "
            f"{self.region!r} and may not write it. Hand it over with "
            "saver.claim_thread(thread_id) once the owner has stopped writing it",
            thread_id=thread_id,
            owner=owner,
        )

    def claim_thread_flow(self, thread_id: str) -> Flow[str]:
        """Make this saver's region the owner of a thread; returns the previous owner."""
        if self.cross_region is None:
            raise InvalidConfigError("claim_thread needs a cross_region configuration")
        thread_id = _thread_value(thread_id)
        result = yield Ddb(
            "update_item",
            {
                "TableName": self.table,
                "Key": {"pk": _s(self.layout.pk(thread_id)), "sk": _s(OWNER_SK)},
                "UpdateExpression": "SET #r = :me, #th = :th, #at = :at",
                "ExpressionAttributeNames": {"#r": "region", "#th": "th", "#at": "at"},
                "ExpressionAttributeValues": {
                    ":me": _s(cast(str, self.region)),
                    ":th": _s(thread_id),
                    ":at": _n(int(self.clock() * 1000)),
                },
                "ReturnValues": "ALL_OLD",
            },
        )
        return _str(result.get("Attributes", {}), "region") or self.cross_region.home_region

    # ------------------------------------------------------------ put_writes
    def put_writes_flow(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> Flow[None]:
        thread_id, ns = self._thread_ns(config)
        cid = self._checkpoint_id(config)
        if cid is None:
            raise InvalidConfigError(
                "put_writes needs config['configurable']['checkpoint_id'] (the checkpoint "
                "the writes belong to)"
            )
        if not isinstance(task_id, str):
            raise InvalidConfigError(f"task_id must be a string, got {type(task_id).__name__}")
        if not writes:
            return
        records: dict[int, list[Any]] = {}
        uploads: dict[str, bytes] = {}
        for idx, (channel, value) in enumerate(writes):
            if not isinstance(channel, str):
                raise InvalidConfigError(f"write channel must be a string, got {channel!r}")
            widx = WRITES_IDX_MAP.get(channel, idx)
            entry, blobs = self._encode_value(
                thread_id,
                value,
                f"write to channel {channel!r} of task {task_id!r}",
                WRITE_INLINE_THRESHOLD,
            )
            uploads.update(blobs)
            records[widx] = [channel, entry]  # a later special write replaces an earlier one
        packed = {i: codec.pack_record(r, self.compression_level) for i, r in records.items()}
        # Keep the item under DynamoDB's 400 KB: move the largest values to blobs.
        for i in sorted(packed, key=lambda i: -len(packed[i])):
            if sum(len(p) for p in packed.values()) <= _ITEM_BUDGET:
                break
            if records[i][1][0] == "i":
                channel = records[i][0]
                entry, blobs = self._encode_value(
                    thread_id, writes_value(writes, i, channel), f"write to {channel!r}", -1
                )
                uploads.update(blobs)
                records[i] = [channel, entry]
                packed[i] = codec.pack_record(records[i], self.compression_level)
        yield from self._upload_flow(uploads)

        key = {
            "pk": _s(self.layout.pk(thread_id)),
            "sk": _s(self.layout.writes_sk(ns, cid, task_id)),
        }
        base_names = {"#tid": "tid", "#tp": "tp", "#cid": "cid", "#at": "at"}
        base_values: dict[str, Any] = {
            ":tid": _s(task_id),
            ":tp": _s(task_path),
            ":cid": _s(cid),
            ":at": _n(int(self.clock() * 1000)),
        }
        clauses: list[tuple[str, str, Any]] = []
        for i, data in packed.items():
            name = _write_attr(i)
            placeholder = f":{name}"
            clause = (
                f"{name} = if_not_exists({name}, {placeholder})"
                if i >= 0
                else f"{name} = {placeholder}"
            )
            clauses.append((clause, placeholder, _b(data)))
        # One request whatever the number of writes, unless DynamoDB's 4 KB
        # expression limit forces a split (about 140 writes in one call).
        groups: list[list[tuple[str, str, Any]]] = [[]]
        length = 0
        for part in clauses:
            if groups[-1] and length + len(part[0]) > _EXPR_BUDGET:
                groups.append([])
                length = 0
            groups[-1].append(part)
            length += len(part[0]) + 2
        owner_check = self._ownership_check(key["pk"])
        for group in groups:
            expr = (
                "SET #tid = :tid, #tp = if_not_exists(#tp, :tp), #cid = :cid, #at = :at, "
                + ", ".join(c for c, _, _ in group)
            )
            values = dict(base_values)
            values.update({p: v for _, p, v in group})
            update = {
                "TableName": self.table,
                "Key": key,
                "UpdateExpression": expr,
                "ExpressionAttributeNames": base_names,
                "ExpressionAttributeValues": values,
            }
            if not owner_check:
                yield Ddb("update_item", update)
                continue
            # Cross-region: the write and the ownership check in one request.
            result = yield Ddb(
                "transact_write_items",
                {"TransactItems": [{"Update": update}, *owner_check]},
                expect=frozenset({"TransactionCanceledException"}),
            )
            if isinstance(result, DdbFailure):
                reasons = result.response.get("CancellationReasons") or []
                if len(reasons) > 1 and reasons[1].get("Code") == "ConditionalCheckFailed":
                    raise self._not_owner(thread_id, reasons[1])
                raise S3SaverError(
                    f"storing writes of task {task_id!r} failed: {[r.get('Code') for r in reasons]}"
                )

    # ------------------------------------------------------------ reading
    def _query(self, params: dict[str, Any]) -> Flow[list[dict[str, Any]]]:
        """All pages of a query or scan."""
        items: list[dict[str, Any]] = []
        op = "scan" if "KeyConditionExpression" not in params else "query"
        request = dict(params)
        while True:
            page = yield Ddb(op, request)
            items.extend(page.get("Items", []))
            last = page.get("LastEvaluatedKey")
            if not last:
                return items
            request = {**request, "ExclusiveStartKey": last}

    def _writes_of(self, item: dict[str, Any]) -> _WritesRow:
        records = []
        for name, attr in item.items():
            idx = _attr_idx(name)
            if idx is not None:
                key = f"{item['pk']['S']}|{item['sk']['S']}|{name}"
                records.append((idx, codec.unpack_record(attr["B"], key=key)))
        return _WritesRow(
            task_id=item["tid"]["S"],
            task_path=item.get("tp", {}).get("S", ""),
            checkpoint_id=item["cid"]["S"],
            records=records,
            sk=item["sk"]["S"],
        )

    def _latest_flow(self, thread_id: str, ns: str) -> Flow[tuple[_Row, list[_WritesRow]] | None]:
        """The newest checkpoint item of ``(thread, ns)`` and its writes: one query, usually."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :pre)",
            "ExpressionAttributeValues": {
                ":pk": _s(self.layout.pk(thread_id)),
                ":pre": _s(self.layout.ns_prefix_sk(ns)),
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
            # Usually the newest few items are the latest checkpoint and its writes;
            # DynamoDB bills every item a page reads, so start small.
            "Limit": 8,
        }
        writes: list[dict[str, Any]] = []
        while True:
            if self._bucket_checked:
                page = yield Ddb("query", request)
            else:
                # A run starts with this read; checking the bucket alongside it keeps
                # the check off the first put's critical path.
                page, _ = yield [Ddb("query", request), S3HeadBucket()]
                self._bucket_checked = True
            for item in page.get("Items", []):
                if _is_checkpoint_item(item):
                    row = _parse_row(item)
                    mine = [self._writes_of(w) for w in writes]
                    return row, [w for w in mine if w.checkpoint_id == row.checkpoint_id]
                if _is_writes_item(item):
                    writes.append(item)
            last = page.get("LastEvaluatedKey")
            if not last:
                return None
            request = {**request, "ExclusiveStartKey": last, "Limit": _QUERY_PAGE}

    def _touch(self, row: _Row) -> Flow[None]:
        """Record a read on the head item, so retention counts it as activity."""
        yield Ddb(
            "update_item",
            {
                "TableName": self.table,
                "Key": {"pk": row.item["pk"], "sk": _s(self.layout.head_sk(row.ns))},
                "UpdateExpression": "SET #rd = :now",
                "ConditionExpression": "attribute_exists(#c)",
                "ExpressionAttributeNames": {"#rd": "rd", "#c": "cid"},
                "ExpressionAttributeValues": {":now": _n(int(self.clock() * 1000))},
            },
            expect=frozenset({"ConditionalCheckFailedException"}),
        )

    def _exact_flow(
        self, thread_id: str, ns: str, cid: str
    ) -> Flow[tuple[_Row, list[_WritesRow]] | None]:
        items = yield from self._query(
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
                "ExpressionAttributeValues": {
                    ":pk": _s(self.layout.pk(thread_id)),
                    ":lo": _s(self.layout.checkpoint_sk(ns, cid)),
                    ":hi": _s(self.layout.writes_upper_sk(ns, cid)),
                },
                "ConsistentRead": True,
            }
        )
        row = next((_parse_row(i) for i in items if _is_checkpoint_item(i)), None)
        if row is None:
            return None
        return row, [self._writes_of(i) for i in items if _is_writes_item(i)]

    def get_tuple_flow(self, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        thread_id, ns = self._thread_ns(config)
        cid = self._checkpoint_id(config)
        if cid is None:
            found = yield from self._latest_flow(thread_id, ns)
            if found is not None and self.touch_on_read:
                yield from self._touch(found[0])
        else:
            found = yield from self._exact_flow(thread_id, ns, cid)
        if found is None:
            return None
        tuples = yield from self._load_flow(
            [found], config if cid is not None else None, remember=True
        )
        # The thread id in the answer tells this run's puts whether they continue the
        # head (a read of the latest) or fork (an exact read): see guard.py.
        got = tuples[0]
        conf = dict(got.config["configurable"])
        if cid is None:
            conf["thread_id"] = guard.read_latest(thread_id, ns, found[0].checkpoint_id)
        else:
            conf["thread_id"] = guard.read_exact(config["configurable"], thread_id, ns, cid)
        return got._replace(config={**got.config, "configurable": conf})

    def _object_key(self, row: _Row) -> str:
        return self.layout.checkpoint_key(row.thread_id, row.ns, row.checkpoint_id, row.digest)

    def _read_envelope(self, row: _Row) -> Flow[dict[str, Any]]:
        envs = yield from self._read_envelopes([row])
        return envs[0]

    def _read_envelopes(
        self,
        rows: Sequence[_Row],
        extra: Sequence[str] = (),
        optional: Sequence[str] = (),
        into: dict[str, bytes] | None = None,
    ) -> Flow[list[dict[str, Any]]]:
        """Checkpoint envelopes: from the index item, the cache, or S3 (all at once).

        ``extra`` blob keys (pending-write blobs) and ``optional`` ones (value blobs the
        index names ahead of the object) are fetched in the same round trip, verified,
        and put in ``into``. A missing or damaged optional blob is skipped: the value
        entries that really need it fetch it again and report it.
        """
        keys = [self._object_key(r) for r in rows]
        bodies: list[bytes | None] = [
            r.body if r.body is not None else self._blob_cache.get(k)
            for r, k in zip(rows, keys, strict=True)
        ]
        wanted = [k for k, b in zip(keys, bodies, strict=True) if b is None]
        required = set(extra)
        blobs = [k for k in dict.fromkeys([*extra, *optional]) if self._blob_cache.get(k) is None]
        if wanted or blobs:
            fetched = yield from self._get_objects(wanted + blobs)
            got = dict(zip(wanted, fetched[: len(wanted)], strict=True))
            bodies = [got[k] if b is None else b for k, b in zip(keys, bodies, strict=True)]
            for key, body in zip(blobs, fetched[len(wanted) :], strict=True):
                try:
                    payload = self._check_blob(key, body)
                except ObjectError:
                    if key in required:
                        raise
                    continue
                if into is not None:
                    into[key] = payload
        envs = [self._open_envelope(r, b) for r, b in zip(rows, bodies, strict=True)]
        for row, key, body in zip(rows, keys, bodies, strict=True):
            if row.body is None and body is not None:
                # Immutable (its digest is in the key): safe to keep for warm reads.
                self._blob_cache.put(key, body, len(body))
        return envs

    def _open_envelope(self, row: _Row, body: bytes | None) -> dict[str, Any]:
        key = self._object_key(row)
        if body is None:
            raise MissingObjectError(
                f"checkpoint object {key!r} is referenced by the index but missing from "
                f"bucket {self.bucket!r}",
                key=key,
            )
        if codec.digest(body) != row.digest:
            raise CorruptObjectError(
                f"checkpoint object {key!r} does not match the digest recorded in the index; "
                "it was altered or truncated",
                key=key,
            )
        env = codec.unpack(codec.unframe(body, key=key, kind=codec.KIND_CHECKPOINT), key=key)
        if not isinstance(env, dict) or (env.get("th"), env.get("ns"), env.get("id")) != (
            row.thread_id,
            row.ns,
            row.checkpoint_id,
        ):
            raise CorruptObjectError(
                f"checkpoint object {key!r} belongs to another checkpoint", key=key
            )
        env["_key"] = key
        return env

    def _load_flow(
        self,
        found: Sequence[tuple[_Row, list[_WritesRow]]],
        requested: RunnableConfig | None,
        remember: bool = False,
    ) -> Flow[list[CheckpointTuple]]:
        """Turn index items into CheckpointTuples: objects and write blobs, then value blobs.

        ``remember``: the caller is about to continue from this checkpoint, so its
        blob entries become the hints the next put() chunks against.
        """
        if not found:
            return []
        write_keys = [
            k
            for row, ws in found
            for w in ws
            for _, rec in w.records
            for k in self._entry_keys(row.thread_id, rec[1])
        ]
        # Checkpoint objects, pending-write blobs and the value blobs the index names
        # go out in the same round trip.
        prefetch = [
            self.layout.blob_key(row.thread_id, d.hex()) for row, _ in found for d in row.prefetch
        ]
        fetched: dict[str, bytes] = {}
        envs = yield from self._read_envelopes(
            [r for r, _ in found], write_keys, prefetch, into=fetched
        )
        write_payloads = yield from self._fetch_blobs(write_keys, fetched)
        value_keys = [
            k
            for (row, _), env in zip(found, envs, strict=True)
            for entry in env["ch"].values()
            for k in self._entry_keys(row.thread_id, entry)
        ]
        payloads = yield from self._fetch_blobs(value_keys, fetched)
        payloads.update(write_payloads)
        out = []
        for (row, ws), env in zip(found, envs, strict=True):
            out.append(self._assemble(row, ws, env, payloads, requested))
            if remember:
                for name, entry in env["ch"].items():
                    self._remember_latest(row.thread_id, row.ns, name, entry)
        return out

    def _assemble(
        self,
        row: _Row,
        writes: list[_WritesRow],
        env: dict[str, Any],
        payloads: Mapping[str, bytes],
        requested: RunnableConfig | None,
    ) -> CheckpointTuple:
        key = env["_key"]
        checkpoint = self._deserialize(env["cp"][0], env["cp"][1], "checkpoint", key)
        values = {}
        for name, entry in env["ch"].items():
            values[name] = self._decode_value(
                row.thread_id, entry, payloads, f"channel {name!r}", key
            )
            self._entries.put(
                (row.thread_id, row.ns, name, str(checkpoint["channel_versions"].get(name))),
                entry,
                _entry_size(entry),
            )
            for k in self._entry_keys(row.thread_id, entry):
                self._known_blobs.put(k, True)
        checkpoint["channel_values"] = values
        metadata = self._deserialize(env["md"][0], env["md"][1], "metadata", key)
        configurable = {
            "thread_id": row.thread_id,
            "checkpoint_ns": row.ns,
            "checkpoint_id": row.checkpoint_id,
        }
        return CheckpointTuple(
            config=requested if requested is not None else {"configurable": configurable},
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config=(
                {
                    "configurable": {
                        "thread_id": row.thread_id,
                        "checkpoint_ns": row.ns,
                        "checkpoint_id": row.parent_id,
                    }
                }
                if row.parent_id
                else None
            ),
            pending_writes=self._pending_writes(row.thread_id, writes, payloads),
        )

    def _pending_writes(
        self, thread_id: str, writes: list[_WritesRow], payloads: Mapping[str, bytes]
    ) -> list[PendingWrite]:
        flat = [(w.task_path, w.task_id, idx, rec, w.sk) for w in writes for idx, rec in w.records]
        flat.sort(key=lambda x: writes_sort_key(x[0], x[1], x[2]))
        return [
            (
                tid,
                rec[0],
                self._decode_value(thread_id, rec[1], payloads, f"write to channel {rec[0]!r}", sk),
            )
            for _, tid, _, rec, sk in flat
        ]

    # ------------------------------------------------------------------ list
    def list_flow(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Generator[Any, Any, None]:
        """Yields I/O operations and, interleaved, ``CheckpointTuple`` results in order."""
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidConfigError(f"limit must be a non-negative int or None, got {limit!r}")
        if filter is not None and not isinstance(filter, Mapping):
            raise InvalidConfigError("filter must be a dict of metadata key -> value")
        if limit == 0:
            return
        before_id = None
        if before is not None:
            before_id = get_checkpoint_id(before)
            if before_id is not None:
                check_checkpoint_id(before_id)
        filter = dict(filter or {})
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        conds: list[str] = []
        for i, (k, v) in enumerate(filter.items()):
            indexed = metadata_index_value(v)
            if indexed is None or not isinstance(k, str) or not k:
                continue  # checked on the loaded metadata below
            names[f"#f{i}"] = k
            values[f":f{i}"] = _s(indexed)
            conds.append(f"#md.#f{i} = :f{i}")
        if conds:
            names["#md"] = "md"
        ckpt_cond = " AND ".join(conds)

        if config is None:
            items = yield from self._scan_all(names, values, ckpt_cond, before_id)
        else:
            thread_id, _ = self._thread_ns(config)
            ns = config["configurable"].get("checkpoint_ns")
            cid = self._checkpoint_id(config)
            items = yield from self._query_thread(
                thread_id,
                None if ns is None else _ns_value(ns),
                cid,
                names,
                values,
                ckpt_cond,
                before_id,
            )

        writes: dict[tuple[str, str], list[_WritesRow]] = {}
        rows: list[_Row] = []
        for item in items:
            if _is_writes_item(item):
                writes.setdefault(_owner(item), []).append(self._writes_of(item))
            elif _is_checkpoint_item(item):
                rows.append(_parse_row(item))
        if config is None:
            rows.sort(key=lambda r: r.checkpoint_id, reverse=True)
        remaining = limit
        for start in range(0, len(rows), _LOAD_BATCH):
            batch = rows[start : start + _LOAD_BATCH]
            found = [(r, writes.get(_owner(r.item), [])) for r in batch]
            tuples = yield from self._load_flow(found, None)
            for tup in tuples:
                if filter and not all(tup.metadata.get(k) == v for k, v in filter.items()):
                    continue
                yield Emit(tup)
                if remaining is not None:
                    remaining -= 1
                    if remaining <= 0:
                        return

    def _scan_all(
        self,
        names: dict[str, str],
        values: dict[str, Any],
        ckpt_cond: str,
        before_id: str | None,
    ) -> Flow[list[dict[str, Any]]]:
        names = dict(names)
        values = dict(values)
        clauses = [
            "(attribute_exists(#tid) OR (attribute_exists(#h)"
            + (f" AND {ckpt_cond}))" if ckpt_cond else "))")
        ]
        names.update({"#tid": "tid", "#h": "h"})
        if self.layout.prefix:
            clauses.append("begins_with(pk, :prefix)")
            values[":prefix"] = _s(self.layout.prefix)
        if before_id is not None:
            clauses.append("#cid < :before")
            names["#cid"] = "cid"
            values[":before"] = _s(before_id)
        params: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": " AND ".join(clauses),
            "ExpressionAttributeNames": names,
        }
        if values:
            params["ExpressionAttributeValues"] = values
        items = yield from self._query(params)
        return [i for i in items if self.layout.owns_pk(i["pk"]["S"])]

    def _query_thread(
        self,
        thread_id: str,
        ns: str | None,
        cid: str | None,
        names: dict[str, str],
        values: dict[str, Any],
        ckpt_cond: str,
        before_id: str | None,
    ) -> Flow[list[dict[str, Any]]]:
        names = dict(names)
        values = dict(values)
        values[":pk"] = _s(self.layout.pk(thread_id))
        filters = [
            "(attribute_exists(#tid) OR (attribute_exists(#h)"
            + (f" AND {ckpt_cond}))" if ckpt_cond else "))")
        ]
        names.update({"#tid": "tid", "#h": "h"})
        if ns is not None and cid is not None:
            key_cond = "pk = :pk AND sk BETWEEN :lo AND :hi"
            values[":lo"] = _s(self.layout.checkpoint_sk(ns, cid))
            values[":hi"] = _s(self.layout.writes_upper_sk(ns, cid))
        elif ns is not None:
            if before_id is not None:
                key_cond = "pk = :pk AND sk BETWEEN :lo AND :hi"
                values[":lo"] = _s(self.layout.ns_prefix_sk(ns))
                values[":hi"] = _s(self.layout.checkpoint_sk(ns, before_id))
            else:
                key_cond = "pk = :pk AND begins_with(sk, :pre)"
                values[":pre"] = _s(self.layout.ns_prefix_sk(ns))
        else:
            key_cond = "pk = :pk AND begins_with(sk, :pre)"
            values[":pre"] = _s("c#")
        if cid is not None:
            filters.append("#cid = :cid")
            values[":cid"] = _s(cid)
            names["#cid"] = "cid"
        if before_id is not None:
            filters.append("#cid < :before")
            values[":before"] = _s(before_id)
            names["#cid"] = "cid"
        items = yield from self._query(
            {
                "TableName": self.table,
                "KeyConditionExpression": key_cond,
                "FilterExpression": " AND ".join(filters),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ScanIndexForward": False,
            }
        )
        return items

    # ---------------------------------------------------------------- deletes
    def _delete_items(self, keys: Sequence[dict[str, Any]]) -> Flow[None]:
        yield from self._batch_write([{"DeleteRequest": {"Key": k}} for k in keys])

    def _put_items(self, items: Sequence[dict[str, Any]]) -> Flow[None]:
        yield from self._batch_write([{"PutRequest": {"Item": i}} for i in items])

    def _batch_write(self, requests: list[dict[str, Any]]) -> Flow[None]:
        """BatchWriteItem, 25 requests at a time, concurrently, retrying what DynamoDB defers."""
        pending = requests
        attempt = 0
        while pending:
            batches = [pending[i : i + _BATCH_WRITE] for i in range(0, len(pending), _BATCH_WRITE)]
            results = yield [
                Ddb("batch_write_item", {"RequestItems": {self.table: b}}) for b in batches
            ]
            pending = [
                r for res in results for r in res.get("UnprocessedItems", {}).get(self.table, [])
            ]
            if pending:
                attempt += 1
                yield Sleep(min(0.05 * 2**attempt, 2.0))

    def _delete_objects(self, keys: Sequence[str]) -> Flow[None]:
        keys = list(dict.fromkeys(keys))
        if keys:
            yield [
                S3Delete(tuple(keys[i : i + _S3_DELETE_BATCH]))
                for i in range(0, len(keys), _S3_DELETE_BATCH)
            ]

    def _list_keys(self, prefix: str) -> Flow[list[tuple[str, float, int]]]:
        out: list[tuple[str, float, int]] = []
        token = None
        while True:
            page: ListPage = yield S3List(prefix, token)
            out.extend(page.keys)
            if page.token is None:
                return out
            token = page.token

    def _thread_items(self, thread_id: str, projection: bool = False) -> Flow[list[dict[str, Any]]]:
        params: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": _s(self.layout.pk(thread_id))},
            "ConsistentRead": True,
        }
        if projection:
            params["ProjectionExpression"] = "pk, sk"
        items = yield from self._query(params)
        return items

    def delete_thread_flow(self, thread_id: str) -> Flow[None]:
        thread_id = _thread_value(thread_id)
        # Index first: once the items are gone the thread is invisible, and a crash
        # before the objects are deleted leaves only garbage for `gc`, never a half thread.
        items = yield from self._thread_items(thread_id, projection=True)
        yield from self._delete_items([{"pk": i["pk"], "sk": i["sk"]} for i in items])
        prefix = self.layout.thread_prefix(thread_id)
        keys = yield from self._list_keys(prefix)
        yield from self._delete_objects(
            [k for k, _, _ in keys if self.layout.owns_object(thread_id, k)]
        )
        self._forget(thread_id)

    def _forget(self, thread_id: str) -> None:
        prefix = self.layout.thread_prefix(thread_id)
        self._blob_cache.discard(lambda k: k.startswith(prefix))
        self._known_blobs.discard(lambda k: k.startswith(prefix))
        self._entries.discard(lambda k: k[0] == thread_id)
        self._latest_entries.discard(lambda k: k[0] == thread_id)

    def _drop_checkpoints(
        self, rows: Sequence[_Row], all_items: Sequence[dict[str, Any]]
    ) -> Flow[None]:
        """Delete checkpoint items, their writes and objects; fix heads that pointed at them."""
        doomed = {_owner(r.item) for r in rows}
        keys = [
            {"pk": item["pk"], "sk": item["sk"]}
            for item in all_items
            if (_is_checkpoint_item(item) or _is_writes_item(item)) and _owner(item) in doomed
        ]
        yield from self._delete_items(keys)
        yield from self._delete_objects([self._object_key(r) for r in rows if r.body is None])
        heads: dict[tuple[str, str], list[str]] = {}
        for r in rows:
            heads.setdefault((r.item["pk"]["S"], r.ns), []).append(r.checkpoint_id)
        ops = []
        for (pk, ns), cids in heads.items():
            for i in range(0, len(cids), 100):
                part = cids[i : i + 100]
                ops.append(
                    Ddb(
                        "delete_item",
                        {
                            "TableName": self.table,
                            "Key": {"pk": _s(pk), "sk": _s(self.layout.head_sk(ns))},
                            "ConditionExpression": "#c IN ("
                            + ", ".join(f":c{j}" for j in range(len(part)))
                            + ")",
                            "ExpressionAttributeNames": {"#c": "cid"},
                            "ExpressionAttributeValues": {
                                f":c{j}": _s(c) for j, c in enumerate(part)
                            },
                        },
                        expect=frozenset({"ConditionalCheckFailedException"}),
                    )
                )
        if ops:
            yield ops

    def delete_for_runs_flow(self, run_ids: Sequence[str]) -> Flow[None]:
        if isinstance(run_ids, str):
            raise InvalidConfigError("run_ids must be a sequence of run ids, not a single string")
        for run_id in dict.fromkeys(run_ids):
            if not isinstance(run_id, str):
                raise InvalidConfigError(f"run id must be a string, got {run_id!r}")
            hits = yield from self._query(
                {
                    "TableName": self.table,
                    "IndexName": _GSI_RUN,
                    "KeyConditionExpression": "#r = :r",
                    "ExpressionAttributeNames": {"#r": "run"},
                    "ExpressionAttributeValues": {":r": _s(run_id)},
                }
            )
            hits = [h for h in hits if self.layout.owns_pk(h["pk"]["S"])]
            if not hits:
                continue
            # The index projects only keys and ids; read the items (and their writes).
            rows: list[_Row] = []
            items: list[dict[str, Any]] = []
            found = yield [
                Ddb(
                    "query",
                    {
                        "TableName": self.table,
                        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
                        "ExpressionAttributeValues": {
                            ":pk": h["pk"],
                            ":lo": h["sk"],
                            ":hi": _s(h["sk"]["S"] + "#x"),
                        },
                        "ConsistentRead": True,
                    },
                )
                for h in hits
            ]
            for page in found:
                for item in page.get("Items", []):
                    items.append(item)
                    if _is_checkpoint_item(item):
                        rows.append(_parse_row(item))
            yield from self._drop_checkpoints(rows, items)

    def copy_thread_flow(self, source_thread_id: str, target_thread_id: str) -> Flow[None]:
        src = _thread_value(source_thread_id)
        dst = _thread_value(target_thread_id)
        if src == dst:
            raise InvalidConfigError("copy_thread needs two different thread ids")
        existing = yield Ddb(
            "query",
            {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": _s(self.layout.pk(dst))},
                "Limit": 1,
                "ConsistentRead": True,
            },
        )
        if existing.get("Items"):
            raise ThreadExistsError(
                f"thread {dst!r} already has checkpoints; delete it first or copy to a new id"
            )
        items = yield from self._thread_items(src)
        rows = [_parse_row(i) for i in items if _is_checkpoint_item(i)]
        if not items:
            return
        # Objects first (blobs are copied as they are, checkpoints re-written with the
        # new thread id), then writes items, checkpoint items and heads: nothing in
        # the target is visible before what it points to exists.
        blob_keys = yield from self._list_keys(self.layout.blob_prefix(src))
        dst_blob_prefix = self.layout.blob_prefix(dst)
        src_blob_prefix = self.layout.blob_prefix(src)
        copies = [
            S3Copy(k, dst_blob_prefix + k[len(src_blob_prefix) :])
            for k, _, _ in blob_keys
            if self.layout.owns_object(src, k)
        ]
        for i in range(0, len(copies), 256):
            yield copies[i : i + 256]
        new_items: list[dict[str, Any]] = []
        dst_pk = _s(self.layout.pk(dst))
        for start in range(0, len(rows), _LOAD_BATCH):
            batch = rows[start : start + _LOAD_BATCH]
            envs = yield from self._read_envelopes(batch)
            puts = []
            for row, env in zip(batch, envs, strict=True):
                env = {k: v for k, v in env.items() if k != "_key"}
                env["th"] = dst
                new_body = codec.frame(
                    codec.KIND_CHECKPOINT, codec.pack(env), self.compression_level
                )
                digest = codec.digest(new_body)
                new_item = {
                    **row.item,
                    "pk": dst_pk,
                    "th": _s(dst),
                    "h": _s(digest),
                    "sz": _n(len(new_body)),
                }
                new_item.pop("b", None)
                if len(new_body) <= self.index_inline_limit:
                    new_item["b"] = _b(new_body)
                else:
                    puts.append(
                        S3Put(
                            self.layout.checkpoint_key(dst, row.ns, row.checkpoint_id, digest),
                            new_body,
                        )
                    )
                new_items.append(new_item)
            if puts:
                yield puts
        writes_items = [{**i, "pk": dst_pk} for i in items if _is_writes_item(i)]
        heads = [
            {**i, "pk": dst_pk, "th": _s(dst)}
            for i in items
            if not _is_checkpoint_item(i) and not _is_writes_item(i)
        ]
        yield from self._put_items(writes_items)
        yield from self._put_items(new_items)
        yield from self._put_items(heads)

    def prune_flow(self, thread_ids: Sequence[str], strategy: str) -> Flow[None]:
        if strategy not in ("keep_latest", "delete"):
            raise InvalidConfigError(
                f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'"
            )
        if isinstance(thread_ids, str):
            raise InvalidConfigError("thread_ids must be a sequence of ids, not a single string")
        for thread_id in dict.fromkeys(_thread_value(t) for t in thread_ids):
            if strategy == "delete":
                yield from self.delete_thread_flow(thread_id)
                continue
            items = yield from self._thread_items(thread_id)
            by_ns: dict[str, dict[str, _Row]] = {}
            for item in items:
                if _is_checkpoint_item(item):
                    row = _parse_row(item)
                    by_ns.setdefault(row.ns, {})[row.checkpoint_id] = row
            doomed: list[_Row] = []
            orphans: list[_Row] = []
            for rows in by_ns.values():
                keep = yield from self._kept_chain(rows)
                doomed.extend(r for cid, r in rows.items() if cid not in keep)
                orphans.extend(
                    rows[cid] for cid in keep if rows[cid].parent_id not in (None, *keep)
                )
            yield from self._drop_checkpoints(doomed, items)
            yield from self._unlink_parents(orphans)

    def _unlink_parents(self, rows: Sequence[_Row]) -> Flow[None]:
        """Forget the parent of kept checkpoints whose parent was pruned.

        As PostgresSaver's prune does: ``parent_config`` then is ``None`` instead of
        naming a checkpoint that no longer loads. The body keeps its ``p``; readers
        take the parent from the index item.
        """
        ops = [
            Ddb(
                "update_item",
                {
                    "TableName": self.table,
                    "Key": {"pk": r.item["pk"], "sk": r.item["sk"]},
                    "UpdateExpression": "REMOVE #p",
                    "ConditionExpression": "#p = :p",
                    "ExpressionAttributeNames": {"#p": "p"},
                    "ExpressionAttributeValues": {":p": _s(r.parent_id or "")},
                },
                expect=frozenset({"ConditionalCheckFailedException"}),
            )
            for r in rows
        ]
        if ops:
            yield ops

    def _kept_chain(self, rows: Mapping[str, _Row]) -> Flow[set[str]]:
        """The latest checkpoint plus the ancestors its delta channels are rebuilt from."""
        latest = rows[max(rows)]
        keep = {latest.checkpoint_id}
        remaining = set(latest.empty)
        if remaining:
            env = yield from self._read_envelope(latest)
            md = self._deserialize(env["md"][0], env["md"][1], "metadata", env["_key"])
            remaining = _delta_channels(md, remaining)
        cursor = latest.parent_id
        while remaining and cursor is not None and cursor in rows:
            row = rows[cursor]
            keep.add(cursor)
            candidates = remaining - row.empty
            if candidates:
                env = yield from self._read_envelope(row)
                remaining -= {ch for ch in candidates if ch in env["ch"]}
            cursor = row.parent_id
        return keep

    # ------------------------------------------------------- delta history
    def delta_history_flow(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Flow[Mapping[str, DeltaChannelHistory]]:
        """Walk the parent chain in index pages (not one GET per ancestor)."""
        if not channels:
            return {}
        thread_id, ns = self._thread_ns(config)
        cid = self._checkpoint_id(config)
        if cid is None:
            latest = yield from self._latest_flow(thread_id, ns)
            if latest is None:
                return {ch: {"writes": []} for ch in channels}
            cid = latest[0].checkpoint_id
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": _s(self.layout.pk(thread_id)),
                ":lo": _s(self.layout.ns_prefix_sk(ns)),
                ":hi": _s(self.layout.checkpoint_sk(ns, cid)),
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": 200,
        }
        rows: dict[str, _Row] = {}
        writes: dict[str, list[_WritesRow]] = {}
        remaining = set(channels)
        collected: list[list[tuple[str, str, Any, str]]] = []  # newest checkpoint first
        seeds: dict[str, tuple[Any, dict[str, Any], _Row]] = {}
        target: _Row | None = None
        cursor: str | None = None
        exhausted = False
        while remaining:
            if not exhausted:
                page = yield Ddb("query", request)
                for item in page.get("Items", []):
                    if _is_checkpoint_item(item):
                        row = _parse_row(item)
                        rows[row.checkpoint_id] = row
                    elif _is_writes_item(item):
                        w = self._writes_of(item)
                        writes.setdefault(w.checkpoint_id, []).append(w)
                last = page.get("LastEvaluatedKey")
                if last:
                    request = {**request, "ExclusiveStartKey": last}
                else:
                    exhausted = True
            if target is None:
                if cid not in rows:
                    if exhausted:
                        return {ch: {"writes": []} for ch in channels}
                    continue
                target = rows[cid]
                cursor = target.parent_id
            # Advance along the chain as far as the pages read so far reach.
            while remaining and cursor is not None and cursor in rows:
                row = rows[cursor]
                ws = sorted(
                    (
                        (w.task_path, w.task_id, idx, rec, w.sk)
                        for w in writes.get(cursor, [])
                        for idx, rec in w.records
                        if rec[0] in remaining
                    ),
                    key=lambda x: writes_sort_key(x[0], x[1], x[2]),
                )
                collected.append([(tid, rec[0], rec[1], sk) for _, tid, _, rec, sk in ws])
                candidates = remaining - row.empty
                if candidates:
                    env = yield from self._read_envelope(row)
                    for ch in candidates:
                        if ch in env["ch"]:
                            seeds[ch] = (env["ch"][ch], env, row)
                            remaining.discard(ch)
                cursor = row.parent_id
            if cursor is None or (exhausted and cursor not in rows):
                break
        keys = [
            k
            for entries in collected
            for _, _, e, _ in entries
            for k in self._entry_keys(thread_id, e)
        ]
        keys += [k for e, _, _ in seeds.values() for k in self._entry_keys(thread_id, e)]
        payloads = yield from self._fetch_blobs(keys)
        result: dict[str, DeltaChannelHistory] = {}
        for ch in channels:
            ch_writes: list[PendingWrite] = [
                (tid, c, self._decode_value(thread_id, e, payloads, f"write to {c!r}", sk))
                for entries in reversed(collected)
                for tid, c, e, sk in entries
                if c == ch
            ]
            history: DeltaChannelHistory = {"writes": ch_writes}
            if ch in seeds:
                entry, env, _ = seeds[ch]
                history["seed"] = self._decode_value(
                    thread_id, entry, payloads, f"channel {ch!r}", env["_key"]
                )
            result[ch] = history
        return result

    # ------------------------------------------------------------------ setup
    def setup_flow(self, *, region: str | None) -> Flow[None]:
        yield CreateBucket(region)
        created = yield Ddb(
            "create_table",
            {
                "TableName": self.table,
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                    {"AttributeName": "run", "AttributeType": "S"},
                ],
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "GlobalSecondaryIndexes": [
                    {
                        "IndexName": _GSI_RUN,
                        "KeySchema": [
                            {"AttributeName": "run", "KeyType": "HASH"},
                            {"AttributeName": "sk", "KeyType": "RANGE"},
                        ],
                        "Projection": {"ProjectionType": "KEYS_ONLY"},
                    }
                ],
                "BillingMode": "PAY_PER_REQUEST",
            },
            expect=frozenset({"ResourceInUseException"}),
        )
        for _ in range(120):
            desc = yield Ddb("describe_table", {"TableName": self.table})
            if desc["Table"]["TableStatus"] == "ACTIVE":
                break
            yield Sleep(1.0)
        if not isinstance(created, DdbFailure):
            yield Ddb(
                "update_time_to_live",
                {
                    "TableName": self.table,
                    "TimeToLiveSpecification": {"Enabled": True, "AttributeName": "expires_at"},
                },
            )

    # ---------------------------------------------------------------- versions
    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as ``InMemorySaver`` makes them: a counter plus a random tail.

        The random tail keeps two forks that bump the same channel from the same
        version apart, so a version always names one value.
        """
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        # random, not uuid4: LangGraph's tests pin uuid4 to make ids deterministic.
        return f"{current_v + 1:032}.{random.random():016}"


@dataclass(frozen=True)
class Emit:
    """A result of ``list_flow`` (as opposed to an I/O operation)."""

    value: CheckpointTuple


def writes_value(writes: Sequence[tuple[str, Any]], widx: int, channel: str) -> Any:
    """The value of the write stored under index ``widx`` (the last with that index)."""
    value: Any = None
    for idx, (c, v) in enumerate(writes):
        if WRITES_IDX_MAP.get(c, idx) == widx:
            value = v
    return value


def _delta_channels(metadata: Mapping[str, Any], missing: set[str]) -> set[str]:
    """Of the versioned channels a checkpoint stores no value for, the delta channels.

    LangGraph rebuilds only a ``DeltaChannel`` from ancestors; any other channel with
    no stored value is empty (``__start__``, ``branch:to:...`` once consumed). A delta
    channel not snapshotted at a checkpoint always has counters in its metadata
    (the superstep count grows every step); threads of older writers only carry
    the ``delta_writes_versioned`` marker, and then every such channel counts.
    """
    if metadata.get("delta_writes_versioned"):
        return set(missing)
    counters = metadata.get("counters_since_delta_snapshot")
    return missing & set(counters) if isinstance(counters, Mapping) else set()


def _owner(item: Mapping[str, Any]) -> tuple[str, str]:
    """(partition key, sort key of the checkpoint item) for a checkpoint or writes item."""
    return item["pk"]["S"], item["sk"]["S"].split("#w#", 1)[0]


def _blob_shape(type_: str, data: bytes) -> list[Any]:
    """The entry a value up to the chunking threshold gets as one blob (no upload)."""
    head, body = chunking.split_head(type_, data)
    return ["r", type_, [codec.digest_bytes(body)], [len(body)], head, 0]


def _stable_count(entry: Sequence[Any]) -> int:
    # Entries written before pieces existed were plain FastCDC output: every chunk
    # but the last ended at a content boundary.
    if len(entry) > 5 and isinstance(entry[5], int):
        return max(0, min(entry[5], len(entry[2])))
    return max(0, len(entry[2]) - 1)


def _entry_size(entry: Sequence[Any]) -> int:
    return len(entry[2]) + 64 if entry[0] == "i" else 64 + 40 * len(entry[2]) + len(entry[4])


def _thread_value(thread_id: object) -> str:
    if isinstance(thread_id, str):
        return str(thread_id)  # a plain str, also for guard.HeadRead
    if isinstance(thread_id, int | uuid.UUID) and not isinstance(thread_id, bool):
        return str(thread_id)
    raise InvalidConfigError(
        f"thread_id must be a string (or int/UUID), got {type(thread_id).__name__}"
    )


def _ns_value(ns: object) -> str:
    if not isinstance(ns, str):
        raise InvalidConfigError(f"checkpoint_ns must be a string, got {type(ns).__name__}")
    return ns


_IDEMPOTENT_MISMATCH = "IdempotentParameterMismatchException"


def _commit_token(item: Mapping[str, Any], variant: str = "") -> str:
    """The idempotency token of a checkpoint's commit: thread, namespace, id, digest."""
    ident = "\x00".join((item["pk"]["S"], item["sk"]["S"], item["h"]["S"], variant))
    return hashlib.sha256(ident.encode()).hexdigest()[:36]


def _clock_skew(thread_id: str, ns: str, parent: str, cid: str) -> ClockSkewError:
    behind = _id_seconds(parent, cid)
    wait = f"retry in {behind + 0.001:.3f} s" if behind is not None else "retry later"
    log.warning("clock skew: checkpoint %s sorts before its parent %s; %s", cid, parent, wait)
    return ClockSkewError(
        f"thread {thread_id!r} (namespace {ns!r}): the new checkpoint {cid!r} does not sort "
        f"after the checkpoint it continues, {parent!r}: this machine's clock is behind "
        f"the one that wrote it. Nothing was written; {wait} (the run then re-reads the "
        "thread) and keep clocks synchronised (NTP, Amazon Time Sync).",
        thread_id=thread_id,
        checkpoint_ns=ns,
        parent=parent,
        checkpoint_id=cid,
        retry_after=behind,
    )


def _id_seconds(later: str, earlier: str) -> float | None:
    """How many seconds the clock in uuid6 id ``later`` is ahead of ``earlier``'s."""
    try:
        a, b = uuid.UUID(later), uuid.UUID(earlier)
    except ValueError:
        return None
    if a.version != 6 or b.version != 6:
        return None
    return max(0.0, (_uuid6_ticks(a.int) - _uuid6_ticks(b.int)) / 1e7)


def _uuid6_ticks(value: int) -> int:
    # 48 high bits of the 100 ns timestamp, the version nibble, then its 12 low bits
    return ((value >> 80) << 12) | ((value >> 64) & 0x0FFF)


def _conflict(
    thread_id: str, ns: str, expected: str | None, actual: str | None
) -> CheckpointConflictError:
    where = f"thread {thread_id!r}" + (f" namespace {ns!r}" if ns else "")
    log.warning("conflict: %s moved on from %s to %s; nothing committed", where, expected, actual)
    return CheckpointConflictError(
        f"{where} moved on while this run was working: it resumed from checkpoint "
        f"{expected!r} but the latest checkpoint is now {actual!r} (another run committed "
        "first). Nothing was committed by this run; reload the thread and decide whether "
        "to continue from the new state",
        thread_id=thread_id,
        checkpoint_ns=ns,
        expected=expected,
        actual=actual,
    )
