"""Was this thread deleted and started again since this saver knew it?

A saver keeps what it knows of a thread (``core/state.py`` ``Caches``: blobs that
exist, chunk lists, stored values; with encryption, the thread's data key) for a
while. Another saver may delete the thread and start it again under the same id (a
new run, or a copy onto it); what the first one knew is then wrong: blobs were
deleted with the old thread, and the new one has a new key. A saver learns it in two
ways:

* it finds the thread empty (a read of its latest finds no checkpoint, or it puts a
  checkpoint without parent): :func:`restarted`;
* it reads a checkpoint item of another incarnation than the one it knew
  (``schema.INCARNATION``: drawn when a run starts the thread, carried by its later
  checkpoints, new for a copy): :func:`incarnation`.

Either way it forgets what it cached of the thread and reads its key again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph_s3.core import schema
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.operations import Flow

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore


def restarted(core: SaverCore, thread_id: str) -> None:
    """Forget what this saver knows of ``thread_id``: the thread has no checkpoint (a
    read of its latest found none, or a checkpoint without parent is put), so another
    saver may have deleted it since. A new run must not name blobs deleted with it
    (which the caches vouch for), nor seal under its shredded key (the next
    :func:`thread_key` reads the key items again). Costs nothing for a thread this
    saver has not touched (a new one)."""
    enc = core.encryption
    folder = core.layout.thread_prefix(thread_id)
    if enc is not None and enc.keys.get(folder) is not None:
        enc.stale(folder)
    core.caches.forget_thread(thread_id, folder)
    core.caches.incarnations.pop(thread_id)


def incarnation(core: SaverCore, thread_id: str, found: bytes | None) -> bool:
    """Take note of the incarnation a checkpoint item of ``thread_id`` carries
    (``schema.INCARNATION``); True if it is not the one this saver knew: the thread
    was deleted and started again elsewhere since (a new run, or a copy onto its id),
    so what this saver cached of it is forgotten and its loaded key, if any, is read
    again (:func:`restarted`): blobs deleted with the old thread must not be named,
    nor a new key's data opened with the old one.

    A saver that knows no incarnation of the thread (items before 0.4.1, or it never
    met one) forgets its caches of the thread too, which costs nothing when it has
    none, but keeps its key: the read that found the item has just loaded it.
    """
    if found is None:
        return False
    known = core.caches.incarnations.get(thread_id)
    if known == found:
        return False
    if known is None:
        core.caches.forget_thread(thread_id, core.layout.thread_prefix(thread_id))
    else:
        restarted(core, thread_id)
    core.caches.incarnations.put(thread_id, found)
    return known is not None


def incarnation_in(
    core: SaverCore, thread_id: str, items: Sequence[Mapping[str, Any]]
) -> Flow[None]:
    """:func:`incarnation` for a flow that reads a thread's items itself (a copy's
    source, a prune): the first checkpoint item's, and the thread's key read again if
    it is not the one this saver knew."""
    found = next(
        (i[schema.INCARNATION]["B"] for i in items if schema.INCARNATION in i),
        None,
    )
    if incarnation(core, thread_id, found):
        yield from thread_key(core, thread_id)


def incarnation_of_put(core: SaverCore, thread_id: str) -> bytes:
    """The incarnation a checkpoint of ``thread_id`` is put with: the one this saver
    knows (read or written last), or a new one for a thread it starts (or does not
    know: then savers that knew another forget their caches, which is only slower)."""
    known = core.caches.incarnations.get(thread_id)
    if known is None:
        known = os.urandom(4)
        core.caches.incarnations.put(thread_id, known)
    return known
