"""Cold start: a fresh process imports a saver, constructs it and reads an existing thread.

    .venv/bin/python bench/coldstart.py run --endpoint URL [--savers s3,async,aiobotocore,dynamodb]
        [--latency-ms 15] [--latency-profile aws]

(``run.py`` runs it after the workloads.) First each saver writes a thread of its own
(``prepare``, in the saver's venv, uncounted): the five checkpoints of an approval
thread paused at its interrupt, with a 12.5 KB retrieved context, a 1.2 KB draft and
pending writes. Then rounds of fresh processes (``sample``), one per saver per round,
the savers alternating so that drift on a shared machine hits all of them alike. The
first round fills the bytecode caches and is dropped; the median of the next 7 is
reported. A sample times, from its first statement: importing the saver's package
(and the bench's wire instrumentation, which imports ``botocore.session``, as every
saver does), constructing the saver as ``savers.py`` does, and its first
``get_tuple`` of the thread over HTTP, at the run's injected latency. The process
wall time (interpreter start and exit included) is printed beside it.

``aiobotocore`` is not a saver but the floor under AsyncS3Saver: what any checkpointer
built on aiobotocore pays with no code of ours. It imports ``langgraph.checkpoint.base``
(every checkpointer subclasses it) and ``aiobotocore.session``, makes a session and a
DynamoDB client, and sends AsyncS3Saver's two requests of its first ``get_tuple`` on
AsyncS3Saver's thread (the same ``Query`` and ``BatchGetItem``), decoding nothing.
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

from catalog import LATENCY_PROFILES

HERE = Path(__file__).resolve().parent
ROUNDS = 7
THREAD = "cold-start"
#: The floor's kind; it reads AsyncS3Saver's thread, so "async" is prepared first.
FLOOR = "aiobotocore"
REGION = "us-east-1"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": REGION,
}


# ------------------------------------------------------------------ in the child
def _saver_class(kind: str) -> Any:
    """Import the saver's package and return its class (timed as the import)."""
    if kind == "dynamodb":
        from langgraph_checkpoint_aws import DynamoDBSaver

        return DynamoDBSaver
    if kind == "async":
        from langgraph_s3 import AsyncS3Saver

        return AsyncS3Saver
    from langgraph_s3 import S3Saver

    return S3Saver


def _construct(cls: Any, kind: str, endpoint: str, resource: str) -> Any:
    """The saver as ``savers.Driver._construct`` makes it (without importing savers.py)."""
    if kind == "dynamodb":
        return cls(
            table_name=resource,
            region_name=REGION,
            endpoint_url=endpoint,
            enable_checkpoint_compression=True,
            s3_offload_config={"bucket_name": resource, "endpoint_url": endpoint},
        )
    return cls(bucket=resource, table=resource, region_name=REGION, endpoint_url=endpoint)


def _floor_read(args: argparse.Namespace, stamps: dict[str, float]) -> Any:
    """The floor: AsyncS3Saver's first two requests from a bare aiobotocore client."""
    import asyncio

    import aiobotocore.session

    async def first_read() -> Any:
        session = aiobotocore.session.get_session()
        client_context = session.create_client(
            "dynamodb", region_name=REGION, endpoint_url=args.endpoint, verify=False
        )
        async with client_context as client:
            stamps["construct"] = time.perf_counter()
            found = await client.query(
                TableName=args.resource,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :pre)",
                ExpressionAttributeValues={":pk": {"S": THREAD}, ":pre": {"S": "c#~#"}},
                ScanIndexForward=False,
                ConsistentRead=True,
                Limit=8,
            )
            keys = json.loads(args.keys)
            await client.batch_get_item(
                RequestItems={args.resource: {"Keys": keys, "ConsistentRead": True}}
            )
            stamps["get_tuple"] = time.perf_counter()
            return found["Items"] or None

    import langgraph.checkpoint.base  # noqa: F401  (every checkpointer subclasses it)

    stamps["import"] = time.perf_counter()
    return asyncio.run(first_read())


def sample(args: argparse.Namespace) -> dict[str, Any]:
    """One cold start, timed from here; run only in a fresh process."""
    t0 = time.perf_counter()
    import wire

    profile = LATENCY_PROFILES[args.latency_profile]
    wire.install(
        args.latency_ms / 1000,
        {k: v / 1000 for k, v in profile.items()},
        aio=args.saver in ("async", FLOOR),
    )
    if args.saver == FLOOR:
        stamps: dict[str, float] = {}
        found = _floor_read(args, stamps)
        return _figures(t0, stamps, found)
    cls = _saver_class(args.saver)
    stamps = {"import": time.perf_counter()}
    config = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
    if args.saver == "async":
        import asyncio

        async def first_read() -> Any:
            saver = _construct(cls, args.saver, args.endpoint, args.resource)
            stamps["construct"] = time.perf_counter()
            found = await saver.aget_tuple(config)
            stamps["get_tuple"] = time.perf_counter()
            await saver.aclose()
            return found

        found = asyncio.run(first_read())
    else:
        saver = _construct(cls, args.saver, args.endpoint, args.resource)
        stamps["construct"] = time.perf_counter()
        found = saver.get_tuple(config)
        stamps["get_tuple"] = time.perf_counter()
    return _figures(t0, stamps, found)


def _figures(t0: float, stamps: dict[str, float], found: Any) -> dict[str, Any]:
    import wire

    assert found is not None, "the prepared thread is missing"
    reqs = wire.RECORDER.requests
    return {
        "import_ms": (stamps["import"] - t0) * 1000,
        "construct_ms": (stamps["construct"] - stamps["import"]) * 1000,
        "get_tuple_ms": (stamps["get_tuple"] - stamps["construct"]) * 1000,
        "total_ms": (stamps["get_tuple"] - t0) * 1000,
        "requests": len(reqs),
        "kinds": sorted(wire.kind(r) for r in reqs),
        "round_trips": wire.critical_path(reqs),
    }


