"""The results.md sections of the issue-22 measurements: long threads, cold start, and
the "Layout v2 targets" table (issue 22's "Where we stand", filled from this run).

Called by ``report.py``; reads ``results/raw/long-*.json`` and ``cold-all.json``. The
layout v2 verdicts are informative: they do not change ``report.py``'s exit status.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import prices
from catalog import LABELS, PROJECT

RAW = Path(__file__).resolve().parent / "results" / "raw"
#: "Items read bounded by the limit": no more than this many index items per
#: checkpoint asked for (DynamoDBSaver reads 4: checkpoint, payload, writes, payload).
ITEMS_PER_LISTED_CHECKPOINT = 4
INDEX_BYTES_TARGET = 400
#: A chat-like step's new content in the index, whatever the layout: its 1,500-character
#: message compressed (810 B, the mean of longthread.py's) and its 300-character write
#: (303 B; records this small are not compressed, and compressed they would be 212).
CHAT_STEP_FLOOR = 810 + 212


def _raw(name: str) -> dict[str, Any] | None:
    path = RAW / name
    return json.loads(path.read_text()) if path.exists() else None


def _kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k.split(':', 1)[1]} {n}" for k, n in kinds.items()) or "-"


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**not met**")


def long_rows(saver: str) -> list[dict[str, Any]]:
    run = _raw(f"long-{saver}.json")
    return [] if run is None else list(run["longthread"]["list"])


def long_section(note: str, storage_class: str = "standard") -> list[str]:
    savers = [s for s in ("s3", "dynamodb") if _raw(f"long-{s}.json")]
    if not savers:
        return []
    lines = [
        "## Long threads: `list` with a limit (`longthread.py`)",
        "",
        "A chat-like thread (each step: a 1,500-character message, a counter, one task's "
        "300-character pending write), written by the saver's own `put`/`put_writes`; one "
        "warm saver per kind, one `list(config, limit=...)` call alone. Items read = "
        "DynamoDB's `ScannedCount` (what it bills); read units from `capacity.py`; cost = "
        "the requests of a million such calls.",
        "",
        note,
        "",
        "| saver | checkpoints | limit | requests | round trips | items returned | items read "
        "| read units | bytes received | wall ms | $ per 1M calls |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for saver in savers:
        for r in long_rows(saver):
            lines.append(
                f"| {LABELS[saver]} | {r['checkpoints']:,} | {r['limit']} | {r['requests']} "
                f"({_kinds(r['kinds'])}) | {r['round_trips']} | {r['items_returned']:,} | "
                f"{r['items_read']:,} | {r['rru']:g} | {r['bytes_in']:,} | {r['ms']:.0f} | "
                f"${prices.request_cost(r, storage_class) * 1e6:.2f} |"
            )
    lines += ["", "Index bytes per checkpoint (DynamoDB item bytes as DynamoDB sizes them):", ""]
    lines += [
        "| saver | long thread: bytes (items) per checkpoint | a step changing only a "
        "counter beside 100 KB: bytes (items) per put | its S3 bytes per put |",
        "|---|---|---|---:|",
    ]
    for saver in savers:
        run = _raw(f"long-{saver}.json")
        assert run is not None
        small = run["longthread"]["small_steps"]
        threads = "; ".join(
            f"{t['checkpoints']:,}: {t['index_bytes_per_checkpoint']:,.0f} B "
            f"({t['index_items_per_checkpoint']:.2f})"
            for t in run["longthread"]["threads"]
        )
        lines.append(
            f"| {LABELS[saver]} | {threads} | {small['index_bytes_per_checkpoint']:,.0f} B "
            f"({small['index_items_per_checkpoint']:.2f}) | "
            f"{small['s3_bytes_per_checkpoint']:,.0f} |"
        )
    return [*lines, ""]


def cold_medians() -> dict[str, dict[str, Any]]:
    run = _raw("cold-all.json")
    return {} if run is None else dict(run["coldstart"]["median"])


def cold_section(note: str) -> list[str]:
    medians = cold_medians()
    if not medians:
        return []
    run = _raw("cold-all.json")
    rounds = run["coldstart"]["rounds"] if run is not None else 7
    base = medians.get("dynamodb", {}).get("total_ms")
    lines = [
        "## Cold start: fresh process, first `get_tuple` (`coldstart.py`)",
        "",
        "Import + construction + first `get_tuple` of an existing approval thread over HTTP, "
        f"timed inside a fresh interpreter; median of {rounds} rounds, savers alternating. "
        "Compare the ratio; absolute times depend on this machine. The aiobotocore row is not a "
        "saver but AsyncS3Saver's floor: `langgraph.checkpoint.base` and aiobotocore "
        "imported, a DynamoDB client made, and AsyncS3Saver's two requests sent, with no "
        "code of ours.",
        "",
        note,
        "",
        "| saver | import ms | construct ms | first get_tuple ms | total ms | vs DynamoDBSaver "
        "| process ms | requests | round trips |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for saver, m in medians.items():
        rel = f"{m['total_ms'] / base:.2f}x" if base else "-"
        kinds: dict[str, int] = {}
        for k in m["kinds"]:
            kinds[k] = kinds.get(k, 0) + 1
        lines.append(
            f"| {LABELS[saver]} | {m['import_ms']:.0f} | {m['construct_ms']:.0f} | "
            f"{m['get_tuple_ms']:.0f} | {m['total_ms']:.0f} | {rel} | {m['process_ms']:.0f} | "
            f"{m['requests']} ({_kinds(kinds)}) | {m['round_trips']} |"
        )
    return [*lines, ""]


# ------------------------------------------------------------ layout v2 targets
Row = tuple[str, str, str, bool | None]


def _ratios(
    report: Any, workload: str, value: Any, fmt: Callable[[float], str]
) -> tuple[list[str], list[float]]:
    """``value(report, workload, saver)`` of each project saver over DynamoDBSaver's."""
    base = value(report, workload, "dynamodb")
    texts, ratios = [], []
    for saver in PROJECT:
        mine = value(report, workload, saver)
        if mine is None or not base:
            texts.append(f"{LABELS[saver]}: no result")
            ratios.append(float("inf"))
            continue
        ratios.append(mine / base)
        texts.append(f"{LABELS[saver]} {fmt(mine)} vs {fmt(base)} = {mine / base:.3f}x")
    return texts, ratios


