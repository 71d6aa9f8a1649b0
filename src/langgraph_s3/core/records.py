"""How the checkpoint itself (without its values) is stored: a compact record.

What LangGraph's serializer makes of a checkpoint without its values is 230-500
bytes of msgpack, and every checkpoint item carries it. Most of it is version strings
(49 characters each, ``core/state.py``: a 32-digit counter and 16 hex digits, each
version often written twice, in ``channel_versions`` and in ``versions_seen``), the
36-character id the item already holds, and a 32-character ISO timestamp. A compact
record (layout 7, written with ``trim_items``) keeps the same map with each distinct
version once, as the counter and the 8 bytes of its tail, the timestamp as
microseconds, and no id (the reader has it from the item or the envelope):
about a third of the size, 80-130 bytes less per checkpoint item.

It is only written where it is exact: :func:`encode` decodes what it made and
compares it with the checkpoint, types included, and gives ``None`` (the saver then
uses the serializer, as before) for anything else: a field or value type it does not
know, another version or timestamp format, a checkpoint whose id is not its item's.
It is only used with the default serializer: a ``serde=`` of the user's own (one that
encrypts, say) serializes the checkpoint as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph_s3 import codec
from langgraph_s3.errors import CorruptObjectError

#: The type a compact record is stored under in the envelope's ``cp`` (no serializer
#: names a type so); a reader before layout 7 refuses the body by its frame version.
RECORD_TYPE = "lgs3/cp"
#: Fields of a checkpoint without values that the record knows; any other: not compact.
_KNOWN = frozenset(
    ("v", "id", "ts", "channel_versions", "versions_seen", "updated_channels", "pending_sends")
)
_VERSION = re.compile(r"\A(\d{32})\.([0-9a-f]{16})\Z")
_TS = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00\Z")
_TAIL = 8
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def encode(checkpoint: Mapping[str, Any], checkpoint_id: str) -> bytes | None:
    """The compact record of ``checkpoint`` (without ``channel_values``), or ``None``
    when it cannot be one exactly."""
    if not set(checkpoint) <= _KNOWN or checkpoint.get("id") != checkpoint_id:
        return None
    table: dict[Any, int] = {}
    try:
        record: dict[str, Any] = {
            "v": checkpoint["v"],
            "c": _indexed(checkpoint["channel_versions"], table),
            "s": {node: _indexed(seen, table) for node, seen in _dict(checkpoint["versions_seen"])},
        }
        record["t"] = _ts(checkpoint["ts"])
    except (KeyError, TypeError):
        return None
    record["V"] = [_version(v) for v in table]
    for field, short in (("updated_channels", "u"), ("pending_sends", "p")):
        if field in checkpoint:
            record[short] = checkpoint[field]
    try:
        data = codec.pack(record)
        back = decode(data, checkpoint_id, "")
    except (TypeError, ValueError, CorruptObjectError):
        return None
    return data if _same(back, checkpoint) else None


def decode(data: bytes, checkpoint_id: str, key: str) -> dict[str, Any]:
    """The checkpoint (without ``channel_values``) a compact record holds.

    Raises:
        CorruptObjectError: the record is not one :func:`encode` writes.
    """
    raw = codec.unpack(data, key=key)
    try:
        versions = [_unversion(v) for v in raw["V"]]

        def named(indexed: Any) -> dict[str, Any]:
            # An index is a position in V; a negative one would count from its end.
            if any(type(i) is not int or i < 0 for i in indexed.values()):
                raise IndexError("not a version index")
            return {channel: versions[i] for channel, i in indexed.items()}

        out: dict[str, Any] = {
            "v": raw["v"],
            "id": checkpoint_id,
            "ts": _unts(raw["t"]),
            "channel_versions": named(raw["c"]),
            "versions_seen": {node: named(seen) for node, seen in raw["s"].items()},
        }
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise CorruptObjectError(
            f"checkpoint object {key!r} holds a malformed checkpoint record", key=key
        ) from exc
    for short, field in (("u", "updated_channels"), ("p", "pending_sends")):
        if short in raw:
            out[field] = raw[short]
    return out


def _dict(value: Any) -> list[tuple[str, Any]]:
    if type(value) is not dict:
        raise TypeError("not a dict")
    return list(value.items())


def _indexed(versions: Any, table: dict[Any, int]) -> dict[str, int]:
    """``versions`` with each version replaced by its place in ``table`` (added once)."""
    out = {}
    for channel, version in _dict(versions):
        if type(version) not in (str, int):
            raise TypeError("not a version")
        # (type, value): the string "1" and the integer 1 are two versions.
        out[channel] = table.setdefault((type(version), version), len(table))
    return out


def _version(entry: tuple[type, Any]) -> Any:
    """A version as stored: ours as bytes (its counter, then its 8-byte tail); any
    other string or integer as it is."""
    _, version = entry
    m = _VERSION.match(version) if isinstance(version, str) else None
    if m is None:
        return version
    counter = int(m.group(1))
    return counter.to_bytes(max(1, (counter.bit_length() + 7) // 8), "big") + bytes.fromhex(
        m.group(2)
    )


def _unversion(stored: Any) -> Any:
    if isinstance(stored, bytes):
        if len(stored) <= _TAIL:
            raise ValueError("a version record too short")
        counter = int.from_bytes(stored[:-_TAIL], "big")
        return f"{counter:032}.{stored[-_TAIL:].hex()}"
    if type(stored) not in (str, int):
        raise TypeError("not a version")
    return stored


def _ts(ts: Any) -> Any:
    """The timestamp as microseconds since the epoch (an ISO text in UTC as
    ``datetime.isoformat`` writes it); any other text as it is."""
    if type(ts) is not str:
        raise TypeError("not a timestamp")
    try:
        delta = datetime.fromisoformat(ts) - _EPOCH if _TS.match(ts) else None
    except ValueError:  # the shape of a timestamp, not a real one (month 13)
        delta = None
    if delta is None:
        return ts
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _unts(stored: Any) -> str:
    if isinstance(stored, str):
        return stored
    if type(stored) is not int:
        raise TypeError("not a timestamp")
    return (_EPOCH + timedelta(microseconds=stored)).isoformat()


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types throughout (``1 == True`` and ``[] == ()`` are not
    the same value once stored)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
