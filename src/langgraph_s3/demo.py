"""``langgraph-s3 demo``: an approval agent that pauses, then resumes in another process.

With no endpoint configured the demo starts a moto server inside this process,
so it needs no AWS account. ``--endpoint-url`` (or ``AWS_ENDPOINT_URL``) points it
at another S3/DynamoDB endpoint; ``--bucket`` without an endpoint uses real AWS
from the usual environment (credentials, region). ``langgraph-s3 demo`` takes these
from the command's global options; ``python -m langgraph_s3.demo`` (which the demo
also runs as its second process) from its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypedDict

from langgraph_s3 import S3Saver
from langgraph_s3.core.inventory import thread_figures
from langgraph_s3.errors import MissingDependencyError

DEMO_BUCKET = "langgraph-s3-demo"
DEMO_TABLE = "langgraph-s3-demo"
# A policy document every step carries unchanged: stored once, referenced by all.
POLICY = "\n".join(
    f"{i:04d}. Refunds above {i * 10} EUR need a second approver; log the ticket id."
    for i in range(1, 700)
)


class ApprovalState(TypedDict, total=False):
    request: str
    policy: str
    draft: str
    decision: str
    outcome: str


def build_graph(saver: S3Saver) -> Any:
    """draft -> approval (interrupt) -> act; the policy channel never changes."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def draft(state: ApprovalState) -> ApprovalState:
        return {
            "draft": f"Refund order {state['request']} in full (policy lines: "
            f"{state['policy'].count(chr(10)) + 1})"
        }

    def approval(state: ApprovalState) -> ApprovalState:
        answer = interrupt({"question": "Approve this action?", "draft": state["draft"]})
        return {"decision": "approved" if answer else "rejected"}

    def act(state: ApprovalState) -> ApprovalState:
        if state["decision"] == "approved":
            return {"outcome": f"done: {state['draft']}"}
        return {"outcome": "abandoned"}

    builder = StateGraph(ApprovalState)
    builder.add_node("draft", draft)
    builder.add_node("approval", approval)
    builder.add_node("act", act)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approval")
    builder.add_edge("approval", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver)


@dataclass
class DemoOptions:
    """Where the demo runs: ``langgraph-s3 demo`` fills this from the global options."""

    bucket: str = DEMO_BUCKET
    table: str = DEMO_TABLE
    prefix: str = "demo/"
    region: str = "us-east-1"
    endpoint_url: str | None = None
    #: No endpoint and no bucket named: start moto inside this process.
    embedded: bool = True
    profile: str | None = None
    #: ``MODULE:ATTR`` of a serializer (``--serde``), or None for the default.
    serde: str | None = None
    thread: str | None = None
    setup: bool = False
    reject: bool = False


@contextmanager
def _endpoint(opts: DemoOptions) -> Iterator[str | None]:
    if not opts.embedded:
        yield opts.endpoint_url
        return
    try:
        from langgraph_s3.local import local_endpoint
    except ImportError as exc:
        raise MissingDependencyError(
            "the embedded demo endpoint needs moto: pip install 'langgraph-s3[demo]' "
            "(or give --endpoint-url, or --bucket for real AWS)"
        ) from exc
    # The embedded server accepts any credentials; never send real ones to it.
    os.environ.update(
        AWS_ACCESS_KEY_ID="demo", AWS_SECRET_ACCESS_KEY="demo", AWS_DEFAULT_REGION=opts.region
    )
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    opts.profile = None
    with local_endpoint() as url:
        print(f"started an embedded S3/DynamoDB endpoint (moto) at {url}")
        yield url


def _saver(opts: DemoOptions, endpoint: str | None) -> S3Saver:
    extra: dict[str, Any] = {}
    if opts.profile:
        import boto3

        extra["session"] = boto3.Session(profile_name=opts.profile)
    if opts.serde:
        from langgraph_s3.cli.common import load_serde

        extra["serde"] = load_serde(opts.serde)
    return S3Saver(
        bucket=opts.bucket,
        table=opts.table,
        prefix=opts.prefix,
        region_name=opts.region,
        endpoint_url=endpoint,
        **extra,
    )


