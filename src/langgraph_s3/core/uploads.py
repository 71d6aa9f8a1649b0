"""Upload sharing: one upload per blob at a time, whoever else needs it waits.

LangGraph hands a new value to the saver twice at once (a task's pending write and
the next checkpoint). The first flow to plan a blob's upload owns it; another flow
that needs the same blob meanwhile waits on the owner's future
(``WaitUpload``) instead of sending the same bytes again, and uploads it itself if
the owner's upload failed. This is the only state in the core that two flows
touch at the same time, hence the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future


class SharedUploads:
    """The uploads in progress, by key."""

    def __init__(self) -> None:
        self._inflight: dict[str, Future[bool]] = {}
        self._lock = threading.Lock()

    def claim(
        self, keys: Iterable[str], skip: Callable[[str], bool]
    ) -> tuple[dict[str, Future[bool]], dict[str, Future[bool]]]:
        """Split ``keys`` (less those ``skip`` rejects) into the uploads this flow now
        owns and those another flow is already doing: key -> its ``done`` future."""
        mine: dict[str, Future[bool]] = {}
        theirs: dict[str, Future[bool]] = {}
        with self._lock:
            for key in keys:
                if skip(key):
                    continue
                if key in self._inflight:
                    theirs[key] = self._inflight[key]
                else:
                    mine[key] = self._inflight[key] = Future()
        return mine, theirs

    def release(
        self,
        mine: dict[str, Future[bool]],
        uploaded: Callable[[str], None],
        failed: Callable[[str], None],
    ) -> None:
        """End this flow's uploads, calling ``uploaded`` or ``failed`` for each key.

        The callbacks run under the lock, so no other flow claims a key between its
        upload ending and the caches learning the outcome. A future the driver never
        resolved (the flow stopped early) counts as failed and is resolved so,
        waking anyone who waits on it.
        """
        with self._lock:
            for key, fut in mine.items():
                if self._inflight.get(key) is fut:
                    del self._inflight[key]
                if not fut.done():
                    fut.set_result(False)
                (uploaded if fut.result() else failed)(key)
