"""A graph input stored as the piece its messages become (``values.input_head``), on
moto: the input checkpoint's ``__start__`` names the chunk the ``__start__`` task's write
stores, so a chat's user message is stored once; every saver reads the input back, cold,
sealed and through time travel; an input whose messages are not appended to a list
stored as blobs stays inline."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages

from langgraph_s3 import codec
from langgraph_s3.core import schema
from langgraph_s3.core.entries import Blobs, Entry, Inline, entry_from_wire
from langgraph_s3.gc import collect
from langgraph_s3.keys import encode_segment
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend, RequestLog
from tests.graphs.test_graphs import writes_summary
from tests.storage.test_chunk_items import build_chat, cfg, chat, counted, user, words
from tests.storage.test_retention_gc import HOUR, Clock
from tests.storage.test_write_pieces import checkpoint_entry, writes_of

#: Enough turns for the message list to be stored as blobs (past 16 KiB).
TURNS = 20
#: The input's bytes before its messages: a one-key map, ``"messages"``, one message.
HEAD = b"\x81\xa8messages\x91"


class TopicChat(TypedDict, total=False):
    topic: str
    messages: Annotated[list[AnyMessage], add_messages]


def start_entry(backend: Backend, thread: str, cid: str, channel: str = "__start__") -> Entry:
    """The entry of ``channel`` in checkpoint ``cid`` (a body kept in its item)."""
    return entry_from_wire(checkpoint_entry(backend, thread, cid, channel), channel, cid)


def s3_bytes(backend: Backend, thread: str) -> int:
    """The bytes of the thread's S3 objects (packs, loose blobs, bodies)."""
    pages = (
        backend.s3()
        .get_paginator("list_objects_v2")
        .paginate(Bucket=backend.bucket, Prefix=f"{encode_segment(thread)}/")
    )
    return sum(o["Size"] for page in pages for o in page.get("Contents", []))


def inputs(saver: Any, thread: str) -> list[Any]:
    """The thread's input checkpoints, newest first."""
    return [t for t in saver.list(cfg(thread)) if t.metadata["source"] == "input"]


def cid_of(tup: Any) -> str:
    return str(tup.config["configurable"]["checkpoint_id"])


def child_of(saver: Any, thread: str, cid: str) -> str:
    [child] = [
        t.config["configurable"]["checkpoint_id"]
        for t in saver.list(cfg(thread))
        if t.parent_config and t.parent_config["configurable"]["checkpoint_id"] == cid
    ]
    return child


def test_the_input_names_the_piece_its_write_stores(backend: Backend) -> None:
    saver = backend.saver()
    chat(saver, "i", TURNS)
    latest, *_, first = inputs(saver, "i")
    cid = cid_of(latest)
    entry = start_entry(backend, "i", cid)
    assert isinstance(entry, Blobs) and entry.head == HEAD and len(entry.digests) == 1
    # The __start__ task's write names the same chunk, and so does the next
    # checkpoint, as its newest piece (that it is stored once: the next test).
    [write] = writes_of(backend, "i", cid)
    assert isinstance(write, Blobs) and write.digests == entry.digests
    assert checkpoint_entry(backend, "i", child_of(saver, "i", cid))[2][-1] == entry.digests[0]
    # The first turns' list is inline in the bodies, and so is their input.
    assert isinstance(start_entry(backend, "i", cid_of(first)), Inline)
    # A cold reader gets the input back as it was given, and its write.
    cold = backend.saver().get_tuple(latest.config)
    assert cold is not None
    assert cold.checkpoint["channel_values"]["__start__"] == user(TURNS - 1)
    assert [(c, v) for _, c, v in cold.pending_writes if c == "messages"] == [
        ("messages", user(TURNS - 1)["messages"])
    ]


