"""Moving data keys to another wrapping key (``langgraph-s3 rekey``): every key item of
the prefix, its data key re-wrapped under the key ring's current key.

The data keys stay the same, so nothing sealed under them is rewritten: KMS re-wraps
each one itself (``ReEncrypt``, same encryption context), a static ring in memory.
An item is updated only if it still holds what was read (``RewrapKey``), so a key
shredded or re-wrapped meanwhile is reported, not overwritten. Re-encrypting a
thread's data under a new data key is another operation (``core/reencrypt.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph_s3.core import schema
from langgraph_s3.core.datakeys import KeyItem, KeyRing, KeyScope, parse_key_item
from langgraph_s3.core.index import RewrapKey, ScanKeyItems
from langgraph_s3.core.paging import read_all
from langgraph_s3.errors import S3SaverError
from langgraph_s3.operations import Flow, perform
from langgraph_s3.sealing.kms import KmsKeyRing

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore


@dataclass(frozen=True)
class Rekeyed:
    """What ``rekey`` did: key items re-wrapped (or, dry, to re-wrap), those already
    under the current key, and those it could not re-wrap (whose, version, why)."""

    rewrapped: list[tuple[KeyScope, int]]
    current: list[tuple[KeyScope, int]]
    failed: list[tuple[str, int, str]]


def is_of_prefix(core: SaverCore, pk: str) -> bool:
    """Whether a partition holds a thread or tenant of this prefix (not a nested one)."""
    return core.layout.owns_pk(pk) or pk.startswith(core.layout.tenants_pk_prefix())


def scope_of(core: SaverCore, item: Mapping[str, Any]) -> KeyScope | None:
    """Whose key a scanned key item is, or None if its thread or tenant attribute does
    not name the partition it sits in (it was moved or altered).

    The encryption context is still rebuilt from where the item was found.
    """
    pk = schema.pk_of(item)
    thread, tenant = schema.text(item, schema.THREAD), schema.text(item, schema.TENANT)
    if thread is not None and core.layout.pk(thread) == pk:
        return KeyScope.thread(thread)
    if tenant is not None and core.layout.tenant_pk(tenant) == pk:
        return KeyScope.tenant(tenant)
    return None


def rewrap(core: SaverCore, ring: KeyRing, scope: KeyScope, stored: KeyItem) -> Flow[bool]:
    """Store ``stored``'s data key wrapped under the ring's current key.

    Returns:
        False if it already was, or the item changed (or was shredded) meanwhile.
    """
    if stored.kek == ring.wrapping_key:
        return False
    context = scope.context(core, stored.version)
    if isinstance(ring, KmsKeyRing):
        new = yield from ring.rewrap(stored.wrapped, context, key_id=stored.key_id, kek=stored.kek)
    else:
        new = ring.rewrap(stored.wrapped, context, key_id=stored.key_id, kek=stored.kek)
    sk = schema.key_sk(stored.version)
    request = RewrapKey(
        core.table, scope.pk(core), sk, stored.wrapped, new, ring.wrapping_key, core.now_ms()
    )
    return bool((yield from perform(request)))


def rekey(core: SaverCore, ring: KeyRing, *, dry_run: bool = False) -> Flow[Rekeyed]:
    """Re-wrap every data key item of this prefix (threads and tenants) under the
    ring's current key; the data keys, and so everything sealed, stay the same.

    A key item that cannot be re-wrapped (moved or altered, an unknown KMS key, access
    denied: a typed error) is reported and left as it is; the others go on.
    """
    items = yield from read_all(ScanKeyItems(core.table, core.layout.prefix))
    done = Rekeyed([], [], [])
    for item in sorted(items, key=lambda i: (schema.pk_of(i), i[schema.SK]["S"])):
        pk = schema.pk_of(item)
        if not is_of_prefix(core, pk) or schema.is_tenant_ref(item):
            continue  # a tenant reference holds no key: its tenant's item is re-wrapped
        version = int(item.get(schema.KEY_VERSION, {}).get("N", 0))
        scope = scope_of(core, item)
        if scope is None:
            why = "its thread or tenant attribute does not name its partition (moved or altered)"
            done.failed.append((f"partition {pk!r}", version, why))
            continue
        try:
            stored = parse_key_item(item, scope)
            if stored.kek == ring.wrapping_key:
                done.current.append((scope, stored.version))
            elif dry_run or (yield from rewrap(core, ring, scope, stored)):
                done.rewrapped.append((scope, stored.version))
            else:
                done.failed.append((scope.describe(), version, "changed while it was re-wrapped"))
        except S3SaverError as exc:
            done.failed.append((scope.describe(), version, str(exc)))
    return done
