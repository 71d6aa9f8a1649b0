"""The invariants checked after every injected fault, counted rather than asserted, so a
sweep reports every broken case (``tests/storage/test_faults.py`` asserts the counts)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from langgraph_s3 import codec
from langgraph_s3.core.entries import Blobs, Entry, Envelope, Listed, envelope_from_wire
from langgraph_s3.core.objects import check_digest
from langgraph_s3.core.schema import is_checkpoint_item, is_writes_item, parse_row, parse_writes
from langgraph_s3.errors import ObjectError
from langgraph_s3.keys import Layout
from tests.faults.graph import Effects, cfg


@dataclass
class Acks:
    """Pending writes the saver acknowledged: (checkpoint id, task id, channel)."""

    rows: set[tuple[str, str, str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, config: Any, writes: Any, task_id: str) -> None:
        cid = str(config["configurable"]["checkpoint_id"])
        with self._lock:
            self.rows.update((cid, task_id, str(channel)) for channel, _ in writes)

    def track(self, saver: Any) -> Any:
        """Record every ``put_writes`` / ``aput_writes`` of ``saver`` that returned."""
        put_writes, aput_writes = saver.put_writes, saver.aput_writes

        def tracked(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            put_writes(config, writes, task_id, task_path)
            self.add(config, writes, task_id)

        async def atracked(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            await aput_writes(config, writes, task_id, task_path)
            self.add(config, writes, task_id)

        saver.put_writes, saver.aput_writes = tracked, atracked
        return saver


@dataclass
class Verdict:
    """What one case left behind."""

    identical: bool = False
    torn: int = 0  # checkpoints list() returns that do not load
    forks: int = 0  # checkpoints whose parent is not the one listed before them
    lost_writes: int = 0  # acknowledged pending writes missing from their checkpoint
    orphan_writes: int = 0  # acknowledged writes on a checkpoint whose commit failed
    deliveries: int = 0  # distinct side effects (must be 1)
    executions: int = 0  # times the side-effect node ran (at least once)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.identical
            and not (self.torn or self.forks or self.lost_writes)
            and self.deliveries == 1
            and not self.problems
        )


def judge(
    tuples: list[Any],
    load: Any,
    final: dict[str, Any] | None,
    reference: dict[str, Any],
    acks: Acks,
    effects: Effects,
    thread: str,
) -> Verdict:
    """Check a thread: ``tuples`` is what ``list()`` returned, ``load(config)`` reads one
    checkpoint exactly (both from a fresh saver without faults)."""
    v = Verdict(identical=final == reference)
    if final != reference:
        v.problems.append("final state differs from the clean run")
    ids = [t.config["configurable"]["checkpoint_id"] for t in tuples]
    parents = [t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
               for t in tuples]  # fmt: skip
    v.forks = sum(1 for p, want in zip(parents, [*ids[1:], None], strict=True) if p != want)
    stored: set[tuple[str, str, str]] = set()
    for t in tuples:
        try:
            got = load(t.config)
        except ObjectError as exc:
            v.torn += 1
            v.problems.append(f"{type(exc).__name__}: {exc}")
            continue
        if got is None or got.checkpoint["id"] != t.checkpoint["id"]:
            v.torn += 1
            continue
        stored.update((got.checkpoint["id"], task, ch) for task, ch, _ in got.pending_writes)
    mine = {row for row in acks.rows if row[0] in set(ids)}
    v.lost_writes = len(mine - stored)
    # LangGraph saves a step's writes concurrently with the checkpoint they belong to;
    # when that commit fails they belong to no checkpoint, and the step runs again.
    v.orphan_writes = len(acks.rows - mine)
    v.deliveries = effects.deliveries(thread)
    v.executions = effects.executions(thread)
    return v


def history(saver: Any, thread: str) -> list[Any]:
    return list(saver.list(cfg(thread)))


async def ahistory(saver: Any, thread: str) -> list[Any]:
    return [t async for t in saver.alist(cfg(thread))]


def envelope_of(backend: Any, item: dict[str, Any]) -> Envelope:
    """The checkpoint of index ``item`` as stored: its body in the item, or its object."""
    row = parse_row(item)
    key = Layout("").checkpoint_key(row.thread_id, row.ns, row.checkpoint_id, row.digest)
    body = row.body
    if body is None:
        body = backend.s3().get_object(Bucket=backend.bucket, Key=key)["Body"].read()
    place = check_digest(row, body, key)  # a bare body (layout 6) gets its ids from it
    raw = codec.unpack(codec.unframe(body, key=key, kind=codec.KIND_CHECKPOINT), key=key)
    return envelope_from_wire(raw, key, place)


def entry_kinds(backend: Any) -> dict[str, int]:
    """How the values in ``backend``'s storage are named, read straight from the table
    and bucket: by checkpoint bodies and pending-write records, the chunk lists in a
    pack (``lists_packed``) or loose (``lists_loose``), and plain chunk entries
    (``chunks``). What tells that the suite really exercises chunk lists."""
    kinds: Counter[str] = Counter()

    def count(entry: Entry) -> None:
        if isinstance(entry, Listed):
            kinds["lists_loose" if entry.span is None else "lists_packed"] += 1
        elif isinstance(entry, Blobs):
            kinds["chunks"] += 1

    ddb = backend.dynamodb()
    for page in ddb.get_paginator("scan").paginate(TableName=backend.table):
        for item in page["Items"]:
            if is_writes_item(item):
                for _, record in parse_writes(item).records:
                    count(record.entry)
            elif is_checkpoint_item(item):
                for entry in envelope_of(backend, item).channels.values():
                    count(entry)
    return {k: kinds[k] for k in ("lists_packed", "lists_loose", "chunks")}