def _requests(report: Any, w: str, s: str) -> float | None:
    t = report.total(w, s)
    return None if t is None else float(t["requests"])


def _per_step(report: Any, w: str, s: str) -> float | None:
    t = report.total(w, s)
    return None if t is None else t["requests"] / max(1, t["supersteps"])


def _cost(report: Any, w: str, s: str) -> float | None:
    c = report.cost(w, s)
    return None if c is None else float(c["total"])


def _bytes(report: Any, w: str, s: str) -> float | None:
    run = report.run(w, s)
    return None if run is None else float(run["storage"]["bytes"])


def workload_rows(report: Any, human_bytes: Callable[[float], str]) -> list[Row]:
    """(a)-(d): ratios to DynamoDBSaver in this run."""
    count, dollars = (lambda x: f"{x:,.0f}"), (lambda x: f"${x:,.2f}")
    specs = (
        ("(a) approval: requests", "a", _requests, count, 0.35),
        ("(a) approval: cost per M supersteps", "a", _cost, dollars, 0.5),
        ("(b) 200-turn chat: bytes stored", "b", _bytes, human_bytes, 0.03),
        ("(b) 200-turn chat: cost per M supersteps", "b", _cost, dollars, 0.1),
        ("(c) fan-out: cost per M supersteps", "c", _cost, dollars, 0.5),
        ("(d) 5 MB document: cost per M supersteps, month 1", "d", _cost, dollars, 0.5),
    )
    rows: list[Row] = []
    for name, w, value, fmt, limit in specs:
        texts, ratios = _ratios(report, w, value, fmt)
        rows.append((name, "; ".join(texts), f"<= {limit}x", max(ratios) <= limit))
    texts, _ = _ratios(report, "d", _per_step, lambda x: f"{x:.1f}")
    steps = [_per_step(report, "d", s) for s in PROJECT]
    ok = all(x is not None and x <= 3 for x in steps)
    rows.insert(5, ("(d) 5 MB document: requests per step", "; ".join(texts), "<= 3", ok))
    return rows


def agent_row(report: Any) -> Row:
    """(f): issue 22 asks for the measurement, not for a ratio, so no verdict."""
    name = "(f) small-state tool agent: cost per M supersteps"
    texts, _ = _ratios(report, "f", _cost, lambda x: f"${x:,.2f}")
    return (name, "; ".join(texts), "none (informative)", None)


def cold_resume_row(report: Any) -> Row:
    """(e): S3 GETs and sequential round trips of the new process's first read."""
    texts, ok = [], True
    for saver in PROJECT:
        run = report.run("e", saver)
        if run is None or "cold_load" not in run["phases"]:
            texts.append(f"{LABELS[saver]}: no result")
            ok = False
            continue
        load = run["phases"]["cold_load"]
        gets = load["kinds"].get("s3:GetObject", 0)
        ok &= gets <= 4 and load["round_trips"] <= 2
        batches = load["kinds"].get("dynamodb:BatchGetItem", 0)
        items = f" (chunk items: {batches} BatchGetItem)" if batches else ""
        texts.append(
            f"{LABELS[saver]} {gets} GETs{items}, {load['requests']} requests, "
            f"{load['round_trips']} round trips"
        )
    return ("(e) cold resume of the chat", "; ".join(texts), "<= 4 GETs, <= 2 round trips", ok)


