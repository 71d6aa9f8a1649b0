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

    ``group`` names the group of a key (the saver: its thread), so that
    :meth:`discard_group` drops one thread's entries in time proportional to their
    number, not to the whole cache's: a saver asks for it on every new thread.
    """

    def __init__(
        self,
        max_entries: int,
        max_bytes: int | None = None,
        *,
        ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        group: Callable[[K], Hashable] | None = None,
    ) -> None:
        self._data: OrderedDict[K, tuple[V, int, float]] = OrderedDict()
        self._group = group
        self._groups: dict[Hashable, set[K]] = {}
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
            self._remove(key)
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
            self._remove(key)
            self._data[key] = (value, size, self._clock())
            self._bytes += size
            if self._group is not None:
                self._groups.setdefault(self._group(key), set()).add(key)
            while len(self._data) > self._max_entries or (
                self._max_bytes is not None and self._bytes > self._max_bytes
            ):
                self._remove(next(iter(self._data)))

    def pop(self, key: K) -> None:
        """Forget ``key`` (no error if it is not cached)."""
        with self._lock:
            self._remove(key)

    def discard(self, predicate: Callable[[K], bool]) -> None:
        """Drop every key for which ``predicate`` is true."""
        with self._lock:
            for key in [k for k in self._data if predicate(k)]:
                self._remove(key)

    def discard_group(self, group: Hashable) -> bool:
        """Drop every key of ``group`` (needs ``group=``); True if there was one."""
        with self._lock:
            keys = list(self._groups.get(group, ()))
            for key in keys:
                self._remove(key)
            return bool(keys)

    def _remove(self, key: K) -> None:
        old = self._data.pop(key, None)
        if old is None:
            return
        self._bytes -= old[1]
        if self._group is not None:
            group = self._group(key)
            members = self._groups[group]
            members.discard(key)
            if not members:
                del self._groups[group]
