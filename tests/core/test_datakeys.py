"""Flow tests of ``core.datakeys``: a scope's data key item created once (the loser of
a race takes the winner's key), read, bound to its thread and version, and shredded.

The static key ring unwraps in memory, so these flows ask only the index; the KMS
ring's requests are in ``tests/unit/test_sealing_kms.py`` and on moto in
``tests/storage/test_kms_keys.py``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from langgraph_s3.core import datakeys, rewrap, schema, scopes
from langgraph_s3.core.datakeys import KeyScope
from langgraph_s3.core.index import BatchWrite, PutNew, Query, RewrapKey, ScanKeyItems
from langgraph_s3.core.sealed import Encryption
from langgraph_s3.errors import DataKeyError, KeyScopeError, KeyUnwrapError
from langgraph_s3.operations import GeneratedKey, KmsDecrypt, KmsGenerateDataKey
from langgraph_s3.sealing import StaticKeyRing
from langgraph_s3.sealing.kms import KmsKeyRing
from tests.core.canned import created_key, lost, make_core, page, started, starts_key
from tests.core.script import Script

RING = StaticKeyRing({"r1": bytes(range(32))}, current="r1")
THREAD = KeyScope.thread("t-42")
ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def current_query(op: Any, limit: int | None = 1) -> bool:
    return (
        isinstance(op, Query)
        and op.prefix == schema.KEY_SK_PREFIX
        and op.newest_first
        and op.limit == limit
        and op.consistent
    )


def load_query(op: Any) -> bool:
    """How a saver loads a thread's or tenant's keys: every version, the same query."""
    return current_query(op, limit=None)


def version_query(op: Any) -> bool:
    return isinstance(op, Query) and op.between is not None and op.consistent


def created_item(scope: KeyScope = THREAD, ring: StaticKeyRing = RING) -> dict[str, Any]:
    """The item another writer stored for version 1 of ``scope``."""
    return created_key(scope, ring)


def test_a_new_thread_gets_version_1_put_only_if_absent() -> None:
    core = make_core(prefix="prod")
    script = Script(datakeys.key_for(core, RING, THREAD))
    assert script.expect(current_query, page([])).pk == "prod/t-42"
    txn = script.expect(starts_key, None)
    key = script.returns()
    assert key.key_id == "1"
    # One transaction: the put if absent, and the check that no tenant reference is.
    ((_, put), (_, check)) = txn.parts
    assert put["Put"]["ConditionExpression"] == "attribute_not_exists(#pk)"
    assert check["ConditionCheck"]["ConditionExpression"] == "attribute_not_exists(#pk)"
    assert check["ConditionCheck"]["Key"] == {"pk": {"S": "prod/t-42"}, "sk": {"S": "k#t"}}
    item = started(txn)
    assert item[schema.PK] == {"S": "prod/t-42"}
    assert item[schema.SK] == {"S": "k#0000000001"}
    assert item[schema.KEY_VERSION] == {"N": "1"}
    assert item[schema.KEK] == {"S": "r1"}
    assert item[schema.THREAD] == {"S": "t-42"}
    # The wrapped key is bound to the prefix, the thread and the version.
    context = {"prefix": "prod/", "thread": "t-42", "key-version": "1"}
    assert RING.unwrap(item[schema.WRAPPED]["B"], context, key_id="1") == key


def test_the_loser_of_two_creators_takes_the_winners_key() -> None:
    winner = created_item()
    script = Script(datakeys.create(make_core(), RING, THREAD))
    script.expect(starts_key, lost("put"))  # another writer was first
    get = script.expect(version_query, page([winner]))
    assert get.between == ("k#0000000001", "k#0000000001")
    mine = script.returns()
    context = {"thread": "t-42", "key-version": "1"}
    assert mine == RING.unwrap(winner[schema.WRAPPED]["B"], context, key_id="1")


def test_a_winner_shredded_before_the_loser_reads_it_says_retry() -> None:
    script = Script(datakeys.create(make_core(), RING, THREAD))
    script.expect(starts_key, lost("put"))
    script.expect(version_query, page([]))
    error = script.raises(DataKeyError)
    assert "thread 't-42'" in str(error) and "retry" in str(error)


def test_an_existing_key_is_read_and_unwrapped() -> None:
    item = created_item()
    script = Script(datakeys.key_for(make_core(), RING, THREAD))
    script.expect(current_query, page([item]))
    assert script.returns().key_id == "1"


def test_a_key_item_moved_to_another_thread_does_not_unwrap() -> None:
    item = created_item(KeyScope.thread("t-1"))
    script = Script(datakeys.key_for(make_core(), RING, THREAD))
    script.expect(current_query, page([item]))
    error = script.raises(KeyUnwrapError)
    assert "'thread': 't-42'" in str(error) and error.key_id == "1"


def test_a_key_item_put_back_under_another_version_does_not_unwrap() -> None:
    item = created_item()
    item[schema.KEY_VERSION] = {"N": "2"}
    script = Script(datakeys.key_for(make_core(), RING, THREAD))
    script.expect(current_query, page([item]))
    assert "'key-version': '2'" in str(script.raises(KeyUnwrapError))


def test_a_damaged_key_item_is_named() -> None:
    item = created_item()
    del item[schema.WRAPPED]
    script = Script(datakeys.key_for(make_core(), RING, THREAD))
    script.expect(current_query, page([item]))
    error = script.raises(DataKeyError)
    assert "'k#0000000001' of thread 't-42' is damaged" in str(error)


def test_a_version_is_read_by_its_sort_key() -> None:
    item = created_item()
    script = Script(datakeys.version(make_core(), THREAD, 1))
    # A consistent Query of that key (the stack's policy grants no GetItem).
    script.expect(Query("t", "t-42", between=("k#0000000001", "k#0000000001")), page([item]))
    assert script.returns() == datakeys.KeyItem(1, item[schema.WRAPPED]["B"], "r1")
    missing = Script(datakeys.version(make_core(), THREAD, 7))
    missing.expect(version_query, page([]))
    assert missing.returns() is None


def test_a_tenant_key_lives_in_a_partition_no_thread_can_have() -> None:
    core = make_core(prefix="prod")
    tenant = KeyScope.tenant("acme/eu")
    assert tenant.pk(core) == "prod/#tenant/acme%2Feu"
    assert not core.layout.owns_pk(tenant.pk(core))  # listings of threads pass it by
    assert tenant.context(core, 3) == {"tenant": "acme/eu", "prefix": "prod/", "key-version": "3"}
    item = created_item(tenant)
    assert item[schema.TENANT] == {"S": "acme/eu"} and schema.THREAD not in item


def test_shredding_deletes_every_version_and_the_cached_keys() -> None:
    core = make_core()
    kms = KmsKeyRing(ARN)
    # A KMS ring that created the thread's key holds it in its cache.
    create = Script(datakeys.create(core, kms, THREAD))
    create.expect(KmsGenerateDataKey, GeneratedKey(bytes(32), b"w", ARN))
    item = started(create.expect(starts_key, None))
    keys = [{schema.PK: item[schema.PK], schema.SK: {"S": schema.key_sk(v)}} for v in (1, 2)]
    script = Script(datakeys.shred(core, kms, THREAD))
    query = script.expect(Query, page(keys))
    assert query.keys_only and query.prefix == schema.KEY_SK_PREFIX
    [batch] = script.expect([BatchWrite], [[]])
    assert [r["DeleteRequest"]["Key"] for r in batch.requests] == keys
    assert script.returns() == 2
    # The cache forgot the key: unwrapping asks KMS again.
    unwrap = Script(datakeys.unwrap(core, kms, THREAD, datakeys.KeyItem(1, b"w", ARN)))
    unwrap.expect(KmsDecrypt, bytes(32))


@pytest.mark.parametrize("scope", [THREAD, KeyScope.tenant("acme")])
def test_without_a_prefix_the_context_has_no_prefix_pair(scope: KeyScope) -> None:
    assert scope.context(make_core(), 1) == {scope.kind: scope.id, "key-version": "1"}


# ------------------------------------------------------------------- rekey
RING2 = StaticKeyRing({"r1": bytes(range(32)), "r2": bytes(range(1, 33))}, current="r2")


def test_a_key_is_rewrapped_under_the_current_ring_key_if_its_item_is_unchanged() -> None:
    item = created_item()
    stored = datakeys.parse_key_item(item, THREAD)
    script = Script(rewrap.rewrap(make_core(), RING2, THREAD, stored))
    update = script.expect(RewrapKey, True)
    assert script.returns() is True
    assert (update.pk, update.sk, update.old, update.kek) == (
        "t-42",
        "k#0000000001",
        stored.wrapped,
        "r2",
    )
    assert update.params["ConditionExpression"] == "#wk = :old"
    # The same data key, now wrapped with r2 for the same context.
    context = {"thread": "t-42", "key-version": "1"}
    key = RING.unwrap(stored.wrapped, context, key_id="1")
    assert RING2.unwrap(update.new, context, key_id="1", kek="r2") == key
    with pytest.raises(KeyUnwrapError):
        RING2.unwrap(update.new, context, key_id="1", kek="r1")


def test_a_key_already_under_the_current_ring_key_is_left_alone() -> None:
    stored = datakeys.parse_key_item(created_item(), THREAD)
    assert Script(rewrap.rewrap(make_core(), RING, THREAD, stored)).returns() is False


def test_rekey_rewraps_threads_and_tenants_of_its_prefix_and_reports_the_rest() -> None:
    core = make_core(prefix="prod")
    mine = created_item_in(core, KeyScope.thread("t-1"))
    tenant = created_item_in(core, KeyScope.tenant("acme"))
    nested = created_item_in(make_core(prefix="prod/inner"), KeyScope.thread("t-2"))
    moved = {**created_item_in(core, KeyScope.thread("t-3")), schema.THREAD: schema.s("t-4")}
    current = created_item_in(core, KeyScope.thread("t-5"), ring=RING2)
    script = Script(rewrap.rekey(core, RING2))
    scan = script.expect(ScanKeyItems, page([mine, tenant, nested, moved, current]))
    assert scan.prefix == "prod/"
    # In key order: the tenant's partition sorts first.
    assert script.expect(RewrapKey, True).pk == "prod/#tenant/acme"
    assert script.expect(RewrapKey, True).pk == "prod/t-1"
    done = script.returns()
    assert done.rewrapped == [(KeyScope.tenant("acme"), 1), (KeyScope.thread("t-1"), 1)]
    assert done.current == [(KeyScope.thread("t-5"), 1)]
    assert [(whose, why.split(" (")[0]) for whose, _, why in done.failed] == [
        ("partition 'prod/t-3'", "its thread or tenant attribute does not name its partition")
    ]


def test_a_dry_rekey_writes_nothing() -> None:
    core = make_core(prefix="prod")
    script = Script(rewrap.rekey(core, RING2, dry_run=True))
    script.expect(ScanKeyItems, page([created_item_in(core, KeyScope.thread("t-1"))]))
    assert script.returns().rewrapped == [(KeyScope.thread("t-1"), 1)]


def test_a_key_that_does_not_unwrap_is_reported_and_the_others_go_on() -> None:
    core = make_core(prefix="prod")
    bad = created_item_in(core, KeyScope.thread("t-1"))
    bad[schema.WRAPPED] = schema.b(bytes(bad[schema.WRAPPED]["B"])[:-1])
    good = created_item_in(core, KeyScope.thread("t-2"))
    script = Script(rewrap.rekey(core, RING2))
    script.expect(ScanKeyItems, page([bad, good]))
    script.expect(RewrapKey, False)  # t-2's item changed meanwhile
    done = script.returns()
    assert done.rewrapped == []
    (t1, v1, why1), (t2, v2, why2) = done.failed
    assert (t1, v1, t2, v2) == ("thread 't-1'", 1, "thread 't-2'", 1)
    assert "does not unwrap" in why1 and "altered" in why1
    assert why2 == "changed while it was re-wrapped"


def created_item_in(core: Any, scope: KeyScope, ring: StaticKeyRing = RING) -> dict[str, Any]:
    return created_key(scope, ring, 1, core)


# ------------------------------------------------------------- tenant references
def tenant_core(tenant_of: Any = lambda thread: "acme", **settings: Any) -> Any:
    return make_core(encryption=Encryption(RING, tenant_of=tenant_of), **settings)


def test_a_writer_starts_a_tenant_thread_with_the_tenants_key_then_a_reference() -> None:
    core = tenant_core(prefix="prod")
    script = Script(datakeys.thread_key(core, "t-1", create=True))
    assert script.expect(load_query, page([])).pk == "prod/t-1"
    assert script.expect(load_query, page([])).pk == "prod/#tenant/acme"
    tenant_item = script.expect(PutNew, True).item
    assert tenant_item[schema.TENANT] == {"S": "acme"}
    txn = script.expect(starts_key, None)
    key = script.returns()
    ref = started(txn)
    # Only if the thread has no version 1 of a key of its own either.
    check = txn.parts[1][1]["ConditionCheck"]
    assert check["Key"] == {"pk": {"S": "prod/t-1"}, "sk": {"S": "k#0000000001"}}
    assert ref == scopes.tenant_ref(core, "t-1", "acme")
    assert ref[schema.SK] == {"S": "k#t"} and ref[schema.PK] == {"S": "prod/t-1"}
    assert schema.WRAPPED not in ref
    # The second thread of the tenant: its Query and its reference, the key cached.
    script = Script(datakeys.thread_key(core, "t-2", create=True))
    script.expect(load_query, page([]))
    script.expect(starts_key, None)
    assert script.returns() is key
    # A reader without tenant_of follows the reference (one Query per thread).
    reader = make_core(prefix="prod", encryption=Encryption(RING))
    script = Script(datakeys.thread_key(reader, "t-1"))
    script.expect(load_query, page([ref]))
    script.expect(load_query, page([tenant_item]))
    assert script.returns() == key
    script = Script(datakeys.thread_key(reader, "t-2"))
    script.expect(load_query, page([scopes.tenant_ref(core, "t-2", "acme")]))
    assert script.returns() == key


def test_the_loser_of_a_reference_race_follows_the_winners_reference() -> None:
    winner = scopes.tenant_ref(tenant_core(), "t-1", "beta")
    beta_key = created_item(KeyScope.tenant("beta"))
    core = tenant_core()
    script = Script(datakeys.thread_key(core, "t-1", create=True))
    script.expect(load_query, page([]))
    script.expect(load_query, page([]))  # acme's key: none yet
    script.expect(PutNew, True)
    script.expect(starts_key, lost("put"))  # another writer's reference was first
    script.expect(load_query, page([winner]))
    script.expect(load_query, page([beta_key]))  # its tenant's key is loaded
    error = script.raises(KeyScopeError)  # and refused: tenant_of says acme
    assert "'t-1' is sealed under the key of tenant 'beta'" in str(error)
    assert "tenant_of says tenant 'acme'" in str(error)


def test_a_reference_that_names_no_tenant_is_refused() -> None:
    altered = {**scopes.tenant_ref(make_core(), "t-1", "acme")}
    del altered[schema.TENANT]
    script = Script(datakeys.thread_key(make_core(encryption=Encryption(RING)), "t-1"))
    script.expect(load_query, page([altered]))
    assert "names no tenant" in str(script.raises(DataKeyError))


def test_rekey_skips_tenant_references() -> None:
    core = make_core(prefix="prod")
    ref = scopes.tenant_ref(core, "t-1", "acme")
    tenant = created_item_in(core, KeyScope.tenant("acme"))
    script = Script(rewrap.rekey(core, RING2))
    script.expect(ScanKeyItems, page([ref, tenant]))
    assert script.expect(RewrapKey, True).pk == "prod/#tenant/acme"
    done = script.returns()
    assert (done.rewrapped, done.current, done.failed) == ([(KeyScope.tenant("acme"), 1)], [], [])


# ------------------------------------------------------------- no key items yet
def test_a_writer_takes_a_reads_answer_that_a_thread_has_no_key_once_within_absent_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(datakeys, "time", SimpleNamespace(monotonic=lambda: now[0]))
    core = make_core(encryption=Encryption(RING, key_ttl=10.0))
    enc = core.encryption
    # A reader asks every time (a key made since would be needed to open).
    for _ in range(2):
        script = Script(datakeys.thread_key(core, "t-1"))
        script.expect(load_query, page([]))
        assert script.returns() is None
    # A writer within ABSENT_FOR (2 s): straight to the conditional put of version 1;
    # if another writer was first, its key is read.
    now[0] = 101.9
    script = Script(datakeys.thread_key(core, "t-1", create=True))
    script.expect(starts_key, lost("put"))
    script.expect(load_query, page([created_item(KeyScope.thread("t-1"))]))
    assert script.returns() is not None
    # Taken once: the next load (the key marked stale, as a first put does) asks.
    enc.stale("t-1/")
    script = Script(datakeys.thread_key(core, "t-1", create=True))
    script.expect(load_query, page([created_item(KeyScope.thread("t-1"))]))
    assert script.returns() is not None
    # Not after ABSENT_FOR, though well within key_ttl (10 s here): writers that
    # disagree on tenant_of could each create their scope's item within it.
    now[0] = 100.0
    script = Script(datakeys.thread_key(core, "t-2"))
    script.expect(load_query, page([]))
    now[0] = 102.0
    script = Script(datakeys.thread_key(core, "t-2", create=True))
    script.expect(load_query, page([]))
