"""Short chunk lists with leads (layout 8) on moto, with both savers: a new value of a
few chunks is named by a list stored right after them in their pack, so every
checkpoint carrying it holds ~90 bytes instead of ~50 a chunk, a cold read still
needs one ranged GET, and copies, prunes and the collector keep what it needs."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from langgraph.checkpoint.base import Checkpoint, create_checkpoint, empty_checkpoint

from langgraph_s3 import Encryption
from langgraph_s3.core import read, schema
from langgraph_s3.core.entries import Listed
from langgraph_s3.gc import collect
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend, RequestLog

#: ~300 KB of text: 5-6 chunks, all new in one put.
BIG = "".join(random.Random(7).choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(300_000))


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


class Steps:
    """A thread's checkpoints put by hand: the first with ``BIG``, then a counter."""

    def __init__(self, saver: Any, thread: str) -> None:
        self.saver, self.config = saver, cfg(thread)
        self.cp: Checkpoint = empty_checkpoint()
        self.versions: dict[str, Any] = {}

    def put(self, changes: dict[str, Any]) -> dict[str, Any]:
        for name in changes:
            self.versions[name] = self.saver.get_next_version(self.versions.get(name), None)
        self.cp = create_checkpoint(self.cp, None, len(self.versions))
        self.cp["channel_values"] = {**self.cp["channel_values"], **changes}
        self.cp["channel_versions"] = dict(self.versions)
        new = {k: self.versions[k] for k in changes}
        self.config = self.saver.put(self.config, self.cp, {"step": 1}, new)
        return self.config


def checkpoint_sizes(backend: Backend, thread: str) -> list[int]:
    """The stored size of each checkpoint item's body, oldest first."""
    items = [i for i in backend.items() if i["pk"]["S"] == thread]
    rows = sorted((i for i in items if schema.is_checkpoint_item(i)), key=lambda i: i["sk"]["S"])
    return [len(i[schema.BODY]["B"]) for i in rows]


def entries(backend: Backend, thread: str) -> list[Any]:
    """The ``big`` entry of each checkpoint body in the thread's index items."""
    saver = backend.saver()
    items = [i for i in backend.items() if i["pk"]["S"] == thread]
    rows = [schema.parse_row(i) for i in items if schema.is_checkpoint_item(i)]
    envs = [read.open_envelope(saver, r, r.body) for r in rows if r.body is not None]
    return [env.channels["big"] for env in envs if "big" in env.channels]


def values_of(saver: Any, thread: str) -> dict[str, Any]:
    got = saver.get_tuple(cfg(thread))
    assert got is not None
    return dict(got.checkpoint["channel_values"])


def test_a_counter_step_beside_a_large_value_holds_its_list_not_its_chunks(
    backend: Backend, request_log: RequestLog
) -> None:
    for thread, options in (("leads", {}), ("before", {"trim_items": False})):
        steps = Steps(backend.saver(**options), thread)
        steps.put({"big": BIG, "counter": 0})
        for i in range(1, 4):
            steps.put({"counter": i})
    # the unchanged value's entry: ~90 bytes with a lead, ~40 a chunk without (BIG
    # makes 5-6 chunks: bodies of 219 against 413 bytes)
    leads, before = checkpoint_sizes(backend, "leads"), checkpoint_sizes(backend, "before")
    assert max(leads[1:]) + 150 < min(before[1:])
    # a cold read: the query, then one ranged GET brings the list and every chunk
    saver = backend.saver(s3_client=request_log.attach(backend.s3()))
    assert values_of(saver, "leads") == {"big": BIG, "counter": 3}
    assert request_log.counts()[("s3", "GetObject")] == 1


