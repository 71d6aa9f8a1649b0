"""Unit tests of ``core.lists``: a value of many chunks is named by its chunk list,
stored once beside its chunks, and every reader finds the chunks through it
(layout 3)."""

from __future__ import annotations

import os
import random
from dataclasses import replace

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import lists, packs, read, schema
from langgraph_s3.core.entries import (
    PENDING,
    Blobs,
    ChunkRef,
    Listed,
    Span,
    entry_from_wire,
    record_from_wire,
)
from langgraph_s3.core.state import SaverCore
from langgraph_s3.errors import CorruptObjectError, UnsupportedFormatError
from langgraph_s3.keys import Layout
from langgraph_s3.operations import S3Get
from tests.core.canned import (
    body_versions,
    checkpoint,
    config,
    from_bucket,
    is_query,
    make_core,
    only_gets,
    page,
    store,
    store_writes,
)
from tests.core.script import Script

#: 1.6 MB of incompressible text: 80 content-defined chunks, over LIST_MIN. From a fixed
#: seed: drawn afresh, 1.6 MB makes 80.6 chunks on average (standard deviation 4.5), and
#: one draw in 3,555 made 65, one chunk from being stored without a list.
BIG = random.Random(2).randbytes(800_000).hex()
#: 400 KB: about 25 chunks, under it.
SMALL = os.urandom(200_000).hex()


def record(item: dict[str, object], attr: str = "w0") -> Listed | Blobs:
    raw = item[attr]
    assert isinstance(raw, dict)
    rec = record_from_wire(codec.unpack_record(raw["B"], key="k"), "k")
    assert isinstance(rec.entry, Listed | Blobs)
    return rec.entry


def test_a_write_of_many_chunks_names_its_chunk_list_packed_with_its_chunks() -> None:
    w = store_writes(config(cid="c01"), [("doc", BIG)], "task")
    ((pack_key, body),) = w.objects.items()
    entry = record(w.item)
    assert isinstance(entry, Listed) and entry.span is not None
    assert pack_key == Layout.pack_key_in("t1/", entry.span.pack.hex())
    # the list is the pack's last frame; it names the pack's own chunks as SELF
    assert entry.span.offset + entry.span.length == len(body)
    raw = codec.unframe(body[entry.span.offset :], key="list", kind=codec.KIND_BLOB)
    assert codec.digest_bytes(raw) == entry.digest and len(raw) == entry.size
    inner = entry_from_wire(codec.unpack(raw, key="list"), "list", "list")
    assert isinstance(inner, Blobs) and len(inner.digests) > lists.LIST_MIN
    assert inner.spans is not None and {s.pack for s in inner.spans if s} == {lists.SELF}
    # the record is ~100 bytes instead of ~46 per chunk
    assert len(w.item["w0"]["B"]) < 200


def test_the_next_checkpoint_re_uses_the_writes_list_and_its_body_fits_the_index() -> None:
    core = make_core()
    w = store_writes(config(cid="c00"), [("doc", BIG)], "task", core=core)
    stored = store(config(cid="c00"), checkpoint("c01", {"doc": BIG, "x": 1}), core=core)
    assert stored.objects == {}  # nothing cut or uploaded again
    body = stored.item[schema.BODY]["B"]
    assert body_versions(body) == (codec.LAYOUT_LEADS, codec.LAYOUT_LEADS)  # a lead
    assert len(body) < 1000
    env = read.open_envelope(core, stored.row, body)
    assert env.channels["doc"] == record(w.item)


def test_a_fresh_reader_fetches_a_list_without_a_lead_then_its_chunks() -> None:
    core = make_core(list_leads=False)  # layout 3's lists, as 0.3.0-0.7.x write them
    w = store_writes(config(cid="c01"), [("doc", BIG)], "task", core=core)
    stored = store(config(), checkpoint("c01", {"doc": BIG}), core=core)
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item, w.item]))
    # one list (checkpoint and write name the same one), a range of its pack
    (first,) = script.expect([S3Get], [from_bucket(w.objects)(script.pending[0])])
    assert first.key in w.objects and first.start is not None
    script.expect(only_gets, [from_bucket(w.objects)(op) for op in script.pending])
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": BIG}
    assert tup.pending_writes == [("task", "doc", BIG)]


