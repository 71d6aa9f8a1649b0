"""A thread's (or tenant's) data key in the index: create it once, read it, shred it.

Client-side encryption (issue 24) seals a scope's values under one data key, kept
wrapped in an index item beside the scope's other items: in the thread's partition
(``pk`` = the thread's), or for a tenant in a partition of its own
(``Layout.tenant_pk``). Each version of the key is an item of its own, sort key
``schema.key_sk(version)``, holding the wrapped key (``wk``), its version (``kv``)
and what wrapped it (``kek``: the KMS key ARN or the static ring's key id).

* **Creating** puts the item only if it does not exist (``PutNew``): two writers of a
  new thread each generate a key, one item wins, and the loser unwraps the winner's
  instead of its own, so both seal under the same key. A thread's version 1 (or its
  tenant reference) is put only if the thread has no item of the other kind either
  (:mod:`langgraph_s3.core.scopes`).
* **Reading** takes the newest version (one consistent query) or a given one; a
  saver loads every version (the same one query): objects name the version that
  sealed them, and there are two only while the thread is re-encrypted
  (:mod:`langgraph_s3.core.reencrypt`).
* **Shredding** deletes every version: whatever was sealed under them, in every
  copy, can no longer be opened.
* **Tenants.** A writer whose ``Encryption.tenant_of`` names a tenant for a new thread
  puts a *tenant reference* in the thread's partition instead of a key
  (``schema.TENANT_REF_SK``, naming the tenant in ``tn``); it sorts after every key
  version, so the one query that reads a thread's newest key item finds it, and any
  reader follows it to the tenant's key: readers need no ``tenant_of``.

The encryption context of a wrapped key names the prefix (when there is one), the
thread or tenant, and the key version, so a key item moved to another thread or put
back under another version does not unwrap, and CloudTrail and key policies see
which thread a key belongs to. It is rebuilt from where the item was found, never
read from the item.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from langgraph_s3.core import schema, scopes
from langgraph_s3.core.index import Item, PutNew, Query
from langgraph_s3.core.paging import delete_items, read_all
from langgraph_s3.core.scopes import check_scope, referenced_tenant, tenant_ref
from langgraph_s3.core.sealed import KeySet
from langgraph_s3.errors import DataKeyError
from langgraph_s3.immutable import immutable
from langgraph_s3.operations import Flow, WaitKey, perform
from langgraph_s3.sealing.cipher import DataKey
from langgraph_s3.sealing.kms import KmsKeyRing
from langgraph_s3.sealing.ring import StaticKeyRing

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: A key ring the flows here accept.
KeyRing = StaticKeyRing | KmsKeyRing

# Encryption context keys (KMS condition keys: kms:EncryptionContext:thread, ...).
CONTEXT_PREFIX = "prefix"
CONTEXT_VERSION = "key-version"


@immutable
class KeyScope:
    """Whom a data key belongs to: one thread, or one tenant (its threads share it)."""

    kind: Literal["thread", "tenant"]
    id: str

    @classmethod
    def thread(cls, thread_id: str) -> KeyScope:
        return cls("thread", thread_id)

    @classmethod
    def tenant(cls, tenant_id: str) -> KeyScope:
        return cls("tenant", tenant_id)

    def pk(self, core: SaverCore) -> str:
        """The partition its key items live in."""
        if self.kind == "thread":
            return core.layout.pk(self.id)
        return core.layout.tenant_pk(self.id)

    def names(self, core: SaverCore) -> dict[str, str]:
        """The encryption context pairs that name the scope (not the version)."""
        out: dict[str, str] = {self.kind: self.id}
        if core.layout.prefix:  # KMS refuses empty values; no prefix is no pair
            out[CONTEXT_PREFIX] = core.layout.prefix
        return out

    def context(self, core: SaverCore, version: int) -> dict[str, str]:
        """The encryption context of version ``version`` of the scope's key."""
        return {**self.names(core), CONTEXT_VERSION: str(version)}

    def describe(self) -> str:
        return f"{self.kind} {self.id!r}"


