"""Re-encrypting a thread under a new version of its data key (issue 24).

For a data key that may have leaked: the thread keeps its id and its whole history
(every checkpoint, namespace, parent link, metadata and pending write), sealed
under a fresh data key, and the old key is shredded.

Theory of operation (:func:`reencrypt_thread`):

1. **A new version.** Version ``n + 1`` of the thread's key item is created
   (``datakeys.create``: a conditional put). From then on savers that load the
   thread's keys get both versions and seal under the newest; every object names
   the version that sealed it, so each opens with its own.
2. **Re-sealing, a batch of checkpoints at a time**, with the code that copies a
   thread under encryption (``reseal.copy_sealed``, source and target the same
   thread): chunks are read, named under the new key and stored again, chunk items
   as chunk items and the others as loose blobs, chunk lists and large bodies too
   (uploaded); only then are the batch's index items rewritten in place (same
   keys). A reader sees the old item (its objects, sealed under ``n``, still exist)
   or the new one (its objects exist already). Each item is put only if it was not
   updated since it was read (``index.Replace``).
3. **Checking.** The thread's items are read again; any checkpoint or pending write
   not sealed under ``n + 1`` (written meanwhile by a run that still had ``n``)
   is re-sealed again, up to :data:`ROUNDS` times, else
   :class:`~langgraph_s3.errors.ReencryptionError` and nothing is shredded.
4. **Shredding.** The key items of the older versions are deleted. What is still
   sealed under them (the old bodies, blobs, chunk items and chunk lists, now
   unreferenced) no longer opens, and ``gc`` removes it.

It is idempotent: a run that stopped midway is finished by the next one (a thread
with two versions resumes at step 2 with the newest). Its rule is the one of
``delete_thread``: run it while no run writes to the thread, since a saver that
loaded the key before step 1 seals under ``n`` for up to ``key_ttl``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langgraph_s3 import codec
from langgraph_s3.core import datakeys, schema
from langgraph_s3.core.config import thread_value
from langgraph_s3.core.datakeys import KeyScope, thread_key
from langgraph_s3.core.index import Item, Replace
from langgraph_s3.core.paging import delete_items, thread_items
from langgraph_s3.core.reseal import copy_sealed
from langgraph_s3.errors import (
    DataKeyError,
    InvalidConfigError,
    KeyScopeError,
    ReencryptionError,
)
from langgraph_s3.operations import Flow, perform_all
from langgraph_s3.sealing import sealed_key_id

if TYPE_CHECKING:
    from langgraph_s3.core.sealed import Encryption
    from langgraph_s3.core.state import SaverCore

#: Passes over the thread after the first that may find items sealed meanwhile under
#: the old key before re-encryption gives up.
ROUNDS = 3


@dataclass
class Reencrypted:
    """What re-encrypting a thread did.

    Attributes:
        thread_id: The thread.
        version: The version of its data key that now seals it (None: the thread
            has nothing stored).
        checkpoints: Checkpoints re-sealed (bodies and their pending writes).
        objects: Objects uploaded: blobs, chunk lists and bodies too large for the
            index.
        chunk_items: Chunk items written (chunks stored in the index).
        shredded: The versions of its data key deleted.
    """

    thread_id: str
    version: int | None = None
    checkpoints: int = 0
    objects: int = 0
    chunk_items: int = 0
    shredded: tuple[int, ...] = ()


def reencrypt_thread(core: SaverCore, thread_id: str) -> Flow[Reencrypted]:
    """Seal everything of ``thread_id`` under a new data key and shred the old one.

    Returns:
        What was done; ``Reencrypted(version=None)`` for a thread with nothing stored.

    Raises:
        InvalidConfigError: The saver has no ``encryption=``.
        DataKeyError: The thread has items but no data key (shredded, or not
            written with encryption).
        KeyScopeError: The thread is under its tenant's data key (re-encrypting a
            tenant is not built).
        ReencryptionError: Runs kept writing under the old key; nothing was
            shredded.
    """
    enc = _encryption(core)
    thread_id = thread_value(thread_id)
    scope = KeyScope.thread(thread_id)
    stored = yield from datakeys.versions(core, scope)
    if not stored:
        items = yield from thread_items(core, thread_id, keys_only=True)
        if not items:
            return Reencrypted(thread_id)
        if any(schema.is_tenant_ref(i) for i in items):
            raise KeyScopeError(
                f"thread {thread_id!r} is sealed under its tenant's data key, which its "
                "tenant's other threads share: re-encrypting a tenant is not built yet. "
                "Copy the thread to a new id under a saver without tenant_of (it gets a "
                "key of its own) and delete this one",
                key_id=thread_id,
            )
        raise DataKeyError(
            f"thread {thread_id!r} has no data key, so it cannot be re-encrypted: it was "
            "shredded, or written without encryption (copy it with "
            "langgraph_s3.archive.copy_threads to a saver with encryption=)",
            key_id=thread_id,
        )
    # Two versions or more: a run that stopped midway; finish it with the newest.
    target = stored[0].version + (1 if len(stored) == 1 else 0)
    if len(stored) == 1:
        yield from datakeys.create(core, enc.ring, scope, target)
    folder = core.layout.thread_prefix(thread_id)
    enc.stale(folder)  # not dropped: a read of this saver may be using it
    # Value entries cached for re-use name blobs under the old key.
    core.caches.forget_thread(thread_id, folder)
    yield from thread_key(core, thread_id)  # every version; the new one seals
    done = Reencrypted(thread_id, target)
    yield from _reseal(core, done, str(target))
    old = tuple(s.version for s in stored if s.version != target)
    yield from _shred(core, enc, scope, old)
    done.shredded = old
    return done


def _shred(core: SaverCore, enc: Encryption, scope: KeyScope, old: Sequence[int]) -> Flow[None]:
    """Delete the key items of versions ``old``; nothing here keeps them either."""
    pk = schema.s(scope.pk(core))
    yield from delete_items(
        core, [{schema.PK: pk, schema.SK: schema.s(schema.key_sk(v))} for v in old]
    )
    enc.stale(core.layout.thread_prefix(scope.id))
    for v in old:
        enc.ring.forget(scope.context(core, v))


def _encryption(core: SaverCore) -> Encryption:
    if core.encryption is None:
        raise InvalidConfigError(
            "re-encrypting a thread needs a saver with encryption= (the key ring its "
            "data key is wrapped with); without it nothing is sealed"
        )
    return core.encryption


def _reseal(core: SaverCore, done: Reencrypted, target: str) -> Flow[None]:
    """Re-seal what is not under ``target`` until a read of the thread finds nothing."""
    # Digests of the bodies this run stored in S3: their key id is not in the item.
    written: set[str] = set()

    def write(batch: list[Item], uploaded: int, chunks: int) -> Flow[None]:
        # Each item only if unchanged since it was read: one a run updated meanwhile
        # keeps its new records, and the next pass re-seals it.
        put = yield from perform_all([Replace(core.table, i) for i in batch])
        rows = [
            schema.parse_row(i)
            for i, ok in zip(batch, put, strict=True)
            if ok and schema.is_checkpoint_item(i)
        ]
        done.checkpoints += len(rows)
        done.objects += uploaded
        done.chunk_items += chunks
        written.update(r.digest for r in rows if r.body is None)

    for round_ in range(ROUNDS + 1):
        items = yield from thread_items(core, done.thread_id)
        todo = stale_items(items, target, written)
        if not todo:
            return
        if round_ == ROUNDS:
            break
        yield from copy_sealed(core, done.thread_id, done.thread_id, todo, each=write)
    raise ReencryptionError(
        f"thread {done.thread_id!r} kept getting checkpoints or pending writes sealed "
        f"under its old data key while it was re-encrypted ({len(todo)} item(s) after "
        f"{ROUNDS} passes): a run is writing to it. Nothing was shredded; stop the runs "
        "of this thread and re-encrypt it again (it goes on where this run stopped)",
        thread_id=done.thread_id,
    )


def stale_items(items: Sequence[Item], target: str, written: set[str]) -> list[Item]:
    """The checkpoint items (and their writes items) of which something is not sealed
    under data key ``target``: a body or a record naming another key, or a body in S3
    this run did not store (its key id is in the object only).

    Writes items of checkpoints that never committed are left out: they are garbage
    for ``gc``, and nothing can be re-sealed for them (``copy_sealed`` skips them).
    """
    checkpoints = {schema.checkpoint_ref(i): i for i in items if schema.is_checkpoint_item(i)}
    stale: set[tuple[str, str]] = set()
    for ref, item in checkpoints.items():
        row = schema.parse_row(item)
        if row.body is None:
            if row.digest not in written:
                stale.add(ref)
        elif _key_id(row.body, item[schema.SK]["S"]) != target:
            stale.add(ref)
    for item in items:
        if not schema.is_writes_item(item):
            continue
        ref = schema.checkpoint_ref(item)
        if ref not in checkpoints or ref in stale:
            continue
        w = schema.parse_writes(item, encrypted=True)
        if w.plain or any(sealed_key_id(d[1:], where=at) != target for _, d, at in w.sealed):
            stale.add(ref)
    return [
        i
        for i in items
        if (schema.is_checkpoint_item(i) or schema.is_writes_item(i))
        and schema.checkpoint_ref(i) in stale
    ]


def _key_id(body: bytes, where: str) -> str:
    return sealed_key_id(codec.sealed_payload(body, key=where), where=where)