def test_a_checkpoint_of_its_own_packs_its_list_and_reads_back() -> None:
    stored = store(config(), checkpoint("c01", {"doc": BIG}))
    (pack_key,) = stored.objects
    assert pack_key.endswith(".pack") and schema.BODY in stored.item
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    tup = script.drain(from_bucket(stored.objects))
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": BIG}


def test_a_value_under_the_limit_keeps_its_chunks_in_its_entry_without_leads() -> None:
    stored = store(config(), checkpoint("c01", {"doc": SMALL}), core=make_core(list_leads=False))
    env = read.open_envelope(make_core(), stored.row, stored.item[schema.BODY]["B"])
    assert isinstance(env.channels["doc"], Blobs)
    body = stored.item[schema.BODY]["B"]
    assert body_versions(body) == (codec.LAYOUT_RECORDS, codec.LAYOUT_PACKS)


def test_a_body_in_s3_naming_a_list_without_a_lead_reads_back_in_three_round_trips() -> None:
    writer = make_core(index_inline_limit=0, list_leads=False)
    stored = store(config(), checkpoint("c01", {"doc": BIG}), core=writer)
    assert schema.BODY not in stored.item and len(stored.objects) == 2
    assert schema.PACK_PREFETCH in stored.item  # the list's range, named ahead
    answer = from_bucket(stored.objects)
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    first = script.expect(only_gets, [answer(op) for op in script.pending])
    assert len(first) == 2  # the body and its list, together
    script.expect(only_gets, [answer(op) for op in script.pending])  # the chunks
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": BIG}


def test_a_damaged_list_is_refused_naming_its_pack() -> None:
    stored = store(config(), checkpoint("c01", {"doc": BIG}), core=make_core(list_leads=False))
    ((pack_key, body),) = stored.objects.items()
    damaged = body[:-30] + bytes(b ^ 0xFF for b in body[-30:])  # inside the list's frame
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    script.expect([S3Get], [from_bucket({pack_key: damaged})(script.pending[0])])
    assert script.raises(CorruptObjectError).key == pack_key


def test_a_list_of_the_wrong_size_or_kind_or_a_loose_one_naming_its_pack_is_refused() -> None:
    span = Span(lists.SELF, 0, 10)
    inner = Blobs("msgpack", (b"\x01" * 32,) * 40, (5,) * 40, b"", 40, (span,) * 40)
    data = lists.content(inner)
    loose = Listed(codec.digest_bytes(data), len(data), None)
    with pytest.raises(CorruptObjectError, match="names its own pack"):
        lists.open_list(loose, data, ChunkRef("t1/b/x"))
    with pytest.raises(CorruptObjectError, match="wrong size") as info:
        lists.open_list(replace(loose, size=1), data, ChunkRef("t1/b/x"))
    assert info.value.key == "t1/b/x"
    packed = replace(loose, span=Span(b"\x07" * 32, 100, 50))
    in_pack = ChunkRef("t1/b/x", packed.span, "t1/b/p.pack")
    with pytest.raises(CorruptObjectError, match="wrong size") as info:
        lists.open_list(replace(packed, size=1), data, in_pack)
    assert info.value.key == "t1/b/p.pack"  # the object to repair or delete
    opened = lists.open_list(packed, data, in_pack)
    assert opened.spans is not None and {s.pack for s in opened.spans if s} == {b"\x07" * 32}
    listed_again = codec.pack(packed.wire())
    with pytest.raises(CorruptObjectError, match="does not list chunks"):
        lists.open_list(replace(loose, size=len(listed_again)), listed_again, ChunkRef("t1/b/x"))


