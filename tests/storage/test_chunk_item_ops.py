"""Thread operations that copy or rewrite stored data, on threads holding chunk items
(small chunks stored in the index, layout 5) on moto: ``copy_thread`` without and with
``encryption=`` (both savers), archives (``export_thread``/``import_thread``, and an
archive exported by an earlier release), and ``reencrypt_thread`` (both savers).

Each copy must name chunks that exist where its entries say they are, and nothing of
it may be visible before they do.
"""

from __future__ import annotations

import asyncio
import io
import os
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_s3 import Encryption, S3SaverError, codec
from langgraph_s3.archive import export_thread, import_thread
from langgraph_s3.core import reseal, schema
from langgraph_s3.core.datakeys import thread_key
from langgraph_s3.core.objects import read_envelopes
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend, RequestLog
from tests.layouts.archive import INLINE, SUB, write_thread
from tests.storage.test_reencrypt import Stop, fail_puts

ARCHIVE = Path(__file__).parents[1] / "layouts" / "archive_v1.jsonl"


@pytest.fixture
def ring() -> StaticKeyRing:
    return StaticKeyRing({"r": os.urandom(32)}, current="r")


def chunk_items(backend: Backend, thread: str, prefix: str = "") -> dict[str, bytes]:
    """A thread's chunk items: sort key -> stored frame (every attribute checked)."""
    out = {}
    for item in backend.items():
        if item["pk"]["S"] == prefix + thread and item["sk"]["S"].startswith("b#"):
            assert set(item) == {"pk", "sk", "v", "at"}, item
            out[item["sk"]["S"]] = item["v"]["B"]
    return out


def blobs(backend: Backend, thread: str) -> list[str]:
    """A thread's S3 blobs and packs."""
    return [k for k in backend.object_keys() if k.startswith(f"{thread}/b/")]


def history(saver: Any, thread: str) -> list[Any]:
    """Every checkpoint of every namespace, as the saver lists it, without thread ids:
    namespace, id, parent, checkpoint, metadata and pending writes."""
    out = []
    for t in saver.list({"configurable": {"thread_id": thread}}):
        conf = t.config["configurable"]
        parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        out.append(
            (conf["checkpoint_ns"], conf["checkpoint_id"], parent, t.checkpoint, t.metadata,
             sorted(t.pending_writes or []))
        )  # fmt: skip
    return sorted(out, key=lambda r: (r[0], r[1]))


def body_layouts(backend: Backend, saver: Any, thread: str) -> set[int | None]:
    """The layouts of a thread's checkpoint bodies (``format_version``), opened."""
    items = [i for i in backend.items() if i["pk"]["S"] == thread]
    rows = [schema.parse_row(i) for i in items if schema.is_checkpoint_item(i)]
    saver.run(thread_key(saver, thread))
    return {env.format for env in saver.run(read_envelopes(saver, rows))}


def small(backend: Backend, **kwargs: Any) -> Any:
    """A saver that stores values above ``INLINE`` bytes as blobs: a few KB are chunk
    items."""
    return backend.saver(inline_threshold=INLINE, **kwargs)


def with_large_value(saver: Any, thread: str) -> None:
    """One more checkpoint whose value has enough chunks for a pack (in S3)."""
    parent = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": SUB}})
    cp = empty_checkpoint()
    version = saver.get_next_version(None, None)
    cp["channel_values"] = {"v": os.urandom(300_000), "n": 9}
    cp["channel_versions"] = {"v": version, "n": version}
    saver.put(parent.config, cp, {"step": 9}, {"v": version})


# --------------------------------------------------------------------- copy_thread
def test_copy_thread_copies_chunk_items_as_they_are(
    backend: Backend, request_log: RequestLog
) -> None:
    """The copy's partition holds the source's chunk items, byte for byte (names are
    the chunks' SHA-256, the same in every thread) and nothing else, written with its
    writes items (no request more); the copy reads like the source, also once the
    source is deleted."""
    write_thread(small(backend), "src")
    with_large_value(small(backend), "src")
    source = chunk_items(backend, "src")
    assert source and blobs(backend, "src")  # chunk items, and a pack in S3
    expected = history(backend.saver(), "src")
    s3, ddb = request_log.attach(backend.s3()), request_log.attach(backend.dynamodb())

    small(backend, s3_client=s3, dynamodb_client=ddb).copy_thread("src", "dst")

    assert chunk_items(backend, "dst") == source
    calls = request_log.counts()
    assert calls[("s3", "CopyObject")] == len(blobs(backend, "src"))  # the pack
    # chunk items and writes items, checkpoint items, heads
    assert calls[("dynamodb", "BatchWriteItem")] == 3
    assert history(backend.saver(), "dst") == expected
    backend.saver().delete_thread("src")
    assert history(backend.saver(), "dst") == expected


