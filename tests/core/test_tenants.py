"""Flow tests of ``core.tenants``: erasing a tenant finds its threads by their
references (of this prefix only, in their own partition), deletes each thread, then
every version of the tenant's key; a dry run only reads."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3.core import schema, scopes, tenants
from langgraph_s3.core.datakeys import KeyScope
from langgraph_s3.core.index import Query, ScanKeyItems
from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.operations import ListPage, S3List
from tests.core.canned import make_core, page
from tests.core.script import Script
from tests.core.test_datakeys import created_item_in
from tests.core.test_threads import batch_writes, ddb, requests


def scanned(core: Any) -> list[dict[str, Any]]:
    """Key items of two tenants, a thread key, and two references that do not count."""
    nested = make_core(prefix="prod/inner")
    moved = {**scopes.tenant_ref(core, "t-3", "acme"), schema.PK: schema.s("prod/t-9")}
    return [
        scopes.tenant_ref(core, "t-2", "acme"),
        scopes.tenant_ref(core, "t-1", "acme"),
        scopes.tenant_ref(core, "b-1", "beta"),
        scopes.tenant_ref(nested, "t-4", "acme"),  # another prefix's thread
        moved,  # not in its thread's partition
        created_item_in(core, KeyScope.thread("solo")),
        created_item_in(core, KeyScope.tenant("acme")),
    ]


def test_erasing_a_tenant_deletes_its_threads_then_its_key() -> None:
    core = make_core(prefix="prod")
    script = Script(tenants.shred_tenant(core, "acme"))
    assert script.expect(ScanKeyItems, page(scanned(core))).prefix == "prod/"
    versions = script.expect(Query, page([{schema.SK: schema.s(schema.key_sk(1))}]))
    assert versions.pk == "prod/#tenant/acme"
    for thread in ("t-1", "t-2"):  # each as delete_thread does
        ref = scopes.tenant_ref(core, thread, "acme")
        assert script.expect(ddb("query"), page([ref])).pk == f"prod/{thread}"
        script.expect(batch_writes(1), [[]])
        script.expect(S3List(f"prod/{thread}/"), ListPage([], None))
    shred = script.expect(Query, page([{schema.PK: schema.s("prod/#tenant/acme"),
                                        schema.SK: schema.s(schema.key_sk(1))}]))  # fmt: skip
    assert shred.pk == "prod/#tenant/acme" and shred.keys_only
    [delete] = script.expect(batch_writes(1), [[]])
    assert requests([delete], "DeleteRequest") == [
        {schema.PK: schema.s("prod/#tenant/acme"), schema.SK: schema.s("k#0000000001")}
    ]
    assert script.returns() == tenants.TenantErased(["t-1", "t-2"], [1])


def test_a_dry_run_only_reads() -> None:
    core = make_core(prefix="prod")
    script = Script(tenants.shred_tenant(core, "beta", dry_run=True))
    script.expect(ScanKeyItems, page(scanned(core)))
    script.expect(Query, page([]))
    assert script.returns() == tenants.TenantErased(["b-1"], [])


@pytest.mark.parametrize("tenant", ["", None])
def test_a_tenant_id_must_be_a_non_empty_string(tenant: Any) -> None:
    with pytest.raises(InvalidConfigError, match="non-empty"):
        Script(tenants.shred_tenant(make_core(), tenant)).step()
