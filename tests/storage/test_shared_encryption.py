"""One ``Encryption`` serves one bucket and table: its key cache is keyed by thread
folder, which names a thread within one storage only. A saver of another storage
given the same instance is refused; the key ring itself may be shared."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from langgraph_s3 import AsyncS3Saver, Encryption, InvalidConfigError
from langgraph_s3.archive import copy_threads
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import REGION, Backend
from tests.storage.test_sealed_storage import put


@pytest.fixture
def ring() -> StaticKeyRing:
    return StaticKeyRing({"r": os.urandom(32)}, current="r")


@pytest.fixture
def other(inproc_backend: Backend) -> Iterator[Backend]:
    """A second bucket and table, in the same moto."""
    b = Backend("inproc", None)
    b.saver().setup()
    yield b


def key_items(backend: Backend) -> list[str]:
    return [i["sk"]["S"] for i in backend.items() if i["sk"]["S"].startswith("k#")]


def test_a_saver_of_another_storage_refuses_a_shared_encryption(
    inproc_backend: Backend, other: Backend, ring: StaticKeyRing
) -> None:
    enc = Encryption(ring)
    inproc_backend.saver(encryption=enc)
    inproc_backend.saver(encryption=enc, prefix="app/")  # same storage: allowed
    with pytest.raises(InvalidConfigError, match=r"encryption=ring.*Encryption\(ring"):
        other.saver(encryption=enc)
    with pytest.raises(InvalidConfigError, match="cannot share it"):
        AsyncS3Saver(bucket=other.bucket, table=other.table, region_name=REGION, encryption=enc)


def test_savers_of_two_storages_sharing_a_ring_each_keep_their_own_keys(
    inproc_backend: Backend, other: Backend, ring: StaticKeyRing
) -> None:
    src, dst = inproc_backend.saver(encryption=ring), other.saver(encryption=ring)
    put(src, "t", os.urandom(30_000))
    put(dst, "u", "in store 2")
    copy_threads(src, dst, ["t"])
    assert key_items(other) == ["k#0000000001", "k#0000000001"]  # one for t, one for u
    cold = other.saver(encryption=Encryption(ring))
    for thread in ("t", "u"):
        assert cold.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
