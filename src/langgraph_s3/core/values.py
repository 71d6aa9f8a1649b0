"""How a value is stored: serialized, then inline in its envelope or as blobs.

A value's entry is :class:`~langgraph_s3.core.entries.Inline` or
:class:`~langgraph_s3.core.entries.Blobs` (its bytes are ``head`` followed by the
blobs, the first ``stable`` of them ending at content boundaries: :func:`chunking.plan`).
Checkpoint bodies that fit go into their index item (:func:`fit_in_index`).
See docs/layout.md ("Inline or blob", "Where the checkpoint body lives").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeGuard

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import WRITES_IDX_MAP

from langgraph_s3 import chunking, codec
from langgraph_s3.core import records, schema
from langgraph_s3.core.entries import (
    PENDING,
    Blobs,
    Entry,
    Envelope,
    InIndex,
    Inline,
    Listed,
    Location,
    Span,
)
from langgraph_s3.core.schema import b, n, s
from langgraph_s3.core.sealed import blob_frame, namer, rekeying, seal_body
from langgraph_s3.errors import CorruptObjectError, SerializationError, UndecodableValueError
from langgraph_s3.keys import Layout

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: Inline values smaller than this stay in the body even when it is too large for the
#: index: moving them would save less than the PUT they cost.
MIN_MOVED = 512
#: The channel that holds a graph's input (LangGraph's ``START``; this package does
#: not depend on ``langgraph`` itself): see :func:`input_head`.
INPUT_CHANNEL = "__start__"


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


def serialize_checkpoint(
    core: SaverCore, checkpoint: Mapping[str, Any], checkpoint_id: str
) -> tuple[str, bytes]:
    """The checkpoint without its values: a compact record (layout 7) where one is
    exact and the saver writes them, else what the serializer makes of it."""
    if core.compact_records:
        record = records.encode(checkpoint, checkpoint_id)
        if record is not None:
            return records.RECORD_TYPE, record
    return serialize(core, dict(checkpoint), "checkpoint (without values)")


def deserialize_checkpoint(core: SaverCore, envelope: Envelope) -> Any:
    """The checkpoint (without its values) an envelope holds."""
    type_, data = envelope.checkpoint
    if type_ == records.RECORD_TYPE:
        return records.decode(data, envelope.checkpoint_id, envelope.key)
    return deserialize(core, type_, data, "checkpoint", envelope.key)


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
    previous: Entry | None = None,
    appends: frozenset[str] = frozenset(),
) -> tuple[Entry, dict[str, bytes]]:
    """A value entry, and the blobs it needs uploaded (key -> framed body).

    ``previous`` is the entry this value probably extends; it only saves work,
    every re-used blob is verified. ``appends``: the channels a graph input's
    messages will be appended to as a piece (:func:`input_head`).
    """
    type_, data = serialize(core, value, what)
    head = input_head(core, type_, data, value, appends) if appends else None
    if head is not None:
        return blob_entry(core, thread_id, type_, data, None, head)
    if len(data) <= inline_limit:
        return Inline(type_, data), {}
    return blob_entry(core, thread_id, type_, data, previous)


def blob_entry(
    core: SaverCore,
    thread_id: str,
    type_: str,
    data: bytes,
    previous: Entry | None,
    head_size: int | None = None,
) -> tuple[Blobs | Listed, dict[str, bytes]]:
    """The blob entry of serialized bytes, and the blobs not known to exist yet.

    A value this saver stored a moment ago (a task's write, now the next
    checkpoint's channel value) re-uses that entry: nothing to cut or upload.
    ``head_size``: how many leading bytes stay in the entry (default: msgpack's
    length header, ``chunking.split_head``).
    """
    value = codec.digest_bytes(data)
    stored = core.caches.values.get((thread_id, type_, value))
    if isinstance(stored, Blobs | Listed):
        return stored, {}
    if isinstance(previous, Listed):
        previous = previous.blobs
    if head_size is None:
        head, body = chunking.split_head(type_, data)
    else:
        head, body = data[:head_size], data[head_size:]
    hint = None
    if isinstance(previous, Blobs) and previous.type == type_:
        hint = chunking.Previous(
            list(previous.digests), list(previous.sizes), previous.stable_count()
        )
    planned, stable = chunking.plan(body, hint, namer(core, thread_id))
    # Where each chunk is: re-used ones where the hint has them, known ones where
    # they were stored, new ones PENDING until packs.seal places them.
    where = dict(zip(previous.digests, previous.spans, strict=True)) if (
        hint is not None and isinstance(previous, Blobs) and previous.spans is not None
    ) else {}  # fmt: skip
    uploads: dict[str, bytes] = {}
    spans: list[Location] = []
    for chunk in planned:
        key = core.layout.blob_key(thread_id, chunk.digest.hex())
        known = None if chunk.data is None else core.caches.known_blobs.get(key)
        if chunk.data is None:
            spans.append(where.get(chunk.digest))
        elif known is not None:
            spans.append(known if isinstance(known, Span | InIndex) else None)
        else:
            spans.append(PENDING)
            if key not in uploads:
                uploads[key] = blob_frame(core, thread_id, chunk.digest, chunk.data)
                core.caches.objects.put(key, chunk.data, chunk.size)
    digests = tuple(c.digest for c in planned)
    sizes = tuple(c.size for c in planned)
    placed = tuple(spans) if any(s is not None for s in spans) else None
    return Blobs(type_, digests, sizes, head, stable, placed, value), uploads


def entry_keys(core: SaverCore, thread_id: str, entry: Entry) -> list[str]:
    """The chunk keys a value entry reads (its loose blob keys, whether the chunks
    are loose or packed: what names them in caches and payloads)."""
    if isinstance(entry, Listed):
        entry = entry.resolved()
    if isinstance(entry, Blobs):
        folder = core.layout.thread_prefix(thread_id)
        return [Layout.blob_key_in(folder, d.hex()) for d in entry.digests]
    return []


def decode_value(
    core: SaverCore,
    thread_id: str,
    entry: Entry,
    payloads: Mapping[str, bytes],
    what: str,
    key: str,
) -> Any:
    """The value of an entry, its blobs taken from ``payloads``; ``key`` names its home."""
    if isinstance(entry, Inline):
        return deserialize(core, entry.type, entry.data, what, key)
    if isinstance(entry, Listed):
        entry = entry.resolved()
    data = entry.head + b"".join(payloads[k] for k in entry_keys(core, thread_id, entry))
    if len(data) != len(entry.head) + sum(entry.sizes):
        raise CorruptObjectError(f"{what} in {key!r}: blob sizes do not add up", key=key)
    return deserialize(core, entry.type, data, what, key)


def frame_body(core: SaverCore, envelope: Envelope, trim: bool | None = None) -> bytes:
    """A checkpoint envelope as the bytes of its object (sealed with encryption).

    ``trim`` (default: ``trim_items``): a body that fits in its index item leaves out
    the ids the item holds (a bare envelope, layout 6: ``schema.place_digest`` binds
    it to them); one that does not is written whole, as before.
    """
    if core.trim_items if trim is None else trim:
        bare = _frame(core, replace(envelope, bare=True))
        if in_index(core, bare):
            return bare
    return _frame(core, replace(envelope, bare=False))


def frame_if_fits(core: SaverCore, envelope: Envelope) -> bytes | None:
    """``frame_body(core, envelope)`` if it fits in the index item, else None: framed
    once (``frame_body`` frames a body that does not fit again, whole, for S3)."""
    body = _frame(core, replace(envelope, bare=core.trim_items))
    return body if in_index(core, body) else None


def _frame(core: SaverCore, envelope: Envelope) -> bytes:
    version = envelope.format or codec.LAYOUT_1
    if envelope.checkpoint[0] == records.RECORD_TYPE:
        version = max(version, codec.LAYOUT_RECORDS)
    frame = codec.frame(
        codec.KIND_CHECKPOINT,
        codec.pack(envelope.wire()),
        core.compression_level,
        max(version, codec.LAYOUT_BARE) if envelope.bare else version,
    )
    ids = (envelope.thread_id, envelope.ns, envelope.checkpoint_id)
    return seal_body(core, ids, frame)


def in_index(core: SaverCore, body: bytes) -> bool:
    """Whether a checkpoint body is kept in its index item rather than in S3."""
    return len(body) <= core.index_inline_limit


def body_attrs(
    core: SaverCore, ids: tuple[str, str, str], body: bytes, trim: bool | None = None
) -> dict[str, Any]:
    """The attributes of a checkpoint item that describe its ``body``: ``h``, and
    ``sz`` and ``b`` (when it is kept in the item).

    ``ids``: thread, namespace, checkpoint id. ``trim`` (default: ``trim_items``), as
    given to :func:`frame_body`: a body in the item gets the place digest as ``h`` (it
    may be bare) and no ``sz`` (its length says it); otherwise ``h`` is the SHA-256 of
    the body (which names its S3 object) and ``sz`` its size.
    """
    if not in_index(core, body):
        return {schema.DIGEST: s(codec.digest(body)), schema.SIZE: n(len(body))}
    if core.trim_items if trim is None else trim:
        return {schema.DIGEST: s(schema.place_digest(ids, body)), schema.BODY: b(body)}
    return {
        schema.DIGEST: s(codec.digest(body)),
        schema.SIZE: n(len(body)),
        schema.BODY: b(body),
    }


def fit_in_index(
    core: SaverCore,
    thread_id: str,
    ns: str,
    envelope: Envelope,
    body: bytes,
    uploads: dict[str, bytes],
    fresh: dict[str, Entry],
) -> bytes:
    """Move the largest inline values to blobs until the body fits in the index.

    A body in the index costs no S3 PUT now and no GET on resume, while a value
    moved to a blob is uploaded once and then only referenced by every later
    checkpoint that carries it unchanged (a retrieved context, a long prompt).
    If moving every candidate would still not make the body fit, nothing moves:
    the body goes to S3 either way, and moved values would only add PUTs.
    ``envelope``, ``uploads`` and ``fresh`` are updated when values move.
    """
    entries = envelope.channels
    inline = {
        n: e for n, e in entries.items() if isinstance(e, Inline) and len(e.data) >= MIN_MOVED
    }
    movable = sorted(inline, key=lambda name: -len(inline[name].data))
    if not movable or core.index_inline_limit == 0:
        return body
    # First, cheaply, the body with every candidate moved (each as the one-blob
    # reference it would get without a hint): if even that does not fit, stop.
    shapes = {name: blob_shape(inline[name].type, inline[name].data) for name in movable}
    if frame_if_fits(core, replace(envelope, channels={**entries, **shapes})) is None:
        return body
    moved: dict[str, Entry] = {}
    added: dict[str, bytes] = {}
    for name in movable:
        latest = core.caches.latest.get((thread_id, ns, name))
        entry, blobs = blob_entry(core, thread_id, inline[name].type, inline[name].data, latest)
        moved[name] = entry
        added.update(blobs)
        candidate = frame_if_fits(core, replace(envelope, channels={**entries, **moved}))
        if candidate is not None:
            entries.update(moved)
            fresh.update(moved)
            uploads.update(added)
            return candidate
    return body


def remember_latest(core: SaverCore, thread_id: str, ns: str, name: str, entry: Entry) -> None:
    """Keep a channel's blob entry as the hint its next version is chunked against."""
    blobs = entry.blobs if isinstance(entry, Listed) else entry
    if isinstance(blobs, Blobs):
        core.caches.latest.put((thread_id, ns, name), blobs, entry_size(blobs))


def remember_value(core: SaverCore, thread_id: str, entry: Entry) -> None:
    """Keep a stored entry under its value's digest, so storing the same value again
    (the next checkpoint carrying a task's write) re-uses it (``blob_entry``)."""
    blobs = entry.blobs if isinstance(entry, Listed) else entry
    if not isinstance(blobs, Blobs) or blobs.value is None:
        return
    key = (thread_id, blobs.type, blobs.value)
    # Only storing starts the time the entry is trusted (cache_ttl): putting back an
    # entry that was re-used would trust its objects for longer than the collector's
    # rule allows (docs/retention.md, "Why two phases").
    if key not in core.caches.values:
        core.caches.values.put(key, entry, entry_size(entry))


def blob_shape(type_: str, data: bytes) -> Blobs:
    """The entry a value up to the chunking threshold gets as one blob (no upload)."""
    head, body = chunking.split_head(type_, data)
    return Blobs(type_, (codec.digest_bytes(body),), (len(body),), head, 0)


def entry_size(entry: Entry) -> int:
    """Approximate memory of an entry, for the caches' byte bounds."""
    if isinstance(entry, Inline):
        return len(entry.data) + 64
    if isinstance(entry, Listed):
        return 128 + (0 if entry.blobs is None else entry_size(entry.blobs))
    return 64 + 40 * len(entry.digests) + len(entry.head)


def writes_value(writes: Sequence[tuple[str, Any]], widx: int, channel: str) -> Any:
    """The value of the write stored under index ``widx`` (the last with that index)."""
    value: Any = None
    for idx, (c, v) in enumerate(writes):
        if WRITES_IDX_MAP.get(c, idx) == widx:
            value = v
    return value


def cached_entry(
    core: SaverCore, thread_id: str, ns: str, name: str, version: object
) -> Entry | None:
    """The entry cached for a channel at ``version``, if any (see ``cache_entry``)."""
    if not _names_one_value(version):
        return None
    return core.caches.entries.get((thread_id, ns, name, version))


def cache_entry(
    core: SaverCore, thread_id: str, ns: str, name: str, version: object, entry: Entry
) -> None:
    """Cache a channel's entry under its version, so a later put whose channel did not
    move re-uses it instead of encoding the value again."""
    if _names_one_value(version) and not rekeying(core, thread_id):
        core.caches.entries.put((thread_id, ns, name, version), entry, entry_size(entry))


def _names_one_value(version: object) -> TypeGuard[str]:
    # Only versions with SaverCore.get_next_version's random tail are unique across
    # forks; integer versions (a thread migrated from DynamoDBSaver) repeat.
    return isinstance(version, str) and "." in version


#: msgpack array headers (fixarray, array16, array32): a list's serialized bytes.
_ARRAY_HEADS = (*range(0x90, 0xA0), 0xDC, 0xDD)


def remember_appends(
    core: SaverCore, thread_id: str, ns: str, entries: Mapping[str, Entry]
) -> None:
    """Keep which channels of ``(thread, ns)``'s latest checkpoint hold their value as
    blobs (``entries``: that checkpoint's), for :func:`appended_piece`."""
    held = frozenset(name for name, entry in entries.items() if isinstance(entry, Blobs | Listed))
    core.caches.appends.put((thread_id, ns), held)


def appended_piece(
    core: SaverCore, thread_id: str, ns: str, channel: str, value: Any, entry: Inline
) -> tuple[Entry, dict[str, bytes]]:
    """A write's inline ``entry``, or, for messages written to a channel whose value is
    stored as blobs, the same value as one blob (and the upload it needs).

    A message list that grows by a task's write (a chat's ``messages``) stores what was
    appended as a new *piece* in the next checkpoint (``chunking.plan``): the list's
    serialized bytes minus its length header are the old version's followed by the
    written messages, which are the write's bytes minus its own header. Stored once as
    a blob by the write, that piece is the next checkpoint's: its name is the same, so
    the checkpoint re-uses it (``known_blobs``) instead of storing the bytes a second
    time, and the writes item names it instead of holding them.

    Only where the checkpoint will most likely append exactly those bytes, because a
    chunk only the write names costs a request and an item more than the inline
    record: messages that all have an id (``add_messages`` gives one to a message
    without, and turns tuples and dicts into messages, so their bytes change), none a
    removal, written to a channel the latest checkpoint this saver wrote or continues
    from holds as blobs (so not a delta channel, which stores no value at most steps,
    and not a list short enough to be inline). Elsewhere, or where the checkpoint
    still cuts otherwise (a content boundary in what was appended, several tasks
    appending in one step, another reducer), it stores its own chunks, as before.
    Only with ``chunk_items``: a saver without them writes what 0.4.x writes.
    """
    if not core.chunk_items or entry.type != "msgpack" or not _messages_with_ids(value):
        return entry, {}
    if channel not in (core.caches.appends.get((thread_id, ns)) or ()):
        return entry, {}
    if not entry.data or entry.data[0] not in _ARRAY_HEADS:
        return entry, {}
    return blob_entry(core, thread_id, entry.type, entry.data, None)


def input_head(
    core: SaverCore, type_: str, data: bytes, value: Any, appends: frozenset[str]
) -> int | None:
    """Where the messages of a graph input start in its serialized bytes, if they will
    be appended to a list held as blobs; else None.

    The input checkpoint holds the input (``{"messages": [m]}``) in ``__start__``, and
    the ``__start__`` task then writes ``[m]`` to ``messages``: the same message bytes
    twice, the second time as the write's piece (:func:`appended_piece`). Stored as
    everything before the messages (kept in the entry, like a length header) and the
    messages as one chunk, the input names the piece the write will name, which is
    stored once. Only where :func:`appended_piece` will store the write that way (the
    list is a dict's last value, so its messages end the bytes; the same conditions
    on the messages and the channel), and only with ``chunk_items``. The caller asks
    only for ``__start__``. A graph whose ``__start__`` task does not write that key
    (an input schema without it) leaves the chunk named by the input alone: one
    request and item, as an inline input would have cost its bytes.
    """
    if not core.chunk_items or type_ != "msgpack" or not isinstance(value, dict) or not value:
        return None
    channel, messages = next(reversed(value.items()))
    if channel not in appends or not _messages_with_ids(messages):
        return None
    written_type, written = serialize(core, messages, f"input to channel {channel!r}")
    head, appended = chunking.split_head(type_, written)
    if written_type != type_ or not head or not appended or not data.endswith(written):
        return None
    return len(data) - len(appended)


def _messages_with_ids(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, BaseMessage) and m.id and m.type != "remove" for m in value)
    )
