"""Read-only commands: threads, history, show, diff, stats, verify."""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from langgraph_s3.cli.common import (
    NOT_OK,
    OK,
    USAGE,
    err,
    fail,
    jsonable,
    out,
    print_json,
    progress,
    require_thread,
    saver,
    shell_message,
)
from langgraph_s3.cli.keys import ThreadKeys, key_needed, opening, thread_keys
from langgraph_s3.core.inventory import ThreadSummary, summaries
from langgraph_s3.core.scratch import Scratch
from langgraph_s3.errors import (
    CorruptObjectError,
    DataKeyError,
    KeyServiceError,
    ObjectError,
    PlaintextObjectError,
    UndecodableValueError,
    UnknownKeyError,
)

#: Storage prices (us-east-1, 2026-11-21) the estimate uses: S3 Standard and DynamoDB
#: Standard table class, per GB-month (https://aws.amazon.com/s3/pricing/,
#: https://aws.amazon.com/dynamodb/pricing/on-demand/); bench/prices.py keeps the same.
S3_GB_MONTH = 0.023
DDB_GB_MONTH = 0.25
#: DynamoDB bills about 100 bytes of overhead per item.
DDB_ITEM_OVERHEAD = 100
GB = 1024**3

JsonOption = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]


def _ago(ms: int) -> str:
    seconds = max(0.0, time.time() - ms / 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


def threads(
    ctx: typer.Context,
    interrupted: Annotated[bool, typer.Option(help="only threads paused on an interrupt")] = False,
    idle_for: Annotated[
        str | None, typer.Option(help="only threads idle this long, e.g. 7d")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="at most this many (newest first)")] = 50,
    json_: JsonOption = False,
) -> None:
    """List threads, most recently active first.

    Example: langgraph-s3 --url s3://my-bucket/agents/?table=checkpoints threads --interrupted
    """
    from langgraph_s3.gc import parse_duration

    idle = parse_duration(idle_for) if idle_for else None
    now_ms = time.time() * 1000
    with inventory(ctx) as (s, scratch):
        # Only the newest `limit` are kept: memory does not grow with the table.
        found = heapq.nlargest(
            limit,
            (
                t
                for t in summaries(s, scratch)
                if (not interrupted or t.interrupted)
                and (idle is None or now_ms - t.last_activity_ms >= idle * 1000)
            ),
            key=lambda t: t.last_activity_ms,
        )
    if json_:
        print_json([asdict(t) for t in found])
        return
    table = Table("thread", "last activity", "step", "interrupt", "checkpoints", "bytes")
    for t in found:
        table.add_row(
            t.thread_id,
            _ago(t.last_activity_ms),
            "" if t.step is None else str(t.step),
            "waiting" if t.interrupted else "",
            str(t.checkpoints),
            str(t.object_bytes + t.index_bytes + t.chunk_item_bytes),
        )
    out.print(table)


@contextmanager
def inventory(ctx: typer.Context) -> Iterator[tuple[Any, Scratch]]:
    """A saver, and a scratch file holding every thread's index items and folder sizes."""
    from langgraph_s3.core.inventory import take_inventory

    with saver(ctx) as s, Scratch() as scratch:
        s.run(take_inventory(s, scratch))
        yield s, scratch


def _config(thread: str, checkpoint: str | None = None, ns: str = "") -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint:
        conf["checkpoint_id"] = checkpoint
    return {"configurable": conf}


def _history_rows(s: Any, thread: str) -> list[dict[str, Any]]:
    rows = []
    for tup in s.list({"configurable": {"thread_id": thread}}):
        conf = tup.config["configurable"]
        parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        rows.append(
            {
                "checkpoint_id": conf["checkpoint_id"],
                "checkpoint_ns": conf["checkpoint_ns"],
                "parent_id": parent,
                "step": tup.metadata.get("step"),
                "source": tup.metadata.get("source"),
                "pending_writes": len(tup.pending_writes or []),
                "interrupted": any(w[1] == "__interrupt__" for w in tup.pending_writes or []),
            }
        )
    rows.sort(key=lambda r: (r["checkpoint_ns"], r["checkpoint_id"]))
    return rows


