"""Trimmed checkpoint items (layout 6, ``trim_items``): a body kept in its index item
leaves out the ids the item holds, ``h`` binds it to them, ``sz`` is left out; both
shapes read the same, and a body moved into another item is refused."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import read, schema
from langgraph_s3.errors import CorruptObjectError, UnsupportedFormatError
from tests.core import canned
from tests.core.script import Script

VALUES = {"n": 3, "text": "hello"}


def envelope_map(body: bytes) -> dict[str, Any]:
    raw = codec.unpack(codec.unframe(body, key="k", kind=codec.KIND_CHECKPOINT), key="k")
    assert isinstance(raw, dict)
    return raw


def read_back(item: dict[str, Any], cid: str = "c02") -> Any:
    script = Script(read.get_tuple(canned.make_core(), canned.config(cid=cid)))
    script.expect(canned.is_query, canned.page([item]))
    return script.drain(canned.from_bucket({}))


def test_a_trimmed_item_holds_a_bare_body_a_place_digest_and_no_size() -> None:
    stored = canned.store(canned.config(cid="c01"), canned.checkpoint("c02", VALUES))
    item = stored.item
    body = item[schema.BODY]["B"]
    assert schema.SIZE not in item
    # Layout 9: th, ns and cid are left to the keys that spell them (test_item_ids.py)
    assert not {schema.THREAD, schema.NS, schema.CID} & set(item)
    assert item[schema.DIGEST] == schema.s(schema.place_digest(("t1", "", "c02"), body))
    assert len(item[schema.DIGEST]["S"]) == 22 and schema.binds_place(item[schema.DIGEST]["S"])
    assert canned.body_versions(body) == (codec.LAYOUT_RECORDS, codec.LAYOUT_1)
    assert not {"th", "ns", "id", "p"} & set(envelope_map(body))


def test_trim_items_false_writes_what_0_5_reads() -> None:
    for core in (canned.make_core(trim_items=False), canned.make_core(chunk_items=False)):
        item = canned.store(
            canned.config(cid="c01"), canned.checkpoint("c02", VALUES), core=core
        ).item
        body = item[schema.BODY]["B"]
        assert item[schema.DIGEST] == schema.s(codec.digest(body))
        assert item[schema.SIZE] == schema.n(len(body))
        # 0.5.x reads th, ns and cid from every checkpoint item it meets
        assert (item[schema.THREAD], item[schema.NS], item[schema.CID]) == (
            schema.s("t1"),
            schema.s(""),
            schema.s("c02"),
        )
        assert canned.body_versions(body) == (codec.LAYOUT_1, codec.LAYOUT_1)
        env = envelope_map(body)
        assert (env["th"], env["ns"], env["id"], env["p"]) == ("t1", "", "c02", "c01")


def test_both_shapes_read_as_the_same_checkpoint() -> None:
    cp = canned.checkpoint("c02", VALUES)
    trimmed = canned.store(canned.config(cid="c01"), cp).item
    whole = canned.store(canned.config(cid="c01"), cp, core=canned.make_core(trim_items=False))
    assert len(trimmed[schema.BODY]["B"]) < len(whole.item[schema.BODY]["B"])
    a, b = read_back(trimmed), read_back(whole.item)
    assert a.checkpoint == b.checkpoint and a.checkpoint["channel_values"] == VALUES
    assert a.metadata == b.metadata and a.parent_config == b.parent_config
    assert a.parent_config["configurable"]["checkpoint_id"] == "c01"


def test_a_body_in_s3_is_written_whole_with_its_sha256() -> None:
    stored = canned.store(
        canned.config(),
        canned.checkpoint("c02", VALUES),
        core=canned.make_core(index_inline_limit=0),
    )
    [body] = stored.objects.values()
    assert schema.BODY not in stored.item and stored.item[schema.SIZE] == schema.n(len(body))
    assert stored.item[schema.DIGEST] == schema.s(codec.digest(body))
    # whole, so its ids are in it; its checkpoint is a compact record (layout 7)
    assert envelope_map(body)["id"] == "c02"
    assert canned.body_versions(body)[0] == codec.LAYOUT_RECORDS


def test_a_body_moved_into_another_item_is_refused() -> None:
    donor = canned.store(canned.config(cid="c01"), canned.checkpoint("c03", {"n": 9})).item
    target = canned.store(canned.config(cid="c01"), canned.checkpoint("c02", VALUES)).item
    moved = {**target, schema.BODY: donor[schema.BODY]}
    with pytest.raises(CorruptObjectError, match="moved from another checkpoint"):
        read_back(moved)
    # with its own h too: h binds the ids of the item it was written for
    with pytest.raises(CorruptObjectError, match="does not match the digest"):
        read_back({**moved, schema.DIGEST: donor[schema.DIGEST]})
    # nor with the body's SHA-256 as h: a bare body needs a place digest
    sha = schema.s(codec.digest(donor[schema.BODY]["B"]))
    with pytest.raises(CorruptObjectError, match="not a checkpoint"):
        read_back({**moved, schema.DIGEST: sha})


def test_a_trimmed_item_whose_parent_prune_unlinked_reads_without_one() -> None:
    item = canned.store(canned.config(cid="c01"), canned.checkpoint("c02", VALUES)).item
    unlinked = {k: v for k, v in item.items() if k != schema.PARENT}  # prune's UnlinkParent
    tup = read_back(unlinked)
    assert tup.parent_config is None and tup.checkpoint["channel_values"] == VALUES


def test_a_bare_body_says_it_needs_layout_6(monkeypatch: pytest.MonkeyPatch) -> None:
    item = canned.store(canned.config(cid="c01"), canned.checkpoint("c02", VALUES)).item
    monkeypatch.setattr(codec, "FORMAT_VERSION", codec.LAYOUT_ITEMS)  # what 0.5.0 reads
    with pytest.raises(UnsupportedFormatError, match="upgrade"):
        read_back(item)


def test_a_newer_body_under_a_digest_this_release_does_not_know_says_upgrade(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A later layout may bind a body to its item by another kind of ``h``: a reader
    that cannot check it says "upgrade" (the body's version is newer), not "altered",
    which is what 0.5.0 says of layout 6."""
    item = canned.store(canned.config(cid="c01"), canned.checkpoint("c02", VALUES)).item
    monkeypatch.setattr(codec, "FORMAT_VERSION", codec.LAYOUT_ITEMS)  # as if 6 were newer
    other = {**item, schema.DIGEST: schema.s("x" * 30)}  # an h of a form it does not know
    with pytest.raises(UnsupportedFormatError, match=r"format version 7.*upgrade"):
        read_back(other)
    monkeypatch.undo()  # this release: the same item is damage
    with pytest.raises(CorruptObjectError, match="does not match the digest"):
        read_back(other)
