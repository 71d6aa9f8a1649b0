"""Damaged storage, on S3Saver and on AsyncS3Saver: pause a thread at the approval,
damage one stored thing (with plain boto3 clients, as a bad deploy or a bit flip
would), then read every checkpoint and resume. Each read and the resume must give the
value they gave before, or a typed error naming the damaged key; never a wrong value.

``list`` and ``missing-list`` hit the chunk list the paused checkpoint's document is
named by (the suite stores the document as a chunk list, ``env.LIST_MIN``): a byte
flipped inside the list's frame, or the object holding it deleted (its pack, or the
loose blob). The resume must read that list before any chunk of the document."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from langgraph_s3 import S3SaverError
from langgraph_s3.core.entries import Listed
from langgraph_s3.errors import ObjectError
from langgraph_s3.keys import Layout
from tests.conftest import Backend
from tests.faults.checks import ahistory, envelope_of, history
from tests.faults.env import async_saver, sync_saver
from tests.faults.graph import INPUT, Effects, adrive, build, cfg, drive
from tests.faults.inject import client_config

DAMAGES = (
    "checkpoint-object", "blob", "missing-blob", "list", "missing-list", "index-body",
    "pending-write", "head", "missing-head",
)  # fmt: skip
LAYOUT = Layout("")


def _flip(data: bytes, seed: int) -> bytes:
    broken = bytearray(data)
    broken[random.Random(seed).randrange(len(broken))] ^= 0x5A
    return bytes(broken)


def _snapshot(tuples: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in tuples:
        writes = sorted((task, ch, repr(v)) for task, ch, v in t.pending_writes)
        out[t.checkpoint["id"]] = (t.checkpoint["channel_values"], writes)
    return out


def _options(kind: str) -> dict[str, Any]:
    # Bodies are kept in the index item unless told otherwise; the object must exist.
    return {"index_inline_limit": 0} if kind == "checkpoint-object" else {}


# ------------------------------------------------------------- the damage
def _break_s3(backend: Backend, kind: str, thread: str, digest: str, newest: str) -> str:
    s3 = backend.s3()

    def rewrite(key: str, change: Any) -> None:
        body = s3.get_object(Bucket=backend.bucket, Key=key)["Body"].read()
        s3.put_object(Bucket=backend.bucket, Key=key, Body=change(body))

    if kind == "checkpoint-object":
        key = LAYOUT.checkpoint_key(thread, "", newest, digest)
        rewrite(key, lambda b: _flip(b, 1))
        return key
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=backend.bucket, Prefix=LAYOUT.thread_prefix(thread)
    )
    blobs = [o for page in pages for o in page.get("Contents", []) if "/b/" in o["Key"]]
    key = max(blobs, key=lambda o: o["Size"])["Key"]
    if kind == "blob":
        rewrite(key, lambda b: _flip(b, 2))
    else:
        s3.delete_object(Bucket=backend.bucket, Key=key)
    return key


def _break_index(backend: Backend, kind: str, thread: str, newest: str) -> str:
    ddb = backend.dynamodb()
    pk = {"S": LAYOUT.pk(thread)}
    item_key = {"pk": pk, "sk": {"S": LAYOUT.checkpoint_sk("", newest)}}

    def set_attr(key: dict[str, Any], attr: str, value: Any) -> None:
        ddb.update_item(
            TableName=backend.table, Key=key, UpdateExpression="SET #a = :v",
            ExpressionAttributeNames={"#a": attr}, ExpressionAttributeValues={":v": value},
        )  # fmt: skip

    if kind == "index-body":
        item = ddb.get_item(TableName=backend.table, Key=item_key)["Item"]
        set_attr(item_key, "b", {"B": _flip(item["b"]["B"], 3)})
        # A body kept in its index item is named like the object it would be in S3
        # (same key, digest and checks either way; see docs/layout.md).
        return LAYOUT.checkpoint_key(thread, "", newest, item["h"]["S"])
    if kind == "pending-write":
        row = ddb.query(
            TableName=backend.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :w)",
            ExpressionAttributeValues={":pk": pk, ":w": {"S": item_key["sk"]["S"] + "#w#"}},
        )["Items"][0]
        attr = sorted(a for a in row if a[0] in "wm" and a[1:].isdigit())[0]
        set_attr({"pk": pk, "sk": row["sk"]}, attr, {"B": _flip(row[attr]["B"], 4)})
        return str(row["sk"]["S"])
    head_key = {"pk": pk, "sk": {"S": LAYOUT.head_sk("")}}
    if kind == "head":
        set_attr(head_key, "cid", {"N": "7"})  # not a checkpoint id at all
    else:
        ddb.delete_item(TableName=backend.table, Key=head_key)
    return str(head_key["sk"]["S"])


def _break_list(backend: Backend, kind: str, thread: str, item: dict[str, Any]) -> str:
    """Flip a byte inside, or delete, the chunk list naming the document in the
    checkpoint of index ``item``; returns the key of the object that holds the list."""
    entry = envelope_of(backend, item).channels["doc"]
    assert isinstance(entry, Listed), f"the document is not a chunk list: {entry!r}"
    if entry.span is None:
        where, start, length = LAYOUT.blob_key(thread, entry.digest.hex()), 0, None
    else:
        where = LAYOUT.pack_key(thread, entry.span.pack.hex())
        start, length = entry.span.offset, entry.span.length
    s3 = backend.s3()
    if kind == "missing-list":
        s3.delete_object(Bucket=backend.bucket, Key=where)
        return where
    data = s3.get_object(Bucket=backend.bucket, Key=where)["Body"].read()
    end = len(data) if length is None else start + length
    data = data[:start] + _flip(data[start:end], 5) + data[end:]
    s3.put_object(Bucket=backend.bucket, Key=where, Body=data)
    return where


def _break(backend: Backend, kind: str, thread: str, newest: str) -> str:
    """Damage one stored thing of ``kind`` in ``thread`` (``newest``: its latest
    checkpoint id); returns the key a typed error must name."""
    if kind in ("checkpoint-object", "blob", "missing-blob", "list", "missing-list"):
        item_key = {"pk": {"S": LAYOUT.pk(thread)}, "sk": {"S": LAYOUT.checkpoint_sk("", newest)}}
        item = backend.dynamodb().get_item(TableName=backend.table, Key=item_key)["Item"]
        if kind in ("list", "missing-list"):
            return _break_list(backend, kind, thread, item)
        return _break_s3(backend, kind, thread, item["h"]["S"], newest)
    return _break_index(backend, kind, thread, newest)


# ------------------------------------------------------------- the checks
class _SyncReads:
    """S3Saver's reads, awaitable like AsyncS3Saver's so one check serves both savers."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    async def get_tuple(self, config: Any) -> Any:
        return self.saver.get_tuple(config)

    async def list(self, thread: str) -> list[Any]:
        return history(self.saver, thread)


