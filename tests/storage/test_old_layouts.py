"""Threads written by an earlier release read, resume, fork, list, copy, prune and are
collected by today's code, in the same thread as new checkpoints (mixed history).

Each fixture ``tests/layouts/{name}.json.gz`` is the bucket and table written by a
release running the ``before`` part of each scenario in ``tests/layouts/scenarios.py``
(``WRITTEN_BY``: ``v1``: 0.1.0, layout 1, commit 0aaf7d3; ``v2``: 0.2.0, with packs,
layout 2, commit 61aa109; ``v3``: 0.3.0, with chunk lists, layout 3, commit 3192de3;
``v4``: 0.4.0 with ``encryption=``, sealed, layout 4, commit b3760f1; ``v41`` and
``v41s``: 0.4.1, commit ace3d50, without and with ``encryption=`` (layout 3 and 4,
checkpoint items with the thread's incarnation ``g``); ``v50`` and ``v50s``: 0.5.0,
commit a0da6af, without and with ``encryption=`` (layout 5: small chunks stored as chunk
items of the thread's partition); ``v60`` and ``v60s``: 0.6.0, commit 48e6ed9, without and
with ``encryption=`` (layout 6: trimmed checkpoint items, grouped records); ``v70`` and
``v70s``: 0.7.0, commit a8f00c8, without and with ``encryption=`` (layout 7: compact
checkpoint records); ``v80`` and ``v80s``: 0.8.0, commit a26dab4, without and with
``encryption=`` (layout 8: chunk lists with a lead); ``v100`` and ``v100s``: 0.10.0,
commit 837b0ba, without and with ``encryption=`` (layout 9, and a chat whose later
writes are pieces: the ``chat`` scenario); ``v110`` and ``v110s``: 0.11.0, commit 08bf244,
without and with ``encryption=`` (layout 9 with the chat's inputs stored as pieces, and
every writes item naming its task and checkpoint ids); a sealed one is read with the
key ring it keeps); see
``tests/layouts/write.py`` for how they were made. A fixture holds the threads of the
scenarios that existed when it was written (its recorded ``threads``: those whose
``since`` is at most its layout), and every scenario's ``after`` part runs on every
fixture holding its thread and must give there what it gives on ``InMemorySaver``.
Today's code continues the threads with its defaults (layout 10: chunk items, grouped
records, trimmed checkpoint items holding compact checkpoint records, chunk lists with
leads, and checkpoint and writes items whose keys stand for their ids), so each
continued thread mixes layouts.
"""

from __future__ import annotations

import base64
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_s3 import codec
from langgraph_s3.core import schema
from langgraph_s3.gc import collect
from langgraph_s3.sealing import MAGIC as SEAL_MAGIC
from tests.conftest import Backend
from tests.graphs.test_graphs import Calls, build_approval, cfg, history_summary, writes_summary
from tests.layouts import store
from tests.layouts.scenarios import SCENARIOS, Scenario, reference
from tests.layouts.write import saver_options

FIXTURES = Path(__file__).resolve().parents[1] / "layouts"
#: fixture -> (release, commit) that wrote it, and the layout it wrote
WRITTEN_BY = {
    "v1": ("0.1.0", "0aaf7d3", 1),
    "v2": ("0.2.0", "61aa109", 2),
    "v3": ("0.3.0", "3192de3", 3),
    "v4": ("0.4.0", "b3760f1", 4),
    "v41": ("0.4.1", "ace3d50", 3),
    "v41s": ("0.4.1", "ace3d50", 4),
    "v50": ("0.5.0", "a0da6af", 5),
    "v50s": ("0.5.0", "a0da6af", 5),
    "v60": ("0.6.0", "48e6ed9", 6),
    "v60s": ("0.6.0", "48e6ed9", 6),
    "v70": ("0.7.0", "a8f00c8", 7),
    "v70s": ("0.7.0", "a8f00c8", 7),
    "v80": ("0.8.0", "a26dab4", 8),
    "v80s": ("0.8.0", "a26dab4", 8),
    "v100": ("0.10.0", "837b0ba", 9),
    "v100s": ("0.10.0", "837b0ba", 9),
    "v110": ("0.11.0", "08bf244", 9),
    "v110s": ("0.11.0", "08bf244", 9),
}
#: the fixtures written with ``encryption=``
SEALED = {"v4", "v41s", "v50s", "v60s", "v70s", "v80s", "v100s", "v110s"}
PREFIX = "fx/"