def test_each_turn_sends_the_same_requests_and_its_input_stores_fewer_bytes(
    inproc_backend: Backend, request_log: RequestLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against the same chat with every input inline: the message's chunk item is
    stored by the input checkpoint's ``put`` instead of its write's ``put_writes``, so
    every turn sends the same requests; the inputs' bodies lose the message."""
    after = chat(counted(inproc_backend, request_log), "c", TURNS, request_log)
    monkeypatch.setattr("langgraph_s3.core.values.input_head", lambda *a: None)
    inline = inproc_backend.sibling()
    before = chat(counted(inline, request_log), "c", TURNS, request_log)
    assert after == before

    def size(backend: Backend, thread: str, kind: Any) -> int:
        items = [i for i in backend.items() if i["pk"]["S"] == encode_segment(thread)]
        return sum(len(codec.pack(i)) for i in items if kind(i))

    def chunks(backend: Backend, thread: str) -> dict[str, bytes]:
        items = backend.chunk_items(encode_segment(thread))
        return {k.split("|")[1]: v for k, v in items.items()}

    # The same chunks (named by their content), only stored by another call.
    assert chunks(inproc_backend, "c") == chunks(inline, "c")
    saved = size(inline, "c", schema.is_checkpoint_item) - size(
        inproc_backend, "c", schema.is_checkpoint_item
    )
    entries = [
        start_entry(inproc_backend, "c", cid_of(t)) for t in inputs(inproc_backend.saver(), "c")
    ]
    carried = [e for e in entries if isinstance(e, Blobs)]
    assert len(carried) >= TURNS // 4
    # Each such input held a 300-1500 character message, compressed in its body.
    assert saved > 150 * len(carried)  # measured: ~400 bytes each


def test_time_travel_from_an_input_matches_in_memory(backend: Backend) -> None:
    """Replay from an old input, ``update_state`` on it, and a turn after: the same
    checkpoints, channel values (``__start__`` included) and writes as InMemorySaver."""
    results = []
    for saver in (InMemorySaver(), backend.saver()):
        graph = build_chat(saver)
        for turn in range(TURNS):
            graph.invoke(user(turn), cfg("t"))
        old = [s for s in graph.get_state_history(cfg("t")) if s.metadata["source"] == "input"]
        graph.invoke(None, old[2].config)
        graph.update_state(old[1].config, {"messages": [HumanMessage("edited", id="edit")]})
        graph.invoke(user(TURNS), cfg("t"))
        results.append(writes_summary(saver, cfg("t")))
    memory, ours = results
    assert ours == memory
    for snap in old[1:3]:  # (ours) what was replayed and updated is a stored piece
        assert isinstance(start_entry(backend, "t", cid_of(snap)), Blobs)
    # ... and a cold saver reads the same.
    assert writes_summary(backend.saver(), cfg("t")) == memory


def test_inputs_whose_messages_are_not_appended_stay_inline(backend: Backend) -> None:
    saver = backend.saver()
    graph = build_chat(saver, TopicChat)
    for turn in range(TURNS):
        graph.invoke({"topic": "t", **user(turn)}, cfg("n"))
    message = HumanMessage("no id here " * 60)
    for given in (
        {"messages": [message]},  # add_messages gives it an id: not the written bytes
        {**user(TURNS), "topic": "t"},  # the messages are not the input's last value
    ):
        graph.invoke(given, cfg("n"))
        cid = cid_of(inputs(saver, "n")[0])
        assert isinstance(start_entry(backend, "n", cid), Inline)
    # Another channel holding such a dict: no task appends it, so it stays inline.
    latest = saver.get_tuple(cfg("n"))
    assert latest is not None
    checkpoint = {**latest.checkpoint, "id": str(uuid6(clock_seq=7))}
    box = saver.get_next_version(None, None)
    checkpoint["channel_values"] = {**checkpoint["channel_values"], "box": user(TURNS)}
    checkpoint["channel_versions"] = {**checkpoint["channel_versions"], "box": box}
    boxed = saver.put(latest.config, checkpoint, {"source": "update", "step": 99}, {"box": box})
    assert isinstance(
        start_entry(backend, "n", boxed["configurable"]["checkpoint_id"], "box"), Inline
    )
    # Nor does a saver without chunk items, which writes what 0.4.x writes.
    build_chat(backend.saver(chunk_items=False), TopicChat).invoke(user(TURNS + 1), cfg("n"))
    cid = cid_of(inputs(saver, "n")[0])
    assert isinstance(start_entry(backend, "n", cid), Inline)
    # Messages last after other keys: those keys are kept with the head.
    graph.invoke({"topic": "u", **user(TURNS + 2)}, cfg("n"))
    latest = inputs(saver, "n")[0]
    entry = start_entry(backend, "n", cid_of(latest))
    assert isinstance(entry, Blobs) and entry.head == b"\x82\xa5topic\xa1u" + HEAD[1:]
    cold = backend.saver().get_tuple(latest.config)
    assert cold is not None
    assert cold.checkpoint["channel_values"]["__start__"] == {"topic": "u", **user(TURNS + 2)}


def test_a_sealed_input_is_a_piece_too_and_reads_back(
    server_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    ring = StaticKeyRing({"r": os.urandom(32)}, current="r")  # each saver its Encryption
    # The same thread id in both tables: the item keys weigh the same.
    chat(server_backend.saver(encryption=ring), "s", TURNS)
    monkeypatch.setattr("langgraph_s3.core.values.input_head", lambda *a: None)
    inline = server_backend.sibling()
    chat(inline.saver(encryption=ring), "s", TURNS)
    monkeypatch.undo()
    sizes = {
        name: sum(
            len(codec.pack(i))
            for i in b.items()
            if i["pk"]["S"] == encode_segment("s") and schema.is_checkpoint_item(i)
        )
        for b, name in ((server_backend, "s"), (inline, "s-inline"))
    }
    assert sizes["s"] < sizes["s-inline"] - 150 * (TURNS // 4)
    # The input names the write's chunk under the thread's keyed name: no chunk more.
    assert len(server_backend.chunk_items(encode_segment("s"))) == len(
        inline.chunk_items(encode_segment("s"))
    )
    got = writes_summary(server_backend.saver(encryption=ring), cfg("s"))
    assert got == writes_summary(inline.saver(encryption=ring), cfg("s"))


def test_the_async_saver_stores_and_reads_the_same_input(server_backend: Backend) -> None:
    async def run() -> Any:
        async with server_backend.async_saver() as saver:
            graph = build_chat(saver)
            for turn in range(TURNS):
                await graph.ainvoke(user(turn), cfg("a"))
            [latest] = [t async for t in saver.alist(cfg("a"), filter={"source": "input"}, limit=1)]
        async with server_backend.async_saver() as cold:
            return latest, await cold.aget_tuple(latest.config)

    latest, cold = asyncio.run(run())
    entry = start_entry(server_backend, "a", cid_of(latest))
    assert isinstance(entry, Blobs) and entry.head == HEAD
    [write] = writes_of(server_backend, "a", cid_of(latest))
    assert isinstance(write, Blobs) and write.digests == entry.digests
    assert cold.checkpoint["channel_values"]["__start__"] == user(TURNS - 1)


def test_an_input_larger_than_a_chunk_stores_less_and_reads_back(
    inproc_backend: Backend, request_log: RequestLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 100 KB message is cut by FastCDC into several chunks. Without the rule its
    input shares all but the first of them with its write already (cut points follow
    content: only the first chunk, which holds the input's key, differs); with it, the
    input names the write's chunks (under a chunk list of its own, its head differs):
    no more requests of any kind, fewer bytes, and it reads back."""
    big = {"messages": [HumanMessage(words("big", 100_000), id="big")]}

    def big_turn(backend: Backend, thread: str) -> tuple[Any, int]:
        graph = build_chat(counted(backend, request_log))
        for turn in range(TURNS):
            graph.invoke(user(turn), cfg(thread))
        request_log.clear()
        graph.invoke(big, cfg(thread))
        items = [i for i in backend.items() if i["pk"]["S"] == encode_segment(thread)]
        return request_log.counts(), s3_bytes(backend, thread) + len(codec.pack(items))

    # The same thread id in both tables: the item keys weigh the same.
    after, stored_after = big_turn(inproc_backend, "c")
    monkeypatch.setattr("langgraph_s3.core.values.input_head", lambda *a: None)
    inline = inproc_backend.sibling()
    before, stored_before = big_turn(inline, "c")
    monkeypatch.undo()
    assert all(after[kind] <= before[kind] for kind in before | after)
    assert stored_after < stored_before - 5_000  # its first chunk and more (~10 KB)
    latest = inputs(inproc_backend.saver(), "c")[0]
    cold = inproc_backend.saver().get_tuple(latest.config)
    assert cold is not None and cold.checkpoint["channel_values"]["__start__"] == big
    assert [v for _, c, v in cold.pending_writes if c == "messages"] == [big["messages"]]


def test_copy_prune_and_the_collector_keep_what_inputs_name(inproc_backend: Backend) -> None:
    """A chat whose inputs are pieces, and a last input whose chunk only it names (its
    turn never ran): a copy reads the same, and after ``prune`` the collector's two
    runs keep every chunk the latest checkpoint and that input name."""
    clock = Clock()
    saver = inproc_backend.saver(clock=clock)
    chat(saver, "g", TURNS)
    latest = saver.get_tuple(cfg("g"))
    assert latest is not None
    checkpoint = {**latest.checkpoint, "id": str(uuid6(clock_seq=9))}
    version = saver.get_next_version(checkpoint["channel_versions"].get("__start__"), None)
    checkpoint["channel_values"] = {**checkpoint["channel_values"], "__start__": user(TURNS)}
    checkpoint["channel_versions"] = {**checkpoint["channel_versions"], "__start__": version}
    alone = saver.put(
        latest.config, checkpoint, {"source": "input", "step": 99}, {"__start__": version}
    )
    assert isinstance(
        start_entry(inproc_backend, "g", alone["configurable"]["checkpoint_id"]), Blobs
    )

    saver.copy_thread("g", "g-copy")
    want = writes_summary(inproc_backend.saver(), cfg("g"))
    assert writes_summary(inproc_backend.saver(), cfg("g-copy")) == want

    saver.prune(["g"], strategy="keep_latest")
    [kept] = list(inproc_backend.saver().list(cfg("g")))
    collect(inproc_backend.saver(clock=clock), grace=HOUR)
    clock.advance(2 * HOUR)
    report = collect(inproc_backend.saver(clock=clock), grace=HOUR)
    assert report.chunk_items_deleted > 0 and not report.errors
    cold = inproc_backend.saver().get_tuple(cfg("g"))
    assert cold is not None and cold.config == alone
    assert cold.checkpoint["channel_values"] == kept.checkpoint["channel_values"]
    assert cold.checkpoint["channel_values"]["__start__"] == user(TURNS)
    assert writes_summary(inproc_backend.saver(), cfg("g-copy")) == want
