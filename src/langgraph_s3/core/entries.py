"""What a stored value entry, a pending-write record and a checkpoint envelope hold.

These are the saver's own structures inside checkpoint objects and pending-write
records (docs/layout.md, "The checkpoint object" and "Pending writes"). On the wire
they are msgpack arrays and maps, read by position; in the code they are the typed
values below, converted at the edge (``wire`` / ``*_from_wire``) so that what is
written stays byte for byte what older releases wrote and read.

- :class:`Inline`: ``["i", type, bytes]``, a value kept in its envelope or record.
- :class:`Blobs`: ``["r", type, digests, sizes, head, stable]``, a value stored as
  content-addressed blobs: its bytes are ``head`` followed by the blobs in order, and
  the first ``stable`` blobs end at content boundaries (``chunking.plan``). Entries
  written before pieces existed have no ``stable``. When some of its chunks are
  stored in packs (layout 2), ``["p", type, digests, sizes, head, stable, packs,
  where]``: ``packs`` the pack digests, ``where`` three integers per chunk (pack
  index, offset, length of its frame in the pack; ``-1, 0, 0`` for a loose blob).
  When some of its chunks are *chunk items* (layout 5: stored in the thread's index
  partition, :data:`IN_INDEX`), ``["x", ...]``, the same shape, where pack index
  ``-2`` (offset and length 0) marks a chunk item; ``-2`` is refused in a ``"p"``.
- :class:`Listed`: ``["l", digest, size]`` or ``["l", digest, size, pack, offset,
  length]`` (layout 3), a value with many chunks whose ``"r"``/``"p"`` entry is
  itself stored once, as a blob (a *chunk list*, :mod:`langgraph_s3.core.lists`),
  loose or in a pack: the entry names that blob's digest and size, and where it is
  packed. ``["l", digest, size, pack, offset, length, lead]`` (layout 8): the
  ``lead`` bytes of the pack before the list hold every chunk it names, so one
  ranged GET brings the list and them, and the pack is all the value needs.
- :class:`Record`: ``[channel, entry]``, one pending write.
- :class:`Envelope`: the map a checkpoint object (or index body) holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.immutable import immutable


@immutable
class Inline:
    """A value stored inline: its serializer type and bytes."""

    type: str
    data: bytes = field(repr=False)

    def wire(self) -> list[Any]:
        return ["i", self.type, self.data]


@immutable
class Span:
    """Where a chunk is stored inside a pack: the pack's digest, and the offset and
    length of the chunk's frame in it."""

    pack: bytes
    offset: int
    length: int


@immutable
class InIndex:
    """Where a *chunk item* is (layout 5): in its thread's index partition, under
    ``schema.chunk_sk`` of its name. Its one value is :data:`IN_INDEX`; a type of its
    own (not a :class:`Span`), so code that reads a pack from a chunk's place must
    say what it does with a chunk item."""


#: A chunk stored as a chunk item (written ``-2, 0, 0`` in an ``"x"`` entry).
IN_INDEX = InIndex()

#: Where a chunk is stored: in a pack, in the index, or (None) a loose blob.
Location = Span | InIndex | None


class ChunkRef(NamedTuple):
    """One chunk to read: its own (loose blob) key, which names it in caches and
    payloads, and where it is packed (``span`` and the pack's key), if it is;
    ``item``: it is a chunk item (``span`` and ``pack`` None)."""

    key: str
    span: Span | None = None
    pack: str | None = None
    item: bool = False

    def known(self) -> Span | InIndex | bool:
        """What ``Caches.known_blobs`` remembers of this chunk once read: where it is
        (True: a loose blob)."""
        return IN_INDEX if self.item else self.span or True


#: A chunk whose pack is not built yet (``packs.seal`` replaces it before anything
#: is stored; its wire form only has to be as long as a real one's).
PENDING = Span(b"\0" * 32, 1 << 31, 1 << 20)


