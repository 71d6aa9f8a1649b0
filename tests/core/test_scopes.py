"""Flow tests of ``core.scopes``: a thread's key scope (version 1 of its own key, or a
tenant reference) is started in one transaction with the check that the other kind
is absent; a writer that loses reads the key items again and takes the scope
stored, or refuses it (``KeyScopeError``); concurrent transactions are retried."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3.core import datakeys, schema, scopes
from langgraph_s3.core.datakeys import KeyScope
from langgraph_s3.core.index import TXN_CANCELLED, Cancelled, PutNew
from langgraph_s3.core.sealed import Encryption
from langgraph_s3.errors import DataKeyError, KeyScopeError, S3SaverError
from langgraph_s3.operations import Sleep
from tests.core.canned import created_key, lost, make_core, page, started, starts_key
from tests.core.script import Script
from tests.core.test_datakeys import RING, load_query

ACME = KeyScope.tenant("acme")


def absent_taken(tenant_of: Any = None) -> Any:
    """A saver whose read of thread t-1 found no key items (``Encryption.absent``):
    its first write puts without asking again."""
    core = make_core(encryption=Encryption(RING, tenant_of=tenant_of))
    script = Script(datakeys.thread_key(core, "t-1"))
    script.expect(load_query, page([]))
    assert script.returns() is None
    return core


def test_a_writer_without_tenant_of_takes_the_tenant_a_thread_was_started_under() -> None:
    core = absent_taken()
    script = Script(datakeys.thread_key(core, "t-1", create=True))
    txn = script.expect(starts_key, lost("absent"))  # a tenant reference is there
    assert started(txn)[schema.SK] == {"S": schema.key_sk(1)}
    # It reads the key items again, as a writer that found them: it follows the reference.
    script.expect(load_query, page([scopes.tenant_ref(core, "t-1", "acme")]))
    acme = created_key(ACME, RING)
    assert script.expect(load_query, page([acme])).pk == ACME.pk(core)
    key = script.returns()
    context = {"tenant": "acme", "key-version": "1"}
    assert key == RING.unwrap(acme[schema.WRAPPED]["B"], context, key_id="1")
    assert core.encryption.scopes.get("t-1/") == "acme"


def test_a_writer_whose_tenant_of_says_none_refuses_a_thread_started_under_a_tenant() -> None:
    core = absent_taken(tenant_of=lambda thread: None)
    script = Script(datakeys.thread_key(core, "t-1", create=True))
    script.expect(starts_key, lost("absent"))
    script.expect(load_query, page([scopes.tenant_ref(core, "t-1", "acme")]))
    script.expect(load_query, page([created_key(ACME, RING)]))
    error = script.raises(KeyScopeError)
    assert "thread 't-1' is sealed under the key of tenant 'acme'" in str(error)
    assert "tenant_of says a key of its own" in str(error)


def test_a_tenant_writer_refuses_a_thread_started_with_a_key_of_its_own() -> None:
    core = absent_taken(tenant_of=lambda thread: "acme")
    script = Script(datakeys.thread_key(core, "t-1", create=True))
    script.expect(load_query, page([]))  # the tenant's key items: none yet
    script.expect(PutNew, True)  # its key, in the tenant's partition (no reference there)
    txn = script.expect(starts_key, lost("absent"))  # the thread has version 1 already
    assert started(txn) == scopes.tenant_ref(core, "t-1", "acme")
    script.expect(load_query, page([created_key(KeyScope.thread("t-1"), RING)]))
    error = script.raises(KeyScopeError)
    assert "thread 't-1' is sealed under a key of its own" in str(error)
    assert "tenant_of says tenant 'acme'" in str(error)


def test_a_thread_started_and_deleted_before_the_loser_reads_it_says_retry() -> None:
    script = Script(datakeys.thread_key(absent_taken(), "t-1", create=True))
    script.expect(starts_key, lost("absent"))
    script.expect(load_query, page([]))
    error = script.raises(DataKeyError)
    assert "'t-1'" in str(error) and "retry" in str(error)


def conflict() -> Cancelled:
    return Cancelled(TXN_CANCELLED, ("put", "absent"), ({"Code": "TransactionConflict"},) * 2)


def item() -> dict[str, Any]:
    return scopes.tenant_ref(make_core(), "t-1", "acme")


def test_a_start_cancelled_by_a_concurrent_transaction_is_sent_again() -> None:
    script = Script(scopes.start(make_core(), item(), schema.key_sk(1)))
    first = script.expect(starts_key, conflict())
    assert isinstance(script.pending, Sleep) and 0.025 <= script.pending.seconds <= 0.075
    script.step()
    assert script.expect(starts_key, lost("absent")) == first  # the same request
    assert script.returns() is False


def test_a_start_that_keeps_colliding_or_is_refused_otherwise_raises() -> None:
    script = Script(scopes.start(make_core(), item(), schema.key_sk(1)))
    for _ in range(scopes.RETRIES):
        script.expect(starts_key, conflict())
        script.expect(Sleep)
    assert "kept colliding" in str(script.raises(S3SaverError))
    script = Script(scopes.start(make_core(), item(), schema.key_sk(1)))
    throttled = Cancelled(TXN_CANCELLED, ("put", "absent"), ({"Code": "ThrottlingError"},) * 2)
    script.expect(starts_key, throttled)
    error = script.raises(S3SaverError)
    assert "'t-1'" in str(error) and "ThrottlingError" in str(error)


@pytest.mark.parametrize("version", [2, 3])
def test_later_versions_and_tenant_keys_are_plain_conditional_puts(version: int) -> None:
    """Re-encryption's versions, and a tenant's key (its partition has no reference)."""
    for scope, number in ((KeyScope.thread("t-1"), version), (ACME, 1)):
        script = Script(datakeys.create(make_core(), RING, scope, number))
        assert script.expect(PutNew, True).item[schema.SK] == {"S": schema.key_sk(number)}
        script.returns()