@immutable
class KeyItem:
    """One version of a scope's data key, as stored."""

    version: int
    wrapped: bytes
    kek: str

    @property
    def key_id(self) -> str:
        """The data key's id, written into every object it seals: its version."""
        return str(self.version)


def key_item(core: SaverCore, scope: KeyScope, version: int, wrapped: bytes, kek: str) -> Item:
    """The index item of version ``version`` of ``scope``'s data key."""
    item: Item = {
        schema.PK: schema.s(scope.pk(core)),
        schema.SK: schema.s(schema.key_sk(version)),
        schema.KEY_VERSION: schema.n(version),
        schema.WRAPPED: schema.b(wrapped),
        schema.KEK: schema.s(kek),
        schema.AT: schema.n(core.now_ms()),
    }
    item[schema.THREAD if scope.kind == "thread" else schema.TENANT] = schema.s(scope.id)
    return item


def parse_key_item(item: Mapping[str, Any], scope: KeyScope) -> KeyItem:
    """A stored key item, checked for its three attributes.

    Raises:
        DataKeyError: The item lacks one (it was altered).
    """
    try:
        return KeyItem(
            int(item[schema.KEY_VERSION]["N"]),
            bytes(item[schema.WRAPPED]["B"]),
            str(item[schema.KEK]["S"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        sk = item.get(schema.SK, {}).get("S", "?")
        raise DataKeyError(
            f"the data key item {sk!r} of {scope.describe()} is damaged (no "
            f"{exc} attribute, or the wrong type): it was altered after it was written; "
            "restore it from a backup, or nothing sealed under it can be opened",
            key_id=sk,
        ) from exc


def current(core: SaverCore, scope: KeyScope) -> Flow[KeyItem | None]:
    """The newest version of the scope's data key, or None if it has none."""
    newest = yield from _newest(core, scope)
    return None if newest is None else parse_key_item(newest, scope)


def _newest(core: SaverCore, scope: KeyScope) -> Flow[Mapping[str, Any] | None]:
    """The scope's newest key item as stored (for a thread: its tenant reference, if any)."""
    page = yield from perform(
        Query(core.table, scope.pk(core), prefix=schema.KEY_SK_PREFIX, newest_first=True, limit=1)
    )
    return page.items[0] if page.items else None


def versions(core: SaverCore, scope: KeyScope) -> Flow[list[KeyItem]]:
    """Every version of the scope's data key, newest first (one consistent query)."""
    items = yield from _key_items(core, scope)
    return [parse_key_item(item, scope) for item in items if not schema.is_tenant_ref(item)]


def _key_items(core: SaverCore, scope: KeyScope) -> Flow[Sequence[Mapping[str, Any]]]:
    """The scope's key items as stored, newest first (a thread's reference first)."""
    return (
        yield from read_all(
            Query(core.table, scope.pk(core), prefix=schema.KEY_SK_PREFIX, newest_first=True)
        )
    )


def version(core: SaverCore, scope: KeyScope, number: int) -> Flow[KeyItem | None]:
    """Version ``number`` of the scope's data key, or None if there is no such item."""
    # A consistent Query of that one key, not a GetItem: the runtime policy of
    # infra/storage.yaml grants the saver Query and no GetItem.
    sk = schema.key_sk(number)
    page = yield from perform(Query(core.table, scope.pk(core), between=(sk, sk)))
    return parse_key_item(page.items[0], scope) if page.items else None


def unwrap(core: SaverCore, ring: KeyRing, scope: KeyScope, stored: KeyItem) -> Flow[DataKey]:
    """The data key a key item holds, unwrapped for the context of where it was found."""
    context = scope.context(core, stored.version)
    if isinstance(ring, KmsKeyRing):
        return (
            yield from ring.unwrap(stored.wrapped, context, key_id=stored.key_id, kek=stored.kek)
        )
    return ring.unwrap(stored.wrapped, context, key_id=stored.key_id, kek=stored.kek)


def create(core: SaverCore, ring: KeyRing, scope: KeyScope, number: int = 1) -> Flow[DataKey]:
    """Generate version ``number`` of the scope's data key and store it, unless another
    writer stored that version first: then its key (both writers end with one key).

    Raises:
        DataKeyError: The winner's item was deleted before it could be read (the scope
            was shredded meanwhile; retry to start it again), or the thread has a
            tenant reference instead (:func:`thread_key` follows it).
    """
    key = yield from _made(core, ring, scope, number)
    if key is not None:
        return key
    winner = yield from version(core, scope, number)
    if winner is None:
        raise DataKeyError(
            f"another writer created data key {number} of {scope.describe()} first, and it "
            "was deleted before it could be read (shredded meanwhile: retry), or the thread "
            "is sealed under its tenant's key (a tenant reference): load it with thread_key",
            key_id=str(number),
        )
    return (yield from unwrap(core, ring, scope, winner))


def _made(core: SaverCore, ring: KeyRing, scope: KeyScope, number: int) -> Flow[DataKey | None]:
    """Generate version ``number`` of the scope's data key and store it unless another
    writer stored that version first, or, for a thread's version 1, started the thread
    under its tenant's key (:func:`scopes.start`). The key, or None if not stored."""
    context = scope.context(core, number)
    if isinstance(ring, KmsKeyRing):
        key, wrapped = yield from ring.generate(context, key_id=str(number))
    else:
        key, wrapped = ring.generate(context, key_id=str(number))
    item = key_item(core, scope, number, wrapped, ring.wrapping_key)
    if scope.kind == "thread" and number == 1:
        stored = yield from scopes.start(core, item, schema.TENANT_REF_SK)
    else:
        stored = yield from perform(PutNew(core.table, item))
    return key if stored else None


_create = create  # thread_key's own ``create`` is a flag


def key_for(core: SaverCore, ring: KeyRing, scope: KeyScope) -> Flow[DataKey]:
    """The scope's current data key: read and unwrapped, or created (version 1)."""
    stored = yield from current(core, scope)
    if stored is None:
        return (yield from create(core, ring, scope))
    return (yield from unwrap(core, ring, scope, stored))


def shred(core: SaverCore, ring: KeyRing | None, scope: KeyScope) -> Flow[int]:
    """Delete every version of the scope's data key (crypto-shredding).

    Whatever was sealed under them, in this bucket, its replicas, old versions and
    exports, can no longer be opened. The ring forgets the keys it cached.

    Returns:
        How many key items were deleted.
    """
    items = yield from read_all(
        Query(core.table, scope.pk(core), prefix=schema.KEY_SK_PREFIX, keys_only=True)
    )
    yield from delete_items(core, schema.keys_of(items))
    if ring is not None:  # None: an administrator's saver without encryption
        ring.forget(scope.names(core))
    return len(items)


# ------------------------------------------------------- the saver's thread keys
def thread_key(core: SaverCore, thread_id: str, *, create: bool = False) -> Flow[DataKey | None]:
    """Load the data key of ``thread_id`` for the code that seals and opens
    (:func:`langgraph_s3.core.sealed.key_of`); None without encryption, or if the
    thread has no key and ``create`` is false (then opening its sealed data raises
    :class:`~langgraph_s3.errors.DataKeyError`).

    A key loaded less than ``key_ttl`` ago is used as it is: a superstep costs no
    request. Otherwise the thread's newest key item is read (one ``Query``; not by a
    writer a read told there is none, ``Encryption.absent``): its own wrapped key,
    unwrapped (a KMS key ring asks KMS unless it has it cached), or a tenant
    reference, whose tenant's key is loaded as :func:`tenant_key` does.
    ``create``, a writer's call, makes what the thread lacks: version 1 of its own key,
    or, if ``Encryption.tenant_of`` names a tenant, the reference (and the tenant's key
    if it has none); two writers agree on one (:func:`create`).

    Raises:
        KeyScopeError: The saver has ``tenant_of`` and the thread's stored scope is not
            the one it names.
    """
    enc = core.encryption
    if enc is None:
        return None
    folder = core.layout.thread_prefix(thread_id)
    check = create and enc.tenant_of is not None
    if check and folder not in enc.scopes:
        enc.stale(folder)  # its scope was evicted: load it again to check it
    key = yield from _cached(
        core, folder, thread_id, lambda at: _load_thread(core, thread_id, create, at)
    )
    if check and key is not None:
        check_scope(thread_id, enc.tenant(thread_id), enc.scopes.get(folder))
    return key


def tenant_key(core: SaverCore, tenant: str, *, create: bool = False) -> Flow[DataKey | None]:
    """The tenant's data key (None without encryption, or if it has none and ``create``
    is false), cached like a thread's under the tenant's partition key."""
    enc = core.encryption
    if enc is None:
        return None
    scope = KeyScope.tenant(tenant)
    return (
        yield from _cached(
            core, scope.pk(core), tenant, lambda at: _load(core, enc.ring, scope, create, at)
        )
    )


#: Loading a slot's keys: given when the load started (monotonic seconds), the keys
#: and when what they came from was read (None: no key).
_Load = Callable[[float], Flow[tuple[KeySet, float] | None]]


def _cached(core: SaverCore, slot: str, owner: str, load: _Load) -> Flow[DataKey | None]:
    """The newest key ``Encryption.keys`` holds for ``slot`` (a thread folder or a
    tenant's partition key) if fresh, else of ``load``'s, kept there as ``owner``'s."""
    enc = core.encryption
    assert enc is not None
    while True:
        started = time.monotonic()
        known = enc.fresh(slot, started)
        if known is not None:
            return known
        # One load per slot at a time: LangGraph starts a new thread with several
        # calls at once, and each would otherwise create (and pay for) a key.
        pending, mine = enc.claim(slot)
        if mine:
            break
        yield WaitKey(slot, pending)
    loaded: tuple[KeySet, float] | None = None
    try:
        loaded = yield from load(started)
        before = enc.keys.get(slot)
        if loaded is None:
            # No key (any more): a stale entry kept for flows in progress goes.
            if before is not None:
                enc.keys.pop(slot)
                core.caches.forget_thread(owner, slot)
            return None
        keys, at = loaded
        if before is not None and before[1].newest != keys.newest:
            # Re-encrypted, or shredded and started again (a new key with the same
            # version): cached value entries name blobs under the old key.
            core.caches.forget_thread(owner, slot)
        # Timed from before the read: a shred after it is seen within key_ttl.
        enc.keys.put(slot, (owner, keys, at))
    finally:
        enc.finish(slot, pending, loaded is not None)
    return keys.newest


def _load(
    core: SaverCore, ring: KeyRing, scope: KeyScope, create: bool, at: float
) -> Flow[tuple[KeySet, float] | None]:
    # Every version: the items of a thread being re-encrypted are sealed under two.
    stored = yield from versions(core, scope)
    if not stored:
        return (KeySet.of([(yield from _create(core, ring, scope))]), at) if create else None
    return (yield from _unwrap_all(core, ring, scope, stored)), at


def _unwrap_all(
    core: SaverCore, ring: KeyRing, scope: KeyScope, stored: Sequence[KeyItem]
) -> Flow[KeySet]:
    """Every version of a key, unwrapped (``stored`` newest first)."""
    keys = []
    for one in stored:
        keys.append((yield from unwrap(core, ring, scope, one)))
    return KeySet.of(keys)


def _load_thread(
    core: SaverCore, thread_id: str, writer: bool, at: float
) -> Flow[tuple[KeySet, float] | None]:
    """A thread's keys from its key items, its own or its tenant's (one Query), and
    when they were read (``at``, or the tenant's, if older); records whose they are in
    ``Encryption.scopes``. A writer of a thread without key items starts it
    (:func:`_start`); if another writer was first, it reads that one's items."""
    enc = core.encryption
    assert enc is not None
    scope = KeyScope.thread(thread_id)
    folder = core.layout.thread_prefix(thread_id)
    items = yield from _thread_items(core, scope, folder, writer)
    if not items and not writer:
        enc.absent.put(folder, at)
        return None
    if not items:
        started = yield from _start(core, thread_id, at)
        if started is not None:
            return started
        items = yield from _key_items(core, scope)  # the first writer's, whatever scope
        if not items:
            raise DataKeyError(
                f"another writer started thread {thread_id!r} first, and its key items were "
                "deleted before they could be read (deleted meanwhile): retry",
                key_id=schema.key_sk(1),
            )
    # What is stored, whatever tenant_of says: a writer checks it (thread_key).
    if not schema.is_tenant_ref(items[0]):
        enc.scopes.put(folder, "")
        stored = [parse_key_item(i, scope) for i in items]
        return (yield from _unwrap_all(core, enc.ring, scope, stored)), at
    tenant = referenced_tenant(items[0], thread_id)
    enc.scopes.put(folder, tenant)
    return (yield from _tenant_keys(core, tenant, at, create=writer))


def _start(core: SaverCore, thread_id: str, at: float) -> Flow[tuple[KeySet, float] | None]:
    """Start a thread without key items under the scope ``tenant_of`` names: version 1
    of its own key, or (after its tenant's key) its tenant reference, each only if the
    thread has neither (:func:`scopes.start`). None: another writer started it first."""
    enc = core.encryption
    assert enc is not None
    folder = core.layout.thread_prefix(thread_id)
    wanted = enc.tenant(thread_id)
    if wanted is None:
        key = yield from _made(core, enc.ring, KeyScope.thread(thread_id), 1)
        if key is None:
            return None
        enc.scopes.put(folder, "")
        return KeySet.of([key]), at
    keys = yield from _tenant_keys(core, wanted, at, create=True)  # before the reference
    if not (yield from scopes.start(core, tenant_ref(core, thread_id, wanted), schema.key_sk(1))):
        return None
    enc.scopes.put(folder, wanted)
    return keys


#: How long a writer takes a read's answer that a thread has no key items (seconds):
#: long enough for LangGraph's first put, which follows its read at once; short, since
#: what it then creates is checked against version 1 only (:func:`scopes.start`): a
#: thread started and re-encrypted meanwhile (version 2 alone) would get a second scope.
ABSENT_FOR = 2.0


def _thread_items(
    core: SaverCore, scope: KeyScope, folder: str, writer: bool
) -> Flow[Sequence[Mapping[str, Any]]]:
    """The thread's key items, newest first: every version (a thread being re-encrypted
    has two), then the reference, if any. A writer takes a read's answer of none
    (``Encryption.absent``, younger than :data:`ABSENT_FOR`) instead of asking again: with
    none it only starts the thread conditionally (:func:`scopes.start`: neither kind of
    key item may exist), and reads what another writer stored first."""
    enc = core.encryption
    assert enc is not None
    seen = enc.absent.get(folder)
    enc.absent.pop(folder)  # taken once: the load stores what it finds or makes
    if writer and seen is not None and time.monotonic() - seen < ABSENT_FOR:
        return []
    return (yield from _key_items(core, scope))


def _tenant_keys(
    core: SaverCore, tenant: str, at: float, *, create: bool
) -> Flow[tuple[KeySet, float] | None]:
    """The tenant's loaded keys (:func:`tenant_key`), to cache for one of its threads,
    timed from when the tenant's key items were read (or ``at``, if later): a shred
    of the tenant reaches the thread's slot within ``key_ttl`` too."""
    assert core.encryption is not None
    yield from tenant_key(core, tenant, create=create)
    known = core.encryption.keys.get(KeyScope.tenant(tenant).pk(core))
    return None if known is None else (known[1], min(at, known[2]))


def thread_keys(core: SaverCore, thread_ids: Sequence[str]) -> Flow[None]:
    """Load the data keys of several threads to read them (see :func:`thread_key`)."""
    for thread_id in dict.fromkeys(thread_ids):
        yield from thread_key(core, thread_id)