def history(ctx: typer.Context, thread: str, json_: JsonOption = False) -> None:
    """The thread's checkpoints as a tree: forks branch, each namespace its own tree.

    Example: langgraph-s3 history user-42
    """
    with saver(ctx) as s, opening(s, thread):
        rows = _history_rows(s, thread)
    if not rows:
        fail(NOT_OK, f"thread {thread!r} has no checkpoints")
    if json_:
        print_json(rows)
        return
    children: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for row in rows:
        children.setdefault((row["checkpoint_ns"], row["parent_id"]), []).append(row)
    for ns in sorted({r["checkpoint_ns"] for r in rows}):
        tree = Tree(f"[bold]{thread}[/]" + (f"  namespace {ns!r}" if ns else ""))
        known = {r["checkpoint_id"] for r in rows if r["checkpoint_ns"] == ns}
        roots = [r for r in rows if r["checkpoint_ns"] == ns and r["parent_id"] not in known]
        _grow(tree, roots, children, ns)
        out.print(tree)


def _grow(node: Any, rows: list[dict[str, Any]], children: dict[Any, Any], ns: str) -> None:
    for row in rows:
        label = f"{row['checkpoint_id']}  step {row['step']}  {row['source']}"
        if row["interrupted"]:
            label += "  [yellow]waiting on interrupt[/]"
        below = children.get((ns, row["checkpoint_id"]), [])
        if len(below) > 1:
            label += f"  [cyan]fork: {len(below)} branches[/]"
        _grow(node.add(label), below, children, ns)


def show(
    ctx: typer.Context,
    thread: str,
    checkpoint: Annotated[str | None, typer.Argument(help="default: the latest")] = None,
    ns: Annotated[str, typer.Option(help="checkpoint namespace")] = "",
    channel: Annotated[str | None, typer.Option(help="only this channel's value")] = None,
    json_: JsonOption = False,
) -> None:
    """A checkpoint: channel values, pending writes, interrupts, metadata.

    Example: langgraph-s3 show user-42 --channel messages
    """
    with saver(ctx) as s, opening(s, thread):
        tup = s.get_tuple(_config(thread, checkpoint, ns))
    if tup is None:
        fail(NOT_OK, f"no checkpoint {checkpoint or '(latest)'} in thread {thread!r}")
    values = tup.checkpoint["channel_values"]
    # Whole values where they are asked for (one channel, or JSON for a program);
    # the overview cuts long strings.
    limit = None if json_ or channel is not None else 2000
    if channel is not None:
        if channel not in values:
            fail(NOT_OK, f"no channel {channel!r}; channels: {', '.join(sorted(values))}")
        values = {channel: values[channel]}
    writes = [
        {"task_id": t, "channel": c, "value": jsonable(v, limit)}
        for t, c, v in tup.pending_writes or []
    ]
    shown = {
        "checkpoint_id": tup.config["configurable"]["checkpoint_id"],
        "checkpoint_ns": ns,
        "parent_id": tup.parent_config["configurable"]["checkpoint_id"]
        if tup.parent_config
        else None,
        "values": jsonable(values, limit),
        "pending_writes": [w for w in writes if w["channel"] != "__interrupt__"],
        "interrupts": [
            one
            for w in writes
            if w["channel"] == "__interrupt__"
            for one in (w["value"] if isinstance(w["value"], list) else [w["value"]])
        ],
        "metadata": jsonable(dict(tup.metadata), limit),
    }
    if json_:
        print_json(shown)
        return
    for key in ("checkpoint_id", "parent_id"):
        out.print(f"[bold]{key}[/]: {shown[key]}")
    for section in ("values", "pending_writes", "interrupts", "metadata"):
        out.print(f"[bold]{section}[/]:")
        out.print_json(data=shown[section])


def diff(
    ctx: typer.Context, thread: str, a: str, b: str, ns: str = "", json_: JsonOption = False
) -> None:
    """What changed between two checkpoints of a thread (channel values).

    Example: langgraph-s3 diff user-42 1f0a...  1f0b...
    """
    with saver(ctx) as s, opening(s, thread):
        first, second = (s.get_tuple(_config(thread, c, ns)) for c in (a, b))
    for cid, tup in ((a, first), (b, second)):
        if tup is None:
            fail(NOT_OK, f"no checkpoint {cid} in thread {thread!r}")
    assert first is not None and second is not None
    va, vb = first.checkpoint["channel_values"], second.checkpoint["channel_values"]
    changes = {
        "added": {k: jsonable(vb[k]) for k in sorted(vb.keys() - va.keys())},
        "removed": {k: jsonable(va[k]) for k in sorted(va.keys() - vb.keys())},
        "changed": {
            k: {"from": jsonable(va[k]), "to": jsonable(vb[k])}
            for k in sorted(va.keys() & vb.keys())
            if va[k] != vb[k]
        },
    }
    if json_:
        print_json(changes)
        return
    for kind, color in (("added", "green"), ("removed", "red"), ("changed", "yellow")):
        for name, value in changes[kind].items():
            out.print(f"[{color}]{kind:>7}[/] {name}: {value}", highlight=False)
    if not any(changes.values()):
        out.print("no channel changed")


