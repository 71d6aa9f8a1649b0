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


def folder(key: str) -> str:
    return key.split("/", 1)[0]


def test_a_group_is_dropped_alone_and_its_bytes_freed() -> None:
    cache: LRU[str, bytes] = LRU(100, max_bytes=12, group=folder)
    for key in ("t1/a", "t1/b", "t2/a"):
        cache.put(key, b"1111", 4)
    assert cache.discard_group("t1") is True
    assert cache.get("t1/a") is None and cache.get("t1/b") is None
    cache.put("t3/a", b"3333", 4)
    cache.put("t3/b", b"3333", 4)  # fits only because t1's 8 bytes were freed
    assert cache.get("t2/a") == b"1111" and cache.get("t3/b") == b"3333"
    assert cache.discard_group("t1") is False  # nothing left to drop
    assert cache.discard_group("never-cached") is False


def test_evicted_and_expired_entries_leave_their_group() -> None:
    clock = Clock()
    cache: LRU[str, bool] = LRU(2, ttl=5.0, clock=clock, group=folder)
    cache.put("t1/a", True)
    cache.put("t2/a", True)
    cache.put("t3/a", True)  # evicts t1/a, the least recently used
    assert cache.discard_group("t1") is False
    clock.now = 6.0
    assert "t2/a" not in cache  # expired, and dropped from its group on lookup
    assert cache.discard_group("t2") is False
    assert cache.discard_group("t3") is True  # expired but still held: dropped now
