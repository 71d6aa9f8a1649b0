"""The chunk planner on its own: appends re-use chunks, nothing else changes the value.

Pure functions, no storage: every plan must reassemble to exactly the new bytes, and
its stable chunks must be the chunks plain FastCDC cuts, whatever the hint was.
"""

from __future__ import annotations

import hashlib
import random

import pytest
from pyfastcdc import FastCDC

from langgraph_s3 import chunking
from langgraph_s3.chunking import Chunk, Previous, plan


def reassemble(chunks: list[Chunk], store: dict[bytes, bytes]) -> bytes:
    """The value from its chunks; re-used chunks must already be in ``store``."""
    out = []
    for c in chunks:
        data = c.data if c.data is not None else store[c.digest]
        assert hashlib.sha256(data).digest() == c.digest and len(data) == c.size
        out.append(data)
    return b"".join(out)


def as_previous(chunks: list[Chunk], stable: int) -> Previous:
    return Previous([c.digest for c in chunks], [c.size for c in chunks], stable)


def fastcdc(data: bytes) -> list[bytes]:
    return [bytes(c.data) for c in FastCDC(chunking.AVG_CHUNK).cut_buf(data)]


def prose(rng: random.Random, n: int) -> bytes:
    words = [b"alpha", b"beta", b"gamma", b"delta", b"river", b"stone", b"%d" % rng.randrange(999)]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + b" "
    return bytes(out[:n])


@pytest.mark.parametrize("seed", range(6))
def test_random_edits_reassemble_and_stable_chunks_match_fastcdc(seed: int) -> None:
    """Appends, edits, truncations, replacements and repeats in random order, each planned
    against the previous plan: the value always reassembles exactly, and the stable chunks
    are the first chunks plain FastCDC cuts (so dedup across savers is not lost)."""
    rng = random.Random(seed)
    store: dict[bytes, bytes] = {}
    data = prose(rng, rng.randrange(0, 200_000))
    previous: Previous | None = None
    for _ in range(60):
        op = rng.choice(["append", "append", "append", "edit", "truncate", "replace", "same"])
        if op == "append":
            data += prose(rng, rng.randrange(1, 5_000))
        elif op == "edit" and data:
            at = rng.randrange(len(data))
            data = data[:at] + prose(rng, rng.randrange(1, 300)) + data[at + 1 :]
        elif op == "truncate":
            data = data[: rng.randrange(len(data) + 1)]
        elif op == "replace":
            data = prose(rng, rng.randrange(0, 120_000))
        chunks, stable = plan(data, previous)
        for c in chunks:
            if c.data is not None:
                store[c.digest] = c.data
        assert reassemble(chunks, store) == data
        assert 0 <= stable <= len(chunks)
        assert len(chunks) - stable <= chunking.MAX_PIECES
        expected = fastcdc(data)
        assert [store[c.digest] for c in chunks[:stable]] == expected[:stable]
        previous = as_previous(chunks, stable)


def test_appends_upload_about_twice_what_was_appended() -> None:
    """400 appends of 0.4-1.8 KB to a 20 KB value: bytes of new chunks stay under 3x the
    bytes appended; re-chunking the whole value each time (no hint) sends over 5x."""
    rng = random.Random(1)
    text = prose(rng, 20_000 + 400 * 1_800)
    size = 20_000
    previous: Previous | None = None
    with_hint = without_hint = appended = 0
    known: set[bytes] = set()
    for _ in range(400):
        step = rng.randrange(400, 1_800)
        size += step
        appended += step
        data = text[:size]
        chunks, stable = plan(data, previous)
        with_hint += sum(c.size for c in chunks if c.data is not None)
        previous = as_previous(chunks, stable)
        for c in plan(data)[0]:  # no hint: what plain content-defined chunking uploads
            if c.digest not in known:
                known.add(c.digest)
                without_hint += c.size
    assert with_hint < 3 * (appended + 20_000), (with_hint, appended)
    assert without_hint > 5 * appended, (without_hint, appended)


def test_a_wrong_hint_is_never_trusted() -> None:
    """A hint whose digests do not match the data (another value, or a forged entry) re-uses
    nothing: every chunk is new and the value is exact."""
    rng = random.Random(2)
    data = prose(rng, 150_000)
    other = prose(rng, 150_000)
    chunks, stable = plan(other)
    forged = Previous([c.digest for c in chunks], [c.size for c in chunks], stable)
    planned, _ = plan(data, forged)
    assert all(c.data is not None for c in planned)
    assert b"".join(c.data or b"" for c in planned) == data
    lying = Previous([hashlib.sha256(b"x").digest()], [len(data)], 1)
    planned, _ = plan(data, lying)
    assert all(c.data is not None for c in planned)
    assert b"".join(c.data or b"" for c in planned) == data


def test_identical_value_reuses_every_chunk() -> None:
    rng = random.Random(4)
    data = prose(rng, 90_000)
    chunks, stable = plan(data)
    again, stable_again = plan(data, as_previous(chunks, stable))
    assert [c.digest for c in again] == [c.digest for c in chunks]
    assert all(c.data is None for c in again)
    assert stable_again == stable


def test_changes_right_after_a_boundary_keep_stable_chunks_equal_to_fastcdc() -> None:
    """FastCDC decides a cut by the byte after it too: when that byte changes (an edit just
    past a boundary, or a truncation to a boundary followed by an append), the chunk before
    it must not stay stable on trust. Every byte value is tried at the first boundary."""
    rng = random.Random(0)
    data = rng.randbytes(200_000)
    chunks, stable = plan(data)
    previous = as_previous(chunks, stable)
    cut = chunks[0].size
    store = {c.digest: c.data for c in chunks if c.data is not None}
    for b in range(256):
        for new in (
            data[:cut] + bytes([b]) + data[cut + 1 :],  # edit just past the boundary
            data[:cut] + bytes([b]) + rng.randbytes(30_000),  # truncate there, then append
        ):
            planned, n_stable = plan(new, previous)
            for c in planned:
                if c.data is not None:
                    store.setdefault(c.digest, c.data)
            assert reassemble(planned, store) == new
            assert [store[c.digest] for c in planned[:n_stable]] == fastcdc(new)[:n_stable]
