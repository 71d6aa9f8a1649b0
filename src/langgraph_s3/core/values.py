"""How a value is stored: serialized, then inline in its envelope or as blobs.

A value entry is ``["i", type, bytes]`` (inline) or ``["r", type, digests, sizes,
head, stable]``: the value's bytes are ``head`` followed by the blobs, in order,
and the first ``stable`` blobs end at content boundaries (:func:`chunking.plan`).
Checkpoint bodies that fit go into their index item (:func:`fit_in_index`).
See docs/layout.md ("Inline or blob", "Where the checkpoint body lives").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

from langgraph.checkpoint.base import WRITES_IDX_MAP

from langgraph_s3 import chunking, codec
from langgraph_s3.errors import CorruptObjectError, SerializationError, UndecodableValueError

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: Inline values smaller than this stay in the body even when it is too large for the
#: index: moving them would save less than the PUT they cost.
MIN_MOVED = 512


def serialize(core: SaverCore, value: Any, what: str) -> tuple[str, bytes]:
    """``serde.dumps_typed``, refusing pickle; ``what`` names the value in errors."""
    try:
        type_, data = core.serde.dumps_typed(value)
    except Exception as exc:
        raise SerializationError(
            f"{what} could not be serialized by {type(core.serde).__name__}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if type_ == "pickle":
        raise SerializationError(
            f"{what} would be stored as pickle, which this saver refuses to store or load"
        )
    return type_, bytes(data)


def serialize_metadata(core: SaverCore, md: Mapping[str, Any]) -> tuple[str, bytes]:
    """The metadata, serialized; an error names the key that is at fault."""
    try:
        return serialize(core, dict(md), "metadata")
    except SerializationError:
        for k, v in md.items():
            serialize(core, v, f"metadata key {k!r}")
        raise


def deserialize(core: SaverCore, type_: str, data: bytes, what: str, key: str) -> Any:
    """``serde.loads_typed``, refusing pickle; damage is a CorruptObjectError at ``key``."""
    if type_ == "pickle":
        raise CorruptObjectError(
            f"{what} in {key!r} is pickled; this saver never loads pickle (it executes code)",
            key=key,
        )
    try:
        return core.serde.loads_typed((type_, data))
    except Exception as exc:
        # The bytes passed their checksum: the serializer in use cannot read them.
        raise UndecodableValueError(
            f"{what} in {key!r} (type {type_!r}) could not be decoded by the serializer "
            f"in use ({type(exc).__name__}: {exc}); if the thread was written with another "
            "serializer (an EncryptedSerializer, another key), pass that one as serde=",
            key=key,
        ) from exc


def encode_value(
    core: SaverCore,
    thread_id: str,
    value: Any,
    what: str,
    inline_limit: int,
    previous: Sequence[Any] | None = None,
) -> tuple[list[Any], dict[str, bytes]]:
    """A value entry, and the blobs it needs uploaded (key -> framed body).

    ``previous`` is the entry this value probably extends; it only saves work,
    every re-used blob is verified.
    """
    type_, data = serialize(core, value, what)
    if len(data) <= inline_limit:
        return ["i", type_, data], {}
    return blob_entry(core, thread_id, type_, data, previous)


def blob_entry(
    core: SaverCore, thread_id: str, type_: str, data: bytes, previous: Sequence[Any] | None
) -> tuple[list[Any], dict[str, bytes]]:
    """The blob entry of serialized bytes, and the blobs not known to exist yet."""
    head, body = chunking.split_head(type_, data)
    hint = None
    if previous is not None and previous[0] == "r" and previous[1] == type_:
        hint = chunking.Previous(previous[2], previous[3], stable_count(previous))
    planned, stable = chunking.plan(body, hint)
    uploads: dict[str, bytes] = {}
    for chunk in planned:
        if chunk.data is None:
            continue
        key = core.layout.blob_key(thread_id, chunk.digest.hex())
        if key not in core.caches.known_blobs and key not in uploads:
            uploads[key] = codec.frame(codec.KIND_BLOB, chunk.data, core.compression_level)
            core.caches.objects.put(key, chunk.data, chunk.size)
    digests = [c.digest for c in planned]
    sizes = [c.size for c in planned]
    return ["r", type_, digests, sizes, head, stable], uploads


def entry_keys(core: SaverCore, thread_id: str, entry: Sequence[Any]) -> list[str]:
    """The blob keys a value entry reads."""
    if entry[0] == "r":
        return [core.layout.blob_key(thread_id, d.hex()) for d in entry[2]]
    return []


def decode_value(
    core: SaverCore,
    thread_id: str,
    entry: Sequence[Any],
    payloads: Mapping[str, bytes],
    what: str,
    key: str,
) -> Any:
    """The value of an entry, its blobs taken from ``payloads``; ``key`` names its home."""
    try:
        kind = entry[0]
        if kind == "i":
            return deserialize(core, entry[1], entry[2], what, key)
        if kind == "r":
            data = entry[4] + b"".join(payloads[k] for k in entry_keys(core, thread_id, entry))
            if len(data) != len(entry[4]) + sum(entry[3]):
                raise CorruptObjectError(f"{what} in {key!r}: blob sizes do not add up", key=key)
            return deserialize(core, entry[1], data, what, key)
    except (IndexError, TypeError, KeyError) as exc:
        raise CorruptObjectError(f"{what} in {key!r} has a malformed entry", key=key) from exc
    raise CorruptObjectError(f"{what} in {key!r} has unknown entry kind {kind!r}", key=key)


def frame_body(core: SaverCore, envelope: Mapping[str, Any]) -> bytes:
    """A checkpoint envelope as the bytes of its object."""
    return codec.frame(codec.KIND_CHECKPOINT, codec.pack(envelope), core.compression_level)


def in_index(core: SaverCore, body: bytes) -> bool:
    """Whether a checkpoint body is kept in its index item rather than in S3."""
    return len(body) <= core.index_inline_limit


def fit_in_index(
    core: SaverCore,
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
    ``envelope``, ``uploads`` and ``fresh`` are updated when values move.
    """
    entries: dict[str, list[Any]] = envelope["ch"]
    movable = sorted(
        (name for name, e in entries.items() if e[0] == "i" and len(e[2]) >= MIN_MOVED),
        key=lambda name: -len(entries[name][2]),
    )
    if not movable or core.index_inline_limit == 0:
        return body
    # First, cheaply, the body with every candidate moved (each as the one-blob
    # reference it would get without a hint): if even that does not fit, stop.
    shapes = {name: blob_shape(entries[name][1], entries[name][2]) for name in movable}
    if not in_index(core, frame_body(core, {**envelope, "ch": {**entries, **shapes}})):
        return body
    moved: dict[str, list[Any]] = {}
    added: dict[str, bytes] = {}
    for name in movable:
        type_, data = entries[name][1], entries[name][2]
        latest = core.caches.latest.get((thread_id, ns, name))
        entry, blobs = blob_entry(core, thread_id, type_, data, latest)
        moved[name] = entry
        added.update(blobs)
        candidate = frame_body(core, {**envelope, "ch": {**entries, **moved}})
        if in_index(core, candidate):
            entries.update(moved)
            fresh.update(moved)
            uploads.update(added)
            return candidate
    return body


