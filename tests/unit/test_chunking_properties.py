"""Properties of the chunk planner (``chunking.py``) for any bytes and any hint.

What ``plan`` promises: the chunks (after the msgpack ``head``) are exactly the value,
each chunk's digest is the SHA-256 of its bytes, stable chunks are the chunks plain
FastCDC cuts, the hint changes only what is re-used (every re-used chunk is verified),
and an append keeps the previous version's stable chunks and its pieces, adding only what
was appended, until a content boundary turns the unfinished end into stable chunks.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import ormsgpack
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from pyfastcdc import FastCDC

from langgraph_s3 import chunking
from langgraph_s3.chunking import Chunk, Previous, plan, split_head

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None)

WORDS = [b"alpha", b"beta", b"gamma", b"delta", b"river", b"stone", b"\n", b"42"]

type_tags = st.one_of(
    st.sampled_from(["msgpack", "bytes", "json", "str", "null", ""]), st.text(max_size=10)
)


def fastcdc(data: bytes) -> list[bytes]:
    return [bytes(c.data) for c in FastCDC(chunking.AVG_CHUNK).cut_buf(data)]


def filler(rng: random.Random, kind: str, n: int) -> bytes:
    """``n`` bytes of noise, prose, or long runs (which FastCDC cuts at its maximum)."""
    if kind == "noise":
        return rng.randbytes(n)
    out = bytearray()
    while len(out) < n:
        if kind == "prose":
            out += rng.choice(WORDS) + b" "
        else:
            out += bytes([rng.randrange(256)]) * rng.randrange(1, 70_000)
    return bytes(out[:n])


@st.composite
def values(draw: st.DrawFn, min_size: int = 0, max_size: int = 250_000) -> bytes:
    kind = draw(st.sampled_from(["small", "noise", "prose", "runs"][min(min_size, 1) :]))
    if kind == "small":
        return draw(st.binary(max_size=300))
    size = draw(
        st.one_of(
            st.integers(min_size, max_size),
            st.sampled_from([chunking.CHUNK_THRESHOLD, chunking.CHUNK_THRESHOLD + 1]),
        )
    )
    return filler(random.Random(draw(st.integers(0, 2**32))), kind, size)


def check_chunks(chunks: list[Chunk], store: dict[bytes, bytes]) -> bytes:
    """The value the chunks spell, after checking every digest and size; re-used chunks
    (``data is None``) must be ones stored before. New chunks join the store."""
    out = []
    for c in chunks:
        data = store[c.digest] if c.data is None else c.data
        assert hashlib.sha256(data).digest() == c.digest
        assert len(data) == c.size > 0
        store[c.digest] = data
        out.append(data)
    return b"".join(out)


def as_previous(chunks: list[Chunk], stable: int) -> Previous:
    return Previous([c.digest for c in chunks], [c.size for c in chunks], stable)


def check_contract(chunks: list[Chunk], stable: int, data: bytes) -> None:
    """Stable chunks are FastCDC's own; what follows them is a bounded number of pieces."""
    assert 0 <= stable <= len(chunks)
    assert len(chunks) - stable <= chunking.MAX_PIECES
    cuts = fastcdc(data)
    assert [c.size for c in chunks[:stable]] == [len(c) for c in cuts[:stable]]
    assert [c.digest for c in chunks[:stable]] == [
        hashlib.sha256(c).digest() for c in cuts[:stable]
    ]


@SETTINGS
@given(type_tags, values())
def test_split_head_and_plan_reproduce_any_value(type_: str, data: bytes) -> None:
    """Without a hint: head + chunks is the value; one chunk up to the threshold, FastCDC's
    chunks above it, all stable but the last."""
    head, body = split_head(type_, data)
    assert head + body == data
    if type_ != "msgpack":
        assert head == b""
    chunks, stable = plan(body)
    assert all(c.data is not None for c in chunks)
    assert head + check_chunks(chunks, {}) == data
    if len(body) <= chunking.CHUNK_THRESHOLD:
        assert [c.data for c in chunks] == ([body] if body else []) and stable == 0
    else:
        assert [c.data for c in chunks] == fastcdc(body)
        assert stable == len(chunks) - 1
        assert max(c.size for c in chunks) <= 4 * chunking.AVG_CHUNK


containers = st.sampled_from(["list", "map", "str", "bin"])