def test_a_copy_that_failed_before_its_chunk_items_leaves_nothing_visible(
    inproc_backend: Backend,
) -> None:
    """Chunk items are written before the checkpoint items that name them: a copy
    whose chunk items were refused shows no checkpoint, and its retry completes."""
    write_thread(small(inproc_backend), "src")
    expected = history(inproc_backend.saver(), "src")
    ddb = inproc_backend.dynamodb()

    def refuse(params: dict[str, Any], **_: Any) -> None:
        for requests in params.get("RequestItems", {}).values():
            for r in requests:
                item = r.get("PutRequest", {}).get("Item", {})
                if item.get("pk") == {"S": "dst"} and item["sk"]["S"].startswith("b#"):
                    error = {"Error": {"Code": "AccessDeniedException", "Message": "denied"}}
                    raise ClientError(error, "BatchWriteItem")  # type: ignore[arg-type]

    ddb.meta.events.register("provide-client-params.dynamodb.BatchWriteItem", refuse)
    with pytest.raises(S3SaverError):
        inproc_backend.saver(dynamodb_client=ddb).copy_thread("src", "dst")
    assert history(inproc_backend.saver(), "dst") == []

    ddb.meta.events.unregister("provide-client-params.dynamodb.BatchWriteItem", refuse)
    inproc_backend.saver(dynamodb_client=ddb).copy_thread("src", "dst")
    assert history(inproc_backend.saver(), "dst") == expected


def test_async_copy_thread_copies_chunk_items(server_backend: Backend) -> None:
    write_thread(small(server_backend), "src")
    expected = history(server_backend.saver(), "src")

    async def main() -> None:
        async with server_backend.async_saver() as saver:
            await saver.acopy_thread("src", "dst")

    asyncio.run(main())
    assert chunk_items(server_backend, "dst") == chunk_items(server_backend, "src")
    assert history(server_backend.saver(), "dst") == expected


def test_a_sealed_copy_reseals_chunk_items_as_chunk_items(
    inproc_backend: Backend, ring: StaticKeyRing
) -> None:
    """Under encryption each chunk item is opened with the source's key and stored
    again as a chunk item named and sealed under the target's (no S3 blob for it);
    a pack's chunks become loose blobs, as before. The copy reads like the source,
    also once the source's chunk items are gone."""
    write_thread(small(inproc_backend, encryption=Encryption(ring)), "src")
    with_large_value(small(inproc_backend, encryption=Encryption(ring)), "src")
    source = chunk_items(inproc_backend, "src")
    (pack,) = blobs(inproc_backend, "src")
    assert pack.endswith(".pack")
    expected = history(inproc_backend.saver(encryption=Encryption(ring)), "src")

    small(inproc_backend, encryption=Encryption(ring)).copy_thread("src", "dst")

    copied = chunk_items(inproc_backend, "dst")
    assert len(copied) == len(source)
    assert not copied.keys() & source.keys()  # keyed names: under another key
    assert not [k for k in blobs(inproc_backend, "dst") if k.endswith(".pack")]
    assert len(blobs(inproc_backend, "dst")) > 1  # the pack's chunks, loose
    for key in source:  # not read by the copy
        ddb = inproc_backend.dynamodb()
        ddb.delete_item(TableName=inproc_backend.table, Key={"pk": {"S": "src"}, "sk": {"S": key}})
    assert history(inproc_backend.saver(encryption=Encryption(ring)), "dst") == expected