@cache
def fixture(layout: str) -> dict[str, Any]:
    return store.read(FIXTURES / f"{layout}.json.gz")


@pytest.fixture(params=sorted(WRITTEN_BY))
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def held(layout: str) -> list[Scenario]:
    """The scenarios whose thread the fixture holds, as it recorded them."""
    threads = fixture(layout)["written_by"]["threads"]
    return [s for s in SCENARIOS if s.thread in threads]


#: every (layout, scenario) pair whose thread the layout's fixture holds
HELD = [(layout, s) for layout in sorted(WRITTEN_BY) for s in held(layout)]


@cache
def expected(scenario: Scenario) -> dict[str, Any]:
    return reference(scenario)


def loaded(backend: Backend, layout: str) -> Backend:
    store.load(backend, fixture(layout))
    return backend


def options(layout: str) -> dict[str, Any]:
    """The saver options the fixture's threads are read with (``encryption=`` for a
    sealed fixture, with the key ring it recorded)."""
    return saver_options(fixture(layout)["written_by"].get("ring"))


def open_saver(backend: Backend, layout: str) -> Any:
    """A new saver (a cold container) on the fixture's storage."""
    return backend.saver(prefix=PREFIX, **options(layout))


def history(backend: Backend, layout: str, thread: str) -> list[dict[str, Any]]:
    """Every checkpoint of the thread (all namespaces) with its metadata and writes."""
    return writes_summary(open_saver(backend, layout), cfg(thread))


def test_the_fixture_was_written_by_its_release(layout: str) -> None:
    """Guards against a fixture rewritten by today's code (which would prove nothing)."""
    meta = fixture(layout)["written_by"]
    assert (meta["version"], meta["commit"], meta["prefix"]) == (*WRITTEN_BY[layout][:2], PREFIX)
    # a scenario newer than the fixture is left out by the threads it recorded, no other
    assert meta["threads"] == [s.thread for s in SCENARIOS if s.since <= number(layout)]
    keys = list(fixture(layout)["objects"])
    assert any("/c/" in k for k in keys), "no checkpoint body in S3: a layout case is missing"
    assert any("/b/" in k for k in keys)
    assert any(k.endswith(".pack") for k in keys) == (layout != "v1")
    # 0.4.1 gives every checkpoint item the thread's incarnation; older releases none
    checkpoints = [i for i in fixture(layout)["items"] if schema.is_checkpoint_item(i)]
    release = tuple(int(part) for part in meta["version"].split("."))
    assert {schema.INCARNATION in i for i in checkpoints} == {release >= (0, 4, 1)}
    assert ("ring" in meta) == (layout in SEALED)
    # every release before 0.9.0 names every checkpoint item's ids; layout 9 leaves
    # those its keys spell out (all of these: short ids)
    named = {bool({schema.THREAD, schema.NS, schema.CID} & set(i)) for i in checkpoints}
    assert named == {number(layout) < 9}
    # every release before 0.12.0 names a writes item's task and checkpoint ids (layout
    # 10 leaves out those its sort key spells)
    writes = [i for i in fixture(layout)["items"] if schema.is_writes_item(i)]
    assert writes and {bool(i[schema.TASK_ID]["S"]) and schema.CID in i for i in writes} == {True}
    # 0.6.0 trims the items that keep their body: h binds the body to its place
    kept = [i for i in checkpoints if schema.BODY in i]
    assert kept and {schema.binds_place(i[schema.DIGEST]["S"]) for i in kept} == {
        number(layout) >= 6
    }
    # 0.5.0 stores a call's small new chunks as chunk items (layout 5)
    assert any(schema.is_chunk_item(i) for i in fixture(layout)["items"]) == (number(layout) >= 5)
    if "ring" in meta:
        assert_sealed(fixture(layout))
        return
    kinds = entry_kinds(layout)
    assert {"i", "r"} <= kinds["write"]
    # from layout 5 a body's small loose blobs are chunk items ("x") instead
    assert {"i", "x" if number(layout) >= 5 else "r"} <= kinds["body"]
    # packed chunks ("p"); from layout 8 a new value of a few chunks is named by a list
    # after them in their pack instead (a "lead", below), as these threads' values are
    packed = "p" in kinds["body"] | kinds["write"] or bool(kinds["lead"])
    assert packed == (number(layout) >= 2)
    # layout 3: a chunk list named by pending writes and by the checkpoints taking them up
    lists = {where for where, found in kinds.items() if "l" in found}
    assert lists == ({"body", "write"} if number(layout) >= 3 else set())
    assert ("x" in kinds["body"] | kinds["write"]) == (number(layout) >= 5)
    # 0.6.0 stores a call's small regular writes as one group (grouped records)
    assert bool(kinds["group"]) == (number(layout) >= 6)
    # 0.7.0 stores the checkpoint without its values as a compact record, every time
    # the default serializer would (none of these threads has a reason not to)
    assert kinds["checkpoint"] == ({"lgs3/cp"} if number(layout) >= 7 else {"msgpack"})
    # 0.8.0 names a new value of a few chunks by a list after them, with its lead
    assert bool(kinds["lead"]) == (number(layout) >= 8)
    # 0.10.0 stores a message appended to a list held as blobs as one chunk item the
    # write names (the chat's later turns): a piece
    assert (len(kinds["piece"]) >= 5) == (release >= (0, 10, 0))


