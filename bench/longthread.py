"""Long threads: what ``list(config, limit=1)`` and ``limit=10`` read on a thread of
1,000 and of 10,000 checkpoints (issue 22), and the index bytes a checkpoint costs.

**Building a thread.** Every checkpoint is made by the saver's own ``put`` and
``put_writes`` (a chat-like step: a 1,500-character message replaces the last one,
a step counter, and one task's 300-character pending write), so every stored item
is exactly what the saver writes. Sending 20,000 writes to moto one by one would
take most of an hour (moto's ``TransactWriteItems`` copies the whole table), so the
saver's DynamoDB client is *captured* while the thread is built: its write requests
(``PutItem``, ``UpdateItem`` with ``SET`` only, ``BatchWriteItem`` puts,
``TransactWriteItems`` puts/updates/condition checks) are applied to an in-memory
table instead of being sent (botocore's ``before-call`` event answers them, as
botocore's ``Stubber`` does), and that table is then written with
``BatchWriteItem``. The guards the saver's conditions check hold by construction
(one writer, each checkpoint continues the previous one). S3 requests are sent as
usual (the bodies here fit in the index, so ``S3Saver`` sends none).

**Measuring.** One saver per kind, warmed by a ``get_tuple`` of the thread (a
long-lived process serving history calls), then each ``list`` call alone: requests
by kind, sequential round trips, HTTP bytes, items DynamoDB returned (``Count``)
and read (``ScannedCount``, what it bills), read units (``capacity.py``, against a
final scan of the table) and the request cost of a million such calls.

**Index bytes per checkpoint** (same run): DynamoDB bytes (attribute names and
values, as DynamoDB sizes items) the thread's items take per checkpoint, and per
``put`` of a step that changed only a counter next to an unchanged 100 KB value.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import prices
import wire
from capacity import TableSnapshot, item_key, request_units
from probes import Writer
from savers import Driver
from stored import REGION
from textgen import seeded, text

SIZES = (1_000, 10_000)
QUICK_SIZES = (1_000,)
LIMITS = (1, 10)
SMALL_STEPS = 20
_CAPTURED = {"PutItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems"}
_SET = re.compile(r"(#?\w+) = (?:if_not_exists\(\1, (:\w+)\)|(:\w+))")
_READS = {"Query", "Scan", "GetItem", "BatchGetItem"}


class IndexCapture:
    """An in-memory table that a saver's DynamoDB writes go to instead of the wire."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.captured: Counter[str] = Counter()
        self.passed: Counter[str] = Counter()
        self._lock = threading.Lock()

    def attach(self, client: Any) -> None:
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._keep, unique_id="lt-keep")
        events.register_first("before-call.dynamodb", self._answer, unique_id="lt-answer")

    def _keep(self, params: Any = None, context: Any = None, **_: Any) -> None:
        if context is not None:
            context["lt_params"] = params

    def _answer(self, model: Any = None, context: Any = None, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        op = model.name
        if op not in _CAPTURED:
            self.passed[op] += 1
            return None
        with self._lock:
            self.captured[op] += 1
            self._apply(op, context["lt_params"])
        parsed = {"UnprocessedItems": {}} if op == "BatchWriteItem" else {}
        return AWSResponse("http://captured", 200, {}, None), parsed

    def _apply(self, op: str, params: dict[str, Any]) -> None:
        if op == "PutItem":
            self._put(params["TableName"], params["Item"])
        elif op == "UpdateItem":
            self._set(params)
        elif op == "BatchWriteItem":
            for table, entries in params["RequestItems"].items():
                for entry in entries:
                    self._put(table, entry["PutRequest"]["Item"])
        else:
            for entry in params["TransactItems"]:
                ((action, body),) = entry.items()
                if action == "Put":
                    self._put(body["TableName"], body["Item"])
                elif action == "Update":
                    self._set(body)
                elif action != "ConditionCheck":
                    raise ValueError(f"cannot capture a transaction {action}")

    def _put(self, table: str, item: dict[str, Any]) -> None:
        key = item_key(item)
        assert key is not None, item
        self.items[(table, *key)] = dict(item)

    def _set(self, params: dict[str, Any]) -> None:
        """Apply an ``UpdateItem`` as DynamoDB would; its expression may hold only
        ``SET a = :v`` and ``SET a = if_not_exists(a, :v)`` (``a`` a ``#name`` or plain)."""
        expr = params["UpdateExpression"]
        found = _SET.findall(expr)
        if not expr.startswith("SET ") or len(found) != expr.count(" = "):
            raise ValueError(f"cannot capture the update {expr!r}")
        key = item_key(params["Key"])
        assert key is not None
        item = self.items.setdefault((params["TableName"], *key), dict(params["Key"]))
        names = params.get("ExpressionAttributeNames") or {}
        values = params["ExpressionAttributeValues"]
        for name, kept, value in found:
            attr = names.get(name, name)
            if kept and attr in item:
                continue
            item[attr] = values[kept or value]

    def flush(self, endpoint: str) -> int:
        """Write the captured items to the table on the moto server; returns how many."""
        import boto3

        with wire.uninstrumented():
            ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
        rows = sorted(self.items.items())
        for start in range(0, len(rows), 25):
            pending: dict[str, list[Any]] = {}
            for (table, *_), item in rows[start : start + 25]:
                pending.setdefault(table, []).append({"PutRequest": {"Item": item}})
            while pending:
                pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
        self.items.clear()
        return len(rows)


@contextmanager
def captured_clients(capture: IndexCapture) -> Iterator[None]:
    """DynamoDB clients created in this block write to ``capture`` (and are not counted)."""
    import botocore.session

    original = botocore.session.Session.create_client

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        if client.meta.service_model.service_name == "dynamodb":
            capture.attach(client)
        return client

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
    try:
        with wire.uninstrumented():
            yield
    finally:
        botocore.session.Session.create_client = original  # type: ignore[method-assign]


# ------------------------------------------------------------------ building
class ThreadBuilder(Writer):
    """Puts chat-like checkpoints on one thread through a saver, as LangGraph would
    (``probes.Writer``'s checkpoints, put without measuring each one)."""

    def __init__(self, saver: Any, thread: str) -> None:
        super().__init__(None, saver, thread)  # type: ignore[arg-type]
        self.ids: list[str] = []

    def put(self, changes: dict[str, Any]) -> dict[str, Any]:
        checkpoint, metadata, new_versions = self.next_checkpoint(changes)
        self.config = self.saver.put(self.config, checkpoint, metadata, new_versions)
        self.ids.append(self.config["configurable"]["checkpoint_id"])
        return {}

    def put_writes(self, writes: list[tuple[str, Any]]) -> None:
        task = str(uuid.UUID(int=self.step + 1))  # a uuid-sized task id, as LangGraph's
        self.saver.put_writes(self.config, writes, task)


def build_thread(driver: Driver, thread: str, checkpoints: int) -> dict[str, Any]:
    """``checkpoints`` chat-like steps on ``thread``, written through a captured client."""
    rng = seeded("longthread")
    messages = [text(rng, 1500) for _ in range(64)]
    replies = [text(rng, 300) for _ in range(64)]
    capture = IndexCapture()
    started = time.perf_counter()
    with captured_clients(capture):
        saver = driver._construct()
        builder = ThreadBuilder(saver, thread)
        for i in range(checkpoints):
            builder.put({"messages": messages[i % 64], "step": i})
            builder.put_writes([("messages", replies[i % 64])])
        _close(saver)
    built = time.perf_counter() - started
    items = capture.flush(driver.endpoint)
    return {
        "checkpoints": checkpoints,
        "items_written": items,
        "captured": dict(capture.captured),
        "sent": dict(capture.passed),
        "build_s": built,
        "flush_s": time.perf_counter() - started - built,
        "newest_ids": builder.ids[::-1][: max(LIMITS)],
    }


def _close(saver: Any) -> None:
    close = getattr(saver, "close", None)
    if callable(close):
        close()


# ------------------------------------------------------------------ measuring
def thread_config(thread: str) -> dict[str, Any]:
    """What ``graph.get_state_history`` passes: the thread and the root namespace."""
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def timed_call(
    driver: Driver, saver: Any, method: str, *args: Any, **kwargs: Any
) -> tuple[Any, wire.CallRecord]:
    """One checkpointer call alone; its record (requests, start and end)."""
    wire.RECORDER.reset()
    result = driver.call(saver, method, *args, **kwargs)
    (call,) = [c for c in wire.RECORDER.calls if c.method == method]
    wire.RECORDER.reset()
    return result, call


def call_figures(call: wire.CallRecord, snapshot: TableSnapshot) -> dict[str, Any]:
    """Requests, items returned and read, read units, bytes and cost of one call."""
    reqs = call.requests
    reads = [r for r in reqs if r.service == "dynamodb" and r.op in _READS]
    responses = [r.summary.get("response", {}) for r in reads]
    rru = sum(request_units(r.summary, snapshot)["rru"] for r in reads)
    s3_ops = [r.op for r in reqs if r.service == "s3"]
    figures = {
        "requests": len(reqs),
        "kinds": dict(sorted(Counter(wire.kind(r) for r in reqs).items())),
        "round_trips": wire.critical_path(reqs),
        "items_returned": sum(int(x.get("count", 0)) for x in responses),
        "items_read": sum(int(x.get("scanned", 0)) for x in responses),
        "rru": rru,
        "bytes_in": sum(r.bytes_in for r in reqs),
        "bytes_out": sum(r.bytes_out for r in reqs),
        "ms": (call.end - call.start) * 1000,
        "s3_tier1": sum(1 for op in s3_ops if op in ("PutObject", "ListObjectsV2")),
        "s3_tier2": sum(1 for op in s3_ops if op not in ("PutObject", "ListObjectsV2")),
        "wru": 0.0,
    }
    figures["usd_per_million_calls"] = prices.request_cost(figures) * 1e6
    return figures


def small_steps(driver: Driver) -> dict[str, Any]:
    """DynamoDB and S3 bytes per ``put`` that changed only a counter beside 100 KB."""
    import probes

    storage = driver.storage()
    assert storage is not None
    writer = probes.Writer(driver, driver.new_saver(), "small-steps")
    writer.put({"big": text(seeded("small-steps"), 100_000), "counter": 0})
    before, _ = storage.measure()
    puts = [writer.put({"counter": i}) for i in range(1, SMALL_STEPS + 1)]
    after, _ = storage.measure()
    per = {k: (after[k] - before[k]) / SMALL_STEPS for k in ("ddb_bytes", "ddb_items", "s3_bytes")}
    return {
        "steps": SMALL_STEPS,
        "index_bytes_per_checkpoint": per["ddb_bytes"],
        "index_items_per_checkpoint": per["ddb_items"],
        "s3_bytes_per_checkpoint": per["s3_bytes"],
        "requests_per_put": sum(p["requests"] for p in puts) / len(puts),
    }


def thread_bytes(snapshot: TableSnapshot, thread: str, checkpoints: int) -> dict[str, float]:
    """DynamoDB bytes and items the thread's index holds, per checkpoint."""
    sizes = [size for (pk, _), size in snapshot.sizes.items() if thread in pk]
    return {
        "index_bytes_per_checkpoint": sum(sizes) / checkpoints,
        "index_items_per_checkpoint": len(sizes) / checkpoints,
    }


def run_longthread(driver: Driver, quick: bool) -> dict[str, Any]:
    """Small steps, then each long thread built, then ``list`` with each limit on it."""
    small = small_steps(driver)
    sizes = QUICK_SIZES if quick else SIZES
    threads = {n: f"long-{n // 1000}k" for n in sizes}
    builds = {n: build_thread(driver, threads[n], n) for n in sizes}
    storage = driver.storage()
    assert storage is not None
    _, snapshot = storage.measure()
    saver = driver.new_saver()
    rows = []
    for n in sizes:
        cfg = thread_config(threads[n])
        latest, _ = timed_call(driver, saver, "get_tuple", cfg)  # warm: clients, connections
        assert latest.config["configurable"]["checkpoint_id"] == builds[n]["newest_ids"][0]
        for limit in LIMITS:
            tuples, call = timed_call(driver, saver, "list", cfg, limit=limit)
            got = [t.config["configurable"]["checkpoint_id"] for t in tuples]
            assert got == builds[n]["newest_ids"][:limit], (got, builds[n]["newest_ids"])
            rows.append({"checkpoints": n, "limit": limit, **call_figures(call, snapshot)})
        builds[n].update(thread_bytes(snapshot, threads[n], n))
    return {"longthread": {"list": rows, "threads": list(builds.values()), "small_steps": small}}