class _AsyncReads:
    def __init__(self, saver: Any) -> None:
        self.saver = saver

    async def get_tuple(self, config: Any) -> Any:
        return await self.saver.aget_tuple(config)

    async def list(self, thread: str) -> list[Any]:
        return await ahistory(self.saver, thread)


async def _reads_are_right_or_refused(
    reads: Any, thread: str, before: dict[str, Any], key: str
) -> tuple[int, list[str]]:
    """Every read of the thread returns what it returned before the damage, or raises an
    ObjectError whose key names the damaged ``key``: (refusals, problems)."""
    refusals, problems = 0, []

    async def check(what: str, read: Any) -> Any:
        nonlocal refusals
        try:
            return await read
        except ObjectError as exc:
            refusals += 1
            if key not in exc.key or key not in str(exc):
                problems.append(f"{what}: {type(exc).__name__} names {exc.key!r}, not {key!r}")
        except Exception as exc:
            problems.append(f"{what}: untyped {exc!r}"[:300])
        return None

    for cid, (values, writes) in before.items():
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": cid}}
        got = await check(f"get_tuple {cid}", reads.get_tuple(config))
        if got is not None and (
            got.checkpoint["channel_values"] != values
            or sorted((t, c, repr(v)) for t, c, v in got.pending_writes) != writes
        ):
            problems.append(f"get_tuple {cid}: a wrong value")
    latest = await check("latest", reads.get_tuple(cfg(thread)))
    if latest is not None and latest.checkpoint["channel_values"] != before[max(before)][0]:
        problems.append("latest: a wrong value")
    listed = await check("list", reads.list(thread))
    if listed is not None and [t.checkpoint["id"] for t in listed] != sorted(before, reverse=True):
        problems.append("list: wrong checkpoints")
    return refusals, problems


def _resume_outcome(final: Any, exc: Exception | None, reference: Any, key: str) -> Any:
    """(what the resume gave, problems): completed with the clean run's state, or a typed
    error that, if it is about an object, names ``key``."""
    if isinstance(exc, S3SaverError):
        wrong = isinstance(exc, ObjectError) and key not in exc.key
        return type(exc).__name__, [f"resume: {exc!r} does not name {key!r}"] if wrong else []
    if exc is not None:
        return "untyped", [f"resume: untyped {exc!r}"[:300]]
    return "completed", ([] if final == reference else ["resume: wrong final state"])


def _figures(kind: str, key: str, reads: tuple[int, list[str]], resume: Any) -> dict[str, Any]:
    return {"kind": kind, "key": key, "refused_reads": reads[0], "resume": resume[0],
            "problems": reads[1] + resume[1]}  # fmt: skip


# ------------------------------------------------------------- the scenarios
def damage(backend: Backend, kind: str, reference: Any, effects: Effects) -> dict[str, Any]:
    """S3Saver: damage one stored thing of ``kind``, then read every checkpoint and resume."""
    thread = f"damage-{kind}"
    writer = sync_saver(backend, client_config(True), **_options(kind))
    build(writer, effects).invoke(INPUT, cfg(thread), durability="sync")
    before = _snapshot(history(sync_saver(backend, client_config(True)), thread))
    key = _break(backend, kind, thread, max(before))
    reader = _SyncReads(sync_saver(backend, client_config(True)))
    reads = asyncio.run(_reads_are_right_or_refused(reader, thread, before, key))
    final, error = None, None
    try:
        final = drive(build(sync_saver(backend, client_config(True)), effects), thread)
    except Exception as exc:
        error = exc
    return _figures(kind, key, reads, _resume_outcome(final, error, reference, key))


async def adamage(backend: Backend, kind: str, reference: Any, effects: Effects) -> dict[str, Any]:
    """The same with AsyncS3Savers over HTTP: written, read and resumed through the
    async API (the damage itself is done with plain boto3 clients)."""
    thread = f"adamage-{kind}"
    async with async_saver(backend, client_config(True), **_options(kind)) as writer:
        await build(writer, effects).ainvoke(INPUT, cfg(thread), durability="sync")
    async with async_saver(backend, client_config(True)) as saver:
        before = _snapshot(await ahistory(saver, thread))
    key = _break(backend, kind, thread, max(before))
    async with async_saver(backend, client_config(True)) as saver:
        reads = await _reads_are_right_or_refused(_AsyncReads(saver), thread, before, key)
    final, error = None, None
    async with async_saver(backend, client_config(True)) as saver:
        try:
            final = await adrive(build(saver, effects), thread)
        except Exception as exc:
            error = exc
    return _figures(kind, key, reads, _resume_outcome(final, error, reference, key))
