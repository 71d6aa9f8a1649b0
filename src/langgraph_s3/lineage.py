"""What this saver believes about the head of each ``(thread, ns)``.

This decides which writes must be conditional (see ``docs/concurrency.md``):

* ``get_tuple`` without a ``checkpoint_id`` *observes* the latest checkpoint P
  (or an empty thread). The next ``put`` whose parent is P is a continuation: it
  commits only if P is still the head, so two runs that resumed from the same
  latest checkpoint cannot both commit.
* Each checkpoint committed as a continuation is observed in turn, so the rest of
  that run stays protected.
* A ``put`` from a checkpoint that was not observed as the latest (replay,
  ``update_state`` or a fork from an earlier ``checkpoint_id``) is a deliberate
  fork and is never refused.

Observations are counted (two concurrent runs in one process each consume one)
and expire after ``window`` seconds, so a snapshot read long ago can still be
used to fork.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

EMPTY = ""  # stands for "the thread had no checkpoint" (checkpoint ids are never empty)

_Key = tuple[str, str, str]


class Lineage:
    """Counts observed heads; thread-safe; bounded."""

    def __init__(
        self,
        window: float = 900.0,
        max_entries: int = 20_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._window = window
        self._max = max_entries
        self._clock = clock
        self._seen: OrderedDict[_Key, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _live(self, key: _Key) -> list[float]:
        now = self._clock()
        stamps = [t for t in self._seen.get(key, ()) if now - t < self._window]
        if stamps:
            self._seen[key] = stamps
        else:
            self._seen.pop(key, None)
        return stamps

    def observe(self, thread_id: str, ns: str, checkpoint_id: str | None) -> None:
        key = (thread_id, ns, checkpoint_id or EMPTY)
        with self._lock:
            stamps = self._live(key)
            stamps.append(self._clock())
            self._seen[key] = stamps
            self._seen.move_to_end(key)
            while len(self._seen) > self._max:
                self._seen.popitem(last=False)

    def is_observed(self, thread_id: str, ns: str, parent_id: str | None) -> bool:
        with self._lock:
            return bool(self._live((thread_id, ns, parent_id or EMPTY)))

    def consume(self, thread_id: str, ns: str, parent_id: str | None) -> None:
        with self._lock:
            key = (thread_id, ns, parent_id or EMPTY)
            stamps = self._live(key)
            if stamps:
                stamps.pop(0)
                if not stamps:
                    self._seen.pop(key, None)

    def committed(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        """A continuation this saver committed is the new head: observe it."""
        self.observe(thread_id, ns, checkpoint_id)

    def forget_thread(self, thread_id: str) -> None:
        with self._lock:
            for key in [k for k in self._seen if k[0] == thread_id]:
                del self._seen[key]
