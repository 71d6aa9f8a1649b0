"""Protocol probes: checkpointer methods called directly, one request count per call.

The graph workloads show what a whole agent costs; these isolate the properties
the targets name, on identical inputs for every AWS saver:

* ``construct``     requests made by constructing a saver (should be none);
* ``put_writes``    requests per call for 1, 4, 16 and 64 writes;
* ``put_small``     requests per ``put`` when only a small channel changed while a
                    100 KB value stays as it was;
* ``resume``        round trips of ``get_tuple`` (latest) from a brand-new saver, for
                    4, 32 and 128 channels, a quarter of them 30 KB, with pending
                    writes (one of them 40 KB);
* ``warm``          a reader that already read a thread reads it again after a
                    writer changed one of two 200 KB values: which objects it fetches;
* ``list``          ``list(limit=10)`` and a full ``list`` of a 30-checkpoint thread.
"""

from __future__ import annotations

import time
from typing import Any

import wire
from savers import Driver
from textgen import seeded, text
from workloads import edit_document


def _summary(call: wire.CallRecord | None, seconds: float) -> dict[str, Any]:
    reqs = call.requests if call is not None else []
    kinds: dict[str, int] = {}
    for r in reqs:
        kinds[wire.kind(r)] = kinds.get(wire.kind(r), 0) + 1
    return {
        "requests": len(reqs),
        "s3": sum(1 for r in reqs if r.service == "s3"),
        "ddb": sum(1 for r in reqs if r.service == "dynamodb"),
        "round_trips": wire.critical_path(reqs),
        "kinds": kinds,
        "bytes_in": sum(r.bytes_in for r in reqs),
        "bytes_out": sum(r.bytes_out for r in reqs),
        "s3_gets": [r.summary.get("key") for r in reqs if r.op == "GetObject"],
        "seconds": seconds,
    }