def test_a_sealed_copy_without_chunk_items_stores_them_as_blobs(
    inproc_backend: Backend, ring: StaticKeyRing
) -> None:
    """A copying saver with ``chunk_items=False`` writes what older releases read:
    the source's chunk items become loose blobs."""
    write_thread(small(inproc_backend, encryption=Encryption(ring)), "src")
    assert chunk_items(inproc_backend, "src")
    expected = history(inproc_backend.saver(encryption=Encryption(ring)), "src")

    small(inproc_backend, encryption=Encryption(ring), chunk_items=False).copy_thread("src", "dst")

    assert chunk_items(inproc_backend, "dst") == {}
    assert len(blobs(inproc_backend, "dst")) == len(chunk_items(inproc_backend, "src"))
    saver = inproc_backend.saver(encryption=Encryption(ring))
    assert body_layouts(inproc_backend, saver, "src") == {codec.LAYOUT_ITEMS}
    assert body_layouts(inproc_backend, saver, "dst") == {codec.LAYOUT_1}
    assert history(inproc_backend.saver(encryption=Encryption(ring)), "dst") == expected


# ------------------------------------------------------------------------ archives
def test_an_exported_thread_with_chunk_items_imports_into_a_working_thread(
    inproc_backend: Backend,
) -> None:
    write_thread(small(inproc_backend), "src")
    assert chunk_items(inproc_backend, "src")
    archive = io.StringIO()
    export_thread(inproc_backend.saver(), "src", archive)
    archive.seek(0)

    restored = small(inproc_backend, prefix="restored/")
    import_thread(restored, archive, thread_id="copy")

    assert chunk_items(inproc_backend, "copy", "restored/")
    got = history(inproc_backend.saver(prefix="restored/"), "copy")
    assert got == history(inproc_backend.saver(), "src")


def test_an_archive_exported_by_an_earlier_release_imports(inproc_backend: Backend) -> None:
    """``archive_v1.jsonl`` was exported by 0.4.1 (loose blobs); imported now, its
    small values become chunk items and it reads as it does in InMemorySaver."""
    memory = InMemorySaver()
    with ARCHIVE.open() as f:
        import_thread(memory, f)
    with ARCHIVE.open() as f:
        import_thread(small(inproc_backend), f)

    assert chunk_items(inproc_backend, "archived")
    assert history(inproc_backend.saver(), "archived") == history(memory, "archived")


# -------------------------------------------------------------------- re-encryption
def drop(backend: Backend, thread: str, keys: Any) -> None:
    ddb = backend.dynamodb()
    for key in keys:
        ddb.delete_item(TableName=backend.table, Key={"pk": {"S": thread}, "sk": {"S": key}})


def test_reencryption_reseals_chunk_items_as_chunk_items(
    inproc_backend: Backend, ring: StaticKeyRing, request_log: RequestLog
) -> None:
    """Each chunk item is stored again as a chunk item named and sealed under the new
    key version (no S3 blob for it), before the items naming it are rewritten; the
    old ones are left for ``gc``, and the thread reads the same without them."""
    write_thread(small(inproc_backend, encryption=Encryption(ring)), "t")
    old = chunk_items(inproc_backend, "t")
    assert old and not blobs(inproc_backend, "t")
    expected = history(inproc_backend.saver(encryption=Encryption(ring)), "t")
    s3, ddb = request_log.attach(inproc_backend.s3()), request_log.attach(inproc_backend.dynamodb())

    done = inproc_backend.saver(
        encryption=Encryption(ring), s3_client=s3, dynamodb_client=ddb
    ).reencrypt_thread("t")

    assert not blobs(inproc_backend, "t")
    new = chunk_items(inproc_backend, "t").keys() - old.keys()
    assert len(new) == len(old)
    assert (done.version, done.objects, done.chunk_items) == (2, 0, len(old))
    calls = request_log.counts()
    assert not [c for c in calls if c[0] == "s3"]
    # the chunk items read, then written (one batch of checkpoints); the old key deleted
    assert calls[("dynamodb", "BatchGetItem")] == 1
    assert calls[("dynamodb", "BatchWriteItem")] == 2
    drop(inproc_backend, "t", old)
    assert history(inproc_backend.saver(encryption=Encryption(ring)), "t") == expected


