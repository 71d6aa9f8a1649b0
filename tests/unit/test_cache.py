"""``cache.LRU``: bounded by entries, bytes and age, least recently used out first."""

from __future__ import annotations

from langgraph_s3.cache import LRU


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_least_recently_used_entry_is_evicted_first() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None
    assert cache.get("a") == 1 and cache.get("c") == 3


def test_byte_bound_evicts_until_the_total_fits_and_refuses_what_never_fits() -> None:
    cache: LRU[str, bytes] = LRU(100, max_bytes=10)
    cache.put("a", b"aaaa", 4)
    cache.put("b", b"bbbb", 4)
    cache.put("c", b"cccc", 4)  # 12 bytes: "a" goes
    assert cache.get("a") is None and cache.get("b") == b"bbbb"
    cache.put("huge", b"h" * 11, 11)  # larger than the bound: not cached, evicts nothing
    assert cache.get("huge") is None and cache.get("c") == b"cccc"


def test_replacing_a_key_counts_its_bytes_once() -> None:
    cache: LRU[str, bytes] = LRU(100, max_bytes=10)
    for _ in range(5):
        cache.put("a", b"aaaa", 4)
    cache.put("b", b"bbbbbb", 6)  # 4 + 6 = 10 fits only if "a" was counted once
    assert cache.get("a") == b"aaaa" and cache.get("b") == b"bbbbbb"


def test_entries_older_than_ttl_are_not_trusted() -> None:
    clock = Clock()
    cache: LRU[str, bool] = LRU(10, ttl=5.0, clock=clock)
    cache.put("k", True)
    clock.now = 5.0
    assert "k" in cache
    clock.now = 5.1
    assert "k" not in cache and cache.get("k") is None
    cache.put("k", True)  # put again: trusted afresh
    assert "k" in cache


def test_pop_and_discard_free_their_bytes() -> None:
    cache: LRU[str, bytes] = LRU(100, max_bytes=8)
    cache.put("t1/a", b"1111", 4)
    cache.put("t2/a", b"2222", 4)
    cache.pop("t1/a")
    cache.pop("never-cached")
    cache.put("t3/a", b"3333", 4)  # fits only because pop freed 4 bytes
    assert cache.get("t2/a") == b"2222" and cache.get("t3/a") == b"3333"
    cache.discard(lambda k: k.startswith("t2/"))
    cache.put("t4/a", b"4444", 4)
    assert cache.get("t2/a") is None
    assert cache.get("t3/a") == b"3333" and cache.get("t4/a") == b"4444"