def assert_sealed(data: dict[str, Any]) -> None:
    """Layout 4 (``encryption=``): every object and record sealed, no metadata index,
    a data key item in every thread's partition."""
    for key, body in data["objects"].items():
        raw = base64.b64decode(body)
        if key.endswith(".pack"):
            assert all(f.startswith(SEAL_MAGIC) for f in codec.frames(raw, key=key)), key
        else:
            assert codec.is_sealed(raw), key
    threads = {i["pk"]["S"] for i in data["items"] if i["sk"]["S"].startswith("c#")}
    keyed = {i["pk"]["S"] for i in data["items"] if i["sk"]["S"].startswith("k#")}
    assert threads and threads <= keyed
    for item in data["items"]:
        assert "md" not in item
        if schema.BODY in item:
            assert codec.is_sealed(base64.b64decode(item[schema.BODY]["B"]))
        for name, attr in item.items():
            if schema.record_index(name) is not None:
                assert base64.b64decode(attr["B"])[:1] == codec.SEALED_RECORD, name


def number(layout: str) -> int:
    """The layout the fixture's release wrote (4: sealed, before chunk items)."""
    return WRITTEN_BY[layout][2]


def entry_kinds(layout: str) -> dict[str, set[str]]:
    """The kinds of value entry (``i``, ``r``, ``p``, ``l``) the fixture stores in
    checkpoint bodies (S3 objects and index items) and in pending-write records;
    (``lead``) whether a body names a chunk list with its lead; and (``piece``) the
    writes to ``messages`` stored as a piece."""
    data = fixture(layout)
    bodies = [base64.b64decode(b) for k, b in data["objects"].items() if "/c/" in k]
    bodies += [base64.b64decode(i[schema.BODY]["B"]) for i in data["items"] if schema.BODY in i]
    names = ("body", "write", "group", "checkpoint", "lead", "piece")
    kinds: dict[str, set[str]] = {k: set() for k in names}
    for body in bodies:
        raw = codec.unpack(codec.unframe(body, key="b", kind=codec.KIND_CHECKPOINT), key="b")
        kinds["body"] |= {entry[0] for entry in raw["ch"].values()}
        # a chunk list with its lead: ["l", digest, size, pack, offset, length, lead]
        kinds["lead"] |= {
            "lead" for entry in raw["ch"].values() if entry[0] == "l" and len(entry) == 7
        }
        kinds["checkpoint"].add(raw["cp"][0])
    for item in data["items"]:
        for name, attr in item.items():
            if schema.record_index(name) is None:
                continue
            record = base64.b64decode(attr["B"])
            if record[:1] == codec.GROUP_RECORD:  # 0.6.0: a call's small writes together
                _, members = codec.unpack_group(record, key=name)
                kinds["group"] |= {entry[0] for _, entry in members}
                continue
            channel, entry = codec.unpack_record(record, key=name)
            kinds["write"].add(entry[0])
            # a piece: the messages a write appends, one chunk after the list's header
            if channel == "messages" and entry[0] == "x" and entry[4] == b"\x91":
                kinds["piece"].add(f"{item['sk']['S']}|{name}")
    return kinds


@pytest.mark.parametrize(
    ("layout", "scenario"), HELD, ids=[f"{layout}-{s.thread}" for layout, s in HELD]
)
def test_an_old_thread_goes_on_as_in_memory(
    backend: Backend, scenario: Scenario, layout: str
) -> None:
    """Read, resume, fork and list each old thread: the same as if it had been in memory."""
    loaded(backend, layout)
    assert scenario.after(lambda: open_saver(backend, layout)) == expected(scenario)


