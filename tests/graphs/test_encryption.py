"""A real graph on savers with ``encryption=``: every kind of stored data round-trips
sealed, and nothing is stored in the clear.

The graph stores, in a few steps: small values (bodies kept in the index), a body
too large for the index (in S3), values in loose blobs, chunks in packs, a value of
more than 64 chunks (a chunk list), pending writes kept in the index and one large
enough for a blob, and the special writes of an interrupt and of an error. Each test
runs it, reads it back through fresh savers with a fresh :class:`Encryption` over
the same key ring (a cold container: the thread's key comes from its key item), and
compares with ``InMemorySaver``.
"""

from __future__ import annotations

import asyncio
import operator
import os
import random
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_s3 import codec
from langgraph_s3.core.sealed import Encryption
from langgraph_s3.gc import collect
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend
from tests.graphs.test_graphs import cfg, history_summary

#: A value of ~1.3 MB of incompressible data: more than 64 chunks, so a chunk list.
LISTED = 1_300_000


def encryption() -> Encryption:
    return Encryption(StaticKeyRing({"ring-1": os.urandom(32)}, current="ring-1"))


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    doc: bytes
    big: bytes
    note: str


def build(saver: Any, seed: int = 0) -> Any:
    rng = random.Random(seed)

    def small(state: State) -> State:
        return {"log": ["small"], "note": "n" * 100}

    def blobs(state: State) -> State:
        # 40 KB: one loose blob; 300 KB: a pack of new chunks; LISTED: a chunk list
        return {"log": ["blobs"], "doc": rng.randbytes(40_000), "big": rng.randbytes(300_000)}

    def huge(state: State) -> State:
        return {"log": ["huge"], "big": rng.randbytes(LISTED), "note": rng.randbytes(3000).hex()}

    def ask(state: State) -> State:
        return {"log": [f"answer:{interrupt('ok?')}"]}

    g = StateGraph(State)
    for name, fn in (("small", small), ("blobs", blobs), ("huge", huge), ("ask", ask)):
        g.add_node(name, fn)
    g.add_edge(START, "small")
    g.add_edge("small", "blobs")
    g.add_edge("blobs", "huge")
    g.add_edge("huge", "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)


def run_graph(graph: Any, thread: str) -> None:
    graph.invoke({"log": ["start"]}, cfg(thread))
    graph.invoke(Command(resume="yes"), cfg(thread))


def summary(graph: Any, thread: str) -> list[dict[str, Any]]:
    return history_summary(graph.get_state_history(cfg(thread)))


def values(graph: Any, thread: str) -> dict[str, Any]:
    return dict(graph.get_state(cfg(thread)).values)


@pytest.fixture(scope="module")
def reference() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    graph = build(InMemorySaver())
    run_graph(graph, "t")
    return summary(graph, "t"), values(graph, "t")


def assert_all_sealed(backend: Backend, packs: bool = True) -> None:
    """Every object is a sealed frame (packs: sealed frames back to back), every body
    in the index is sealed, every record is sealed, and no metadata is indexed."""
    s3 = backend.s3()
    # the collector's own state (condemned keys and times, no thread data) is not sealed
    keys = [k for k in backend.object_keys() if k != ".gc/state"]
    assert any(k.endswith(".pack") for k in keys) == packs
    for key in keys:
        body = s3.get_object(Bucket=backend.bucket, Key=key)["Body"].read()
        assert codec.is_sealed(body), key
        codec.frames(body, key=key)  # a whole pack still cuts into its frames
    records = 0
    for item in backend.items():
        assert "md" not in item
        if "b" in item:
            assert codec.is_sealed(item["b"]["B"])
        for name, attr in item.items():
            if name[:1] in ("w", "m") and name[1:].isdigit():
                assert attr["B"][:1] == codec.SEALED_RECORD
                records += 1
    assert records


@pytest.mark.parametrize("inline_limit", [4096, 0])
def test_every_kind_of_data_round_trips_sealed(
    inproc_backend: Backend, reference: Any, inline_limit: int
) -> None:
    enc = encryption()
    graph = build(inproc_backend.saver(encryption=enc, index_inline_limit=inline_limit))
    run_graph(graph, "t")
    history, state = reference
    fresh = build(inproc_backend.saver(encryption=Encryption(enc.ring)))
    assert summary(fresh, "t") == history
    assert values(fresh, "t") == state
    assert_all_sealed(inproc_backend)


def test_pending_writes_of_an_error_and_a_large_write_round_trip(inproc_backend: Backend) -> None:
    enc = encryption()
    saver = inproc_backend.saver(encryption=enc)
    config = saver.put(cfg("w", checkpoint_ns=""), _checkpoint(), {"step": 1}, {})
    large = os.urandom(50_000)
    saver.put_writes(config, [("doc", large), ("log", ["x"])], "task-1")
    saver.put_writes(config, [("__error__", "boom")], "task-2")
    got = inproc_backend.saver(encryption=Encryption(enc.ring)).get_tuple(config)
    assert got is not None
    assert sorted((t, c, v) for t, c, v in got.pending_writes) == [
        ("task-1", "doc", large),
        ("task-1", "log", ["x"]),
        ("task-2", "__error__", "boom"),
    ]
    assert list(
        inproc_backend.saver(encryption=Encryption(enc.ring)).list(None, filter={"step": 1})
    )
    assert not list(
        inproc_backend.saver(encryption=Encryption(enc.ring)).list(None, filter={"step": 2})
    )


def _checkpoint() -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return empty_checkpoint()


def test_copy_reseals_for_the_target_and_gc_keeps_both(
    inproc_backend: Backend, reference: Any
) -> None:
    enc = encryption()
    saver = inproc_backend.saver(encryption=enc)
    run_graph(build(saver), "src")
    saver.copy_thread("src", "dst")
    history, state = reference
    assert summary(build(inproc_backend.saver(encryption=Encryption(enc.ring))), "dst") == history
    report = collect(inproc_backend.saver(encryption=Encryption(enc.ring)), grace=0)
    assert not report.errors
    saver.delete_thread("src")  # the copy depends on nothing of the source
    collect(inproc_backend.saver(encryption=Encryption(enc.ring)), grace=0)
    report = collect(inproc_backend.saver(encryption=Encryption(enc.ring)), grace=0)
    assert not report.errors and report.objects_deleted == 0
    fresh = build(inproc_backend.saver(encryption=Encryption(enc.ring)))
    assert summary(fresh, "dst") == history
    assert values(fresh, "dst") == state
    assert_all_sealed(inproc_backend, packs=False)  # a copy stores loose blobs


def test_a_copier_writing_what_older_releases_read_gives_sealed_writes_both_ids(
    inproc_backend: Backend, reference: Any
) -> None:
    from langgraph_s3.core import schema
    from langgraph_s3.keys import Layout

    enc = encryption()
    run_graph(build(inproc_backend.saver(encryption=enc)), "src")
    untrimmed = inproc_backend.saver(encryption=Encryption(enc.ring), trim_items=False)
    untrimmed.copy_thread("src", "dst")
    held: dict[str, set[tuple[bool, bool]]] = {}
    for item in inproc_backend.items():
        if schema.is_writes_item(item):
            thread = str(Layout.ids_of_keys(item[schema.PK]["S"], "")[0])
            shape = (bool(item[schema.TASK_ID]["S"]), schema.CID in item)
            held.setdefault(thread, set()).add(shape)
    assert held == {"src": {(False, False)}, "dst": {(True, True)}}  # layout 10, then 9
    history, _ = reference
    assert summary(build(inproc_backend.saver(encryption=Encryption(enc.ring))), "dst") == history


def test_stats_and_prune_read_sealed_threads(inproc_backend: Backend, reference: Any) -> None:
    from langgraph_s3.core.inventory import thread_figures

    enc = encryption()
    saver = inproc_backend.saver(encryption=enc)
    run_graph(build(saver), "t")
    figures = saver.run(thread_figures(saver, "t"))
    assert figures["checkpoints"] == len(reference[0])
    saver.prune(["t"], strategy="keep_latest")
    assert values(build(inproc_backend.saver(encryption=Encryption(enc.ring))), "t") == reference[1]


def test_async_saver_round_trips_sealed(server_backend: Backend, reference: Any) -> None:
    enc = encryption()

    async def main() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with server_backend.async_saver(encryption=enc) as saver:
            graph = build(saver)
            await graph.ainvoke({"log": ["start"]}, cfg("t"))
            await graph.ainvoke(Command(resume="yes"), cfg("t"))
        async with server_backend.async_saver(encryption=enc) as saver:
            graph = build(saver)
            snaps = [s async for s in graph.aget_state_history(cfg("t"))]
            return history_summary(snaps), dict((await graph.aget_state(cfg("t"))).values)

    history, state = asyncio.run(main())
    assert (history, state) == reference
    # and the sync saver reads what the async one sealed
    assert values(build(server_backend.saver(encryption=enc)), "t") == state
    assert_all_sealed(server_backend)


def test_a_plain_saver_cannot_read_and_a_sealed_one_refuses_plaintext(
    inproc_backend: Backend,
) -> None:
    from langgraph_s3 import PlaintextObjectError, SealedObjectError

    enc = encryption()
    run_graph(build(inproc_backend.saver(encryption=enc)), "sealed")
    run_graph(build(inproc_backend.saver()), "plain")
    with pytest.raises(SealedObjectError, match="encryption="):
        values(build(inproc_backend.saver()), "sealed")
    with pytest.raises(PlaintextObjectError, match="copy_threads") as info:
        values(build(inproc_backend.saver(encryption=enc)), "plain")
    assert info.value.key.startswith("plain")


def test_plain_threads_move_into_sealed_storage_with_copy_threads(
    inproc_backend: Backend, reference: Any
) -> None:
    from langgraph_s3.archive import copy_threads

    enc = encryption()
    plain = inproc_backend.saver(prefix="old/")
    run_graph(build(plain), "t")
    copy_threads(plain, inproc_backend.saver(prefix="new/", encryption=enc))
    fresh = build(inproc_backend.saver(prefix="new/", encryption=enc))
    assert (summary(fresh, "t"), values(fresh, "t")) == reference


def test_a_thread_deleted_and_written_again_is_sealed_under_a_new_key(
    inproc_backend: Backend,
) -> None:
    """delete_thread shreds the thread's key item; the same saver must not go on
    sealing with the key it still had loaded, or a cold reader could open nothing."""
    from langgraph_s3.core import datakeys
    from langgraph_s3.core.datakeys import KeyScope

    enc = encryption()
    saver = inproc_backend.saver(encryption=enc)
    run_graph(build(saver), "t")
    first = saver.run(datakeys.current(saver, KeyScope.thread("t")))
    saver.delete_thread("t")
    assert saver.run(datakeys.current(saver, KeyScope.thread("t"))) is None
    run_graph(build(saver), "t")
    second = saver.run(datakeys.current(saver, KeyScope.thread("t")))
    assert second is not None and first is not None and second.wrapped != first.wrapped
    cold = build(inproc_backend.saver(encryption=Encryption(enc.ring)))
    assert values(cold, "t") == values(build(saver), "t")
