"""tracing.py: one OpenTelemetry span per saver call, whose request and byte counts
are what went over the wire; nothing at all without opentelemetry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import langgraph_s3.tracing
from tests.conftest import Backend, RequestLog

#: A retrieved context that does not compress: stored as a blob, not in the index.
CONTEXT = os.urandom(8000).hex()


class State(TypedDict, total=False):
    request: str
    context: str
    log: list[str]


def build(checkpointer: Any) -> Any:
    """The README's approval graph, with a retrieved context large enough for a blob."""

    def draft(state: State) -> dict[str, Any]:
        return {"context": CONTEXT, "log": [f"draft {state['request']}"]}

    def approve(state: State) -> dict[str, Any]:
        return {"log": [*state["log"], f"{state['request']}: {interrupt('approve?')}"]}

    builder = StateGraph(State)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Spans of this test only: a provider of its own, not the process-wide one."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(langgraph_s3.tracing, "_tracer", provider.get_tracer("test"))
    yield exporter
    provider.shutdown()


class S3Bytes:
    """Object bytes S3 requests carried, as botocore sent and received them."""

    def __init__(self) -> None:
        self.sent = self.received = 0

    def attach(self, client: Any) -> Any:
        def sent(params: dict[str, Any], model: Any, **_: Any) -> None:
            if model.name == "PutObject":
                self.sent += len(params["Body"])

        def received(parsed: dict[str, Any], model: Any, **_: Any) -> None:
            if model.name == "GetObject" and "ContentLength" in parsed:
                self.received += int(parsed["ContentLength"])

        client.meta.events.register("before-parameter-build.s3.*", sent)
        client.meta.events.register("after-call.s3.*", received)
        return client


def totals(exporter: InMemorySpanExporter) -> dict[str, int]:
    out: Counter[str] = Counter()
    for span in exporter.get_finished_spans():
        for key in ("requests.s3", "requests.dynamodb", "s3.bytes_sent", "s3.bytes_received"):
            out[key] += int(span.attributes[f"langgraph_s3.{key}"])
    return dict(out)


def test_a_graph_run_is_one_span_per_call_with_the_wire_counts(
    inproc_backend: Backend, request_log: RequestLog, spans: InMemorySpanExporter
) -> None:
    s3_bytes = S3Bytes()
    s3 = s3_bytes.attach(request_log.attach(inproc_backend.s3()))
    ddb = request_log.attach(inproc_backend.dynamodb())
    conf = {"configurable": {"thread_id": "approval-1"}}
    with inproc_backend.saver(s3_client=s3, dynamodb_client=ddb) as saver:
        build(saver).invoke({"request": "refund"}, conf)
    with inproc_backend.saver(s3_client=s3, dynamodb_client=ddb) as saver:  # a new container
        build(saver).invoke(Command(resume="yes"), conf)
        history = list(saver.list(conf, limit=2))
    assert len(history) == 2

    names = Counter(span.name for span in spans.get_finished_spans())
    assert names["langgraph_s3.list"] == 1
    assert names["langgraph_s3.get_tuple"] >= 2 and names["langgraph_s3.put"] >= 4
    assert set(names) <= {f"langgraph_s3.{n}" for n in ("get_tuple", "put", "put_writes", "list")}
    by_service = Counter(service for service, _ in request_log.calls)
    assert totals(spans) == {
        "requests.s3": by_service["s3"],
        "requests.dynamodb": by_service["dynamodb"],
        "s3.bytes_sent": s3_bytes.sent,
        "s3.bytes_received": s3_bytes.received,
    }
    assert s3_bytes.sent > 5_000 and s3_bytes.received > 5_000  # the context went as a blob
    for span in spans.get_finished_spans():
        assert span.attributes["langgraph_s3.thread_id"] == "approval-1"
        assert span.attributes["langgraph_s3.retries"] == 0
    resume_reads = [s for s in spans.get_finished_spans() if s.name == "langgraph_s3.get_tuple"]
    assert any(s.attributes["langgraph_s3.requests.s3"] > 0 for s in resume_reads)


