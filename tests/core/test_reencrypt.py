"""Flow tests of ``core.reencrypt`` and of the versioned thread keys it relies on
(``datakeys.thread_key``, ``sealed``): a saver loads every version of a thread's key
in one query, opens each object with the version it names, seals with the newest;
which items a re-encryption still has to re-seal; what it asks first."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_s3 import codec
from langgraph_s3.core import reencrypt, schema, sealed
from langgraph_s3.core.datakeys import KeyScope, thread_key
from langgraph_s3.core.index import BatchWrite, PutNew, Query
from langgraph_s3.core.sealed import Encryption, key_of
from langgraph_s3.errors import InvalidConfigError, KeyVersionError
from langgraph_s3.sealing.ring import StaticKeyRing
from tests.core.canned import (
    checkpoint,
    config,
    created_key,
    make_core,
    page,
    store,
    store_writes,
)
from tests.core.script import Script

RING = StaticKeyRing({"r": bytes(range(32))}, current="r")


_ITEMS: dict[int, dict[str, Any]] = {}


def key_item(core: Any, version: int) -> dict[str, Any]:
    """Version ``version`` of thread t1's key item, as a writer stores it (one per
    version for the whole module)."""
    if version not in _ITEMS:
        _ITEMS[version] = created_key(KeyScope.thread("t1"), RING, version, core)
    return _ITEMS[version]


def loaded(versions: list[int]) -> Any:
    """A core that loaded thread t1's key versions ``versions`` (one query)."""
    core = make_core(encryption=Encryption(RING))
    items = [key_item(make_core(), v) for v in sorted(versions, reverse=True)]
    script = Script(thread_key(core, "t1"))
    query = script.expect(Query, page(items))
    assert query.prefix == schema.KEY_SK_PREFIX and query.newest_first and query.limit is None
    assert script.returns() is not None
    return core


def body_under(core: Any, cid: str = "c1") -> bytes:
    return sealed.seal_body(core, ("t1", "", cid), codec.frame(codec.KIND_CHECKPOINT, b"x", 3))


def test_every_version_loads_in_one_query_and_the_newest_seals() -> None:
    core = loaded([1, 2])
    assert key_of(core, "t1").key_id == "2"
    old = body_under(loaded([1]))
    new = body_under(core)
    for body in (old, new):  # each opens with the version its header names
        assert sealed.open_body(core, ("t1", "", "c1"), body, "x")
    assert sealed.rekeying(core, "t1") and not sealed.rekeying(loaded([2]), "t1")


def test_a_shredded_version_is_named_and_a_newer_one_marks_the_keys_stale() -> None:
    old, newer = body_under(loaded([1])), body_under(loaded([1, 3]))
    core = loaded([2])
    with pytest.raises(KeyVersionError, match="shredded") as info:
        sealed.open_body(core, ("t1", "", "c1"), old, "x")
    assert (info.value.key_id, info.value.thread_id, info.value.newer) == ("1", "t1", False)
    assert core.encryption.fresh(core.layout.thread_prefix("t1"), 0.0) is not None
    with pytest.raises(KeyVersionError, match="re-encrypted since") as info:
        sealed.open_body(core, ("t1", "", "c1"), newer, "x")
    assert info.value.newer
    # The next call loads the keys again instead of using them.
    again = Script(thread_key(core, "t1"))
    again.expect(Query, page([key_item(make_core(), 3), key_item(make_core(), 2)]))
    assert again.returns().key_id == "3"


def test_stale_items_are_what_is_not_sealed_under_the_target() -> None:
    core = loaded([1])
    cp = store(config("t1"), checkpoint("c1", {"v": "a"}), core=core).item
    writes = store_writes(config("t1", "c1"), [("v", "b")], "task-1", core=core).item
    items = [cp, writes]
    assert reencrypt.stale_items(items, "2", set()) == items  # the checkpoint, its writes
    assert reencrypt.stale_items(items, "1", set()) == []
    # Writes of a checkpoint that never committed are left for gc.
    assert reencrypt.stale_items([writes], "2", set()) == []
    # Re-sealed under 2: only what is still under 1 is left, with its checkpoint.
    core2 = loaded([1, 2])
    # After a parent: a thread's first checkpoint reloads its keys (none canned here).
    cp2 = store(config("t1", "c0"), checkpoint("c1", {"v": "a"}), core=core2).item
    assert reencrypt.stale_items([cp2, writes], "2", set()) == [cp2, writes]
    writes2 = store_writes(config("t1", "c1"), [("v", "b")], "task-1", core=core2).item
    assert reencrypt.stale_items([cp2, writes2], "2", set()) == []
    # A body in S3 is known to be re-sealed only if this run stored it (its digest).
    large = make_core(encryption=core2.encryption, index_inline_limit=0)
    cp3 = store(config("t1", "c0"), checkpoint("c1", {"v": "a"}), core=large).item
    assert schema.BODY not in cp3
    assert reencrypt.stale_items([cp3], "2", set()) == [cp3]
    assert reencrypt.stale_items([cp3], "2", {cp3[schema.DIGEST]["S"]}) == []


def test_without_encryption_nothing_is_asked() -> None:
    with pytest.raises(InvalidConfigError, match="encryption="):
        Script(reencrypt.reencrypt_thread(make_core(), "t1")).returns()


def test_a_thread_with_one_version_gets_the_next_one_first() -> None:
    core = make_core(encryption=Encryption(RING))
    script = Script(reencrypt.reencrypt_thread(core, "t1"))
    script.expect(Query, page([key_item(make_core(), 1)]))  # the versions there are
    put = script.expect(PutNew, True)
    assert put.item[schema.SK] == {"S": schema.key_sk(2)}
    # Then both versions are loaded (one query), and the thread's items read.
    script.expect(Query, page([dict(put.item), key_item(make_core(), 1)]))
    items = script.expect(Query, page([]))
    assert items.prefix is None and not items.keys_only
    # Nothing to re-seal: the old version is deleted.
    (delete,) = script.expect([BatchWrite], [[]])
    assert [r["DeleteRequest"]["Key"][schema.SK] for r in delete.requests] == [
        {"S": schema.key_sk(1)}
    ]
    done = script.returns()
    assert (done.version, done.checkpoints, done.shredded) == (2, 0, (1,))
