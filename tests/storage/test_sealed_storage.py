"""Tampering with sealed storage (``encryption=``) on moto: whoever may write the
bucket or the table, but holds no key, cannot move, swap or alter sealed data
unnoticed. Each case ends in a typed error naming the object to repair."""

from __future__ import annotations

import os
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import Encryption, PlaintextObjectError, SealedObjectError
from langgraph_s3.core import schema
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend


@pytest.fixture
def enc() -> Encryption:
    return Encryption(StaticKeyRing({"ring-1": os.urandom(32)}, current="ring-1"))


def put(saver: Any, thread: str, value: Any, parent: RunnableConfig | None = None) -> Any:
    """A checkpoint holding ``value`` in channel ``v``, after ``parent``."""
    cp = empty_checkpoint()
    version = saver.get_next_version(None, None)
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": version}
    config = parent or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"step": 1}, {"v": version})


def read(backend: Backend, enc: Encryption, config: RunnableConfig) -> Any:
    """The checkpoint tuple, read by a fresh saver (nothing cached)."""
    return backend.saver(encryption=enc).get_tuple(config)


def item(backend: Backend, thread: str, sk_part: str) -> dict[str, Any]:
    (found,) = [i for i in backend.items() if i["pk"]["S"] == thread and sk_part in i["sk"]["S"]]
    return found


def put_item(backend: Backend, value: dict[str, Any]) -> None:
    backend.dynamodb().put_item(TableName=backend.table, Item=value)


def blob_keys(backend: Backend, thread: str) -> list[str]:
    return [k for k in backend.object_keys() if k.startswith(f"{thread}/b/")]


def test_a_blob_moved_to_another_thread_does_not_open(inproc_backend: Backend, enc: Any) -> None:
    saver = inproc_backend.saver(encryption=enc)
    put(saver, "a", os.urandom(40_000))
    config = put(saver, "b", os.urandom(40_000))
    (a_blob,), (b_blob,) = blob_keys(inproc_backend, "a"), blob_keys(inproc_backend, "b")
    s3 = inproc_backend.s3()
    body = s3.get_object(Bucket=inproc_backend.bucket, Key=a_blob)["Body"].read()
    s3.put_object(Bucket=inproc_backend.bucket, Key=b_blob, Body=body)
    with pytest.raises(SealedObjectError, match="moved from another thread") as info:
        read(inproc_backend, enc, config)
    assert info.value.key == b_blob


def test_a_body_swapped_with_its_parents_does_not_open(inproc_backend: Backend, enc: Any) -> None:
    saver = inproc_backend.saver(encryption=enc)
    parent = put(saver, "t", "first")
    child = put(saver, "t", "second", parent)
    p_item = item(inproc_backend, "t", parent["configurable"]["checkpoint_id"])
    c_item = item(inproc_backend, "t", child["configurable"]["checkpoint_id"])
    c_item["b"] = p_item["b"]
    # the digest too: someone with write access to the table can compute it
    row = schema.parse_row(c_item)
    place = (row.thread_id, row.ns, row.checkpoint_id)
    c_item["h"] = schema.s(schema.place_digest(place, p_item["b"]["B"]))
    put_item(inproc_backend, c_item)
    with pytest.raises(SealedObjectError, match="checkpoint body") as info:
        read(inproc_backend, enc, child)
    assert child["configurable"]["checkpoint_id"] in info.value.key
    assert read(inproc_backend, enc, parent).checkpoint["channel_values"]["v"] == "first"


def test_a_write_moved_to_another_slot_does_not_open(inproc_backend: Backend, enc: Any) -> None:
    saver = inproc_backend.saver(encryption=enc, group_writes=False)  # groups: test_write_groups
    config = put(saver, "t", "x")
    saver.put_writes(config, [("a", 1), ("b", 2)], "task-1")
    writes = item(inproc_backend, "t", "#w#task-1")
    writes["w0"], writes["w1"] = writes["w1"], writes["w0"]
    put_item(inproc_backend, writes)
    with pytest.raises(SealedObjectError, match="pending write") as info:
        read(inproc_backend, enc, config)
    assert info.value.key.endswith("#w#task-1|w0") or info.value.key.endswith("|w1")


def test_a_flipped_bit_in_a_pack_names_the_pack(inproc_backend: Backend, enc: Any) -> None:
    saver = inproc_backend.saver(encryption=enc)
    config = put(saver, "t", os.urandom(300_000))
    (pack,) = [k for k in blob_keys(inproc_backend, "t") if k.endswith(".pack")]
    s3 = inproc_backend.s3()
    body = bytearray(s3.get_object(Bucket=inproc_backend.bucket, Key=pack)["Body"].read())
    body[len(body) // 2] ^= 0x10
    s3.put_object(Bucket=inproc_backend.bucket, Key=pack, Body=bytes(body))
    with pytest.raises(SealedObjectError) as info:
        read(inproc_backend, enc, config)
    assert info.value.key == pack


def test_a_flipped_bit_in_a_body_with_a_matching_digest(inproc_backend: Backend, enc: Any) -> None:
    import hashlib

    saver = inproc_backend.saver(encryption=enc)
    config = put(saver, "t", "x")
    it = item(inproc_backend, "t", config["configurable"]["checkpoint_id"])
    body = bytearray(it["b"]["B"])
    body[-5] ^= 0x01
    it["b"] = {"B": bytes(body)}
    it["h"] = {"S": hashlib.sha256(body).hexdigest()}
    put_item(inproc_backend, it)
    with pytest.raises(SealedObjectError, match="altered") as info:
        read(inproc_backend, enc, config)
    assert config["configurable"]["checkpoint_id"] in info.value.key


def test_a_plaintext_record_slipped_into_a_sealed_thread(inproc_backend: Backend, enc: Any) -> None:
    plain = inproc_backend.saver()
    config = put(inproc_backend.saver(encryption=enc), "t", "x")
    plain_config = put(plain, "p", "x")
    plain.put_writes(plain_config, [("a", 1)], "task-1")
    inproc_backend.saver(encryption=enc).put_writes(config, [("a", 1)], "task-1")
    sealed_writes = item(inproc_backend, "t", "#w#task-1")
    sealed_writes["w0"] = item(inproc_backend, "p", "#w#task-1")["w0"]
    put_item(inproc_backend, sealed_writes)
    with pytest.raises(PlaintextObjectError, match="without encryption") as info:
        read(inproc_backend, enc, config)
    assert info.value.key.endswith("#w#task-1|w0")