def container(kind: str, items: list[str]) -> Any:
    if kind == "list":
        return items
    if kind == "map":
        return {f"k{i}": v for i, v in enumerate(items)}
    return "".join(items) if kind == "str" else "".join(items).encode()


@SETTINGS
@given(containers, st.lists(st.text(max_size=40), min_size=1, max_size=40), st.text(max_size=40))
def test_split_head_keeps_a_growing_containers_body_a_prefix(
    kind: str, items: list[str], more: str
) -> None:
    """The size header is all that changes when a msgpack list, map, str or bin grows, so
    the body of the old value starts the body of the new one (across fix/16/32 forms)."""
    old = ormsgpack.packb(container(kind, items))
    new = ormsgpack.packb(container(kind, [*items, more]))
    old_head, old_body = split_head("msgpack", old)
    new_head, new_body = split_head("msgpack", new)
    if len(old_head) == 0:  # an empty str or bin is its header alone
        assert kind in ("str", "bin") and old_body == old and len(old) <= 5
        return
    assert len(old_head) in (1, 2, 3, 5) and len(new_head) in (1, 2, 3, 5)
    assert new_body.startswith(old_body)


def check_append(prev: list[Chunk], prev_stable: int, data: bytes, appended: int) -> None:
    """Plan ``data`` (the previous value plus ``appended`` bytes) against ``prev``."""
    known = {c.digest for c in prev}
    chunks, stable = plan(data, as_previous(prev, prev_stable))
    kept = min(prev_stable, len(prev) - 1)
    start = sum(c.size for c in prev[:kept])
    assert chunks[:kept] == [Chunk(c.digest, c.size, None) for c in prev[:kept]]
    assert all(c.data is not None or c.digest in known for c in chunks)
    assert sum(c.size for c in chunks if c.data is not None) <= len(data) - start
    cuts = fastcdc(data)
    if len(cuts) > kept + 1:  # a content boundary in the unfinished end: it becomes stable
        event("append: new content boundary")
        assert stable == len(cuts) - 1
        assert [c.size for c in chunks] == [len(c) for c in cuts]
        assert all(c.data == cut for c, cut in zip(chunks[kept:], cuts[kept:], strict=True))
    elif len(prev) - kept + 1 <= chunking.MAX_PIECES:  # every piece kept, one new piece
        event("append: pieces kept")
        assert stable == kept
        assert chunks[:-1] == [Chunk(c.digest, c.size, None) for c in prev]
        assert chunks[-1].data == data[len(data) - appended :]
    else:  # too many pieces: merged into one
        event("append: pieces merged")
        assert stable == kept
        assert len(chunks) == kept + 1 and chunks[-1].data == data[start:]


@SETTINGS
@given(
    values(max_size=180_000),
    st.sampled_from(["noise", "prose", "runs"]),
    st.one_of(
        st.lists(st.integers(1, 6000), min_size=1, max_size=24),
        st.lists(st.integers(1, 300), min_size=16, max_size=40),  # many pieces, then merged
    ),
    st.integers(0, 2**32),
)
def test_appends_keep_stable_chunks_and_pieces(
    start: bytes, kind: str, appends: list[int], seed: int
) -> None:
    """A value growing by appends, each version planned against the previous plan: exact
    value, FastCDC's stable chunks, and the re-use the module promises (see check_append)."""
    rng = random.Random(seed)
    store: dict[bytes, bytes] = {}
    data = start
    chunks, stable = plan(data)
    check_chunks(chunks, store)
    for n in appends:
        prev, prev_stable = chunks, stable
        data += filler(rng, kind, n)
        check_append(prev, prev_stable, data, n)
        chunks, stable = plan(data, as_previous(prev, prev_stable))
        assert check_chunks(chunks, store) == data
        check_contract(chunks, stable, data)


