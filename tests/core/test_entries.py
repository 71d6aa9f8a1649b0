"""core.entries: typed entries, records and envelopes, byte for byte what is stored."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core.entries import (
    IN_INDEX,
    Blobs,
    Envelope,
    Inline,
    Record,
    Span,
    entry_from_wire,
    envelope_from_wire,
    record_from_wire,
)
from langgraph_s3.errors import CorruptObjectError

KEY = "t1/c/~/c1.x"
D1, D2, D3 = b"a" * 32, b"b" * 32, b"c" * 32


@pytest.mark.parametrize(
    "wire",
    [
        ["i", "msgpack", b"\x01"],
        ["r", "json", [D1, D2], [10, 20], b"head", 1],
        ["r", "json", [D1, D2, D3], [1, 2, 3], b""],  # written before pieces existed
    ],
)
def test_entries_round_trip_to_the_same_bytes(wire: list[Any]) -> None:
    entry = entry_from_wire(wire, "channel 'x'", KEY)
    assert entry.wire() == wire
    assert codec.pack(entry.wire()) == codec.pack(wire)


def test_an_inline_and_a_blob_entry_say_what_they_hold() -> None:
    assert entry_from_wire(["i", "msgpack", b"1"], "v", KEY) == Inline("msgpack", b"1")
    blobs = entry_from_wire(["r", "json", [D1], [5], b"h", 0], "v", KEY)
    assert blobs == Blobs("json", (D1,), (5,), b"h", 0)


def test_stable_counts_of_new_and_old_entries() -> None:
    assert Blobs("t", (D1, D2, D3), (1, 1, 1), b"", 2).stable_count() == 2
    assert Blobs("t", (D1, D2), (1, 1), b"", 9).stable_count() == 2  # capped
    assert Blobs("t", (D1, D2, D3), (1, 1, 1), b"").stable_count() == 2  # legacy: all but last
    assert Blobs("t", (), (), b"").stable_count() == 0


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (["i"], "malformed"),
        (["i", "msgpack", "not bytes"], "malformed"),
        (["r", "json", [D1], ["ten"], b""], "malformed"),
        (["r", "json", [D1], [True], b""], "malformed"),
        (["r", "json", [D1], [1]], "malformed"),
        (["z", 1], "unknown entry kind 'z'"),
        ([], "unknown entry kind None"),
        ("i", "unknown entry kind None"),
    ],
)
def test_a_malformed_entry_is_corrupt_and_named(wire: Any, message: str) -> None:
    with pytest.raises(CorruptObjectError, match=message) as caught:
        entry_from_wire(wire, "channel 'x'", KEY)
    assert "channel 'x'" in str(caught.value) and caught.value.key == KEY


def test_records_are_channel_and_entry() -> None:
    wire = ["out", ["i", "msgpack", b"1"]]
    record = record_from_wire(wire, "pk|sk|w0")
    assert record == Record("out", Inline("msgpack", b"1")) and record.wire() == wire
    with pytest.raises(CorruptObjectError, match="write to channel 'out'"):
        record_from_wire(["out", ["q"]], "pk|sk|w0")
    with pytest.raises(CorruptObjectError, match="not a pending write"):
        record_from_wire([1, ["i", "msgpack", b"1"]], "pk|sk|w0")


def _wire_envelope(**changes: Any) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "f": 1,
        "th": "t1",
        "ns": "",
        "id": "c2",
        "p": "c1",
        "cp": ["msgpack", b"cp"],
        "md": ["msgpack", b"md"],
        "ch": {"a": ["i", "msgpack", b"1"], "b": ["r", "json", [D1, D2], [1, 2], b"", 1]},
    }
    wire.update(changes)
    return wire


def test_an_envelope_round_trips_in_field_order() -> None:
    wire = _wire_envelope()
    env = envelope_from_wire(wire, KEY)
    assert (env.thread_id, env.ns, env.checkpoint_id, env.parent_id) == ("t1", "", "c2", "c1")
    assert env.checkpoint == ("msgpack", b"cp") and env.key == KEY
    assert env.blob_references() == 2
    assert codec.pack(env.wire()) == codec.pack(wire)  # same bytes, same order


def test_an_envelope_without_a_format_field_is_rewritten_without_one() -> None:
    wire = _wire_envelope()
    del wire["f"]
    env = envelope_from_wire(wire, KEY)
    assert env.format is None and codec.pack(env.wire()) == codec.pack(wire)


@pytest.mark.parametrize(
    "wire",
    [
        [1, 2],
        {k: v for k, v in _wire_envelope().items() if k != "ch"},
        _wire_envelope(cp="x"),
        _wire_envelope(p=5),
        _wire_envelope(ch=[]),
    ],
)
def test_a_malformed_envelope_is_corrupt(wire: Any) -> None:
    with pytest.raises(CorruptObjectError, match="checkpoint object") as caught:
        envelope_from_wire(wire, KEY)
    assert caught.value.key == KEY


def test_a_malformed_channel_entry_names_the_channel() -> None:
    with pytest.raises(CorruptObjectError, match="channel 'a'"):
        envelope_from_wire(_wire_envelope(ch={"a": ["i"]}), KEY)


def test_envelopes_are_values() -> None:
    env = envelope_from_wire(_wire_envelope(), KEY)
    assert isinstance(env, Envelope) and env == envelope_from_wire(_wire_envelope(), KEY)


# Chunk items (layout 5): pack index -2 marks a chunk stored in the index.
P1 = b"p" * 32


def test_an_entry_naming_a_chunk_item_is_written_as_x() -> None:
    blobs = Blobs("json", (D1, D2, D3), (1, 2, 3), b"h", 2, (IN_INDEX, None, Span(P1, 7, 9)))
    wire = ["x", "json", [D1, D2, D3], [1, 2, 3], b"h", 2, [P1], [-2, 0, 0, -1, 0, 0, 0, 7, 9]]
    assert blobs.wire() == wire
    assert entry_from_wire(wire, "v", KEY) == blobs
    assert blobs.has_items() and blobs.packed()
    assert blobs.location(0) is IN_INDEX and blobs.span(0) is None


def test_an_x_entry_may_name_no_pack() -> None:
    blobs = Blobs("json", (D1, D2), (1, 2), b"", 1, (IN_INDEX, None))
    assert blobs.wire() == ["x", "json", [D1, D2], [1, 2], b"", 1, [], [-2, 0, 0, -1, 0, 0]]
    assert not blobs.packed()
    assert entry_from_wire(blobs.wire(), "v", KEY) == blobs


def test_entries_without_chunk_items_are_written_as_before() -> None:
    packed = Blobs("json", (D1, D2), (1, 2), b"", 1, (Span(P1, 0, 4), None))
    assert packed.wire()[0] == "p" and not packed.has_items()
    assert Blobs("json", (D1,), (1,), b"", 0).wire()[0] == "r"


@pytest.mark.parametrize(
    "wire",
    [
        ["p", "json", [D1], [1], b"", 0, [], [-2, 0, 0]],  # -2 only in an "x"
        ["x", "json", [D1], [1], b"", 0, [], [-3, 0, 0]],
        ["x", "json", [D1], [1], b"", 0, [], [-2, 0, 5]],  # a chunk item has no span
        ["x", "json", [D1], [1], b"", 0, []],
    ],
)
def test_a_malformed_x_entry_is_corrupt(wire: Any) -> None:
    with pytest.raises(CorruptObjectError, match="malformed"):
        entry_from_wire(wire, "v", KEY)