@immutable
class Blobs:
    """A value stored as blobs (see the module docstring)."""

    type: str
    digests: tuple[bytes, ...]
    sizes: tuple[int, ...]
    head: bytes = field(repr=False)
    #: Leading blobs that end at content boundaries; None in entries written before
    #: pieces existed, where every blob but the last did.
    stable: int | None = None
    #: Per chunk, where it is stored (a pack's span, :data:`IN_INDEX`, or None for a
    #: loose blob). None: every chunk is loose, and the entry is written as layout 1
    #: wrote it.
    spans: tuple[Location, ...] | None = None
    #: SHA-256 of the serialized value, when this saver made the entry (not stored):
    #: lets the next call that stores the same value re-use the entry.
    value: bytes | None = field(default=None, compare=False, repr=False)

    def wire(self) -> list[Any]:
        out = ["r", self.type, list(self.digests), list(self.sizes), self.head]
        if self.spans is None:
            return out if self.stable is None else [*out, self.stable]
        packs = list(dict.fromkeys(s.pack for s in self.spans if isinstance(s, Span)))
        where: list[int] = []
        for span in self.spans:
            if isinstance(span, Span):
                where += [packs.index(span.pack), span.offset, span.length]
            else:
                where += [-1 if span is None else -2, 0, 0]
        kind = "x" if self.has_items() else "p"
        return [kind, *out[1:], self.stable_count(), packs, where]

    def packed(self) -> bool:
        """Whether any chunk is in a pack (the entry needs layout 2 to be read)."""
        return self.spans is not None and any(isinstance(s, Span) for s in self.spans)

    def has_items(self) -> bool:
        """Whether any chunk is a chunk item (the entry needs layout 5 to be read)."""
        return self.spans is not None and IN_INDEX in self.spans

    def location(self, i: int) -> Location:
        """Where chunk ``i`` is stored: a pack's span, :data:`IN_INDEX`, or None."""
        return None if self.spans is None else self.spans[i]

    def span(self, i: int) -> Span | None:
        """Where chunk ``i`` is packed, or None for a loose blob or a chunk item."""
        where = self.location(i)
        return where if isinstance(where, Span) else None

    def stable_count(self) -> int:
        """How many leading blobs end at content boundaries."""
        if self.stable is None:
            return max(0, len(self.digests) - 1)
        return max(0, min(self.stable, len(self.digests)))


#: What makes two chunk lists the same list (``lists.identity``): the thread folder
#: they are stored in and a digest of the chunks they name.
ListIdentity = tuple[str, bytes]


@immutable
class Listed:
    """A value whose :class:`Blobs` entry is stored as a blob of its own (see the
    module docstring); ``blobs`` is that entry once it is known (written or read)."""

    digest: bytes
    size: int
    #: where the chunk list is packed (None: a loose blob)
    span: Span | None
    blobs: Blobs | None = field(default=None, compare=False, repr=False)
    #: how many bytes of the pack before the list hold every chunk it names (layout
    #: 8), so a reader fetches them with the list; None: read the list first (layout 3)
    lead: int | None = None

    def wire(self) -> list[Any]:
        out: list[Any] = ["l", self.digest, self.size]
        if self.span is not None:
            out += [self.span.pack, self.span.offset, self.span.length]
            if self.lead is not None:
                out.append(self.lead)
        return out

    def reach(self) -> Span | None:
        """The bytes of its pack that hold the list and the chunks before it (its
        ``lead``): what one ranged GET reads; None for a loose list."""
        if self.span is None:
            return None
        lead = self.lead or 0
        return Span(self.span.pack, self.span.offset - lead, lead + self.span.length)

    def resolved(self) -> Blobs:
        """The entry this chunk list holds; it must have been read (``lists.expand``)."""
        if self.blobs is None:
            raise AssertionError(f"chunk list {self.digest.hex()} was not read before use")
        return self.blobs


Entry = Inline | Blobs | Listed


def entry_from_wire(raw: Any, what: str, key: str) -> Entry:
    """An entry as stored; a malformed one is a CorruptObjectError naming ``what``
    (the channel or write) and ``key`` (where it is stored)."""
    kind = raw[0] if isinstance(raw, list | tuple) and raw else None
    try:
        if kind == "i" and len(raw) == 3:
            return Inline(_text(raw[1]), _bytes(raw[2]))
        if kind == "r" and len(raw) in (5, 6):
            digests = tuple(_bytes(d) for d in raw[2])
            sizes = tuple(_int(z) for z in raw[3])
            stable = _int(raw[5]) if len(raw) == 6 else None
            return Blobs(_text(raw[1]), digests, sizes, _bytes(raw[4]), stable)
        if kind in ("p", "x") and len(raw) == 8:
            return _packed_from_wire(raw, items=kind == "x")
        if kind == "l" and len(raw) in (3, 6, 7):
            return _listed_from_wire(raw)
    except (TypeError, ValueError, IndexError) as exc:
        raise CorruptObjectError(f"{what} in {key!r} has a malformed entry", key=key) from exc
    if kind in ("i", "r", "p", "x", "l"):
        raise CorruptObjectError(f"{what} in {key!r} has a malformed entry", key=key)
    raise CorruptObjectError(f"{what} in {key!r} has unknown entry kind {kind!r}", key=key)


def _packed_from_wire(raw: Any, items: bool) -> Blobs:
    digests = tuple(_bytes(d) for d in raw[2])
    sizes = tuple(_int(z) for z in raw[3])
    packs = [_bytes(p) for p in raw[6]]
    where = [_int(w) for w in raw[7]]
    if len(digests) != len(sizes) or len(where) != 3 * len(digests):
        raise ValueError("chunk lists of different lengths")
    spans: list[Location] = []
    for i in range(len(digests)):
        index, offset, length = where[3 * i : 3 * i + 3]
        if index < (-2 if items else -1) or offset < 0 or length < 0:
            raise ValueError("negative span")
        if index == -2:
            if offset or length:
                raise ValueError("a chunk item has no span")
            spans.append(IN_INDEX)
        else:
            spans.append(None if index == -1 else Span(packs[index], offset, length))
    return Blobs(_text(raw[1]), digests, sizes, _bytes(raw[4]), _int(raw[5]), tuple(spans))


