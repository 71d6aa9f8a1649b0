"""Grouped records: a ``put_writes`` call's small regular writes stored as one record.

A task that sends ten ``Send`` packets with the same payload stores ten records that
compress well together and poorly apart; DynamoDB bills an item's write by the KB.
So the writes of one call that stay inline (regular ones, index >= 0) are packed
together into one *group* when that makes the item smaller (``core/writes.py``):
the record ``[[indices], [[channel, entry], ...]]``, tag ``codec.GROUP_RECORD``,
checksummed and compressed like any record, and sealed with encryption to the slot
of its lowest index, ``lo``, in whose attribute ``w{lo}`` it is stored. Special
writes (index < 0) are replaced by later ones, so they are never grouped; blob-bound
values stay single records.

Theory of operation (first write wins per index, as in ``InMemorySaver``):

* A single record holds its own index, in its own attribute (``w3`` holds write 3),
  and is written with ``if_not_exists``.
* A group is written only under the condition that no attribute ``w{lo}`` ...
  ``w{hi}`` exists (``WritesUpdate.guards``): none of the indices it spans is held
  yet by a single record or by a group starting there. When the condition fails,
  the writer stores the call's writes as single records instead.
* So wherever two records hold an index, the one in the lower attribute was stored
  first: a single record ``w{i}`` stored before a group holding ``i`` would have
  failed the group's condition, and a group stored before another overlapping one
  starts lower (the later one's condition covers every attribute from its own
  ``lo`` to its ``hi``, so the earlier ``lo`` is below it). Readers therefore take,
  for each index, the record of the lowest attribute holding it (:func:`merge`):
  the first write, whatever a retry or a later call with other values sent.

Releases before grouped records (0.5.0 and earlier) read every ``w*`` attribute and
refuse the unknown tag with ``CorruptObjectError`` (with encryption, after opening
the seal); ``group_writes=False`` keeps writing single records for them
(docs/layout.md, "Grouped records").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from langgraph_s3 import codec
from langgraph_s3.core.entries import Record, record_from_wire
from langgraph_s3.errors import CorruptObjectError

#: The most attributes one group spans (``w{lo}`` to ``w{hi}``): its condition names
#: each of them, and DynamoDB caps a condition expression at 4 KB.
GROUP_SPAN = 100

#: The records one attribute holds: (attribute's write index, [(write index, record)],
#: whether it is a group).
Stored = tuple[int, list[tuple[int, Record]], bool]


def pack(members: Sequence[tuple[int, Record]], level: int) -> bytes:
    """A group of records (write index, record), ordered by index, packed."""
    wire = [[i for i, _ in members], [r.wire() for _, r in members]]
    return codec.pack_group(wire, level)


def unpack(data: bytes, attr: int, key: str) -> Stored:
    """The writes one record attribute holds (``data``: unsealed), read from ``key``;
    ``attr``: the write index its attribute names (``schema.record_index``)."""
    if data[:1] != codec.GROUP_RECORD:
        return attr, [(attr, record_from_wire(codec.unpack_record(data, key=key), key))], False
    raw = codec.unpack_group(data, key=key)
    indices = raw[0] if isinstance(raw, list | tuple) and len(raw) == 2 else None
    records = raw[1] if indices is not None else None
    if (
        not isinstance(indices, list | tuple)
        or not isinstance(records, list | tuple)
        or len(indices) != len(records)
        or not indices
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in indices)
        # ordered, regular, none below the attribute that holds them
        or list(indices) != sorted(set(indices))
        or attr < 0
        or indices[0] < attr
    ):
        raise CorruptObjectError(f"record {key!r} is not a group of pending writes", key=key)
    members = [(i, record_from_wire(r, key)) for i, r in zip(indices, records, strict=True)]
    return attr, members, True


def merge(stored: Iterable[Stored]) -> tuple[list[tuple[int, Record]], dict[int, tuple[int, ...]]]:
    """One record per write index, from the records of a writes item's attributes: the
    one of the lowest attribute holding it, which was stored first (see the module).

    Returns:
        The records by write index, and the groups that give some of them: attribute
        index -> the write indices it gives (``reseal`` copies a group as these).
    """
    records: dict[int, Record] = {}
    groups: dict[int, tuple[int, ...]] = {}
    for attr, members, grouped in sorted(stored, key=lambda s: s[0]):
        won = [(i, r) for i, r in members if i not in records]
        records.update(won)
        if grouped and won:
            groups[attr] = tuple(i for i, _ in won)
    return sorted(records.items(), key=lambda r: r[0]), groups


def plan_members(candidates: Sequence[int]) -> list[tuple[int, ...]]:
    """The groups to try for the write indices that may be grouped (sorted): runs that
    span at most :data:`GROUP_SPAN` attributes, of two writes or more."""
    runs: list[list[int]] = []
    for i in candidates:
        if runs and i - runs[-1][0] < GROUP_SPAN:
            runs[-1].append(i)
        else:
            runs.append([i])
    return [tuple(run) for run in runs if len(run) >= 2]
