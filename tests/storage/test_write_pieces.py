"""A task's write stored as the next checkpoint's piece (``values.appended_piece``), on
moto: a chat's messages are stored once, by the write, and named by the checkpoint that
appends them; both savers read the writes back, cold and through the history; what is
not an append to a list stored as blobs keeps its inline record."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages

from langgraph_s3 import codec
from langgraph_s3.core import schema
from langgraph_s3.core.entries import Blobs, Inline
from langgraph_s3.keys import encode_segment
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend, RequestLog
from tests.storage.test_chunk_items import build_chat, cfg, chat, counted, user

TURNS = 30


def _add_each(state: list[Any], writes: list[Any]) -> list[Any]:
    """``add_messages`` over a batch of writes (a ``DeltaChannel`` reducer)."""
    for write in writes:
        state = add_messages(state, write)
    return state


def writes_rows(backend: Backend, thread: str) -> list[schema.WritesRow]:
    return [
        schema.parse_writes(i)
        for i in backend.items()
        if i["pk"]["S"] == encode_segment(thread) and schema.is_writes_item(i)
    ]


def message_entries(rows: list[schema.WritesRow]) -> list[Any]:
    """The entries of every write to ``messages``."""
    return [r.entry for row in rows for _, r in row.records if r.channel == "messages"]


def checkpoint_entry(
    backend: Backend, thread: str, cid: str, channel: str = "messages"
) -> list[Any]:
    """The wire entry of ``channel`` in checkpoint ``cid`` (a body kept in its item)."""
    (item,) = [
        i
        for i in backend.items()
        if i["pk"]["S"] == encode_segment(thread)
        and schema.is_checkpoint_item(i)
        and schema.parse_row(i).checkpoint_id == cid
    ]
    body = codec.unpack(codec.unframe(item["b"]["B"], key="", kind=b"C"), key="")
    return body["ch"][channel]


def writes_sk(backend: Backend, thread: str, cid: str) -> str:
    """The sort key of the one writes item of checkpoint ``cid`` that writes messages."""
    [sk] = [
        i["sk"]["S"]
        for i in backend.items()
        if i["pk"]["S"] == encode_segment(thread)
        and schema.is_writes_item(i)
        and schema.parse_writes(i).checkpoint_id == cid
        and any(r.channel == "messages" for _, r in schema.parse_writes(i).records)
    ]
    return sk


def writes_of(backend: Backend, thread: str, cid: str) -> list[Any]:
    """The ``messages`` entries written by the tasks of checkpoint ``cid``."""
    rows = [r for r in writes_rows(backend, thread) if r.checkpoint_id == cid]
    return message_entries(rows)


def test_the_reply_is_stored_once_and_named_by_the_checkpoint_that_appends_it(
    backend: Backend,
) -> None:
    saver = backend.saver()
    chat(saver, "c", TURNS)
    latest = saver.get_tuple(cfg("c"))
    assert latest is not None and latest.parent_config is not None
    parent = latest.parent_config["configurable"]["checkpoint_id"]
    [write] = writes_of(backend, "c", parent)
    assert isinstance(write, Blobs) and len(write.digests) == 1 and write.head == b"\x91"
    entry = checkpoint_entry(backend, "c", latest.config["configurable"]["checkpoint_id"])
    assert entry[2][-1] == write.digests[0]  # the checkpoint's newest piece
    items = backend.chunk_items(encode_segment("c"))
    assert sum(k.endswith(write.digests[0].hex()) for k in items) == 1
    reply = latest.checkpoint["channel_values"]["messages"][-1]
    # The record names the piece: a few dozen bytes where the message took hundreds.
    sk = writes_sk(backend, "c", parent)
    [item] = [i for i in backend.items() if i["sk"]["S"] == sk]
    assert len(item["w0"]["B"]) < 100 < len(codec.pack(reply.content)) // 3

    # A cold reader gets the write back as it was written, with either saver.
    cold = backend.saver().get_tuple(latest.parent_config)
    assert cold is not None
    assert [(c, v) for _, c, v in cold.pending_writes] == [("messages", [reply])]


def test_every_later_write_of_the_chat_is_a_piece_and_the_history_reads_back(
    backend: Backend,
) -> None:
    saver = backend.saver()
    chat(saver, "h", TURNS)
    entries = message_entries(writes_rows(backend, "h"))
    pieces = [e for e in entries if isinstance(e, Blobs)]
    # The first turns' list is inline in the bodies: only later writes become pieces.
    assert len(entries) == 2 * TURNS and TURNS < len(pieces) < 2 * TURNS
    assert all(isinstance(e, Inline) for e in entries if e not in pieces)
    # The same chat stored by a saver that keeps every write inline: the same history,
    # read by either kind of saver.
    inline = backend.sibling()
    chat(inline.saver(chunk_items=False), "inline", TURNS)
    for options in ({}, {"chunk_items": False}):
        got = [_writes(t) for t in backend.saver(**options).list(cfg("h"))]
        assert got == [_writes(t) for t in inline.saver(**options).list(cfg("inline"))]
        assert sum(len(w) for w in got) > 2 * TURNS


def _writes(tup: Any) -> list[tuple[str, Any]]:
    return [(channel, value) for _, channel, value in tup.pending_writes]


def _item_bytes(backend: Backend, thread: str, kind: Any) -> int:
    """What DynamoDB counts for ``thread``'s items of ``kind``: names and values."""
    total = 0
    for item in backend.items():
        if item["pk"]["S"] == encode_segment(thread) and kind(item):
            for name, attr in item.items():
                (value,) = attr.values()
                total += len(name) + len(value if isinstance(value, bytes) else str(value))
    return total