#: Figures ``stats`` measures by reading objects back (``inventory.thread_figures``).
_MEASURED = ("bytes_uncompressed", "bytes_stored", "blobs", "blob_references",
             "blob_writes_saved_by_dedup")  # fmt: skip


def stats(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Argument()] = None,
    measure: Annotated[
        bool,
        typer.Option(help="all threads: also read every object back for compression and dedup"),
    ] = False,
    json_: JsonOption = False,
) -> None:
    """Objects, bytes and the estimated monthly storage cost of all threads, or one.

    For one thread, or all with --measure (which reads every object once), also the
    compression ratio and the blob writes dedup saved. Example: langgraph-s3 stats --measure --json
    """
    with inventory(ctx) as (s, scratch):
        found = (t for t in summaries(s, scratch) if thread is None or t.thread_id == thread)
        figures, measured = _cost_figures(found)
        if thread is not None and not measured:
            fail(NOT_OK, f"thread {thread!r} has no checkpoints")
        if thread is not None or measure:
            figures.update(_measured_figures(s, measured))
    if json_:
        print_json(figures)
        return
    table = Table("figure", "value")
    for key, value in figures.items():
        if key != "prices":
            table.add_row(key, str(value))
    out.print(table)
    out.print(f"prices: S3 ${S3_GB_MONTH}/GB-month, DynamoDB ${DDB_GB_MONTH}/GB-month (us-east-1)")


def _cost_figures(found: Iterable[ThreadSummary]) -> tuple[dict[str, Any], list[str]]:
    """Counts, bytes and the monthly storage cost of threads, from their summaries
    (read once, one at a time); and the ids of the threads summed."""
    ids: list[str] = []
    checkpoints = objects = object_bytes = index_bytes = chunk_items = chunk_item_bytes = 0
    for t in found:
        ids.append(t.thread_id)
        checkpoints += t.checkpoints
        objects += t.objects
        object_bytes += t.object_bytes
        chunk_items += t.chunk_items
        chunk_item_bytes += t.chunk_item_bytes
        index_bytes += t.index_bytes + DDB_ITEM_OVERHEAD * t.checkpoints
        index_bytes += t.chunk_item_bytes + DDB_ITEM_OVERHEAD * t.chunk_items
    figures = {
        "threads": len(ids),
        "checkpoints": checkpoints,
        "objects": objects,
        "object_bytes": object_bytes,
        "chunk_items": chunk_items,
        "chunk_item_bytes": chunk_item_bytes,
        "index_bytes": index_bytes,
        "monthly_storage_usd": round(
            object_bytes / GB * S3_GB_MONTH + index_bytes / GB * DDB_GB_MONTH, 6
        ),
        "prices": {
            "s3_gb_month": S3_GB_MONTH,
            "dynamodb_gb_month": DDB_GB_MONTH,
            "as_of": "2026-11-21",
        },
    }
    return figures, ids


def _measured_figures(s: Any, threads: list[str]) -> dict[str, Any]:
    """Compression and dedup of threads, their objects and bodies read back."""
    from langgraph_s3.core.inventory import thread_figures

    totals = dict.fromkeys(_MEASURED, 0)
    with progress() as tick:
        for done, thread_id in enumerate(threads, 1):
            with opening(s, thread_id):
                measured = s.run(thread_figures(s, thread_id))
            for key in _MEASURED:
                totals[key] += measured[key]
            if tick is not None:
                tick("measure", done, len(threads))
    stored = totals["bytes_stored"]
    return {**totals, "compression_ratio": round(totals["bytes_uncompressed"] / stored, 2)
            if stored else None}  # fmt: skip


