"""What the savers send, exactly: a fingerprint of every request body, to compare two
versions of the code.

    .venv/bin/python bench/wire_fingerprint.py [--out FILE]

Runs a fixed program on S3Saver and on AsyncS3Saver against an embedded moto server:
graphs with an interrupt and resume, a subgraph, ``update_state`` on an old
checkpoint, ``list`` with a filter, ``before`` and ``limit``, pending writes large
enough for blobs, ``copy_thread``, ``prune``, ``delete_for_runs``, ``delete_thread``,
a ten-turn chat whose message list grows past 16 KiB (chunk items, layout 5), a
250 KB value carried by a second step and copied (a short chunk list, layout 8) and a
garbage collection. Clocks, ids and random version tails are made
deterministic, so two runs of the same code send the same bytes.

Per saver it prints, for each (service, operation): the number of requests, the
bytes of their bodies, and a SHA-256 over the sorted canonical forms of the requests
(DynamoDB JSON with sorted keys, S3 method, path and body), so a difference in any
request's content shows even where the order of concurrent requests differs. Run it
on two checkouts and compare the output (``diff``): a refactoring that must not
change the wire shows no difference.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import itertools
import json
import operator
import os
import random
import sys
import uuid
from collections import defaultdict
from typing import Annotated, Any, TypedDict

os.environ.update(
    AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
)

T0_NS = 1_700_000_000 * 10**9
_ticks = itertools.count()
_lock_rng = random.Random(0)
#: The incarnations' own: uuid4 is also drawn from worker threads (LangGraph's
#: background puts), so a shared generator gave them run-dependent values.
_incarnation_rng = random.Random(1)


def _fake_time_ns() -> int:
    return T0_NS + next(_ticks) * 1_000_000  # 1 ms per call


class _FakeDatetime(dt.datetime):
    @classmethod
    def now(cls, tz: Any = None) -> _FakeDatetime:
        base = dt.datetime.fromtimestamp(_fake_time_ns() / 1e9, tz or dt.UTC)
        return cls.fromtimestamp(base.timestamp(), tz)


def make_deterministic() -> None:
    """Fixed clocks, ids and randomness for what the savers and LangGraph write."""
    import langgraph.checkpoint.base.id as lg_id
    import langgraph.pregel._checkpoint as lg_checkpoint

    lg_id.time = type("T", (), {"time_ns": staticmethod(_fake_time_ns)})  # type: ignore[attr-defined]
    lg_checkpoint.datetime = _FakeDatetime  # type: ignore[attr-defined]
    random.seed(0)
    uuid.uuid4 = lambda: uuid.UUID(int=_lock_rng.getrandbits(128), version=4)
    # A thread's incarnation (4 bytes of os.urandom) too.
    import langgraph_s3.core.incarnations as incarnations

    draw = lambda n: _incarnation_rng.getrandbits(8 * n).to_bytes(n, "big")  # noqa: E731
    incarnations.os = type("Os", (), {"urandom": staticmethod(draw)})  # type: ignore[assignment]


class Captured:
    """Request bodies by (service, operation), from every client created."""

    def __init__(self) -> None:
        self.by_op: dict[tuple[str, str], list[bytes]] = defaultdict(list)

    def handler(self, event_name: str, request: Any, **_: Any) -> None:
        _, service, op = event_name.split(".", 2)
        body = request.body or b""
        if hasattr(body, "read"):  # S3 bodies are sent from a file-like object
            at = body.tell()
            body, _ = body.read(), body.seek(at)
        if isinstance(body, str):
            body = body.encode()
        path = request.url.split("://", 1)[-1].split("/", 1)[-1]
        if service == "dynamodb":
            canonical = json.dumps(json.loads(body), sort_keys=True).encode()
        else:
            canonical = f"{request.method} /{path}\n".encode() + body
        self.by_op[(service, op)].append(canonical + b"\n" + str(len(body)).encode())

    def install(self) -> None:
        import aiobotocore.session
        import botocore.session

        plain = botocore.session.Session.create_client
        aio = aiobotocore.session.AioSession._create_client

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = plain(session, *args, **kwargs)
            client.meta.events.register("before-send", self.handler)
            return client

        async def create_aio_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = await aio(session, *args, **kwargs)
            client.meta.events.register("before-send", self.handler)
            return client

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        aiobotocore.session.AioSession._create_client = create_aio_client  # type: ignore[method-assign]

    def report(self) -> dict[str, Any]:
        out = {}
        for (service, op), bodies in sorted(self.by_op.items()):
            digest = hashlib.sha256(b"\0".join(sorted(bodies))).hexdigest()[:16]
            size = sum(int(b.rsplit(b"\n", 1)[1]) for b in bodies)
            out[f"{service}:{op}"] = {"requests": len(bodies), "bytes": size, "sha256": digest}
        self.by_op.clear()
        return out


class State(TypedDict, total=False):
    topic: str
    notes: list[str]
    doc: str
    answer: str


def graph(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def research(state: State) -> dict[str, Any]:
        rng = random.Random(state["topic"])
        text = "".join(rng.choice("abcdefgh ") for _ in range(30_000))
        return {"notes": [*state.get("notes", []), state["topic"]], "doc": text}

    def approve(state: State) -> dict[str, Any]:
        return {"answer": str(interrupt({"question": state["topic"]}))}

    sub = StateGraph(State)
    sub.add_node("research", research)
    sub.add_edge(START, "research")
    sub.add_edge("research", END)
    builder = StateGraph(State)
    builder.add_node("sub", sub.compile())
    builder.add_node("approve", approve)
    builder.add_edge(START, "sub")
    builder.add_edge("sub", "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer)


class Chat(TypedDict):
    messages: Annotated[list[str], operator.add]


def chat(checkpointer: Any) -> Any:
    """A growing message list: past 16 KiB it is chunked, and each turn's new pieces
    are small enough to be chunk items (layout 5)."""
    from langgraph.graph import END, START, StateGraph

    def reply(state: Chat) -> dict[str, Any]:
        rng = random.Random(len(state["messages"]))
        return {"messages": ["".join(rng.choice("abcdefgh ") for _ in range(1_500))]}

    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


def report(checkpointer: Any) -> Any:
    """A 250 KB value written once and carried by the next step: a new value of several
    chunks, all in one pack (a short chunk list with its lead, layout 8)."""
    from langgraph.graph import END, START, StateGraph

    def write(state: State) -> dict[str, Any]:
        if state.get("doc"):
            return {"notes": [*state.get("notes", []), "kept"]}
        rng = random.Random("report")
        return {"doc": "".join(rng.choice("abcdefghijklmnop ") for _ in range(250_000))}

    builder = StateGraph(State)
    builder.add_node("write", write)
    builder.add_edge(START, "write")
    builder.add_edge("write", END)
    return builder.compile(checkpointer=checkpointer)


def turns() -> list[dict[str, Any]]:
    rng = random.Random("turns")
    return [
        {"messages": [f"user {n}: " + "".join(rng.choice("ijklmnop ") for _ in range(1_500))]}
        for n in range(10)
    ]


def program(saver: Any) -> None:
    """The sync program (S3Saver)."""
    from langgraph.types import Command
    from langgraph_s3.gc import collect

    g = graph(saver)
    for n in range(3):
        conf = {"configurable": {"thread_id": f"t{n}"}, "run_id": uuid.uuid4()}
        g.invoke({"topic": f"topic {n}"}, conf, durability="sync")
        g.invoke(Command(resume=f"ok {n}"), conf, durability="sync")
    conf = {"configurable": {"thread_id": "t0"}}
    history = list(g.get_state_history(conf))
    g.update_state(history[-2].config, {"notes": ["edited"]})
    list(saver.list(conf, filter={"source": "loop"}, limit=2))
    list(saver.list(conf, before=history[1].config))
    saver.copy_thread("t1", "t1-copy")
    saver.prune(["t1-copy"], strategy="keep_latest")
    saver.delete_for_runs([str(uuid.UUID(int=0))])
    saver.delete_thread("t2")
    c = chat(saver)
    for message in turns():
        c.invoke(message, {"configurable": {"thread_id": "chat"}}, durability="sync")
    r = report(saver)
    for _ in range(2):
        r.invoke({"topic": "report"}, {"configurable": {"thread_id": "report"}}, durability="sync")
    saver.copy_thread("report", "report-copy")
    collect(saver, grace=0)


async def aprogram(saver: Any) -> None:
    """The async program (AsyncS3Saver), the same steps."""
    from langgraph.types import Command
    from langgraph_s3.gc import acollect

    g = graph(saver)
    for n in range(3):
        conf = {"configurable": {"thread_id": f"a{n}"}, "run_id": uuid.uuid4()}
        await g.ainvoke({"topic": f"topic {n}"}, conf, durability="sync")
        await g.ainvoke(Command(resume=f"ok {n}"), conf, durability="sync")
    conf = {"configurable": {"thread_id": "a0"}}
    history = [s async for s in g.aget_state_history(conf)]
    await g.aupdate_state(history[-2].config, {"notes": ["edited"]})
    [t async for t in saver.alist(conf, filter={"source": "loop"}, limit=2)]
    [t async for t in saver.alist(conf, before=history[1].config)]
    await saver.acopy_thread("a1", "a1-copy")
    await saver.aprune(["a1-copy"], strategy="keep_latest")
    await saver.adelete_for_runs([str(uuid.UUID(int=0))])
    await saver.adelete_thread("a2")
    c = chat(saver)
    for message in turns():
        await c.ainvoke(message, {"configurable": {"thread_id": "achat"}}, durability="sync")
    r = report(saver)
    for _ in range(2):
        conf = {"configurable": {"thread_id": "areport"}}
        await r.ainvoke({"topic": "report"}, conf, durability="sync")
    await saver.acopy_thread("areport", "areport-copy")
    await acollect(saver, grace=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument(
        "--no-chunk-items",
        action="store_true",
        help="chunk_items=False: the wire of layout 4 (compare with releases before 5)",
    )
    args = parser.parse_args()
    make_deterministic()
    captured = Captured()
    captured.install()
    from langgraph_s3 import AsyncS3Saver, S3Saver
    from langgraph_s3.local import local_endpoint

    # One fixed time for the savers: LangGraph stores pending writes from worker
    # threads, so a moving clock would be read in a different order each run.
    def clock() -> float:
        return T0_NS / 1e9

    result: dict[str, Any] = {}
    with local_endpoint() as url:
        common: dict[str, Any] = {
            "endpoint_url": url,
            "region_name": "us-east-1",
            "max_concurrency": 1,
        }
        if args.no_chunk_items:
            common["chunk_items"] = False
        with S3Saver("wire-s3", "wire-s3", clock=clock, **common) as saver:
            saver.setup()
            captured.report()  # setup is not the point
            program(saver)
        result["S3Saver"] = captured.report()

        async def run_async() -> None:
            async with AsyncS3Saver("wire-async", "wire-async", clock=clock, **common) as saver:
                await saver.setup()
                captured.report()
                await aprogram(saver)

        asyncio.run(run_async())
        result["AsyncS3Saver"] = captured.report()
    text = json.dumps(result, indent=1, sort_keys=True)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