def _resume(opts: DemoOptions) -> int:
    """Runs in a separate process: a brand-new saver continues the paused thread."""
    from langgraph.types import Command

    saver = _saver(opts, opts.endpoint_url)
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": opts.thread}}
    result = graph.invoke(Command(resume=not opts.reject), config, durability="sync")
    print(json.dumps({"pid": os.getpid(), "outcome": result.get("outcome")}))
    return 0


def run_demo(opts: DemoOptions) -> int:
    """Run the demo (see the module docstring); 0 when the resumed run finished."""
    with _endpoint(opts) as endpoint:
        saver = _saver(opts, endpoint)
        if endpoint is not None or opts.setup:
            saver.setup()
        graph = build_graph(saver)
        thread_id = opts.thread or f"demo-{uuid.uuid4().hex[:8]}"
        config = {"configurable": {"thread_id": thread_id}}

        print(f"\n1. process {os.getpid()}: run thread {thread_id!r} until it asks for approval")
        graph.invoke({"request": "A-1042", "policy": POLICY}, config)
        state = graph.get_state(config)
        question = state.tasks[0].interrupts[0].value
        print(f"   paused at {state.next}: {question['question']} {question['draft']!r}")

        print("\n2. a separate process with a brand-new saver approves and resumes the thread")
        cmd = [
            sys.executable,
            "-m",
            "langgraph_s3.demo",
            "--resume",
            "--thread",
            thread_id,
            "--bucket",
            saver.bucket,
            "--table",
            saver.table,
            "--prefix",
            opts.prefix,
            "--region",
            opts.region,
        ]
        if endpoint:
            cmd += ["--endpoint-url", endpoint]
        if opts.profile:
            cmd += ["--profile", opts.profile]
        if opts.serde:
            cmd += ["--serde", opts.serde]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return done.returncode
        child = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"   process {child['pid']}: outcome = {child['outcome']!r}")

        print("\n3. history, read back by yet another new saver (newest first)")
        reader = _saver(opts, endpoint)
        history = build_graph(reader).get_state_history(config)
        for snap in history:
            meta = snap.metadata or {}
            print(
                f"   step {meta.get('step'):>2}  {meta.get('source'):<6} "
                f"{snap.config['configurable']['checkpoint_id']}  next={list(snap.next)}"
            )

        print("\n4. storage for this thread")
        for name, value in reader.run(thread_figures(reader, thread_id)).items():
            print(f"   {name:<28} {value}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m langgraph_s3.demo``: the demo with options of its own (and the resumed
    second process the demo starts)."""
    parser = argparse.ArgumentParser(prog="python -m langgraph_s3.demo")
    parser.add_argument("--endpoint-url", help="S3/DynamoDB endpoint (default: embedded moto)")
    parser.add_argument("--bucket", help=f"bucket (default {DEMO_BUCKET}); alone: real AWS")
    parser.add_argument("--table", default=DEMO_TABLE, help=f"table (default {DEMO_TABLE})")
    parser.add_argument("--prefix", default="demo/", help="key prefix (default demo/)")
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--profile", help="AWS profile")
    parser.add_argument("--serde", help="serializer as MODULE:ATTR")
    parser.add_argument("--thread", help="thread id (default: a new one)")
    parser.add_argument("--setup", action="store_true", help="create bucket and table first")
    parser.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reject", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    endpoint = args.endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
    opts = DemoOptions(
        bucket=args.bucket or DEMO_BUCKET, table=args.table, prefix=args.prefix,
        region=args.region, endpoint_url=endpoint, embedded=not (endpoint or args.bucket),
        profile=args.profile, serde=args.serde, thread=args.thread, setup=args.setup,
        reject=args.reject,
    )  # fmt: skip
    return _resume(opts) if args.resume else run_demo(opts)


if __name__ == "__main__":
    sys.exit(main())