def verify(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Argument(metavar="THREAD")] = None,
    json_: JsonOption = False,
) -> None:
    """Read every committed checkpoint back (objects checked against their digests).

    Exits 1 when anything is missing or damaged, 2 when values are intact but the
    serializer in use cannot decode them (pass --serde) or the key options do not open
    them (an encrypted thread without --kms-key: "locked", not damaged).
    Example: langgraph-s3 verify user-42
    """
    from langgraph_s3.core import schema
    from langgraph_s3.core.inventory import take_inventory
    from langgraph_s3.core.paging import thread_items

    found: dict[str, list[dict[str, str]]] = {"damaged": [], "undecodable": [], "locked": []}
    sealed: dict[str, ThreadKeys] = {}  # per thread: its key items, read once
    checked = 0
    with saver(ctx) as s, Scratch() as scratch:
        if thread is None:
            s.run(take_inventory(s, scratch, with_objects=False))
            groups: Iterable[list[dict[str, Any]]] = scratch.threads()
        else:
            require_thread(s, thread)
            groups = [s.run(thread_items(s, thread))]
        for items in groups:
            for item in filter(schema.is_checkpoint_item, items):
                checked += 1
                try:
                    row = schema.parse_row(item)
                except CorruptObjectError as exc:  # it names no ids its keys cannot give
                    found["damaged"].append(_unnamed(item, exc))
                    continue
                try:
                    s.get_tuple(_config(row.thread_id, row.checkpoint_id, row.ns))
                except (ObjectError, DataKeyError) as exc:
                    kind, message = _verdict(s, row.thread_id, exc, sealed)
                    found[kind].append(
                        {"thread_id": row.thread_id, "checkpoint_ns": row.ns,
                         "checkpoint_id": row.checkpoint_id, "error": message}
                    )  # fmt: skip
    _report_verify(checked, found, json_)


def _unnamed(item: dict[str, Any], exc: CorruptObjectError) -> dict[str, str]:
    """A ``verify`` finding for a checkpoint item that does not say which checkpoint it
    is: its partition key for the thread, and what its sort key spells."""
    from langgraph_s3.core import schema
    from langgraph_s3.keys import Layout

    pk, sk = schema.checkpoint_ref(item)
    _, ns, cid = Layout.ids_of_keys(pk, sk)
    return {"thread_id": pk, "checkpoint_ns": ns or "", "checkpoint_id": cid or sk,
            "error": str(exc)}  # fmt: skip


def _verdict(
    s: Any, thread_id: str, exc: ObjectError | DataKeyError, sealed: dict[str, ThreadKeys]
) -> tuple[str, str]:
    """Whether a checkpoint that did not open is damaged, undecodable (another serde),
    or locked (the key options do not fit its thread), and what to say."""
    if isinstance(exc, UndecodableValueError):
        return "undecodable", str(exc)
    if isinstance(exc, PlaintextObjectError | UnknownKeyError):
        return "locked", shell_message(exc)
    if isinstance(exc, KeyServiceError):
        raise exc  # KMS did not answer: nothing is known about the data
    if s.encryption is None:
        if thread_id not in sealed:
            sealed[thread_id] = thread_keys(s, thread_id)
        if sealed[thread_id]:
            return "locked", str(key_needed(sealed[thread_id]))
    return "damaged", str(exc)


def _report_verify(checked: int, found: dict[str, list[dict[str, str]]], json_: bool) -> None:
    damaged, undecodable, locked = found["damaged"], found["undecodable"], found["locked"]
    if json_:
        print_json({"checked": checked, **found})
    else:
        for d in damaged:
            out.print(
                f"[red]damaged[/] {d['thread_id']} {d['checkpoint_id']}: {escape(d['error'])}",
                highlight=False,
            )
        out.print(
            f"{checked} checkpoint(s) checked, {len(damaged)} damaged"
            + (f", {len(locked)} locked (not opened with the key options given)" if locked else ""),
            highlight=False,
        )
    if locked:
        threads = list(dict.fromkeys(d["thread_id"] for d in locked))
        err.print(
            f"{len(locked)} checkpoint(s) of {len(threads)} thread(s) did not open with the "
            f"key options given (not damage); first: {escape(locked[0]['error'])}",
            highlight=False,
        )
    if undecodable:
        err.print(
            f"{len(undecodable)} checkpoint(s) are intact but the serializer in use cannot "
            "decode them (not damage): pass the serializer that wrote them with --serde "
            f"MODULE:ATTR; first: {escape(undecodable[0]['error'])}",
            highlight=False,
        )
    raise typer.Exit(NOT_OK if damaged else USAGE if undecodable or locked else OK)
