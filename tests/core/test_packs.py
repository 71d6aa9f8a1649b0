"""Unit tests of ``core.packs``: a call's new chunks go up as one pack, and every
reader finds them there (layout 2)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import packs, read, schema
from langgraph_s3.core.entries import (
    IN_INDEX,
    PENDING,
    Blobs,
    Inline,
    Listed,
    Span,
    entry_from_wire,
)
from langgraph_s3.core.packs import ChunkRef
from langgraph_s3.core.state import SaverCore
from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.operations import S3Get
from tests.core.canned import (
    body_versions,
    checkpoint,
    config,
    from_bucket,
    is_query,
    make_core,
    page,
    store,
    store_writes,
)
from tests.core.script import Script

#: 400 KB of incompressible text: about 25 content-defined chunks.
DOC = os.urandom(200_000).hex()
#: 24 KB: one chunk.
ONE = os.urandom(12_000).hex()


def packed() -> SaverCore:
    """A saver naming every chunk of a new value in its entry (before layout 8)."""
    return make_core(list_leads=False)


def test_one_new_chunk_stays_a_loose_blob_and_the_entry_is_layout_1() -> None:
    core = make_core(chunk_items=False)
    sealed = packs.seal(core, "t1", {core.layout.blob_key("t1", "ab" * 32): b"frame"})
    assert list(sealed.shares.bodies) == [core.layout.blob_key("t1", "ab" * 32)]
    entry = Blobs("msgpack", (bytes.fromhex("ab" * 32),), (5,), b"", 1, (PENDING,))
    resolved = sealed.resolve(entry)
    assert isinstance(resolved, Blobs) and resolved.spans is None
    assert resolved.wire()[0] == "r" and packs.layout_of([resolved]) == codec.LAYOUT_1


def test_several_new_chunks_go_up_as_one_pack_in_order() -> None:
    core = make_core()
    keys = [core.layout.blob_key("t1", f"{i:064x}") for i in range(3)]
    frames = [b"A" * 10, b"B" * 20, b"C" * 5]
    sealed = packs.seal(core, "t1", dict(zip(keys, frames, strict=True)))
    ((pack_key, body),) = sealed.shares.bodies.items()
    assert body == b"".join(frames)
    assert pack_key == core.layout.pack_key("t1", codec.digest(body))
    spans = list(sealed.placed.values())
    assert [(s.offset, s.length) for s in spans if s] == [(0, 10), (10, 20), (30, 5)]
    # a chunk the entry already had in another pack keeps its place
    old = Span(b"\x07" * 32, 99, 7)
    entry = Blobs("bytes", (bytes(32), bytes.fromhex(f"{1:064x}")), (1, 1), b"", 2, (old, PENDING))
    resolved = sealed.resolve(entry)
    assert isinstance(resolved, Blobs) and resolved.spans == (old, spans[1])
    assert packs.objects_in("t1/", resolved) == [
        core.layout.pack_key("t1", old.pack.hex()),
        pack_key,
    ]


def test_a_packed_entry_round_trips_and_a_malformed_one_is_refused() -> None:
    span = Span(b"\x01" * 32, 4, 9)
    entry = Blobs("msgpack", (b"\x02" * 32, b"\x03" * 32), (3, 4), b"h", 1, (None, span))
    wire = entry.wire()
    assert wire[0] == "p" and wire[6] == [span.pack] and wire[7] == [-1, 0, 0, 0, 4, 9]
    assert entry_from_wire(wire, "channel 'x'", "k") == entry
    for bad in ([*wire[:7], [0, 4]], [*wire[:6], [], wire[7]], [*wire[:7], [-2, 0, 0, 0, 4, 9]]):
        with pytest.raises(CorruptObjectError, match="channel 'x' in 'k'"):
            entry_from_wire(bad, "channel 'x'", "k")
    assert isinstance(entry_from_wire(Inline("json", b"1").wire(), "x", "k"), Inline)


def test_a_put_of_a_large_value_makes_one_put_and_reads_back_in_one_round_trip() -> None:
    # its chunks named one by one (before layout 8: test_lists has the short list)
    stored = store(config(), checkpoint("c01", {"doc": DOC, "x": 1}), core=packed())
    (pack_key,) = stored.objects
    assert pack_key.endswith(".pack")
    body = stored.item[schema.BODY]["B"]
    # the body says it needs layout 2 (and 6: it is bare)
    assert body_versions(body) == (codec.LAYOUT_RECORDS, codec.LAYOUT_PACKS)

    core = make_core()  # a fresh saver: nothing cached
    script = Script(read.get_tuple(core, config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    (get,) = script.expect([S3Get], [stored.objects[pack_key]])
    assert get.key == pack_key and (get.start, get.end) == (0, len(stored.objects[pack_key]))
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": DOC, "x": 1}


def test_a_body_in_s3_and_its_packed_chunks_come_in_one_round_trip() -> None:
    writer = make_core(index_inline_limit=0)
    stored = store(config(), checkpoint("c01", {"doc": DOC}), core=writer)
    assert schema.PACK_PREFETCH in stored.item
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    gets = script.expect(
        lambda ops: all(isinstance(op, S3Get) for op in ops),
        [from_bucket(stored.objects)(op) for op in script.pending],
    )
    assert sorted(op.key for op in gets) == sorted(stored.objects)
    tup = script.returns()  # no further round trip
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": DOC}


def test_a_damaged_chunk_in_a_pack_is_refused_naming_the_pack() -> None:
    stored = store(config(), checkpoint("c01", {"doc": DOC}), core=packed())
    ((pack_key, body),) = stored.objects.items()
    damaged = body[:-40] + bytes(b ^ 0xFF for b in body[-40:])
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    script.expect([S3Get], [damaged])
    assert script.raises(CorruptObjectError).key == pack_key


def test_the_next_put_uploads_only_new_chunks_and_references_the_rest_where_they_are() -> None:
    # S3 only: with chunk items, the append's one or two new chunks (random data)
    # may become items; test_chunkitems covers that placement.
    core = make_core(chunk_items=False)
    first = store(config(), checkpoint("c01", {"doc": DOC}), core=core)
    (pack_key,) = first.objects
    edited = DOC + ONE  # an append: the old chunks are re-used
    second = store(config(cid="c01"), checkpoint("c02", {"doc": edited}, {"doc": "2"}), core=core)
    assert all(k not in first.objects for k in second.objects)
    assert sum(len(b) for b in second.objects.values()) < len(first.objects[pack_key]) / 4
    # A fresh reader finds every chunk: old pack, and the new pack or loose blob.
    objects = {**first.objects, **second.objects}
    script = Script(read.get_tuple(make_core(), config(cid="c02")))
    script.expect(is_query, page([second.item]))
    tup = script.drain(from_bucket(objects))
    assert tup is not None and tup.checkpoint["channel_values"]["doc"] == edited


def test_writes_with_several_chunks_are_one_pack_and_read_back() -> None:
    core = make_core()
    w = store_writes(config(cid="c01"), [("doc", DOC), ("note", "hi")], "task", core=core)
    (pack_key,) = w.objects
    assert pack_key.endswith(".pack")
    stored = store(config(), checkpoint("c01", {"x": 1}), core=core)
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item, w.item]))
    tup = script.drain(from_bucket(w.objects))
    assert tup is not None and tup.pending_writes == [("task", "doc", DOC), ("task", "note", "hi")]


def test_chunk_refs_name_the_pack_or_the_loose_blob() -> None:
    span = Span(b"\x01" * 32, 4, 9)
    entry = Blobs("msgpack", (b"\x02" * 32, b"\x03" * 32), (3, 4), b"", 1, (None, span))
    loose, packed = packs.chunk_refs_in("p/t/", entry)
    assert loose == ChunkRef(f"p/t/b/{'02' * 32}")
    assert packed == ChunkRef(f"p/t/b/{'03' * 32}", span, f"p/t/b/{'01' * 32}.pack")


def test_a_large_call_makes_several_packs_read_in_parallel_parts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(packs, "PACK_MAX", 100_000)  # DOC: 200 KB framed, three packs
    stored = store(config(), checkpoint("c01", {"doc": DOC}), core=packed())
    sizes = [len(b) for b in stored.objects.values()]
    assert len(sizes) >= 3 and max(sizes) <= 100_000
    script = Script(read.get_tuple(make_core(), config(cid="c01")))
    script.expect(is_query, page([stored.item]))
    gets = script.expect(
        lambda ops: len(ops) == len(sizes) and all(isinstance(op, S3Get) for op in ops),
        [from_bucket(stored.objects)(op) for op in script.pending],
    )
    # a pack's chunks in one ranged GET each (a chunk left alone is a loose blob)
    assert all(op.start is None or op.end - op.start <= 100_000 for op in gets)
    tup = script.returns()
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": DOC}


def test_a_chunk_stored_meanwhile_is_referenced_where_it_is() -> None:
    """Between planning a value and placing its chunks, another flow may have stored
    one of them (in a pack, or loose): it is referenced there, not uploaded again."""
    core = make_core(chunk_items=False)
    in_pack, loose, new = (core.layout.blob_key("t1", f"{i:064x}") for i in range(3))
    core.caches.known_blobs.put(in_pack, Span(b"\x01" * 32, 0, 5))
    core.caches.known_blobs.put(loose, True)
    sealed = packs.seal(core, "t1", {in_pack: b"A", loose: b"B", new: b"C"})
    assert list(sealed.shares.bodies) == [new]  # one new chunk: a loose blob
    assert sealed.placed == {
        bytes.fromhex(f"{0:064x}"): Span(b"\x01" * 32, 0, 5),
        bytes.fromhex(f"{1:064x}"): None,
        bytes.fromhex(f"{2:064x}"): None,
    }


def test_two_or_fewer_new_chunks_stay_loose_blobs() -> None:
    core = make_core(chunk_items=False)
    keys = [core.layout.blob_key("t1", f"{i:064x}") for i in range(2)]
    sealed = packs.seal(core, "t1", dict.fromkeys(keys, b"frame"))
    assert sorted(sealed.shares.bodies) == keys and set(sealed.placed.values()) == {None}


def test_a_body_that_re_uses_packed_chunks_is_version_2_though_it_uploads_nothing() -> None:
    """An older release must be told to upgrade (UnsupportedFormatError), not see an
    unknown entry kind, whenever a body names a pack, also when the put uploaded none."""
    core = make_core(list_leads=False)
    first = store(
        config(), checkpoint("c01", {"doc": DOC, "x": 1}, {"doc": "1.a", "x": "1.a"}), core=core
    )
    second = store(
        config(cid="c01"),
        checkpoint("c02", {"doc": DOC, "x": 2}, {"doc": "1.a", "x": "2.a"}),
        new_versions={"x": "2.a"},
        core=core,
    )
    assert first.objects and not second.objects
    body = second.item[schema.BODY]["B"]
    assert body_versions(body) == (codec.LAYOUT_RECORDS, codec.LAYOUT_PACKS)


def test_a_warm_read_of_a_body_in_s3_sends_no_range_again() -> None:
    stored = store(config(), checkpoint("c01", {"doc": DOC}), core=make_core(index_inline_limit=0))
    core = make_core()
    first = Script(read.get_tuple(core, config(cid="c01")))
    first.expect(is_query, page([stored.item]))
    assert first.drain(from_bucket(stored.objects)) is not None
    again = Script(read.get_tuple(core, config(cid="c01")))
    again.expect(is_query, page([stored.item]))
    tup = again.returns()  # object, chunks: all cached, no GET
    assert tup is not None and tup.checkpoint["channel_values"] == {"doc": DOC}


def test_a_body_naming_a_chunk_item_needs_layout_5() -> None:
    d = b"d" * 32
    item = Blobs("t", (d,), (1,), b"", 0, (IN_INDEX,))
    assert packs.layout_of([item]) == codec.LAYOUT_ITEMS
    # also when only the chunk list names it: an older release refuses the body
    assert packs.layout_of([Listed(d, 10, None, item)]) == codec.LAYOUT_ITEMS
    assert packs.layout_of([Listed(d, 10, None, replace(item, spans=None))]) == 3
    ref = packs.chunk_refs_in("t/", item)[0]
    assert ref.item and ref.span is None and ref.pack is None
    assert packs.objects_in("t/", item) == []