@settings(SETTINGS, max_examples=20)
@given(st.integers(0, 2**32), st.integers(20, 60), st.integers(1, 6))
def test_a_growing_message_list_reuses_its_chunks(seed: int, start: int, turns: int) -> None:
    """The case chunking is built for: a msgpack list of messages, one more per turn."""
    rng = random.Random(seed)
    messages = [filler(rng, "prose", rng.randrange(200, 4000)).decode() for _ in range(start)]
    store: dict[bytes, bytes] = {}
    _, body = split_head("msgpack", ormsgpack.packb(messages))
    chunks, stable = plan(body)
    check_chunks(chunks, store)
    for _ in range(turns):
        messages.append(filler(rng, "prose", rng.randrange(200, 4000)).decode())
        new_head, new_body = split_head("msgpack", ormsgpack.packb(messages))
        assert new_body.startswith(body)
        check_append(chunks, stable, new_body, len(new_body) - len(body))
        chunks, stable = plan(new_body, as_previous(chunks, stable))
        assert new_head + check_chunks(chunks, store) == ormsgpack.packb(messages)
        body = new_body


@st.composite
def edits(draw: st.DrawFn, data: bytes) -> bytes:
    """An earlier version of ``data``: edited, cut, extended, shifted, or unrelated."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    op = draw(st.sampled_from(["edit", "truncate", "extend", "shift", "other", "same"]))
    at = rng.randrange(len(data) + 1)
    if op == "edit" and data:
        return data[:at] + filler(rng, "noise", rng.randrange(1, 300)) + data[at + 1 :]
    if op == "truncate":
        return data[:at]
    if op == "extend":
        return data + filler(rng, "prose", rng.randrange(1, 90_000))
    if op == "shift":
        return data[at:]
    if op == "other":
        return filler(rng, "prose", rng.randrange(0, 150_000))
    return data


@SETTINGS
@given(values(), st.data())
def test_any_earlier_version_as_hint_gives_the_exact_value(
    data: bytes, draw: st.DataObject
) -> None:
    """Edits, shrinks, shifts and replacements: the plan is still exactly the new value, its
    stable chunks still FastCDC's, and it re-uses only chunks of the hint."""
    old = draw.draw(edits(data))
    store: dict[bytes, bytes] = {}
    old_chunks, old_stable = plan(old)
    check_chunks(old_chunks, store)
    chunks, stable = plan(data, as_previous(old_chunks, old_stable))
    assert check_chunks(chunks, store) == data
    check_contract(chunks, stable, data)
    if data == old:
        assert (chunks, stable) == ([Chunk(c.digest, c.size, None) for c in old_chunks], old_stable)


@SETTINGS
@given(
    values(min_size=chunking.CHUNK_THRESHOLD + 1),
    st.integers(0, 2**32),
    st.sampled_from(["change", "insert", "cut"]),
)
def test_an_edit_just_after_a_stable_chunk_keeps_stable_chunks_fastcdcs(
    old: bytes, seed: int, op: str
) -> None:
    """FastCDC's cut also depends on the byte after it: a chunk whose following byte was
    edited is no longer stable, and must not be kept as such."""
    rng = random.Random(seed)
    old_chunks, old_stable = plan(old)
    assume(old_stable > 0)
    at = sum(c.size for c in old_chunks[: rng.randrange(1, old_stable + 1)])
    byte = bytes([(old[at] + rng.randrange(1, 256)) % 256])
    if op == "change":
        data = old[:at] + byte + old[at + 1 :]
    elif op == "insert":
        data = old[:at] + byte + old[at:]
    else:
        data = old[:at] + byte
    store: dict[bytes, bytes] = {}
    check_chunks(old_chunks, store)
    chunks, stable = plan(data, as_previous(old_chunks, old_stable))
    assert check_chunks(chunks, store) == data
    check_contract(chunks, stable, data)


@SETTINGS
@given(values(), st.data())
def test_a_wrong_hint_never_changes_the_value(data: bytes, draw: st.DataObject) -> None:
    """Hints with made-up digests, or with the right digests for cuts FastCDC would not
    make, and any stable count: only verified chunks are re-used, the value is exact."""
    rng = random.Random(draw.draw(st.integers(0, 2**32)))
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, 30))) if data else []
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if b > a]
    digests = [
        hashlib.sha256(p).digest() if draw.draw(st.booleans()) else rng.randbytes(32)
        for p in pieces
    ]
    hint = Previous(digests, [len(p) for p in pieces], draw.draw(st.integers(0, len(pieces))))
    store = {d: p for d, p in zip(digests, pieces, strict=True) if hashlib.sha256(p).digest() == d}
    chunks, stable = plan(data, hint)
    assert check_chunks(chunks, store) == data
    assert 0 <= stable <= len(chunks)
