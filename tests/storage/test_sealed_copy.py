"""``copy_thread`` under encryption on moto: a copy that failed part way can be retried,
and a source re-encrypted since the saver loaded its keys is copied all the same."""

from __future__ import annotations

import os
from typing import Any

import pytest
from botocore.exceptions import ClientError

from langgraph_s3 import AccessDeniedError, Encryption, ThreadExistsError
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend
from tests.storage.test_sealed_storage import put


@pytest.fixture
def ring() -> StaticKeyRing:
    return StaticKeyRing({"r": os.urandom(32)}, current="r")


def values(backend: Backend, ring: StaticKeyRing, thread: str) -> list[Any]:
    """Every checkpoint's value of channel ``v``, read by a cold saver."""
    saver = backend.saver(encryption=Encryption(ring))
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return [t.checkpoint["channel_values"].get("v") for t in saver.list(config)]


def test_a_copy_that_failed_part_way_is_retried(
    inproc_backend: Backend, ring: StaticKeyRing
) -> None:
    saver = inproc_backend.saver(encryption=Encryption(ring))
    config = put(saver, "src", os.urandom(20_000))
    put(saver, "src", os.urandom(30_000), config)
    s3 = inproc_backend.s3()

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", "").startswith("dst/"):
            error = {"Error": {"Code": "AccessDenied", "Message": "denied"}}
            raise ClientError(error, "PutObject")  # type: ignore[arg-type]

    s3.meta.events.register("provide-client-params.s3.PutObject", refuse)
    copier = inproc_backend.saver(encryption=Encryption(ring), s3_client=s3)
    with pytest.raises(AccessDeniedError):
        copier.copy_thread("src", "dst")
    # The target's key item was created before the uploads failed; nothing is visible.
    assert [i["sk"]["S"] for i in inproc_backend.items() if i["pk"]["S"] == "dst"] == [
        "k#0000000001"
    ]
    s3.meta.events.unregister("provide-client-params.s3.PutObject", refuse)
    copier.copy_thread("src", "dst")  # the retry reuses the target's key
    assert values(inproc_backend, ring, "dst") == values(inproc_backend, ring, "src")
    assert len(values(inproc_backend, ring, "dst")) == 2
    with pytest.raises(ThreadExistsError):  # now it has checkpoints
        copier.copy_thread("src", "dst")


def test_a_source_reencrypted_since_its_keys_were_loaded_is_copied(
    inproc_backend: Backend, ring: StaticKeyRing
) -> None:
    config = put(inproc_backend.saver(encryption=Encryption(ring)), "src", os.urandom(20_000))
    copier = inproc_backend.saver(encryption=Encryption(ring))
    copier.get_tuple(config)  # loads version 1 of src's key
    inproc_backend.saver(encryption=Encryption(ring)).reencrypt_thread("src")
    copier.copy_thread("src", "dst")
    assert values(inproc_backend, ring, "dst") == values(inproc_backend, ring, "src")
    assert len(values(inproc_backend, ring, "dst")) == 1
