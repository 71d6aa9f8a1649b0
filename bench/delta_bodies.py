"""What "delta bodies" would save, simulated on what S3Saver stores today (issue 22).

``python bench/delta_bodies.py`` (any venv with the project and moto, e.g.
``.venv/bin/python``; ~2 min) runs workloads (a) approval, (b) 200-turn chat and
(c) fan-out, and the long-thread "counter beside 100 KB" step, on ``S3Saver`` with
moto in-process. It then re-encodes every checkpoint item whose body is kept in the
index the way the proposed layout would, and prints what the commits would be billed.

``trim`` alone is measured first (the only variant that needs no base); the others
each add to the one before:

* ``a``: a channel whose entry the base checkpoint holds unchanged is written as
  ``["a", base id]`` (~40 bytes) instead of the entry (an 800-byte request, a
  100 KB value's 330-byte packed entry, ...).
* ``d``: a blob entry whose first k chunks are the base's is written as
  ``["d", base id, k, tail]``, the tail holding only the new chunks (a growing
  message list).
* ``cp``: the checkpoint without its values as a diff against the base's
  (changed channel versions and versions seen).
* ``trim``: the item attributes the keys or the body already say (``cid``, ``th``,
  ``ns``, and ``h``/``sz`` of a body kept in the item) and the body's own ids dropped.

The base of a channel is the nearest earlier checkpoint of the same thread,
namespace and run (``run_id`` of the metadata, or none for both) at most ``K``
checkpoints back that stores the entry in full, so a reader needs at most a few
items the latest-read query already returns. Nothing here is built in the library:
this measures whether it is worth building. Bodies stored in S3 are counted as they
are. Write units: a transactional write bills 2 units per started KB of each item;
the commit is the checkpoint item plus the head (2 units). "Carried" bills the
commit that is not a transaction (docs/concurrency.md, "Alternatives considered"):
the item written once plus a head update that carries a copy of it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command
from langgraph_s3 import codec
from langgraph_s3.core import records, schema
from langgraph_s3.core.objects import open_envelope
from langgraph_s3.core.schema import Row
from langgraph_s3.testing import local_saver

sys.path.insert(0, str(Path(__file__).parent))
import workloads
from capacity import item_size
from textgen import seeded, text

K = 4
VARIANTS = ("today", "trim", "a", "a+d", "a+d+cp", "a+d+cp+trim")
HEAD_TX_WRU = 2
_SERDE = JsonPlusSerializer()
_TRIMMED = ("cid", "th", "ns", "h", "sz")


def kb(size: int) -> int:
    return math.ceil(size / 1024)


@dataclass
class Totals:
    """Per variant: commits, transaction write units, carried write units, bytes."""

    commits: int = 0
    tx: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VARIANTS, 0))
    carried: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VARIANTS, 0))
    size: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VARIANTS, 0))

    def add(self, variant: str, size: int) -> None:
        self.tx[variant] += 2 * kb(size) + HEAD_TX_WRU
        self.carried[variant] += 2 * kb(size)
        self.size[variant] += size


@dataclass
class Base:
    seq: int
    run: str | None
    value: Any


@dataclass
class Stream:
    """What the writer of one (thread, namespace) would remember."""

    seq: int = 0
    entries: dict[str, Base] = field(default_factory=dict)
    cp: Base | None = None

    def usable(self, base: Base | None, run: str | None) -> bool:
        return base is not None and base.run == run and self.seq - base.seq <= K


def entry_delta(entry: list[Any], base: list[Any], cid: str) -> list[Any] | None:
    """``["d", ...]`` for a blob entry extending the base's, or None."""
    kinds = ("r", "p", "x")
    if entry[0] not in kinds or base[0] != entry[0]:
        return None
    old, new = base[2], entry[2]
    keep = 0
    while keep < min(len(old), len(new)) - 1 and old[keep] == new[keep]:
        keep += 1
    if keep == 0:
        return None
    # "p"/"x": [kind, type, digests, sizes, head, stable, packs, locations]; the
    # packs are named by index into their own list, so they stay whole.
    tail = [entry[0], entry[1], new[keep:], entry[3][keep:], *entry[4:6]]
    if entry[0] != "r":
        tail += [entry[6], entry[7][keep:]]
    return ["d", cid, keep, tail]


