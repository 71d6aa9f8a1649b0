"""Compact checkpoint records (layout 7, ``core/records.py``): the checkpoint without its
values, written exactly or not at all; read back equal to what the serializer gives."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3 import codec
from langgraph_s3.core import read, records
from langgraph_s3.errors import CorruptObjectError, UnsupportedFormatError
from tests.core import canned
from tests.core.script import Script

CID = "1f1e9b8b-53ac-6fa5-8256-89cf6ec86ed4"
V1 = "00000000000000000000000000000599.6d7dfae5d5ec1c18"
V2 = "00000000000000000000000000000600.b5701106499eca11"


def chat_checkpoint(**changes: Any) -> dict[str, Any]:
    """A checkpoint without values as LangGraph makes one for a chat graph."""
    cp: dict[str, Any] = {
        "v": 4,
        "ts": "2026-11-26T16:44:54.898036+00:00",
        "id": CID,
        "channel_versions": {"__start__": V1, "messages": V2, "branch:to:agent": V2},
        "versions_seen": {"__input__": {}, "__start__": {"__start__": V1}, "agent": {"x": V1}},
        "updated_channels": ["messages"],
    }
    return cp | changes


def test_a_checkpoint_comes_back_equal_with_its_id_from_the_item() -> None:
    cp = chat_checkpoint()
    data = records.encode(cp, CID)
    assert data is not None
    back = records.decode(data, CID, "k")
    assert back == cp and list(back["channel_versions"]) == list(cp["channel_versions"])
    assert CID.encode() not in data  # the item holds the id; the record does not repeat it


def test_a_record_is_under_a_third_of_what_the_serializer_makes() -> None:
    cp = chat_checkpoint()
    data = records.encode(cp, CID)
    _, serialized = JsonPlusSerializer().dumps_typed(cp)
    assert data is not None and 3 * len(data) < len(serialized)


@pytest.mark.parametrize(
    "changes",
    [
        {"ts": "2026-11-26T16:44:54+00:00"},  # isoformat leaves out a zero fraction
        {"ts": "2026-11-26 16:44:54"},  # another text: kept as it is
        {"ts": "2026-11-26T16:44:54.898036+02:00"},  # not UTC: kept as text too
        {"ts": "2026-13-40T16:44:54.898036+00:00"},  # not a date: kept as text too
        {"channel_versions": {"a": 3, "b": "3", "c": "0.8164102431"}},  # ints, other texts
        {"updated_channels": None},
        {"pending_sends": []},  # checkpoints of LangGraph before v4 carry it
        {"versions_seen": {}},
    ],
)
def test_other_forms_of_timestamp_and_version_are_kept_exactly(changes: dict[str, Any]) -> None:
    cp = chat_checkpoint(**changes)
    data = records.encode(cp, CID)
    assert data is not None and records.decode(data, CID, "k") == cp


@pytest.mark.parametrize(
    "changes",
    [
        {"extra": 1},  # a field a later LangGraph may add
        {"updated_channels": ("messages",)},  # a tuple would come back a list
        {"channel_versions": {"a": 1.5}},
        {"channel_versions": {"a": True}},  # True == 1, but it is not an int version
        {"id": "another-id"},  # not the id of the item it goes in
    ],
)
def test_what_it_cannot_hold_exactly_is_left_to_the_serializer(changes: dict[str, Any]) -> None:
    assert records.encode(chat_checkpoint(**changes), CID) is None


NEGATIVE = {"v": 4, "t": 0, "V": ["1", "2"], "c": {"a": -1}, "s": {}}


@pytest.mark.parametrize(
    "data", [b"\xc1", codec.pack({"v": 4}), codec.pack({"V": [b"x"]}), codec.pack(NEGATIVE)]
)
def test_a_damaged_record_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptObjectError, match="k"):
        records.decode(data, CID, "k")


def read_back(item: dict[str, Any], cid: str = "c02", **settings: Any) -> Any:
    script = Script(read.get_tuple(canned.make_core(**settings), canned.config(cid=cid)))
    script.expect(canned.is_query, canned.page([item]))
    return script.drain(canned.from_bucket({}))


def stored_cp_type(stored: canned.Stored) -> str:
    env = codec.unpack(
        codec.unframe(stored.row.body or b"", key="k", kind=codec.KIND_CHECKPOINT), key="k"
    )
    return str(env["cp"][0])


def test_the_default_saver_writes_a_record_and_reads_it_back() -> None:
    cp = canned.checkpoint("c02", {"n": 3}, versions={"n": V2})
    stored = canned.store(canned.config(cid="c01"), cp)
    assert stored_cp_type(stored) == records.RECORD_TYPE
    assert canned.body_versions(stored.row.body or b"")[0] == codec.LAYOUT_RECORDS
    tup = read_back(stored.item)
    assert tup.checkpoint == cp


@pytest.mark.parametrize(
    "settings",
    [
        {"trim_items": False},
        {"chunk_items": False},
        {"serde": type("Mine", (JsonPlusSerializer,), {})()},
    ],
    ids=["untrimmed", "no-chunk-items", "own-serde"],
)
def test_without_trimming_or_with_a_serde_of_ones_own_the_serializer_writes_it(
    settings: dict[str, Any],
) -> None:
    cp = canned.checkpoint("c02", {"n": 3}, versions={"n": V2})
    stored = canned.store(canned.config(cid="c01"), cp, core=canned.make_core(**settings))
    assert stored_cp_type(stored) == "msgpack"
    assert canned.body_versions(stored.row.body or b"")[0] < codec.LAYOUT_RECORDS
    assert read_back(stored.item, **settings).checkpoint == cp


def test_a_release_before_layout_7_says_upgrade(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = canned.store(canned.config(cid="c01"), canned.checkpoint("c02", {"n": 3}))
    monkeypatch.setattr(codec, "FORMAT_VERSION", codec.LAYOUT_BARE)  # what 0.6.0 reads
    with pytest.raises(UnsupportedFormatError, match=r"format version 7.*upgrade"):
        read_back(stored.item)