async def test_the_async_saver_resumes_an_old_thread(server_backend: Backend, layout: str) -> None:
    memory = InMemorySaver()
    SCENARIOS[0].before(lambda: memory)
    reference_graph = build_approval(memory, Calls())
    want_final = reference_graph.invoke(Command(resume=True), cfg("approval"))
    want_history = history_summary(reference_graph.get_state_history(cfg("approval")))

    loaded(server_backend, layout)
    async with server_backend.async_saver(prefix=PREFIX, **options(layout)) as saver:
        graph = build_approval(saver, Calls())
        final = await graph.ainvoke(Command(resume=True), cfg("approval"))
        got = history_summary([s async for s in graph.aget_state_history(cfg("approval"))])
    assert (final, got) == (want_final, want_history)


def test_old_and_mixed_threads_copy_prune_and_delete(backend: Backend, layout: str) -> None:
    loaded(backend, layout)
    SCENARIOS[0].after(lambda: open_saver(backend, layout))  # approval: now mixed
    saver = open_saver(backend, layout)
    before = {t: history(backend, layout, t) for t in ("approval", "fanout", "nested")}

    saver.copy_thread("approval", "approval-copy")
    saver.copy_thread("fanout", "fanout-copy")
    assert history(backend, layout, "approval-copy") == before["approval"]
    assert history(backend, layout, "fanout-copy") == before["fanout"]

    saver.prune(["fanout"], strategy="keep_latest")
    pruned = history(backend, layout, "fanout")
    assert len(pruned) == 1 and pruned[0]["channels"] == before["fanout"][0]["channels"]

    saver.delete_thread("nested")
    assert not [k for k in backend.object_keys() if k.startswith(f"{PREFIX}nested/")]
    assert not [i for i in backend.items() if i["pk"]["S"] == f"{PREFIX}nested"]
    assert history(backend, layout, "approval") == before["approval"]


def test_the_collector_keeps_what_old_and_mixed_threads_use(backend: Backend, layout: str) -> None:
    loaded(backend, layout)
    written = [i for i in backend.items() if schema.is_chunk_item(i)]  # by 0.5.0 on
    SCENARIOS[4].after(lambda: open_saver(backend, layout))  # direct: now mixed
    # with layout 5 checkpoints: the continued document's new chunk is a chunk item
    chunk_items = [i for i in backend.items() if schema.is_chunk_item(i)]
    added = [i for i in chunk_items if i not in written]
    assert added and {schema.pk_of(i) for i in added} == {f"{PREFIX}direct"}
    saver = open_saver(backend, layout)
    threads = ("approval", "failing", "fanout")
    before = {t: history(backend, layout, t) for t in threads}
    direct = [t.checkpoint for t in saver.list(cfg("direct"))]

    report = collect(saver, grace=0)
    assert report.errors == [] and report.objects_deleted == 0
    stored = [k for k in backend.object_keys() if not k.startswith(f"{PREFIX}.gc/")]
    assert report.objects == report.objects_referenced == len(stored)
    assert report.chunk_items == report.chunk_items_referenced == len(chunk_items)
    fresh = open_saver(backend, layout)
    assert {t: history(backend, layout, t) for t in threads} == before
    assert [t.checkpoint for t in fresh.list(cfg("direct"))] == direct

    fresh.delete_thread("direct")
    report = collect(open_saver(backend, layout), grace=0)
    assert report.errors == []
    assert not [k for k in backend.object_keys() if k.startswith(f"{PREFIX}direct/")]
    assert {t: history(backend, layout, t) for t in threads} == before


@pytest.mark.parametrize("layout", [layout for layout, s in HELD if s.thread == "lists"])
def test_an_old_thread_with_chunk_lists_is_copied_and_collected(
    backend: Backend, layout: str
) -> None:
    """Chunk lists in packs (layout 3) survive a copy, and the copy survives deleting
    and collecting the original."""
    loaded(backend, layout)
    saver = open_saver(backend, layout)
    before = history(backend, layout, "lists")
    saver.copy_thread("lists", "lists-copy")
    assert history(backend, layout, "lists-copy") == before

    saver.delete_thread("lists")
    report = collect(open_saver(backend, layout), grace=0)
    assert report.errors == [] and report.objects_deleted == 0
    assert not [k for k in backend.object_keys() if k.startswith(f"{PREFIX}lists/")]
    assert history(backend, layout, "lists-copy") == before
