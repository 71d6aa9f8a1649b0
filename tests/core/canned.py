"""Canned state for flow tests: a saver state without clients, and realistic storage.

Index items and objects are never written by hand: :func:`store` runs the real
``commit.put`` flow and keeps what it uploads and the item it commits, and
:func:`store_writes` does the same with ``writes.put_writes``. A test then feeds
those back to a reading flow, so reads are tested on exactly what puts write.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, empty_checkpoint

from langgraph_s3 import codec
from langgraph_s3.core import SaverCore, datakeys, schema
from langgraph_s3.core.commit import put
from langgraph_s3.core.datakeys import KeyRing, KeyScope
from langgraph_s3.core.index import (
    TXN_CANCELLED,
    BatchWrite,
    Cancelled,
    Page,
    PutNew,
    Query,
    Transact,
    WritesUpdate,
)
from langgraph_s3.core.writes import put_writes
from langgraph_s3.operations import IndexRequest, S3Get, S3Put, WaitUpload
from tests.core.script import Script

#: The saver clock of every canned core (2023-11-14T22:13:20Z).
T0 = 1_700_000_000.0


def make_core(list_leads: bool | None = None, **settings: Any) -> SaverCore:
    """A saver state on bucket ``b`` and table ``t`` with a fixed clock; no clients.

    ``list_leads=False``: values stored as chunk lists and packs as before layout 8
    (no short lists, no leads), everything else as the settings make it."""
    settings.setdefault("clock", lambda: T0)
    core = SaverCore(bucket="b", table="t", **settings)
    if list_leads is not None:
        core.list_leads = list_leads
    return core


def body_versions(body: bytes) -> tuple[int, int]:
    """A plain checkpoint body's frame version, and the layout its entries need (its
    envelope's ``f``): ``(7, n)`` with a compact checkpoint record (``trim_items``, the
    default serializer) and ``n`` up to 7, ``(n, n)`` else."""
    env = codec.unpack(codec.unframe(body, key="k", kind=codec.KIND_CHECKPOINT), key="k")
    return body[len(codec.MAGIC)], env.get("f", codec.LAYOUT_1)


def config(thread_id: str = "t1", cid: str | None = None, ns: str = "") -> RunnableConfig:
    """A LangGraph config naming a thread, namespace and optionally a checkpoint."""
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def checkpoint(
    cid: str, values: Mapping[str, Any] | None = None, versions: Mapping[str, Any] | None = None
) -> Checkpoint:
    """A checkpoint with id ``cid``; every value's channel has version ``"1"`` unless
    ``versions`` says otherwise (a channel may have a version and no value)."""
    cp = empty_checkpoint()
    cp["id"] = cid
    cp["channel_values"] = dict(values or {})
    cp["channel_versions"] = (
        dict(versions) if versions is not None else dict.fromkeys(cp["channel_values"], "1")
    )
    return cp


@dataclass
class Stored:
    """What a put wrote: its index item, and the objects it uploaded (key -> body)."""

    item: dict[str, Any] = field(default_factory=dict)
    #: The head item of the namespace as the commit leaves it.
    head: dict[str, Any] = field(default_factory=dict)
    objects: dict[str, bytes] = field(default_factory=dict)
    config: RunnableConfig | None = None
    #: With encryption=: the data key items the flow created.
    key_items: list[dict[str, Any]] = field(default_factory=list)
    #: Chunk items (layout 5) the flow wrote, by (pk, sk).
    chunk_items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    @property
    def row(self) -> schema.Row:
        return schema.parse_row(self.item)


def _answer(stored: Stored, op: Any) -> Any:
    if isinstance(op, Query) and op.prefix == schema.KEY_SK_PREFIX:
        # With encryption=: the key items (or a tenant reference) of the partition asked.
        items = sorted(
            (i for i in stored.key_items if i[schema.PK]["S"] == op.pk),
            key=lambda i: str(i[schema.SK]["S"]),
            reverse=op.newest_first,
        )
        return Page(items[: op.limit], None)
    if isinstance(op, PutNew):
        stored.key_items.append(dict(op.item))
        return True
    if starts_key(op):
        stored.key_items.append(started(op))
        return None
    if isinstance(op, S3Put):
        stored.objects[op.key] = op.body
        return None
    if isinstance(op, WaitUpload):
        return True
    if isinstance(op, BatchWrite):
        for request in op.requests:
            item = request["PutRequest"]["Item"]
            stored.chunk_items[item[schema.PK]["S"], item[schema.SK]["S"]] = dict(item)
        return []
    if isinstance(op, Transact):
        for role, part in op.parts:
            if "Put" in part:
                stored.item = part["Put"]["Item"]
            if "Update" in part and "#tid" in part["Update"]["ExpressionAttributeNames"]:
                if _taken(part["Update"], stored.item):
                    roles = tuple(r for r, _ in op.parts)
                    codes = ("ConditionalCheckFailed" if r == role else "None" for r in roles)
                    return Cancelled(TXN_CANCELLED, roles, tuple({"Code": c} for c in codes))
                stored.item = applied(part["Update"], stored.item)
            elif "Update" in part:
                head = part["Update"]
                values = head["ExpressionAttributeValues"]
                stored.head = {
                    **head["Key"],
                    **{
                        name: values[f":{p[1:]}"]
                        for p, name in head["ExpressionAttributeNames"].items()
                    },
                }
        return None
    assert isinstance(op, WritesUpdate), op
    if _taken(op.params, stored.item):
        return False
    stored.item = applied(op.update(), stored.item)
    return True


def _taken(update: Mapping[str, Any], item: Mapping[str, Any]) -> bool:
    """Whether a writes update's condition (a group's span is free) fails on ``item``."""
    names = re.findall(r"attribute_not_exists\((\w+)\)", update.get("ConditionExpression", ""))
    return any(name in item for name in names)


def store(
    cfg: RunnableConfig,
    cp: Checkpoint,
    metadata: Mapping[str, Any] | None = None,
    new_versions: Mapping[str, Any] | None = None,
    core: SaverCore | None = None,
) -> Stored:
    """Run ``commit.put`` on a fresh saver state (or ``core``) and keep what it wrote.

    ``new_versions`` defaults to every channel of the checkpoint.
    """
    stored = Stored()
    flow = put(
        core or make_core(),
        cfg,
        cp,
        cast(CheckpointMetadata, dict(metadata or {"source": "loop", "step": 0})),
        dict(new_versions if new_versions is not None else cp["channel_versions"]),
    )
    stored.config = Script(flow).drain(lambda op: _answer(stored, op))
    return stored


def store_writes(
    cfg: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
    core: SaverCore | None = None,
) -> Stored:
    """Run ``writes.put_writes`` on a fresh saver state (or ``core``); keep the item
    its update requests build and the blobs it uploads."""
    stored = Stored()
    Script(put_writes(core or make_core(), cfg, writes, task_id, task_path)).drain(
        lambda op: _answer(stored, op)
    )
    return stored


def created_key(
    scope: KeyScope, ring: KeyRing, version: int = 1, core: SaverCore | None = None
) -> dict[str, Any]:
    """The item a writer stores for version ``version`` of ``scope``'s data key
    (``datakeys.create``, no other writer first)."""
    stored = Stored()
    Script(datakeys.create(core or make_core(), ring, scope, version)).drain(
        lambda op: _answer(stored, op)
    )
    (item,) = stored.key_items
    return item


def applied(update: Mapping[str, Any], item: Mapping[str, Any]) -> dict[str, Any]:
    """The writes item an UpdateItem request of ``index.writes_updates`` leaves behind
    (on top of ``item``): its key and the values it sets; the task path and regular
    writes (``if_not_exists``) only where ``item`` has none yet."""
    names = update["ExpressionAttributeNames"]
    out = {**item, **update["Key"]}
    for placeholder, value in update["ExpressionAttributeValues"].items():
        attr = names.get(f"#{placeholder[1:]}", placeholder[1:])
        idx = schema.record_index(attr)
        if_not_exists = attr == schema.TASK_PATH or (idx is not None and idx >= 0)
        if not (if_not_exists and attr in out):
            out[attr] = value
    return out


def page(items: Sequence[Mapping[str, Any]], last: Mapping[str, Any] | None = None) -> Page:
    """A page of a query or scan."""
    return Page([dict(i) for i in items], None if last is None else dict(last))


def from_bucket(objects: Mapping[str, bytes]) -> Any:
    """An answer for ``S3Get`` requests: the body stored under the key, or None."""

    def answer(op: Any) -> Any:
        assert isinstance(op, S3Get), op
        body = objects.get(op.key)
        return body if body is None else body[op.start : op.end]

    return answer


#: The parts of a transaction that starts a thread's key scope, by role.
ROLES = ("put", "absent")


def starts_key(op: Any) -> bool:
    """Whether a request starts a thread's key scope (``scopes.start``): a transaction
    of the put of its version 1 or tenant reference, and the check that the other is
    absent (``Script.expect`` matcher)."""
    return isinstance(op, Transact) and tuple(role for role, _ in op.parts) == ROLES


def started(op: Transact) -> dict[str, Any]:
    """The key item (version 1, or the tenant reference) a ``starts_key`` request puts."""
    return dict(op.parts[0][1]["Put"]["Item"])


def lost(role: str = "absent") -> Cancelled:
    """The answer to a ``starts_key`` request when another writer started the thread
    first: its other item exists (``absent``), or the same one (``put``)."""
    reasons = tuple({"Code": "ConditionalCheckFailed" if r == role else "None"} for r in ROLES)
    return Cancelled(TXN_CANCELLED, ROLES, reasons)


def is_query(op: Any) -> bool:
    """Whether a request is an index query (``Script.expect`` matcher)."""
    return isinstance(op, IndexRequest) and op.method == "query"


def only_gets(ops: Sequence[Any]) -> bool:
    """Whether a round trip holds S3 GETs only (``Script.expect`` matcher)."""
    return all(isinstance(op, S3Get) for op in ops)