def floor_keys(args: argparse.Namespace) -> dict[str, Any]:
    """The keys of AsyncS3Saver's ``BatchGetItem`` in its first ``get_tuple`` of the
    prepared thread, taken from the request it sends (uncounted): the floor sends the
    same request."""
    import asyncio

    import aiobotocore.session
    from langgraph_s3 import AsyncS3Saver

    keys: list[dict[str, Any]] = []

    def seen(params: dict[str, Any], **_: Any) -> None:
        for wanted in params["RequestItems"].values():
            keys.extend(wanted["Keys"])

    async def first_read() -> None:
        session = aiobotocore.session.get_session()
        made = session.create_client("dynamodb", region_name=REGION, endpoint_url=args.endpoint)
        async with made as client:
            client.meta.events.register("provide-client-params.dynamodb.BatchGetItem", seen)
            saver = AsyncS3Saver(
                bucket=args.resource,
                table=args.resource,
                dynamodb_client=client,
                region_name=REGION,
                endpoint_url=args.endpoint,
            )
            config = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
            await saver.aget_tuple(config)
            await saver.aclose()

    asyncio.run(first_read())
    return {"keys": keys}


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Write the thread the samples read: an approval thread paused at its interrupt."""
    if args.saver == FLOOR:
        return floor_keys(args)
    import probes
    import wire
    from savers import fake_credentials, make_driver
    from textgen import seeded, text

    fake_credentials()
    wire.install(0.0)
    driver = make_driver(args.saver, args.endpoint, args.resource, HERE / "results" / "state")
    driver.setup()
    rng = seeded("cold-start")
    writer = probes.Writer(driver, driver.new_saver(), THREAD)
    writer.put({"request": text(rng, 300)})
    writer.put_writes([("context", [text(rng, 1250) for _ in range(10)])], "retrieve")
    writer.put({"context": [text(rng, 1250) for _ in range(10)]})
    writer.put_writes([("draft", text(rng, 1200))], "draft")
    writer.put({"draft": text(rng, 1200)})
    writer.put_writes([("__interrupt__", [{"value": "approve?"}])], "approval")
    driver.close()
    return {"thread": THREAD, "checkpoint_id": writer.config["configurable"]["checkpoint_id"]}


# ------------------------------------------------------------------ the parent
def resource_of(kind: str) -> str:
    return f"bench-{'async' if kind == FLOOR else kind}-cold"


def python_for(kind: str) -> Path:
    venv = HERE / (".venv-aws" if kind == "dynamodb" else ".venv")
    return venv / "bin" / "python"


def child(
    kind: str, mode: str, args: argparse.Namespace, keys: str = "[]"
) -> tuple[dict[str, Any], float]:
    """Run this script in a fresh interpreter of the saver's venv; (its JSON, wall ms)."""
    python = python_for(kind)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(CREDENTIALS)
    for var in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        env.pop(var, None)
    # Compiled bytecode for every package, as after `pip install` (see importtime.py).
    env["PYTHONPYCACHEPREFIX"] = str(HERE / ".pycache" / python.parent.parent.name)
    cmd = [str(python), str(Path(__file__).resolve()), mode, "--saver", kind]
    cmd += ["--endpoint", args.endpoint, "--resource", resource_of(kind), "--keys", keys]
    cmd += ["--latency-ms", str(args.latency_ms), "--latency-profile", args.latency_profile]
    started = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE, timeout=120)
    wall_ms = (time.perf_counter() - started) * 1000
    if out.returncode != 0:
        raise SystemExit(f"coldstart {mode} {kind} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result, wall_ms


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """Prepare every saver's thread, then alternate fresh samples; medians per saver."""
    kinds = [k for k in args.savers.split(",") if k]
    if FLOOR in kinds and "async" not in kinds:
        raise SystemExit(f"{FLOOR} reads AsyncS3Saver's thread: add async to --savers")
    floor_keys_json = "[]"
    for kind in sorted(kinds, key=lambda k: k == FLOOR):  # the floor after async
        prepared, _ = child(kind, "prepare", args)
        if kind == FLOOR:
            floor_keys_json = json.dumps(prepared["keys"])
    samples: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for round_no in range(args.rounds + 1):
        for kind in kinds:
            figures, wall_ms = child(kind, "sample", args, floor_keys_json)
            if round_no > 0:  # round 0 fills the bytecode caches
                samples[kind].append({**figures, "process_ms": wall_ms})
    keys = ("import_ms", "construct_ms", "get_tuple_ms", "total_ms", "process_ms")
    median = {
        kind: {
            **{key: statistics.median(s[key] for s in rows) for key in keys},
            "requests": rows[0]["requests"],
            "kinds": rows[0]["kinds"],
            "round_trips": rows[0]["round_trips"],
        }
        for kind, rows in samples.items()
    }
    return {"coldstart": {"rounds": args.rounds, "median": median, "samples": samples}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("run", "prepare", "sample"))
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--saver", default="s3")
    parser.add_argument("--savers", default=f"s3,async,{FLOOR},dynamodb")
    parser.add_argument("--resource", default="bench-cold")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds after the dropped one")
    parser.add_argument("--keys", default="[]", help="the floor's BatchGetItem keys (JSON)")
    parser.add_argument("--latency-ms", type=float, default=15.0)
    parser.add_argument("--latency-profile", default="uniform", choices=sorted(LATENCY_PROFILES))
    args = parser.parse_args(argv)
    if args.mode == "sample":
        result = sample(args)
    elif args.mode == "prepare":
        result = prepare(args)
    else:
        result = run_all(args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