def test_a_listed_entry_round_trips_and_a_malformed_one_is_refused() -> None:
    for entry in (
        Listed(b"\x02" * 32, 900, None),
        Listed(b"\x02" * 32, 900, Span(b"\x03" * 32, 7, 99)),
    ):
        assert entry_from_wire(entry.wire(), "channel 'x'", "k") == entry
    for bad in (["l", b"\x02" * 31, 9], ["l", b"\x02" * 32, -1], ["l", b"\x02" * 32, 9, b"", 0, 1]):
        with pytest.raises(CorruptObjectError, match="channel 'x' in 'k' has a malformed"):
            entry_from_wire(bad, "channel 'x'", "k")


@pytest.mark.parametrize(
    ("doc", "reads"),
    [(BIG, codec.LAYOUT_PACKS), (SMALL, codec.LAYOUT_RECORDS)],
    ids=["a-list-to-0.2.0", "a-lead-to-0.7.0"],
)
def test_an_older_release_is_told_to_upgrade(
    monkeypatch: pytest.MonkeyPatch, doc: str, reads: int
) -> None:
    stored = store(config(), checkpoint("c01", {"doc": doc}))
    body = stored.item[schema.BODY]["B"]
    monkeypatch.setattr(codec, "FORMAT_VERSION", reads)  # what that release reads
    with pytest.raises(UnsupportedFormatError, match="upgrade langgraph-s3"):
        codec.unframe(body, key="k", kind=codec.KIND_CHECKPOINT)


def test_one_new_chunk_and_its_list_go_up_as_one_pack() -> None:
    """An edit that makes one new chunk of a listed value costs one PUT, not two: the
    entries naming the pack are in the list, so packing costs the index nothing."""
    core = make_core()
    first = store(config(), checkpoint("c01", {"doc": BIG}, {"doc": "1.a"}), core=core)
    edited = BIG[:-10] + "0123456789"  # only the last chunk changes
    second = store(config(cid="c01"), checkpoint("c02", {"doc": edited}, {"doc": "2.a"}), core=core)
    (pack_key,) = second.objects
    assert pack_key.endswith(".pack") and pack_key not in first.objects
    assert len(codec.frames(second.objects[pack_key], key=pack_key)) == 2  # chunk, list
    script = Script(read.get_tuple(make_core(), config(cid="c02")))
    script.expect(is_query, page([second.item]))
    tup = script.drain(from_bucket({**first.objects, **second.objects}))
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": edited}


def test_a_list_stored_already_is_named_where_it_is_not_stored_again() -> None:
    """A call that encodes a value another call has just stored (before that value
    was remembered) builds the same list: it names the stored one, uploads nothing."""
    core = make_core()
    first = store_writes(config(cid="c01"), [("doc", BIG)], "task", core=core)
    entry = record(first.item)
    assert isinstance(entry, Listed) and entry.span is not None
    ((pack_key, body),) = first.objects.items()
    frame = body[entry.span.offset : entry.span.offset + entry.span.length]
    raw = codec.unframe(frame, key=pack_key, kind=codec.KIND_BLOB)
    inner = lists.open_list(entry, raw, ChunkRef("list", entry.span, pack_key))
    again = replace(inner, spans=(PENDING,) * len(inner.digests), value=None)
    frames = {core.layout.blob_key("t1", d.hex()): b"frame" for d in again.digests}
    sealed = packs.seal(core, "t1", frames, [again])
    assert sealed.shares.bodies == {}  # chunks known, list known
    assert sealed.resolve(lists.spill(again)) == entry