def test_the_chat_sends_the_same_requests_and_stores_fewer_bytes(
    inproc_backend: Backend, request_log: RequestLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against the same chat with every write inline: a turn's piece is stored by its
    write's BatchWriteItem instead of its checkpoint's, so each turn sends the same
    requests but where the checkpoint cut what was appended at a content boundary (it
    then stores its own piece too)."""
    after = chat(counted(inproc_backend, request_log), "after", TURNS, request_log)
    monkeypatch.setattr("langgraph_s3.core.writes.appended_piece", lambda *a: (a[-1], {}))
    inline = inproc_backend.sibling()
    before = chat(counted(inline, request_log), "before", TURNS, request_log)
    batch = ("dynamodb", "BatchWriteItem")
    for old, new in zip(before, after, strict=True):
        assert {k: v for k, v in old.items() if k != batch} == {
            k: v for k, v in new.items() if k != batch
        }
        assert old[batch] <= new[batch] <= old[batch] + 2
    extra = sum(n[batch] - o[batch] for o, n in zip(before, after, strict=True))
    assert extra <= TURNS // 5  # content boundaries: about one per 16 KiB appended

    def writes(item: Any) -> bool:
        return schema.is_writes_item(item)

    def everything(item: Any) -> bool:
        return True

    # The first turns' list is inline in the bodies, and their writes too (measured:
    # 0.55 of the bytes over 30 turns).
    assert _item_bytes(inproc_backend, "after", writes) < 0.7 * _item_bytes(
        inline, "before", writes
    )
    assert _item_bytes(inproc_backend, "after", everything) < 0.95 * _item_bytes(
        inline, "before", everything
    )


def test_writes_that_do_not_append_to_a_list_stored_as_blobs_stay_inline(
    backend: Backend,
) -> None:
    saver = backend.saver()
    chat(saver, "w", TURNS)
    config = saver.get_tuple(cfg("w")).config
    reply = [AIMessage(content="a reply " * 40, id="extra")]
    saver.put_writes(
        config,
        [
            ("messages", {"not": "a list"}),  # not a list
            ("other", reply),  # a channel this saver holds no blobs of
            ("__interrupt__", reply),  # a special write
        ],
        "odd",
    )
    [row] = [r for r in writes_rows(backend, "w") if r.task_id == "odd"]
    assert all(isinstance(r.entry, Inline) for _, r in row.records)
    # A saver that has not read the thread knows of no blobs to append to.
    backend.saver().put_writes(config, [("messages", reply)], "cold")
    [row] = [r for r in writes_rows(backend, "w") if r.task_id == "cold"]
    assert all(isinstance(r.entry, Inline) for _, r in row.records)
    # Nor does a saver without chunk items, which writes what 0.4.x writes.
    old = backend.saver(chunk_items=False)
    old.get_tuple(cfg("w"))
    old.put_writes(config, [("messages", reply)], "old")
    [row] = [r for r in writes_rows(backend, "w") if r.task_id == "old"]
    assert all(isinstance(r.entry, Inline) for _, r in row.records)
    # The same write from a saver that read the thread is a piece.
    warm = backend.saver()
    warm.get_tuple(cfg("w"))
    warm.put_writes(config, [("messages", reply)], "warm")
    [row] = [r for r in writes_rows(backend, "w") if r.task_id == "warm"]
    assert [type(r.entry) for _, r in row.records] == [Blobs]
    got = {
        t: [(c, v) for tid, c, v in backend.saver().get_tuple(config).pending_writes if tid == t]
        for t in ("warm", "old")
    }
    assert got["warm"] == got["old"] == [("messages", reply)]


def test_sealed_writes_are_pieces_too_and_read_back(server_backend: Backend) -> None:
    ring = StaticKeyRing({"r": os.urandom(32)}, current="r")  # each saver its Encryption
    chat(server_backend.saver(encryption=ring), "s", TURNS)
    inline = server_backend.sibling()
    chat(inline.saver(encryption=ring, chunk_items=False), "s-inline", TURNS)
    sealed = _item_bytes(server_backend, "s", schema.is_writes_item)
    assert sealed < 0.7 * _item_bytes(inline, "s-inline", schema.is_writes_item)
    assert [_writes(t) for t in server_backend.saver(encryption=ring).list(cfg("s"))] == [
        _writes(t) for t in inline.saver(encryption=ring).list(cfg("s-inline"))
    ]


def test_the_async_saver_stores_the_same_pieces(server_backend: Backend) -> None:
    async def run() -> None:
        async with server_backend.async_saver() as saver:
            graph = build_chat(saver)
            for turn in range(TURNS):
                await graph.ainvoke(user(turn), cfg("a"))

    asyncio.run(run())
    sync = server_backend.sibling()
    chat(sync.saver(), "sync", TURNS)
    shapes = {
        t: [type(e) for e in message_entries(writes_rows(b, t))]
        for b, t in ((server_backend, "a"), (sync, "sync"))
    }
    assert shapes["a"] == shapes["sync"] and Blobs in shapes["a"]
    assert [_writes(t) for t in server_backend.saver().list(cfg("a"))] == [
        _writes(t) for t in sync.saver().list(cfg("sync"))
    ]


class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_each, snapshot_frequency=10)]


def test_a_delta_channels_writes_stay_inline_between_its_snapshots(backend: Backend) -> None:
    """A delta channel stores no value at most checkpoints, so what a task appends to
    it is not a piece any checkpoint names: its writes stay inline, but where the
    checkpoint they follow stored a snapshot (one update in ten here)."""

    graph = build_chat(backend.saver(), DeltaChat)
    for turn in range(TURNS):
        graph.invoke(user(turn), cfg("d"))
    entries = message_entries(writes_rows(backend, "d"))
    pieces = [e for e in entries if isinstance(e, Blobs)]
    # Only writes that follow a checkpoint holding a snapshot, which with LangGraph's
    # background writes may be the one before or after theirs: a few, where a plain
    # list channel makes most writes pieces (the tests above).
    assert len(entries) == 2 * TURNS and len(pieces) <= len(entries) // 5
    # Read back cold: the same messages as the same chat on a plain list channel.
    plain = backend.sibling()
    chat(plain.saver(), "plain", TURNS)
    cold = build_chat(backend.saver(), DeltaChat).get_state(cfg("d"))
    assert (
        cold.values["messages"]
        == build_chat(plain.saver()).get_state(cfg("plain")).values["messages"]
    )