async def test_the_async_saver_traces_the_same_way(
    server_backend: Backend, spans: InMemorySpanExporter
) -> None:
    conf = {"configurable": {"thread_id": "a-1"}}
    async with server_backend.async_saver() as saver:
        await build(saver).ainvoke({"request": "refund"}, conf)
        await build(saver).ainvoke(Command(resume="yes"), conf)
        assert len([t async for t in saver.alist(conf)]) >= 4
        await saver.adelete_thread("a-1")
    finished = spans.get_finished_spans()
    names = Counter(span.name for span in finished)
    assert names["langgraph_s3.list"] == 1 and names["langgraph_s3.delete_thread"] == 1
    deleted = next(s for s in finished if s.name == "langgraph_s3.delete_thread")
    assert deleted.attributes["langgraph_s3.requests.dynamodb"] >= 2  # query, batch delete
    assert deleted.attributes["langgraph_s3.requests.s3"] >= 2  # list, delete
    # The context went up as a blob, with the task's write that stored it.
    writes = [s for s in finished if s.name in ("langgraph_s3.put", "langgraph_s3.put_writes")]
    assert sum(s.attributes["langgraph_s3.s3.bytes_sent"] for s in writes) > 5_000


def test_a_conflict_is_marked_on_its_span(
    inproc_backend: Backend, spans: InMemorySpanExporter
) -> None:
    from langgraph_s3 import CheckpointConflictError

    conf = {"configurable": {"thread_id": "c-1"}}
    with inproc_backend.saver() as saver:
        graph = build(saver)
        graph.invoke({"request": "one"}, conf)
        stale = saver.get_tuple(conf)  # this run reads the head ...
        assert stale is not None
        graph.invoke(Command(resume="yes"), conf)  # ... another commits first
        with pytest.raises(CheckpointConflictError):
            saver.put(stale.config, empty_checkpoint(), {"step": 9}, {})
    [failed] = [s for s in spans.get_finished_spans() if s.attributes["langgraph_s3.conflict"]]
    assert failed.name == "langgraph_s3.put"


def test_without_opentelemetry_nothing_is_imported_and_calls_work(moto_server: str) -> None:
    code = f"""
import sys
sys.modules["opentelemetry"] = None  # as if not installed
from langgraph.checkpoint.base import empty_checkpoint
from langgraph_s3 import S3Saver, tracing
saver = S3Saver("nootel", "nootel", endpoint_url={moto_server!r}, region_name="us-east-1")
saver.setup()
conf = {{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}
saver.put(conf, empty_checkpoint(), {{"step": -1}}, {{}})
assert saver.get_tuple(conf) is not None
assert tracing._tracer is False
assert not any(m.startswith("opentelemetry.") for m in sys.modules), "imported"
print("ok")
"""
    env = {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "PATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.strip() == "ok", done.stderr


_TRACED_README = """
import json, sys
from collections import Counter
import botocore.session, aiobotocore.session
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
wire = Counter()

def count(client):
    service = client.meta.service_model.service_name
    def sent(params, model, **_):
        wire["requests." + service] += 1
        if model.name == "PutObject":
            wire["s3.bytes_sent"] += len(params["Body"])
    def received(parsed, model, **_):
        if model.name == "GetObject":
            wire["s3.bytes_received"] += int(parsed.get("ContentLength", 0))
    client.meta.events.register("before-call", sent)
    client.meta.events.register("after-call", received)
    return client

plain = botocore.session.Session.create_client
botocore.session.Session.create_client = lambda s, *a, **k: count(plain(s, *a, **k))
aio = aiobotocore.session.AioSession._create_client
async def create_aio(s, *a, **k):
    return count(await aio(s, *a, **k))
aiobotocore.session.AioSession._create_client = create_aio

exec(compile(sys.stdin.read(), "README", "exec"))
spans = [(s.name, dict(s.attributes)) for s in exporter.get_finished_spans()]
print(json.dumps({"spans": spans, "wire": wire}))
"""


@pytest.mark.parametrize("which", [0, 1], ids=["sync", "async"])
def test_the_readme_example_traced_shows_the_wire_counts(moto_server: str, which: int) -> None:
    from tests.graphs.test_readme import complete_examples, example_env

    done = subprocess.run(
        [sys.executable, "-c", _TRACED_README], input=complete_examples()[which],
        env=example_env(moto_server), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    spans = [(name, attrs) for name, attrs in out["spans"] if name.startswith("langgraph_s3.")]
    names = Counter(name for name, _ in spans)
    assert names["langgraph_s3.put"] >= 2 and names["langgraph_s3.get_tuple"] >= 2
    summed: Counter[str] = Counter()
    for _, attrs in spans:
        for key in ("requests.s3", "requests.dynamodb", "s3.bytes_sent", "s3.bytes_received"):
            summed[key] += attrs[f"langgraph_s3.{key}"]
    # setup() is a saver call too, so every request the example made is in a span.
    assert {k: v for k, v in summed.items() if v} == out["wire"]