def test_copies_prunes_and_the_collector_keep_what_a_list_with_a_lead_needs(
    backend: Backend,
) -> None:
    steps = Steps(backend.saver(), "t")
    steps.put({"big": BIG, "counter": 0})
    steps.put({"counter": 1})
    steps.put({"big": BIG[:-5000] + "edited" * 500, "counter": 2})  # an edit: no short list
    saver = backend.saver()
    saver.copy_thread("t", "t-copy")
    assert values_of(backend.saver(), "t-copy") == values_of(backend.saver(), "t")
    history = [t.checkpoint["channel_values"] for t in backend.saver().list(cfg("t"))]
    assert [h["big"] == BIG for h in history] == [False, True, True]
    backend.saver().prune(["t"], strategy="keep_latest")
    packs = {k for k in backend.object_keys() if k.startswith("t/") and k.endswith(".pack")}
    assert len(packs) == 1  # the first put's chunks and short list (the edit's: an item)
    for _ in range(2):  # with no grace, the second run deletes what the first condemned
        report = collect(backend.saver(), grace=0)
        assert not report.errors
    # the latest names most of the first pack's chunks (the edit re-uses them): kept
    assert packs <= set(backend.object_keys())
    assert values_of(backend.saver(), "t")["big"].endswith("edited" * 500)
    assert values_of(backend.saver(), "t-copy")["counter"] == 2


def test_the_collector_reads_no_list_with_a_lead(inproc_backend: Backend) -> None:
    """Every chunk such a list names is in its pack: the pack is kept, unread."""
    steps = Steps(inproc_backend.saver(), "t")
    steps.put({"big": BIG, "counter": 0})
    steps.put({"counter": 1})
    assert {(type(e), e.lead is not None) for e in entries(inproc_backend, "t")} == {(Listed, True)}
    s3, got = inproc_backend.s3(), []
    s3.meta.events.register(
        "before-call.s3.GetObject", lambda params, **_: got.append(params["url_path"])
    )
    report = collect(inproc_backend.saver(s3_client=s3), grace=0)
    assert not report.errors and report.objects_referenced == 1 and report.objects_deleted == 0
    assert got == ["/.gc/state"]  # its own state only: no list, no pack
    assert values_of(inproc_backend.saver(), "t") == {"big": BIG, "counter": 1}


def test_the_async_saver_writes_and_reads_a_list_with_a_lead(server_backend: Backend) -> None:
    async def run() -> dict[str, Any]:
        async with server_backend.async_saver() as saver:
            config = await saver.aput(
                cfg("a"),
                {**empty_checkpoint(), "channel_values": {"big": BIG},
                 "channel_versions": {"big": saver.get_next_version(None, None)}},
                {"step": 1},
                {"big": saver.get_next_version(None, None)},
            )  # fmt: skip
            assert config["configurable"]["checkpoint_id"]
        async with server_backend.async_saver() as cold:
            got = await cold.aget_tuple(cfg("a"))
            assert got is not None
            return dict(got.checkpoint["channel_values"])

    assert asyncio.run(run()) == {"big": BIG}
    sizes = checkpoint_sizes(server_backend, "a")
    assert sizes and max(sizes) < 300  # a list with a lead, not 5-6 chunk names


def test_a_sealed_thread_reads_a_list_with_a_lead_in_one_get(
    backend: Backend, request_log: RequestLog
) -> None:
    """With ``encryption=`` the list and its chunks are sealed frames in the pack (their
    names keyed): the same one ranged GET reads them, and a copy reads back."""
    ring = {"encryption": Encryption(StaticKeyRing({"r": bytes(range(32))}, current="r"))}
    for thread, trim in (("s", True), ("before", False)):
        steps = Steps(backend.saver(trim_items=trim, **ring), thread)
        steps.put({"big": BIG, "counter": 0})
        steps.put({"counter": 1})
    # sealed bodies too name the value by its list (layout 8 against layout 4)
    assert checkpoint_sizes(backend, "s")[1] + 150 < checkpoint_sizes(backend, "before")[1]
    sealed = backend.saver(s3_client=request_log.attach(backend.s3()), **ring)
    assert values_of(sealed, "s") == {"big": BIG, "counter": 1}
    assert request_log.counts()[("s3", "GetObject")] == 1
    backend.saver(**ring).copy_thread("s", "s-copy")
    assert values_of(backend.saver(**ring), "s-copy") == {"big": BIG, "counter": 1}
