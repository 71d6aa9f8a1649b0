"""Bounded, thread-safe caches.

Content-addressed objects never change, so caching them is always safe; the only
question is memory, which the byte bound answers.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """Least-recently-used map bounded by entry count, total ``size`` and optionally age.

    ``ttl`` bounds how long an entry is trusted: the saver uses it for what it
    *knows exists* in the bucket, because garbage collection may remove an object
    that no checkpoint references any more (see docs/retention.md).
    """

    def __init__(
        self,
        max_entries: int,
        max_bytes: int | None = None,
        *,
        ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._data: OrderedDict[K, tuple[V, int, float]] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._ttl = ttl
        self._clock = clock
        self._bytes = 0
        self._lock = threading.Lock()
        #: How many lookups found a fresh entry (read by tracing).
        self.hits = 0

    def _fresh(self, key: K) -> tuple[V, int, float] | None:
        hit = self._data.get(key)
        if hit is None:
            return None
        if self._ttl is not None and self._clock() - hit[2] > self._ttl:
            self._bytes -= self._data.pop(key)[1]
            return None
        return hit

    def get(self, key: K) -> V | None:
        with self._lock:
            hit = self._fresh(key)
            if hit is None:
                return None
            self.hits += 1
            self._data.move_to_end(key)
            return hit[0]

    def __contains__(self, key: K) -> bool:
        with self._lock:
            found = self._fresh(key) is not None
            self.hits += found
            return found

    def put(self, key: K, value: V, size: int = 0) -> None:
        if self._max_bytes is not None and size > self._max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._data[key] = (value, size, self._clock())
            self._bytes += size
            while len(self._data) > self._max_entries or (
                self._max_bytes is not None and self._bytes > self._max_bytes
            ):
                _, (_, evicted, _) = self._data.popitem(last=False)
                self._bytes -= evicted

    def pop(self, key: K) -> None:
        """Forget ``key`` (no error if it is not cached)."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]

    def discard(self, predicate: Callable[[K], bool]) -> None:
        """Drop every key for which ``predicate`` is true (after a thread is deleted)."""
        with self._lock:
            for key in [k for k in self._data if predicate(k)]:
                self._bytes -= self._data.pop(key)[1]