def test_a_list_whose_chunks_are_all_stored_goes_up_alone_as_a_loose_blob() -> None:
    """The chunks are known (stored by an earlier call) but this list is not: it is
    one loose blob naming the chunks where they are (no pack of one object)."""
    core = make_core()
    digests = tuple(bytes([i]) * 32 for i in range(70))
    where = Span(b"\x09" * 32, 0, 10)
    for d in digests:
        core.caches.known_blobs.put(core.layout.blob_key("t1", d.hex()), where)
    blobs = Blobs("msgpack", digests, (10,) * 70, b"", 70, (PENDING,) * 70)
    frames = {core.layout.blob_key("t1", d.hex()): b"frame" for d in digests}
    sealed = packs.seal(core, "t1", frames, [blobs])
    ((key, body),) = sealed.shares.bodies.items()
    listed = sealed.resolve(lists.spill(blobs))
    assert isinstance(listed, Listed) and listed.span is None
    assert key == core.layout.blob_key("t1", listed.digest.hex())
    raw = codec.unframe(body, key=key, kind=codec.KIND_BLOB)
    inner = lists.open_list(listed, raw, ChunkRef(key))
    assert inner.spans == (where,) * 70
    # another flow needs the same list while it is in flight: it waits for it
    again = packs.seal(core, "t1", frames, [replace(blobs)])
    assert again.shares.bodies == {} and key in again.shares.waits
    # a saver that knows the list's blob is stored references it, uploads nothing
    other = make_core()
    for d in digests:
        other.caches.known_blobs.put(other.layout.blob_key("t1", d.hex()), where)
    other.caches.known_blobs.put(key, True)
    fresh = replace(blobs)
    third = packs.seal(other, "t1", frames, [fresh])
    assert third.shares.bodies == {} and third.resolve(lists.spill(fresh)) == listed


# Layout 8: short chunk lists and leads.


def short_listed(stored_item: dict[str, object], core: SaverCore | None = None) -> Listed:
    """The ``doc`` entry of a checkpoint whose body is in its item."""
    row = schema.parse_row(stored_item)
    assert row.body is not None
    env = read.open_envelope(core or make_core(), row, row.body)
    entry = env.channels["doc"]
    assert isinstance(entry, Listed)
    return entry


def test_a_new_value_of_a_few_chunks_is_named_by_a_list_right_after_them() -> None:
    stored = store(config(), checkpoint("c01", {"doc": SMALL}))
    (body,) = stored.objects.values()
    entry = short_listed(stored.item)
    assert entry.span is not None and entry.span.offset + entry.span.length == len(body)
    # every chunk is before the list in the same pack, from its first byte
    assert entry.lead == entry.span.offset and entry.reach() == Span(entry.span.pack, 0, len(body))
    assert body_versions(stored.item[schema.BODY]["B"]) == (codec.LAYOUT_LEADS, codec.LAYOUT_LEADS)
    # the body holds ~90 bytes for the value, not ~40 per chunk (~17 chunks): 878 -> 198
    before = store(config(), checkpoint("c01", {"doc": SMALL}), core=make_core(list_leads=False))
    assert len(stored.item[schema.BODY]["B"]) * 2 < len(before.item[schema.BODY]["B"])


def test_a_fresh_reader_gets_a_list_with_a_lead_and_its_chunks_in_one_ranged_get() -> None:
    core = make_core()
    w = store_writes(config(cid="c00"), [("doc", SMALL)], "task", core=core)
    assert isinstance(record(w.item), Listed) and record(w.item).lead is not None
    stored = store(config(cid="c00"), checkpoint("c01", {"doc": SMALL}), core=core)
    again = store_writes(config(cid="c01"), [("doc", SMALL)], "task", core=core)
    assert stored.objects == again.objects == {}  # both name the first write's list
    ((pack_key, body),) = w.objects.items()
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item, again.item]))
    (get,) = script.expect([S3Get], [body])
    assert (get.key, get.start, get.end) == (pack_key, 0, len(body))
    tup = script.returns()  # list and chunks cut from that range: no other round trip
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": SMALL}
    assert tup.pending_writes == [("task", "doc", SMALL)]


def test_a_body_in_s3_naming_a_list_with_a_lead_reads_back_in_two_round_trips() -> None:
    stored = store(config(), checkpoint("c01", {"doc": BIG}), core=make_core(index_inline_limit=0))
    assert schema.BODY not in stored.item and len(stored.objects) == 2
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    first = script.expect(only_gets, [from_bucket(stored.objects)(op) for op in script.pending])
    assert sorted(op.key for op in first) == sorted(stored.objects)  # body, pack range
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": BIG}


