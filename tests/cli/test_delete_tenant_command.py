"""``langgraph-s3 delete-tenant`` end to end on a moto server: a dry run names the
tenant's threads and key versions and changes nothing; the real run deletes the
threads and shreds the tenant's key, and leaves other tenants and threads alone. The
command needs no key ring: deleting opens nothing."""

from __future__ import annotations

from typing import Any

from langgraph_s3 import Encryption
from tests.cli.test_commands import run, url
from tests.conftest import Backend
from tests.storage.test_tenant_keys import EXPECTED, RING, key_items, reader, state, tenant_of
from tests.storage.test_tenant_keys import run as run_graph

PREFIX = "tenants/"


def delete_tenant(backend: Backend, *args: str) -> Any:
    return run("--url", url(backend, PREFIX), "--endpoint-url", backend.endpoint_url or "",
               "delete-tenant", *args)  # fmt: skip


def test_delete_tenant_erases_the_tenants_threads_and_key(server_backend: Backend) -> None:
    saver = server_backend.saver(prefix=PREFIX, encryption=Encryption(RING, tenant_of=tenant_of))
    run_graph(saver, "acme:1", "acme:2", "beta:1", "solo")
    before = key_items(server_backend)

    dry = delete_tenant(server_backend, "acme", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "thread 'acme:1'" in dry.stdout and "thread 'acme:2'" in dry.stdout
    assert "would delete 2 thread(s) of tenant 'acme' and shred its 1 data key version(s)" in (
        dry.stdout
    )
    assert key_items(server_backend) == before

    done = delete_tenant(server_backend, "acme", "--yes")
    assert done.returncode == 0, done.stderr
    assert "deleted 2 thread(s) of tenant 'acme'; shredded 1 data key version(s)" in done.stdout
    assert sorted(key_items(server_backend)) == [
        f"{PREFIX}#tenant/beta",
        f"{PREFIX}beta:1",
        f"{PREFIX}solo",
    ]
    assert not [k for k in server_backend.object_keys() if k.startswith(f"{PREFIX}acme")]
    for thread in ("beta:1", "solo"):
        assert state(reader(server_backend, prefix=PREFIX), thread) == EXPECTED

    again = delete_tenant(server_backend, "acme", "--yes")
    assert again.returncode == 0, again.stderr
    assert "deleted 0 thread(s) of tenant 'acme'; shredded 0 data key version(s)" in again.stdout
