"""AsyncS3Saver on aiobotocore 3 (our ``async`` extra) against aioboto3 15.5 clients.

    python3 bench/async_clients.py [--rounds 3] [--threads 10] [--turns 5]

Needs ``.venv`` and ``.venv-aioboto3`` (``python3 run.py test`` makes both). One moto
server (``bench/moto_server.py``, its own process, so its CPU is not counted) serves
both; the two flavours run alternately, ``--rounds`` times each, in fresh processes:

- **requests**: HTTP requests the saver sends for the same graph workload (a
  ``before-send`` handler on the clients counts them); they should be equal.
- **CPU per request**: the worker process's CPU time over the workload divided by
  its requests (graph execution included, identical in both), as a ratio.
- **import time**: wall time of ``import langgraph_s3.aio`` plus the client library
  in a fresh interpreter, median of 5.

Prints a Markdown table; ratios, not absolute times, are what to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = {
    "aiobotocore 3 (async extra)": ROOT / ".venv" / "bin" / "python",
    "aioboto3 15.5": ROOT / ".venv-aioboto3" / "bin" / "python",
}
ENV = {
    **os.environ,
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


async def workload(endpoint: str, threads: int, turns: int) -> dict[str, Any]:
    """Run the graph workload once on this interpreter's async client library."""
    from langgraph.graph import END, START, StateGraph
    from langgraph_s3 import AsyncS3Saver

    try:
        import aioboto3

        session = aioboto3.Session()
        make = session.client
        library = f"aioboto3 {aioboto3.__version__}"
    except ImportError:
        from aiobotocore import __version__
        from aiobotocore.session import get_session

        make = get_session().create_client
        library = f"aiobotocore {__version__}"
    sent = 0

    def count(**_: Any) -> None:
        nonlocal sent
        sent += 1

    where = {"region_name": "us-east-1", "endpoint_url": endpoint}
    async with make("s3", **where) as s3, make("dynamodb", **where) as ddb:
        for client in (s3, ddb):
            client.meta.events.register("before-send", count)
        name = f"bench-{uuid.uuid4().hex[:10]}"
        saver = AsyncS3Saver(bucket=name, table=name, s3_client=s3, dynamodb_client=ddb)
        await saver.setup()
        builder = StateGraph(State)
        for node in ("plan", "act", "reply"):
            builder.add_node(node, lambda s, n=node: {"log": [f"{n}: " + "x" * 2000]})
        builder.add_edge(START, "plan")
        builder.add_edge("plan", "act")
        builder.add_edge("act", "reply")
        builder.add_edge("reply", END)
        graph = builder.compile(checkpointer=saver)
        before, cpu = sent, time.process_time()
        for t in range(threads):
            config = {"configurable": {"thread_id": f"t{t}"}}
            for _ in range(turns):
                await graph.ainvoke({"log": ["user"]}, config)
            await graph.aget_state(config)
        cpu = time.process_time() - cpu
        requests = sent - before
    return {"library": library, "requests": requests, "cpu_s": cpu}


def import_seconds(python: Path) -> float:
    probe = (
        "import time; t = time.perf_counter(); import langgraph_s3.aio\n"
        "try:\n    import aioboto3\nexcept ImportError:\n    import aiobotocore.session\n"
        "print(time.perf_counter() - t)"
    )
    runs = [
        float(subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                             check=True, env=ENV, cwd=ROOT).stdout)
        for _ in range(5)
    ]  # fmt: skip
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=10)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(workload(args.worker, args.threads, args.turns))))
        return 0
    missing = [str(p) for p in PYTHONS.values() if not p.exists()]
    if missing:
        print(f"missing {missing}: run `python3 run.py test` first", file=sys.stderr)
        return 1
    server = subprocess.Popen(
        [str(PYTHONS["aiobotocore 3 (async extra)"]), str(ROOT / "bench" / "moto_server.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    assert server.stdout is not None
    endpoint = json.loads(server.stdout.readline())["endpoint"]
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in PYTHONS}
    try:
        for _ in range(args.rounds):
            for flavour, python in PYTHONS.items():
                worker = [str(python), __file__, "--worker", endpoint,
                          "--threads", str(args.threads), "--turns", str(args.turns)]  # fmt: skip
                out = subprocess.run(worker, capture_output=True, text=True, env=ENV, cwd=ROOT)
                if out.returncode:
                    print(out.stderr, file=sys.stderr)
                    return 1
                results[flavour].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=30)
    report(results, {k: import_seconds(p) for k, p in PYTHONS.items()}, args)
    return 0


def report(results: dict[str, list[dict[str, Any]]], imports: dict[str, float], args: Any) -> None:
    base = "aiobotocore 3 (async extra)"
    per_request = {
        k: statistics.median(r["cpu_s"] / r["requests"] for r in runs)
        for k, runs in results.items()
    }
    print(f"{args.threads} threads x {args.turns} turns, {args.rounds} rounds alternated\n")
    print("| client | library | requests | CPU per request | ratio | import | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for k, runs in results.items():
        requests = sorted({r["requests"] for r in runs})
        print(
            f"| {k} | {runs[0]['library']} | {', '.join(map(str, requests))} | "
            f"{per_request[k] * 1e3:.2f} ms | {per_request[k] / per_request[base]:.2f} | "
            f"{imports[k] * 1e3:.0f} ms | {imports[k] / imports[base]:.2f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