def list_row() -> Row:
    """list(limit=10): items read must not grow with the thread."""
    name = "`list(config, limit=10)` on a 1,000-checkpoint thread: items read"
    reads = {
        s: {r["checkpoints"]: r for r in long_rows(s) if r["limit"] == 10}
        for s in ("s3", "dynamodb")
    }
    if 1000 not in reads["s3"]:
        return (name, "no result", "bounded by the limit", None)
    texts = []
    for saver, by_size in reads.items():
        if by_size:
            sizes = ", ".join(
                f"{r['items_read']:,} items ({r['rru']:g} RRU) at {n:,}" for n, r in by_size.items()
            )
            texts.append(f"{LABELS[saver]}: {sizes}")
    mine = reads["s3"]
    ok = mine[1000]["items_read"] <= ITEMS_PER_LISTED_CHECKPOINT * 10
    ok &= all(r["items_read"] == mine[1000]["items_read"] for r in mine.values())
    target = (
        f"bounded by the limit (<= {ITEMS_PER_LISTED_CHECKPOINT} items per listed "
        "checkpoint, the same at 10,000)"
    )
    return (name, "; ".join(texts), target, ok)


def cold_row() -> Row:
    name = "fresh process, first `get_tuple` over HTTP (median of 7)"
    medians = cold_medians()
    base = medians.get("dynamodb", {}).get("total_ms")
    if not base:
        return (name, "no result", "<= DynamoDBSaver's, both savers", None)
    texts, ok = [], True
    for saver in (*PROJECT, "dynamodb"):
        if saver not in medians:
            ok = False
            continue
        total = medians[saver]["total_ms"]
        ok &= saver == "dynamodb" or total <= base
        texts.append(f"{LABELS[saver]} {total:.0f} ms ({total / base:.2f}x)")
    if "aiobotocore" in medians:  # informative: what AsyncS3Saver cannot go below
        floor = medians["aiobotocore"]["total_ms"]
        texts.append(f"{LABELS['aiobotocore']} {floor:.0f} ms ({floor / base:.2f}x)")
    return (name, "; ".join(texts), "<= DynamoDBSaver's, both savers", ok)


def index_bytes_rows(report: Any) -> list[Row]:
    """S3Saver's DynamoDB bytes per checkpoint: when no large value changed (a counter
    beside 100 KB), and when each step adds a chat message (whose new content alone is
    over the target: its floor, bench/README.md)."""
    name = "index bytes per checkpoint with no large change"
    chat_name = "index bytes per checkpoint, a new 1,500-character message each step"
    target = f"<= {INDEX_BYTES_TARGET} B"
    run = _raw("long-s3.json")
    if run is None:
        return [(name, "no result", target, None), (chat_name, "no result", target, None)]
    small = run["longthread"]["small_steps"]["index_bytes_per_checkpoint"]
    threads = run["longthread"]["threads"]
    chat = max(t["index_bytes_per_checkpoint"] for t in threads)
    texts = [f"long chat-like thread {chat:,.0f} B"]
    b = report.run("b", "s3")
    if b is not None:
        per = b["storage"]["ddb_bytes"] / max(1, b["phases"]["total"]["supersteps"])
        texts.append(f"(b) chat {per:,.0f} B")
    texts.append(f"its new content alone >= {CHAT_STEP_FLOOR:,} B a step (the floor)")
    return [
        (name, f"S3Saver: counter-only step {small:,.0f} B", target, small <= INDEX_BYTES_TARGET),
        (chat_name, "S3Saver: " + "; ".join(texts), target, chat <= INDEX_BYTES_TARGET),
    ]


def v2_section(
    report: Any, human_bytes: Callable[[float], str]
) -> tuple[list[str], list[dict[str, Any]]]:
    """The issue-22 table, filled from this run; and its rows for results.json."""
    rows = [
        *workload_rows(report, human_bytes),
        agent_row(report),
        cold_resume_row(report),
        list_row(),
        cold_row(),
        *index_bytes_rows(report),
    ]
    lines = [
        "## Layout v2 targets (issue 22)",
        "",
        'Issue 22\'s "Where we stand" table, measured in this run (ratios to DynamoDBSaver '
        "in the same run; counts exact). Informative: these verdicts do not set the exit status.",
        "",
        report.profile_note(),
        "",
        "| | this run | target | verdict |",
        "|---|---|---|---|",
    ]
    lines += [f"| {name} | {now} | {target} | {_verdict(ok)} |" for name, now, target, ok in rows]
    summary = [{"target": n, "measured": m, "goal": t, "met": ok} for n, m, t, ok in rows]
    return [*lines, ""], summary