def remember_latest(core: SaverCore, thread_id: str, ns: str, name: str, entry: list[Any]) -> None:
    """Keep a channel's blob entry as the hint its next version is chunked against."""
    if entry[0] == "r":
        core.caches.latest.put((thread_id, ns, name), entry, entry_size(entry))


def blob_shape(type_: str, data: bytes) -> list[Any]:
    """The entry a value up to the chunking threshold gets as one blob (no upload)."""
    head, body = chunking.split_head(type_, data)
    return ["r", type_, [codec.digest_bytes(body)], [len(body)], head, 0]


def stable_count(entry: Sequence[Any]) -> int:
    """How many leading blobs of an entry end at content boundaries."""
    # Entries written before pieces existed were plain FastCDC output: every chunk
    # but the last ended at a content boundary.
    if len(entry) > 5 and isinstance(entry[5], int):
        return max(0, min(entry[5], len(entry[2])))
    return max(0, len(entry[2]) - 1)


def entry_size(entry: Sequence[Any]) -> int:
    """Approximate memory of an entry, for the caches' byte bounds."""
    return len(entry[2]) + 64 if entry[0] == "i" else 64 + 40 * len(entry[2]) + len(entry[4])


def writes_value(writes: Sequence[tuple[str, Any]], widx: int, channel: str) -> Any:
    """The value of the write stored under index ``widx`` (the last with that index)."""
    value: Any = None
    for idx, (c, v) in enumerate(writes):
        if WRITES_IDX_MAP.get(c, idx) == widx:
            value = v
    return value


def cached_entry(
    core: SaverCore, thread_id: str, ns: str, name: str, version: object
) -> list[Any] | None:
    """The entry cached for a channel at ``version``, if any (see ``cache_entry``)."""
    if not _names_one_value(version):
        return None
    return core.caches.entries.get((thread_id, ns, name, version))


def cache_entry(
    core: SaverCore, thread_id: str, ns: str, name: str, version: object, entry: list[Any]
) -> None:
    """Cache a channel's entry under its version, so a later put whose channel did not
    move re-uses it instead of encoding the value again."""
    if _names_one_value(version):
        core.caches.entries.put((thread_id, ns, name, version), entry, entry_size(entry))


def _names_one_value(version: object) -> TypeGuard[str]:
    # Only versions with SaverCore.get_next_version's random tail are unique across
    # forks; integer versions (a thread migrated from DynamoDBSaver) repeat.
    return isinstance(version, str) and "." in version