def channel_forms(
    body: Mapping[str, Any], cid: str, stream: Stream, run: str | None, deltas: bool
) -> dict:
    """The ``ch`` map with "a" references (and, with ``deltas``, "d" entries)."""
    out: dict[str, Any] = {}
    for name, entry in body["ch"].items():
        base = stream.entries.get(name)
        if base is None or not stream.usable(base, run):
            out[name] = entry
        elif base.value == entry:
            out[name] = ["a", cid]
            continue
        else:
            out[name] = (entry_delta(entry, base.value, cid) if deltas else None) or entry
        if out[name] is entry:
            stream.entries[name] = Base(stream.seq, run, entry)
    return out


def checkpoint_diff(cp: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """The checkpoint without values, as changes against the base's."""
    out = {k: v for k, v in cp.items() if k not in ("channel_versions", "versions_seen")}
    old = base["channel_versions"]
    out["cv"] = {k: v for k, v in cp["channel_versions"].items() if old.get(k) != v}
    out["cvx"] = [k for k in old if k not in cp["channel_versions"]]
    seen: dict[str, Any] = {}
    for node, versions in cp["versions_seen"].items():
        before = base["versions_seen"].get(node)
        changed = {k: v for k, v in versions.items() if (before or {}).get(k) != v}
        if changed or before is None:
            seen[node] = changed
    out["vs"] = seen
    return out


def reencoded(item: Mapping[str, Any], body: Mapping[str, Any], trim: bool) -> int:
    """The size of ``item`` with ``body`` framed in place of its own."""
    if trim:
        body = {k: v for k, v in body.items() if k not in ("th", "ns", "id", "p")}
    framed = codec.frame(codec.KIND_CHECKPOINT, ormsgpack.packb(body), 3, version=9)
    out = {**item, "b": {"B": framed}}
    if trim:
        out = {k: v for k, v in out.items() if k not in _TRIMMED}
    return item_size(out)


def decoded(saver: Any, item: dict[str, Any]) -> tuple[Row, dict[str, Any], dict[str, Any]]:
    """A checkpoint item kept in the index: its row, its body as written (the wire
    map) and the checkpoint it holds (without values)."""
    row = schema.parse_row(item)
    env = open_envelope(saver, row, row.body)
    kind, data = env.checkpoint
    if kind == records.RECORD_TYPE:
        cp = records.decode(data, row.checkpoint_id, "-")
    else:
        cp = _SERDE.loads_typed((kind, data))
    return row, env.wire(), cp


def simulate(saver: Any, items: list[dict[str, Any]]) -> Totals:
    """Every checkpoint item of a table, in history order, under every variant."""
    totals = Totals()
    streams: dict[tuple[str, str, bool], Stream] = {}
    checkpoints = sorted(
        (i for i in items if schema.is_checkpoint_item(i)),
        key=lambda i: (i["pk"]["S"], i["sk"]["S"]),
    )
    for item in checkpoints:
        totals.commits += 1
        key = (item["pk"]["S"], schema.checkpoint_ids(item)[1])
        stream = streams.setdefault((*key, True), Stream())
        plain = streams.setdefault((*key, False), Stream())
        stream.seq += 1
        plain.seq += 1
        size = item_size(item)
        totals.add("today", size)
        if "b" not in item:
            for variant in VARIANTS[1:]:
                totals.add(variant, size)
            continue
        row, body, cp = decoded(saver, item)
        run = item.get("run", {}).get("S")
        cid = row.checkpoint_id
        only_a = channel_forms(body, cid, plain, run, deltas=False)
        with_d = channel_forms(body, cid, stream, run, deltas=True)
        diff: Any = body["cp"]
        if stream.usable(stream.cp, run) and stream.cp is not None:
            packed = ormsgpack.packb(checkpoint_diff(cp, stream.cp.value), default=str)
            diff = packed if len(packed) < len(body["cp"][1]) else diff
        else:
            stream.cp = Base(stream.seq, run, cp)
        totals.add("trim", reencoded(item, body, trim=True))
        totals.add("a", reencoded(item, {**body, "ch": only_a}, trim=False))
        totals.add("a+d", reencoded(item, {**body, "ch": with_d}, trim=False))
        totals.add("a+d+cp", reencoded(item, {**body, "ch": with_d, "cp": diff}, trim=False))
        totals.add("a+d+cp+trim", reencoded(item, {**body, "ch": with_d, "cp": diff}, trim=True))
    return totals


def writes_units(items: list[dict[str, Any]]) -> tuple[int, int]:
    """Write units of the writes items (billed on their final size) as stored, and
    without ``tid`` and ``cid`` (which their sort key already says)."""
    writes = [i for i in items if schema.is_writes_item(i)]
    trimmed = [{k: v for k, v in i.items() if k not in ("tid", "cid")} for i in writes]
    return sum(kb(item_size(i)) for i in writes), sum(kb(item_size(i)) for i in trimmed)


def measured(drive: Callable[[Any], None]) -> tuple[Totals, tuple[int, int], int]:
    """Run ``drive`` on a fresh S3Saver; what its checkpoint items would cost under
    each variant, its writes items' write units, and the bytes of every item."""
    with local_saver() as saver:
        drive(saver)
        client = boto3.client(
            "dynamodb", region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )  # fmt: skip
        items = list(_scan(client, saver.table))
        return simulate(saver, items), writes_units(items), sum(map(item_size, items))


def _scan(client: Any, table: str) -> Iterator[dict[str, Any]]:
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = client.scan(**kwargs)
        yield from page["Items"]
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def approval(saver: Any) -> None:
    graph = workloads.build_approval().compile(checkpointer=saver)
    for i in range(5):
        cfg = {"configurable": {"thread_id": f"approval-{i}"}}
        graph.invoke({"request": workloads.approval_request(i)}, cfg)
        graph.invoke(Command(resume=True), cfg)


def chat(saver: Any) -> None:
    graph = workloads.build_chat().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "chat"}}
    for turn in range(1, 201):
        graph.invoke({"messages": [workloads.user_message(turn)]}, cfg)


