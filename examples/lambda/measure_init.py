"""Measure the cold-start cost of the Lambda example, one fresh interpreter per sample.

Each sample is a new ``python`` process, like a new Lambda container, that:

1. imports ``handler`` (what Lambda does during INIT),
2. builds the runtime: imports LangGraph and the saver, creates the boto3 clients,
   the saver and the compiled graph (what the first real request pays),
3. calls ``get_runtime()`` again (what every later request pays: nothing),
4. with ``--requests``: answers ``GET /threads/{id}`` twice against a local moto
   server (first request of the container, then a warm one).

Usage::

    python examples/lambda/measure_init.py            # import and init only
    python examples/lambda/measure_init.py --requests # also requests (needs moto[server])

Numbers are medians over ``--samples`` processes, in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import handler
t1 = time.perf_counter()
cheap = sorted(m for m in ("langgraph", "boto3", "langgraph_s3") if m in sys.modules)
# The same work get_runtime() does, timed step by step: imports first, then the rest.
import boto3
tb = time.perf_counter()
import langgraph.graph, langgraph.types
tl = time.perf_counter()
import langgraph_s3, approval_agent
ts = time.perf_counter()
rt = handler.get_runtime()
t2 = time.perf_counter()
again = handler.get_runtime()
t3 = time.perf_counter()
out = {
    "import_handler_ms": (t1 - t0) * 1000,
    "first_init_ms": (t2 - t1) * 1000,
    "of_which_import_boto3_ms": (tb - t1) * 1000,
    "of_which_import_langgraph_ms": (tl - tb) * 1000,
    "of_which_import_langgraph_s3_ms": (ts - tl) * 1000,
    "of_which_clients_saver_graph_ms": (t2 - ts) * 1000,
    "reuse_ms": (t3 - t2) * 1000,
    "heavy_modules_after_import": cheap,
    "runtime_reused": again is rt and again.saver.s3_client is rt.saver.s3_client,
}
if len(sys.argv) > 2:
    event = {
        "version": "2.0",
        "routeKey": "GET /threads/{id}",
        "rawPath": "/threads/" + sys.argv[2],
        "pathParameters": {"id": sys.argv[2]},
        "requestContext": {"http": {"method": "GET"}},
    }
    t4 = time.perf_counter()
    first = handler.handler(event, None)
    t5 = time.perf_counter()
    second = handler.handler(event, None)
    t6 = time.perf_counter()
    assert first["statusCode"] == second["statusCode"] == 200, (first, second)
    out["first_request_ms"] = (t5 - t4) * 1000
    out["warm_request_ms"] = (t6 - t5) * 1000
print(json.dumps(out))
"""


def _env(endpoint: str | None, url: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_ACCESS_KEY_ID": "measure",
        "AWS_SECRET_ACCESS_KEY": "measure",
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "CHECKPOINT_URL": url,
    }
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


def _sample(env: dict[str, str], thread: str | None) -> dict[str, Any]:
    args = [sys.executable, "-c", PROBE, str(HERE)] + ([thread] if thread else [])
    started = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall_ms"] = (time.perf_counter() - started) * 1000
    return result


def _bare_interpreter_ms(samples: int) -> float:
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _seed_thread(endpoint: str, url: str) -> str:
    """Create storage on the moto server and start one thread to read back."""
    os.environ.update(_env(endpoint, url))
    sys.path.insert(0, str(HERE))
    import handler

    from langgraph_s3 import S3Saver
    from langgraph_s3.connection import parse_conn_string

    S3Saver(**parse_conn_string(url)).setup()
    started = handler.handler(
        {
            "version": "2.0",
            "routeKey": "POST /threads",
            "rawPath": "/threads",
            "requestContext": {"http": {"method": "POST"}},
            "body": json.dumps({"request": "refund order M-1"}),
        },
        None,
    )
    return str(json.loads(started["body"])["thread_id"])


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--requests", action="store_true", help="also time GET requests (moto)")
    args = parser.parse_args(argv)

    url = "s3://measure-bucket/measure/?table=measure-table&region=us-east-1"
    endpoint = thread = None
    server = None
    if args.requests:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        thread = _seed_thread(endpoint, url)
    try:
        bare = _bare_interpreter_ms(args.samples)
        runs = [_sample(_env(endpoint, url), thread) for _ in range(args.samples)]
    finally:
        if server is not None:
            server.stop()

    assert all(r["runtime_reused"] for r in runs)
    print(f"python {sys.version.split()[0]}, {args.samples} fresh processes each, median (min-max)")
    print("| step | ms |\n|---|---:|")
    print(f"| bare interpreter start (`python -c pass`) | {bare:.0f} |")
    for key in (
        "import_handler_ms",
        "first_init_ms",
        "of_which_import_boto3_ms",
        "of_which_import_langgraph_ms",
        "of_which_import_langgraph_s3_ms",
        "of_which_clients_saver_graph_ms",
        "reuse_ms",
        "first_request_ms",
        "warm_request_ms",
        "process_wall_ms",
    ):
        values = [r[key] for r in runs if key in r]
        if values:
            print(
                f"| {key[:-3].replace('_', ' ')} | {statistics.median(values):.1f} "
                f"({min(values):.1f}-{max(values):.1f}) |"
            )
    print(f"heavy modules loaded by `import handler`: {runs[0]['heavy_modules_after_import']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