def test_a_damaged_chunk_before_a_list_is_read_again_alone_and_refused_naming_the_pack() -> None:
    stored = store(config(), checkpoint("c01", {"doc": SMALL}))
    ((pack_key, body),) = stored.objects.items()
    damaged = body[:40] + bytes(b ^ 0xFF for b in body[40:80]) + body[80:]  # the first chunk
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    script.expect([S3Get], [damaged])  # the list is whole: it names the chunks
    (again,) = script.expect([S3Get], [from_bucket({pack_key: damaged})(script.pending[0])])
    assert again.key == pack_key and again.start == 0  # the damaged chunk on its own
    assert script.raises(CorruptObjectError).key == pack_key


def test_an_edited_value_names_its_old_chunks_in_its_entry_and_reads_back() -> None:
    core = make_core(chunk_items=False)
    first = store(config(), checkpoint("c01", {"doc": SMALL}, {"doc": "1.a"}), core=core)
    edited = SMALL + "0123456789" * 3000  # an append: the list's chunks are re-used
    second = store(config(cid="c01"), checkpoint("c02", {"doc": edited}, {"doc": "2.a"}), core=core)
    row = schema.parse_row(second.item)
    assert row.body is not None
    assert isinstance(read.open_envelope(core, row, row.body).channels["doc"], Blobs)
    script = Script(read.get_tuple(make_core(), config(cid="c02")))
    script.expect(is_query, page([second.item]))
    tup = script.drain(from_bucket({**first.objects, **second.objects}))
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": edited}


def test_only_a_value_of_three_or_more_chunks_all_new_gets_a_short_list() -> None:
    def blobs(*spans: Span | None) -> Blobs:
        n = len(spans)
        return Blobs("msgpack", (b"\x01" * 32,) * n, (5,) * n, b"", n, spans)

    old = Span(b"\x07" * 32, 0, 5)
    assert isinstance(lists.spill(blobs(PENDING, PENDING, PENDING), short=True), Listed)
    for entry in (blobs(PENDING, PENDING), blobs(PENDING, PENDING, old), blobs(None, None, None)):
        assert lists.spill(entry, short=True) is entry
    assert lists.spill(blobs(PENDING, PENDING, PENDING)) == blobs(PENDING, PENDING, PENDING)