def _listed_from_wire(raw: Any) -> Listed:
    digest, size = _bytes(raw[1]), _int(raw[2])
    if len(digest) != 32 or size < 0:
        raise ValueError("not a chunk list reference")
    span: Span | None = None
    lead: int | None = None
    if len(raw) >= 6:
        span = Span(_bytes(raw[3]), _int(raw[4]), _int(raw[5]))
        if len(span.pack) != 32 or span.offset < 0 or span.length < 0:
            raise ValueError("negative span")
        if len(raw) == 7:
            lead = _int(raw[6])
            if lead < 0 or lead > span.offset:
                raise ValueError("a lead outside the pack")
    return Listed(digest, size, span, lead=lead)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _bytes(value: Any) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(value)
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(value)
    return value


@immutable
class Record:
    """One pending write: the channel written and the value's entry."""

    channel: str
    entry: Entry

    def wire(self) -> list[Any]:
        return [self.channel, self.entry.wire()]


def record_from_wire(raw: Any, key: str) -> Record:
    """A pending-write record as stored (``[channel, entry]``)."""
    if not isinstance(raw, list | tuple) or len(raw) != 2 or not isinstance(raw[0], str):
        raise CorruptObjectError(f"record {key!r} is not a pending write", key=key)
    return Record(raw[0], entry_from_wire(raw[1], f"write to channel {raw[0]!r}", key))


#: Envelope fields on the wire, in the order they are written.
_FIELDS = ("f", "th", "ns", "id", "p", "cp", "md", "ch")


@dataclass
class Envelope:
    """A checkpoint as its object stores it: ids, the serialized checkpoint (without
    its values) and metadata, and one entry per stored channel.

    ``key`` names where it was read from (for errors); it is not stored.
    """

    format: int | None
    thread_id: str
    ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: tuple[str, bytes]
    metadata: tuple[str, bytes]
    channels: dict[str, Entry]
    key: str = ""
    #: Written without its ids (layout 6): only in an index item, whose ``h`` binds
    #: the body to the ids the item holds (``schema.place_digest``). ``format`` stays
    #: the layout its entries need; the frame's header says at least 6.
    bare: bool = False

    def wire(self) -> dict[str, Any]:
        """The map to pack (field order as every release wrote it)."""
        out: dict[str, Any] = {} if self.format is None else {"f": self.format}
        if not self.bare:
            out |= {
                "th": self.thread_id,
                "ns": self.ns,
                "id": self.checkpoint_id,
                "p": self.parent_id,
            }
        return out | {
            "cp": list(self.checkpoint),
            "md": list(self.metadata),
            "ch": {name: entry.wire() for name, entry in self.channels.items()},
        }

    def blob_references(self) -> int:
        """How many blobs the channel entries name (counting repeats; a chunk list
        counts as one blob plus, once read, the chunks it names)."""
        count = 0
        for e in self.channels.values():
            if isinstance(e, Listed):
                count += 1 + (0 if e.blobs is None else len(e.blobs.digests))
            elif isinstance(e, Blobs):
                count += len(e.digests)
        return count


#: The ids a bare envelope (layout 6) leaves out.
_IDS = ("th", "ns", "id", "p")


def envelope_from_wire(
    raw: Any, key: str, place: tuple[str, str, str, str | None] | None = None
) -> Envelope:
    """An envelope as unpacked from a checkpoint object or index body.

    ``place``: the thread, namespace, checkpoint and parent ids of the index item
    whose ``h`` bound the body to it (``schema.place_digest``, checked); only then may
    the envelope leave its ids out (a bare envelope, layout 6): it gets them from there.
    """
    if isinstance(raw, Mapping) and place is not None and not any(f in raw for f in _IDS):
        raw = {**raw, **dict(zip(_IDS, place, strict=True))}
        bare = True
    else:
        bare = False
    if not isinstance(raw, Mapping) or any(f not in raw for f in _FIELDS[1:]):
        raise CorruptObjectError(f"checkpoint object {key!r} is not a checkpoint", key=key)
    try:
        channels = {
            _text(name): entry_from_wire(entry, f"channel {name!r}", key)
            for name, entry in raw["ch"].items()
        }
        return Envelope(
            format=None if "f" not in raw else _int(raw["f"]),
            thread_id=_text(raw["th"]),
            ns=_text(raw["ns"]),
            checkpoint_id=_text(raw["id"]),
            parent_id=None if raw["p"] is None else _text(raw["p"]),
            checkpoint=(_text(raw["cp"][0]), _bytes(raw["cp"][1])),
            metadata=(_text(raw["md"][0]), _bytes(raw["md"][1])),
            channels=channels,
            key=key,
            bare=bare,
        )
    except (TypeError, ValueError, AttributeError, IndexError) as exc:
        raise CorruptObjectError(
            f"checkpoint object {key!r} holds a malformed envelope", key=key
        ) from exc
