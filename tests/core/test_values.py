"""Unit tests of ``core.values``: how a value is serialized, stored inline or as
blobs, and read back; and how a body is made to fit in its index item."""

from __future__ import annotations

import os
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3 import codec
from langgraph_s3.core import values
from langgraph_s3.core.entries import Blobs, Entry, Envelope, Inline
from langgraph_s3.errors import CorruptObjectError, SerializationError, UndecodableValueError
from tests.core.canned import make_core

KEY = "t1/c/~/c1.x"


class PickleSerde(JsonPlusSerializer):
    """A serializer that stores everything as pickle (as a pickle fallback would)."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return "pickle", b"..."


class Unserializable:
    pass


def payloads_of(core: Any, uploads: dict[str, bytes]) -> dict[str, bytes]:
    return {k: codec.unframe(v, key=k, kind=codec.KIND_BLOB) for k, v in uploads.items()}


def test_a_value_the_serializer_cannot_handle_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError, match="channel 'x' could not be serialized"):
        values.serialize(make_core(), Unserializable(), "channel 'x'")
    with pytest.raises(SerializationError, match="pickle"):
        values.serialize(make_core(serde=PickleSerde()), 1, "channel 'x'")


def test_bad_metadata_names_its_key() -> None:
    with pytest.raises(SerializationError, match="metadata key 'bad'"):
        values.serialize_metadata(make_core(), {"ok": 1, "bad": Unserializable()})
    assert values.serialize_metadata(make_core(), {"ok": 1})[0] == "msgpack"


def test_pickled_or_undecodable_data_is_corrupt_never_loaded() -> None:
    core = make_core()
    with pytest.raises(CorruptObjectError, match="pickled"):
        values.deserialize(core, "pickle", b"...", "channel 'x'", KEY)
    # Intact bytes the serializer cannot read: not damage, a serializer mismatch.
    with pytest.raises(UndecodableValueError, match="could not be decoded by the serializer"):
        values.deserialize(core, "msgpack", b"\xc1", "channel 'x'", KEY)


def test_small_values_are_inline_and_large_ones_blobs_that_read_back() -> None:
    core = make_core()
    entry, uploads = values.encode_value(core, "t1", {"a": 1}, "v", 100)
    assert isinstance(entry, Inline) and uploads == {}
    assert values.entry_keys(core, "t1", entry) == []
    big = os.urandom(40_000).hex()
    entry, uploads = values.encode_value(core, "t1", big, "v", 100)
    assert isinstance(entry, Blobs) and uploads
    assert sorted(values.entry_keys(core, "t1", entry)) == sorted(uploads)
    assert values.decode_value(core, "t1", entry, payloads_of(core, uploads), "v", KEY) == big


def test_a_value_extending_the_previous_one_uploads_only_new_blobs() -> None:
    core = make_core()
    text = os.urandom(60_000).hex()
    first, uploads = values.encode_value(core, "t1", text, "v", 100)
    for key in uploads:
        core.caches.known_blobs.put(key, True)
    second, more = values.encode_value(core, "t1", text + "tail", "v", 100, previous=first)
    shared = set(values.entry_keys(core, "t1", first)) & set(values.entry_keys(core, "t1", second))
    assert shared and not shared & set(more)
    assert len(more) < len(uploads)


def test_damaged_entries_are_corrupt() -> None:
    core = make_core()
    big = os.urandom(40_000).hex()
    entry, uploads = values.encode_value(core, "t1", big, "v", 100)
    payloads = payloads_of(core, uploads)
    short = dict(payloads)
    first = values.entry_keys(core, "t1", entry)[0]
    short[first] = short[first][:-1]
    with pytest.raises(CorruptObjectError, match="do not add up"):
        values.decode_value(core, "t1", entry, short, "v", KEY)
    with pytest.raises(KeyError):  # a blob the caller did not fetch: a bug, not damage
        values.decode_value(core, "t1", entry, {}, "v", KEY)


def envelope(**channels: Any) -> Envelope:
    core = make_core()
    entries = {k: values.encode_value(core, "t1", v, k, 1 << 20)[0] for k, v in channels.items()}
    return Envelope(1, "t1", "", "c1", None, ("msgpack", b""), ("msgpack", b""), entries)


def test_the_largest_values_move_to_blobs_until_the_body_fits() -> None:
    core = make_core(index_inline_limit=1024)
    env = envelope(a=os.urandom(3000).hex(), b=os.urandom(300).hex(), c="small")
    body = values.frame_body(core, env)
    assert not values.in_index(core, body)
    uploads: dict[str, bytes] = {}
    fresh: dict[str, Entry] = {}
    fitted = values.fit_in_index(core, "t1", "", env, body, uploads, fresh)
    assert values.in_index(core, fitted) and fitted == values.frame_body(core, env)
    assert list(fresh) == ["a"] and env.channels["a"] == fresh["a"]
    assert isinstance(fresh["a"], Blobs)
    assert sorted(uploads) == sorted(values.entry_keys(core, "t1", fresh["a"]))
    assert isinstance(env.channels["b"], Inline)


def test_nothing_moves_without_movable_values_or_with_a_limit_of_zero() -> None:
    core = make_core(index_inline_limit=1024)
    # Values below MIN_MOVED never move.
    many_small = envelope(**{f"c{i}": os.urandom(200).hex() for i in range(10)})
    small_body = values.frame_body(core, many_small)
    assert not values.in_index(core, small_body)
    assert values.fit_in_index(core, "t1", "", many_small, small_body, {}, {}) == small_body
    # A limit of 0 keeps every body in S3.
    zero = make_core(index_inline_limit=0)
    env = envelope(a=os.urandom(3000).hex())
    body = values.frame_body(zero, env)
    assert values.fit_in_index(zero, "t1", "", env, body, {}, {}) == body


def test_moving_values_is_not_worth_it_when_the_rest_still_does_not_fit() -> None:
    core = make_core(index_inline_limit=1024)
    env = envelope(
        big=os.urandom(2000).hex(), **{f"c{i}": os.urandom(200).hex() for i in range(10)}
    )
    body = values.frame_body(core, env)
    uploads: dict[str, bytes] = {}
    assert values.fit_in_index(core, "t1", "", env, body, uploads, {}) == body
    assert uploads == {} and isinstance(env.channels["big"], Inline)


def test_blob_entries_are_remembered_as_hints_and_inline_ones_not() -> None:
    core = make_core()
    values.remember_latest(core, "t1", "", "x", Inline("msgpack", b"1"))
    assert core.caches.latest.get(("t1", "", "x")) is None
    entry = Blobs("msgpack", (b"d" * 32,), (10,), b"h", 1)
    values.remember_latest(core, "t1", "", "x", entry)
    assert core.caches.latest.get(("t1", "", "x")) == entry


def test_entry_sizes_grow_with_what_they_hold() -> None:
    assert values.entry_size(Inline("t", b"x" * 100)) == 164
    assert values.entry_size(Blobs("t", (b"d", b"d"), (1, 1), b"hh", 0)) == 64 + 80 + 2


def test_the_value_of_a_write_index_is_the_last_write_with_it() -> None:
    writes = [("a", 1), ("__error__", "e1"), ("b", 2), ("__error__", "e2")]
    assert values.writes_value(writes, 0, "a") == 1
    assert values.writes_value(writes, -1, "__error__") == "e2"
    assert values.writes_value(writes, 7, "zz") is None