def test_a_list_whose_chunks_are_in_other_packs_too_has_no_lead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A large call makes several packs and puts the list in the last: a lead would not
    reach every chunk. A list of more than ``LIST_MIN`` chunks is named without one
    (read first, then the chunks, as in layout 3); a short one is not used at all: the
    entry names the chunks, as before layout 8, and they come in one round trip."""
    monkeypatch.setattr(packs, "PACK_MAX", 80_000)  # SMALL: ~200 KB framed, 3+ packs
    stored = store(config(), checkpoint("c01", {"doc": SMALL}))
    assert len(stored.objects) >= 3
    row = schema.parse_row(stored.item)
    assert row.body is not None
    assert isinstance(read.open_envelope(make_core(), row, row.body).channels["doc"], Blobs)
    assert body_versions(row.body) == (codec.LAYOUT_RECORDS, codec.LAYOUT_PACKS)
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    script.expect(only_gets, [from_bucket(stored.objects)(op) for op in script.pending])
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": SMALL}

    monkeypatch.setattr(lists, "LIST_MIN", 8)  # now a long list
    stored = store(config(), checkpoint("c01", {"doc": SMALL}))
    entry = short_listed(stored.item)
    assert entry.span is not None and entry.lead is None
    assert body_versions(stored.item[schema.BODY]["B"])[1] == codec.LAYOUT_LISTS
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    (get,) = script.expect([S3Get], [from_bucket(stored.objects)(script.pending[0])])
    assert get.start == entry.span.offset  # the list alone
    script.expect(only_gets, [from_bucket(stored.objects)(op) for op in script.pending])
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": SMALL}


def test_a_short_list_whose_chunks_are_not_all_new_here_is_not_stored() -> None:
    """Another call stored one of the chunks meanwhile: a list could not lead to it, so
    none goes up (no PUT for nothing) and the entry names the chunks where they are."""
    core = make_core(chunk_items=False)
    digests = tuple(bytes([i]) * 32 for i in range(4))
    keys = [core.layout.blob_key("t1", d.hex()) for d in digests]
    elsewhere = Span(b"\x09" * 32, 0, 10)
    core.caches.known_blobs.put(keys[0], elsewhere)
    blobs = Blobs("msgpack", digests, (10,) * 4, b"", 4, (PENDING,) * 4)
    entry = lists.spill(blobs, short=True)
    assert isinstance(entry, Listed)
    sealed = packs.seal(core, "t1", dict.fromkeys(keys, b"frame"), lists.pending([entry]))
    ((pack_key, body),) = sealed.shares.bodies.items()
    assert body == b"frame" * 3  # the three new chunks, no list
    resolved = sealed.resolve(entry)
    assert isinstance(resolved, Blobs) and resolved.digests == digests
    assert resolved.spans is not None and resolved.spans[0] == elsewhere
    assert {s.pack for s in resolved.spans[1:] if isinstance(s, Span)} == {
        bytes.fromhex(pack_key.rsplit("/", 1)[1].removesuffix(".pack"))
    }


def test_a_lead_round_trips_and_one_outside_the_pack_is_refused() -> None:
    entry = Listed(b"\x02" * 32, 900, Span(b"\x03" * 32, 70, 99), lead=70)
    assert entry.wire()[6] == 70 and entry_from_wire(entry.wire(), "x", "k") == entry
    assert entry.reach() == Span(b"\x03" * 32, 0, 169)
    for lead in (71, -1, True, "1"):
        with pytest.raises(CorruptObjectError, match="malformed"):
            entry_from_wire([*entry.wire()[:6], lead], "x", "k")


def test_a_list_naming_a_chunk_outside_its_lead_is_refused_naming_its_pack() -> None:
    """The collector keeps only the pack of a list with a lead: a list that names a
    chunk anywhere else (or in its pack, but not in the lead bytes) is damage."""
    own, other = Span(lists.SELF, 100, 50), Span(b"\x07" * 32, 0, 50)
    for spans in ((own, other), (own, None), (own, Span(lists.SELF, 20, 50))):
        inner = Blobs("msgpack", (b"\x01" * 32,) * 2, (5, 5), b"", 2, spans)
        data = lists.content(inner)
        entry = Listed(codec.digest_bytes(data), len(data), Span(b"\x03" * 32, 150, 40), lead=50)
        at = ChunkRef("t1/b/list", entry.span, "t1/b/p.pack")
        with pytest.raises(CorruptObjectError, match="outside its lead") as info:
            lists.open_list(entry, data, at)
        assert info.value.key == "t1/b/p.pack"
    inner = Blobs("msgpack", (b"\x01" * 32,), (5,), b"", 1, (own,))
    data = lists.content(inner)
    entry = Listed(codec.digest_bytes(data), len(data), Span(b"\x03" * 32, 150, 40), lead=50)
    opened = lists.open_list(entry, data, ChunkRef("t1/b/list", entry.span, "t1/b/p.pack"))
    assert opened.spans == (Span(b"\x03" * 32, 100, 50),)


def test_without_trimming_no_lead_is_written() -> None:
    """``trim_items=False`` writes what 0.5.x-0.7.x read: no short list, no lead."""
    core = make_core(trim_items=False)
    assert not core.list_leads
    stored = store(config(), checkpoint("c01", {"doc": BIG}), core=core)
    row = schema.parse_row(stored.item)
    assert row.body is not None
    entry = read.open_envelope(core, row, row.body).channels["doc"]
    assert isinstance(entry, Listed) and entry.lead is None
    assert body_versions(row.body) == (codec.LAYOUT_LISTS, codec.LAYOUT_LISTS)