def fanout(saver: Any) -> None:
    graph = workloads.build_fanout(10).compile(checkpointer=saver)
    for i in range(5):
        cfg = {"configurable": {"thread_id": f"fan-{i}"}}
        graph.invoke({"topic": workloads.fanout_topic(i)}, cfg)


def counter_steps(saver: Any) -> None:
    """longthread.py's small step: a counter changes beside an unchanged 100 KB value."""
    config: Any = {"configurable": {"thread_id": "small", "checkpoint_ns": ""}}
    versions: dict[str, Any] = {}
    values: dict[str, Any] = {"big": text(seeded("small-steps"), 100_000), "counter": 0}
    for step in range(21):
        changed = list(values) if step == 0 else ["counter"]
        values["counter"] = step
        for name in changed:
            versions[name] = saver.get_next_version(versions.get(name), None)
        checkpoint = {
            "v": 4, "id": f"1f0{step:05d}-0000-6000-8000-000000000000", "ts": "",
            "channel_values": dict(values), "channel_versions": dict(versions),
            "versions_seen": {}, "updated_channels": changed,
        }  # fmt: skip
        config = saver.put(config, checkpoint, {"step": step}, {n: versions[n] for n in changed})


WORKLOADS = {"(a)": approval, "(b)": chat, "(c)": fanout, "counter step": counter_steps}


def main() -> None:
    print(f"K = {K}; write units of the commits (checkpoint item + head), avg item bytes;")
    print("bytes saved: of every index item of the table (chunk and writes items too)")
    print("| workload | commits | variant | transaction WRU | carried WRU | avg item bytes "
          "| index bytes saved |")  # fmt: skip
    print("|---|---:|---|---:|---:|---:|---:|")
    writes: dict[str, tuple[int, int]] = {}
    for name, drive in WORKLOADS.items():
        totals, writes[name], index_bytes = measured(drive)
        for variant in VARIANTS:
            avg = round(totals.size[variant] / max(1, totals.commits))
            saved = totals.size["today"] - totals.size[variant]
            print(
                f"| {name} | {totals.commits} | {variant} | {totals.tx[variant]} "
                f"| {totals.carried[variant]} | {avg:,} | {saved:,} of {index_bytes:,} |"
            )
    print()
    print("| workload | writes items WRU | without tid, cid |")
    print("|---|---:|---:|")
    for name, (today, trimmed) in writes.items():
        print(f"| {name} | {today} | {trimmed} |")


if __name__ == "__main__":
    main()
