"""Erasing a tenant: its threads, then its data key (client-side encryption per tenant).

Threads a writer started for a tenant (``Encryption.tenant_of``) hold a tenant
reference instead of a key of their own (:mod:`langgraph_s3.core.datakeys`), so
deleting one of them shreds nothing: the tenant's other threads still need the key.
:func:`shred_tenant` erases the whole tenant: it finds its threads by their
references (a scan of the key items, as ``rekey`` does: an administrator's
operation, the saver's runtime policy grants no ``dynamodb:Scan``), deletes each as
``delete_thread`` does, then deletes every version of the tenant's key. Whatever
copies of the tenant's sealed data remain (old object versions, replicas, backups,
a thread started while this ran) can then no longer be opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from langgraph_s3.core import datakeys, schema
from langgraph_s3.core.datakeys import KeyScope
from langgraph_s3.core.index import Query, ScanKeyItems
from langgraph_s3.core.paging import read_all
from langgraph_s3.core.threads import delete_thread
from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.operations import Flow

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore


@dataclass(frozen=True)
class TenantErased:
    """What :func:`shred_tenant` deleted (or, dry, would delete): the tenant's threads
    and the versions of its data key."""

    threads: list[str]
    key_versions: list[int]


def tenant_threads(core: SaverCore, tenant: str) -> Flow[list[str]]:
    """The ids of the threads of this prefix whose tenant reference names ``tenant``."""
    items = yield from read_all(ScanKeyItems(core.table, core.layout.prefix))
    found = set()
    for item in items:
        thread = schema.text(item, schema.THREAD)
        if (
            schema.is_tenant_ref(item)
            and schema.text(item, schema.TENANT) == tenant
            and thread is not None
            # Not a nested prefix's thread, nor a reference moved to another partition.
            and core.layout.pk(thread) == schema.pk_of(item)
        ):
            found.add(thread)
    return sorted(found)


def tenant_key_versions(core: SaverCore, tenant: str) -> Flow[list[int]]:
    """The versions of the tenant's data key that are stored."""
    scope = KeyScope.tenant(tenant)
    items = yield from read_all(
        Query(core.table, scope.pk(core), prefix=schema.KEY_SK_PREFIX, keys_only=True)
    )
    return sorted(int(i[schema.SK]["S"][len(schema.KEY_SK_PREFIX) :]) for i in items)


def shred_tenant(core: SaverCore, tenant: str, *, dry_run: bool = False) -> Flow[TenantErased]:
    """Delete every thread of ``tenant`` (items, then objects), then every version of
    its data key (crypto-shredding the tenant).

    A writer still starting threads for the tenant meanwhile may leave a thread behind
    (found by a second run) or seal under the shredded key: stop the tenant's writers
    first. Objects a crash left behind are garbage ``gc`` collects.

    Raises:
        InvalidConfigError: ``tenant`` is not a non-empty str.
    """
    if not isinstance(tenant, str) or not tenant:
        raise InvalidConfigError(f"a tenant id must be a non-empty string, got {tenant!r}")
    threads = yield from tenant_threads(core, tenant)
    versions = yield from tenant_key_versions(core, tenant)
    if dry_run:
        return TenantErased(threads, versions)
    for thread_id in threads:
        yield from delete_thread(core, thread_id)
    scope = KeyScope.tenant(tenant)
    enc = core.encryption
    yield from datakeys.shred(core, None if enc is None else enc.ring, scope)
    if enc is not None:
        enc.forget(scope.pk(core))
    return TenantErased(threads, versions)