def measured(driver: Driver, saver: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """Call one checkpointer method; returns (result, figures of that call)."""
    wire.RECORDER.reset()
    start = time.perf_counter()
    result = driver.call(saver, method, *args, **kwargs)
    seconds = time.perf_counter() - start
    calls = [c for c in wire.RECORDER.calls if c.method == method]
    wire.RECORDER.reset()
    return result, _summary(calls[0] if calls else None, seconds)


class Writer:
    """Builds a thread checkpoint by checkpoint, as LangGraph would."""

    def __init__(self, driver: Driver, saver: Any, thread: str) -> None:
        self.driver = driver
        self.saver = saver
        self.config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        self.values: dict[str, Any] = {}
        self.versions: dict[str, Any] = {}
        self.step = -1

    def next_checkpoint(
        self, changes: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The next checkpoint with ``changes`` applied, its metadata and new versions."""
        from langgraph.checkpoint.base import empty_checkpoint

        new_versions = {}
        for name, value in changes.items():
            version = self.saver.get_next_version(self.versions.get(name), None)
            self.versions[name] = version
            self.values[name] = value
            new_versions[name] = version
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = dict(self.values)
        checkpoint["channel_versions"] = dict(self.versions)
        checkpoint["updated_channels"] = sorted(changes)
        metadata = {"source": "loop", "step": self.step, "parents": {}}
        self.step += 1
        return checkpoint, metadata, new_versions

    def put(self, changes: dict[str, Any]) -> dict[str, Any]:
        checkpoint, metadata, new_versions = self.next_checkpoint(changes)
        self.config, figures = measured(
            self.driver, self.saver, "put", self.config, checkpoint, metadata, new_versions
        )
        return dict(figures)

    def put_writes(self, writes: list[tuple[str, Any]], task_id: str) -> dict[str, Any]:
        _, figures = measured(self.driver, self.saver, "put_writes", self.config, writes, task_id)
        return dict(figures)

    @property
    def latest(self) -> dict[str, Any]:
        conf = self.config["configurable"]
        return {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": ""}}


def probe_construct(driver: Driver) -> dict[str, Any]:
    wire.RECORDER.reset()
    start = time.perf_counter()
    driver.new_saver()
    seconds = time.perf_counter() - start
    requests = len(wire.RECORDER.requests)
    wire.RECORDER.reset()
    return {"requests": requests, "seconds": seconds}


def probe_put_writes(driver: Driver, saver: Any) -> list[dict[str, Any]]:
    w = Writer(driver, saver, "pw")
    w.put({"a": "start"})
    rows = []
    for n in (1, 4, 16, 64):
        rng = seeded("pw", n)
        writes = [(f"ch{j}", text(rng, 200)) for j in range(n)]
        rows.append({"writes": n, **w.put_writes(writes, f"task-{n}")})
    return rows


def probe_put_small(driver: Driver, saver: Any) -> dict[str, Any]:
    w = Writer(driver, saver, "pu")
    big = text(seeded("pu-big"), 100_000)
    first = w.put({"big": big, "counter": 0})
    small = [w.put({"counter": i}) for i in range(1, 4)]
    large = w.put({"big": edit_document(big, 1), "counter": 4})
    return {"first": first, "small_changes": small, "large_change": large}


def probe_resume(driver: Driver, writer_saver: Any) -> list[dict[str, Any]]:
    rows = []
    for n in (4, 32, 128):
        rng = seeded("resume", n)
        w = Writer(driver, writer_saver, f"rc-{n}")
        w.put({f"c{j}": text(rng, 30_000 if j % 4 == 0 else 200) for j in range(n)})
        w.put_writes([("c1", text(rng, 40_000))], "task-a")
        w.put_writes([("c2", "small write")], "task-b")
        fresh = driver.new_saver()
        tup, figures = measured(driver, fresh, "get_tuple", w.latest)
        assert tup is not None and tup.checkpoint["channel_values"] == w.values
        assert len(tup.pending_writes) == 2
        figures.pop("s3_gets")
        rows.append({"channels": n, **figures})
    return rows


def probe_warm(driver: Driver, writer_saver: Any) -> dict[str, Any]:
    storage = driver.storage()
    assert storage is not None
    w = Writer(driver, writer_saver, "warm")
    doc2 = text(seeded("warm", 2), 200_000)
    w.put({"doc1": text(seeded("warm", 1), 200_000), "doc2": doc2, "small": "s0"})
    reader = driver.new_saver()
    _, first = measured(driver, reader, "get_tuple", w.latest)
    before = set(storage.s3_objects())
    w.put({"doc2": edit_document(doc2, 7), "small": "s1"})
    new = set(storage.s3_objects()) - before
    tup, second = measured(driver, reader, "get_tuple", w.latest)
    assert tup is not None and tup.checkpoint["channel_values"] == w.values
    _, third = measured(driver, reader, "get_tuple", w.latest)
    gets = second["s3_gets"]
    return {
        "first_read": {k: v for k, v in first.items() if k != "s3_gets"},
        "second_read": {k: v for k, v in second.items() if k != "s3_gets"},
        "unchanged_read": {k: v for k, v in third.items() if k != "s3_gets"},
        "objects_total": len(before | new),
        "objects_new": len(new),
        "s3_gets": len(gets),
        "s3_gets_of_new_objects": sum(1 for k in gets if k in new),
        "s3_gets_of_seen_objects": sum(1 for k in gets if k not in new),
        "duplicate_gets": len(gets) - len(set(gets)),
    }


def probe_list(driver: Driver, writer_saver: Any) -> dict[str, Any]:
    w = Writer(driver, writer_saver, "list")
    rng = seeded("list")
    for i in range(30):
        w.put({"messages": text(rng, 1500), "step": i})
        w.put_writes([("messages", text(rng, 300))], f"task-{i}")
    out = {}
    for name, kwargs in (("limit_10", {"limit": 10}), ("all", {})):
        fresh = driver.new_saver()
        tuples, figures = measured(driver, fresh, "list", w.latest, **kwargs)
        assert len(tuples) == (10 if kwargs else 30)
        figures.pop("s3_gets")
        out[name] = figures
    return out


def run_probes(driver: Driver) -> dict[str, Any]:
    construct = probe_construct(driver)
    saver = driver.new_saver()
    return {
        "probes": {
            "construct": construct,
            "put_writes": probe_put_writes(driver, saver),
            "put_small": probe_put_small(driver, saver),
            "resume": probe_resume(driver, saver),
            "warm": probe_warm(driver, saver),
            "list": probe_list(driver, saver),
        }
    }
