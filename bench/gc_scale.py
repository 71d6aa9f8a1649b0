"""Whole-table commands at scale: time and memory of a collection, and of
``langgraph-s3 threads``, ``stats`` and ``verify``, over N threads.

    .venv/bin/python bench/gc_scale.py [--threads 10000] [--tracemalloc]
        [--commands gc,threads,stats,verify]

A moto server (``bench/moto_server.py``, its own process) holds N threads whose index
items are clones of what a real put writes (two checkpoints with their head, bodies in
the index), written with BatchWriteItem, plus one garbage blob per 100 threads. Each
command then runs once in a child process of its own (``gc``: ``gc.collect``; the
others: the command line, in-process); its wall time, RSS growth and (with
``--tracemalloc``) the peak of Python memory it allocated are printed, one JSON line
per command. Run with the project's ``.venv``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
os.environ.update(
    AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
)


def template_items(saver: Any) -> list[dict[str, Any]]:
    """The index items of one real two-step thread."""
    from langgraph.checkpoint.base import empty_checkpoint

    parent = None
    for step in range(2):
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": [f"turn {i}" for i in range(step + 1)]}
        cp["channel_versions"] = {"messages": saver.get_next_version(None, None)}
        conf: dict[str, Any] = {"thread_id": "template", "checkpoint_ns": ""}
        if parent:
            conf["checkpoint_id"] = parent
        parent = saver.put({"configurable": conf}, cp, {"step": step}, cp["channel_versions"])[
            "configurable"
        ]["checkpoint_id"]
    ddb = saver.dynamodb_client
    found = ddb.query(
        TableName=saver.table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "template"}},
    )
    return list(found["Items"])


def clone(saver: Any, item: dict[str, Any], name: str) -> dict[str, Any]:
    """``item`` for thread ``name``, as ``copy_thread`` writes it: a checkpoint's body
    (kept in the item) is re-written for that thread, so its place digest names it."""
    from dataclasses import replace

    from langgraph_s3.core import schema
    from langgraph_s3.core.objects import open_envelope
    from langgraph_s3.core.reseal import copied_body, copied_item

    if not schema.is_checkpoint_item(item):  # the head
        return {**item, "pk": {"S": saver.layout.pk(name)}, "th": {"S": name}}
    row = schema.parse_row(item)
    env = open_envelope(saver, row, row.body)
    out, put = copied_item(saver, row, copied_body(saver, replace(env, thread_id=name)), name)
    assert put is None, "the template's bodies are kept in their items"
    return out


def populate(saver: Any, threads: int) -> None:
    ddb, s3 = saver.dynamodb_client, saver.s3_client
    template = template_items(saver)
    batch: list[dict[str, Any]] = []
    for n in range(threads):
        name = f"thread-{n:07d}"
        for item in template:
            batch.append({"PutRequest": {"Item": clone(saver, item, name)}})
            if len(batch) == 25:
                ddb.batch_write_item(RequestItems={saver.table: batch})
                batch = []
        if n % 100 == 0:  # garbage: a blob no checkpoint references
            s3.put_object(Bucket=saver.bucket, Key=f"{name}/b/{n:064x}", Body=b"LGS3")
    if batch:
        ddb.batch_write_item(RequestItems={saver.table: batch})


def collect_once(endpoint: str, trace: bool) -> dict[str, Any]:
    """One collection in this process: time, RSS growth, and (``trace``) Python peak."""
    import resource

    from langgraph_s3 import S3Saver
    from langgraph_s3.gc import collect

    saver = S3Saver(
        bucket="gc-scale", table="gc-scale", endpoint_url=endpoint, region_name="us-east-1"
    )
    saver.setup()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    report = collect(saver, grace=0)
    seconds = time.perf_counter() - started
    out: dict[str, Any] = {
        "threads": report.threads, "objects": report.objects,
        "objects_deleted": report.objects_deleted, "errors": len(report.errors),
        "collect_s": round(seconds, 1),
        "scratch_mb": round(report.scratch_bytes / 2**20, 1),
        "rss_before_mb": round(before / 1024, 1),
        "rss_growth_mb": round(
            (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024, 1
        ),
    }  # fmt: skip
    if trace:
        out["peak_python_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
    return out


def command_once(endpoint: str, command: str, trace: bool) -> dict[str, Any]:
    """One ``langgraph-s3`` command in this process: time, RSS growth, Python peak."""
    import contextlib
    import io
    import resource

    from langgraph_s3.cli import main as cli

    argv = ["--endpoint-url", endpoint, "--region", "us-east-1", "--bucket", "gc-scale",
            "--table", "gc-scale", command, "--json"]  # fmt: skip
    if command == "threads":
        argv += ["--limit", "20"]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli(argv)
    out: dict[str, Any] = {
        "command": command, "exit": code, "seconds": round(time.perf_counter() - started, 1),
        "rss_before_mb": round(before / 1024, 1),
        "rss_growth_mb": round(
            (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024, 1
        ),
        "output_bytes": len(printed.getvalue()),
    }  # fmt: skip
    if trace:
        out["peak_python_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--commands", default="gc", help="of gc,threads,stats,verify")
    parser.add_argument("--collect", metavar="ENDPOINT", help=argparse.SUPPRESS)
    parser.add_argument("--command", nargs=2, metavar=("ENDPOINT", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.collect:
        print(json.dumps(collect_once(args.collect, args.tracemalloc)))
        return 0
    if args.command:
        print(json.dumps(command_once(*args.command, args.tracemalloc)))
        return 0
    server = subprocess.Popen([sys.executable, str(HERE / "moto_server.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert server.stdout is not None
    endpoint = json.loads(server.stdout.readline())["endpoint"]
    try:
        from langgraph_s3 import S3Saver

        saver = S3Saver(
            bucket="gc-scale", table="gc-scale", endpoint_url=endpoint, region_name="us-east-1"
        )
        saver.setup()
        started = time.perf_counter()
        populate(saver, args.threads)
        loaded = time.perf_counter() - started
        print(json.dumps({"threads": args.threads, "populate_s": round(loaded, 1)}), flush=True)
        # gc deletes the garbage blobs, so the read-only commands run first.
        for command in sorted(args.commands.split(","), key=lambda c: c == "gc"):
            how = ["--collect", endpoint] if command == "gc" else ["--command", endpoint, command]
            child = [sys.executable, __file__, *how]
            if args.tracemalloc:
                child.append("--tracemalloc")
            run = subprocess.run(child, capture_output=True, text=True)
            if run.returncode:
                print(json.dumps({"command": command, "failed": run.stderr[-2000:]}), flush=True)
                continue
            result = json.loads(run.stdout)
            result["rss_growth_bytes_per_thread"] = round(
                result["rss_growth_mb"] * 2**20 / max(1, args.threads)
            )
            print(json.dumps({"command": command, **result}), flush=True)
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