@pytest.mark.parametrize("operation", ["copy", "reencrypt"])
def test_read_hints_name_the_resealed_chunk_items(
    inproc_backend: Backend, ring: StaticKeyRing, operation: str
) -> None:
    """Bodies in S3 name the chunk items a reader gets beside them (``pi``); a sealed
    copy or a re-encryption leaves no hint naming a chunk item under the old key (it
    drops them, as ``pf`` and ``pp``), and a cold read, the old key shredded, reads
    the same."""
    writer = small(inproc_backend, encryption=Encryption(ring), index_inline_limit=0)
    write_thread(writer, "t")
    assert any("pi" in i for i in inproc_backend.items() if i["sk"]["S"].startswith("c#"))
    expected = history(inproc_backend.saver(encryption=Encryption(ring)), "t")
    old = chunk_items(inproc_backend, "t")
    saver = inproc_backend.saver(encryption=Encryption(ring))
    if operation == "copy":
        saver.copy_thread("t", "dst")
        saver.delete_thread("t")
        thread = "dst"
    else:
        saver.reencrypt_thread("t")
        thread = "t"
    named = {
        i["pi"]["B"][at : at + 32].hex()
        for i in inproc_backend.items()
        if i["pk"]["S"] == thread and "pi" in i
        for at in range(0, len(i["pi"]["B"]), 32)
    }
    assert {f"b#{n}" for n in named} <= chunk_items(inproc_backend, thread).keys() - old.keys()
    assert history(inproc_backend.saver(encryption=Encryption(ring)), thread) == expected


def test_a_reencryption_that_stopped_midway_is_finished_by_the_next(
    inproc_backend: Backend, ring: StaticKeyRing, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after its first batches (new chunk items written, some items not
    rewritten), the thread reads the same; the next run finishes it."""
    monkeypatch.setattr(reseal, "_BATCH", 2)  # several batches of checkpoints
    write_thread(small(inproc_backend, encryption=Encryption(ring)), "t")
    old = chunk_items(inproc_backend, "t")
    expected = history(inproc_backend.saver(encryption=Encryption(ring)), "t")
    dying = inproc_backend.saver(encryption=Encryption(ring))
    fail_puts(dying, after=5)  # the new key, then the first batches' items
    with pytest.raises(Stop):
        dying.reencrypt_thread("t")
    assert len(chunk_items(inproc_backend, "t")) > len(old)  # some written already
    assert history(inproc_backend.saver(encryption=Encryption(ring)), "t") == expected

    done = inproc_backend.saver(encryption=Encryption(ring)).reencrypt_thread("t")

    assert done.shredded == (1,)
    drop(inproc_backend, "t", old)
    assert history(inproc_backend.saver(encryption=Encryption(ring)), "t") == expected


def test_the_async_saver_reencrypts_chunk_items(
    server_backend: Backend, ring: StaticKeyRing
) -> None:
    write_thread(small(server_backend, encryption=Encryption(ring)), "t")
    old = chunk_items(server_backend, "t")
    expected = history(server_backend.saver(encryption=Encryption(ring)), "t")

    async def main() -> Any:
        async with server_backend.async_saver(encryption=Encryption(ring)) as saver:
            return await saver.areencrypt_thread("t")

    done = asyncio.run(main())
    assert not blobs(server_backend, "t")
    assert (done.version, done.chunk_items) == (2, len(old))
    drop(server_backend, "t", old)
    assert history(server_backend.saver(encryption=Encryption(ring)), "t") == expected


def test_a_warm_writer_names_no_chunk_item_under_the_old_key(
    inproc_backend: Backend, ring: StaticKeyRing
) -> None:
    """A saver that stored the thread's chunk items (and remembers them) before the
    re-encryption names none of them once it loaded the new key: what it puts then
    reads back after the old key is shredded."""
    warm = small(inproc_backend, encryption=Encryption(ring, key_ttl=0.2))
    write_thread(warm, "t")
    latest = warm.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    inproc_backend.saver(encryption=Encryption(ring)).reencrypt_thread("t")
    time.sleep(0.25)  # its key_ttl passes: its next call loads the keys again
    cp = {**latest.checkpoint, "id": str(uuid6())}
    version = warm.get_next_version(None, None)
    cp["channel_values"] = {**cp["channel_values"], "w": os.urandom(1_500)}
    cp["channel_versions"] = {**cp["channel_versions"], "w": version}
    config = warm.put(latest.config, cp, {"step": 99}, {"w": version})
    got = inproc_backend.saver(encryption=Encryption(ring)).get_tuple(config)
    assert got is not None and got.checkpoint["channel_values"] == cp["channel_values"]
