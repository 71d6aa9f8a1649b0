"""Chunk items (layout 5) on moto: a growing chat stores its small new chunks in the
index and reads them back with one BatchGetItem; what each call sends, before (with
``chunk_items=False``, layout 4's wire) and after."""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from langgraph_s3 import SealedObjectError, codec
from langgraph_s3.core import schema
from langgraph_s3.core.sealed import Encryption
from langgraph_s3.keys import encode_segment
from langgraph_s3.sealing import StaticKeyRing
from tests.conftest import Backend, RequestLog


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def words(seed: str, size: int) -> str:
    rng = random.Random(seed)
    return " ".join(
        rng.choice(["state", "graph", "chunk", "index", "reply", "query"])
        + str(rng.randint(0, 999))
        for _ in range(size // 9)
    )


def answer(state: Any) -> dict[str, Any]:
    """The chat's node: every user message answered with 300-1500 characters (the
    state untyped, so that a graph of another state schema takes it as its own)."""
    turn = sum(1 for m in state["messages"] if m.type == "human")
    size = random.Random(f"ai{turn}").randint(300, 1500)
    return {"messages": [AIMessage(content=words(f"ai{turn}", size), id=f"ai-{turn}")]}


def build_chat(checkpointer: Any, state: Any = Chat) -> Any:
    """One node answering every user message (``answer``), over the state ``state``."""
    builder = StateGraph(state)
    builder.add_node("agent", answer)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=checkpointer)


def user(turn: int) -> dict[str, Any]:
    size = random.Random(f"user{turn}").randint(300, 1500)
    return {"messages": [HumanMessage(content=words(f"user{turn}", size), id=f"human-{turn}")]}


def cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def counted(backend: Backend, log: RequestLog, **kw: Any) -> Any:
    """A fresh S3Saver whose requests are counted."""
    return backend.saver(
        s3_client=log.attach(backend.s3()), dynamodb_client=log.attach(backend.dynamodb()), **kw
    )


def chat(
    saver: Any, thread: str, turns: int, log: RequestLog | None = None, first: int = 0
) -> list[Counter[Any]]:
    """Run ``turns`` turns from turn ``first``; the requests of each turn (if ``log``)."""
    graph = build_chat(saver)
    per_turn = []
    for turn in range(first, first + turns):
        if log is not None:
            log.clear()
        graph.invoke(user(turn), cfg(thread))
        if log is not None:
            per_turn.append(log.counts())
    return per_turn


def loose_blobs(backend: Backend, thread: str) -> list[str]:
    prefix = f"{encode_segment(thread)}/b/"
    return [k for k in backend.object_keys() if k.startswith(prefix)]


def test_a_growing_chat_stores_its_new_pieces_as_chunk_items(
    backend: Backend, request_log: RequestLog
) -> None:
    per_turn = chat(counted(backend, request_log), "chat", 30, request_log)
    items = backend.chunk_items(encode_segment("chat"))
    assert len(items) > 20 and loose_blobs(backend, "chat") == []
    assert all(frame.startswith(b"LGS3\x01B") for frame in items.values())
    late = per_turn[-1]
    assert late[("s3", "PutObject")] == 0 and late[("dynamodb", "BatchWriteItem")] >= 1

    request_log.clear()
    reader = counted(backend, request_log)
    tup = reader.get_tuple(cfg("chat"))
    assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) == 60
    assert request_log.counts() == Counter(
        {("dynamodb", "Query"): 1, ("dynamodb", "BatchGetItem"): 1}
    )
    expected = build_chat(backend.saver(chunk_items=False)).get_state(cfg("chat")).values
    assert tup.checkpoint["channel_values"]["messages"] == expected["messages"]


def test_each_turn_sends_a_batch_write_where_it_sent_puts_and_nothing_else_changes(
    inproc_backend: Backend, request_log: RequestLog
) -> None:
    """Turns 21-30 of a chat: the S3 PUTs of its new pieces become BatchWriteItems
    (one per call, the task's write and the checkpoint), every other request stays."""
    counts = {}
    where = {False: inproc_backend, True: inproc_backend.sibling()}
    for items in (False, True):
        per_turn = chat(
            counted(where[items], request_log, chunk_items=items), f"c{items}", 30, request_log
        )
        counts[items] = sum(per_turn[20:], Counter())
    before, after = counts[False], counts[True]
    assert before[("s3", "PutObject")] >= 20 and ("dynamodb", "BatchWriteItem") not in before
    assert ("s3", "PutObject") not in after
    # A message that holds a content boundary costs one more: the write stores it as
    # a piece and the checkpoint its own cut of it too (test_write_pieces.py); in
    # turns 21-30 only turn 24 sends more (measured: two).
    assert after[("dynamodb", "BatchWriteItem")] <= before[("s3", "PutObject")] + 2
    rest = {("s3", "PutObject"), ("dynamodb", "BatchWriteItem")}
    assert {k: v for k, v in before.items() if k not in rest} == {
        k: v for k, v in after.items() if k not in rest
    }


def test_with_chunk_items_off_the_chat_uses_loose_blobs_and_reads_either(
    backend: Backend,
) -> None:
    chat(backend.saver(chunk_items=False), "old", 30)
    assert backend.chunk_items(encode_segment("old")) == {}
    assert len(loose_blobs(backend, "old")) > 20
    # the thread goes on with chunk items: a history mixing loose blobs and items
    chat(backend.saver(), "old", 5, first=30)
    assert backend.chunk_items(encode_segment("old"))
    state = build_chat(backend.saver(chunk_items=False)).get_state(cfg("old"))
    assert len(state.values["messages"]) == 70
    history = list(build_chat(backend.saver()).get_state_history(cfg("old")))
    assert [len(s.values.get("messages", [])) for s in history[:3]] == [70, 69, 68]


def test_sealed_chunk_items_hold_the_sealed_frame_under_the_keyed_name(
    backend: Backend,
) -> None:
    enc = Encryption(StaticKeyRing({"ring-1": os.urandom(32)}, current="ring-1"))
    chat(backend.saver(encryption=enc), "sealed", 25)
    items = backend.chunk_items(encode_segment("sealed"))
    assert items and all(f.startswith(b"LGS3\x04S") for f in items.values())
    text = words("user3", 400).encode()
    assert not any(text[:40] in f for f in items.values())
    # the keyed name is not the plain digest of anything stored
    state = build_chat(backend.saver(encryption=enc)).get_state(cfg("sealed"))
    assert len(state.values["messages"]) == 50
    plain = backend.saver()
    with pytest.raises(SealedObjectError):
        plain.get_tuple(cfg("sealed"))


def test_an_entry_mixing_loose_blobs_packs_and_items_reads_back(backend: Backend) -> None:
    """One value whose chunks are in a pack (80 KB at once: several new chunks), a loose
    blob (~12 KB compressed appended: 13 WRU as an item) and a chunk item (a small
    piece appended)."""
    saver = backend.saver()
    graph = _list_graph(saver)
    rng = random.Random(8)  # fixed bytes: fixed chunk boundaries
    for part in (rng.randbytes(40_000).hex(), rng.randbytes(12_000).hex(), "a piece " * 50):
        graph.invoke({"parts": [part]}, cfg("mixed"))
    keys = loose_blobs(backend, "mixed")
    assert any(k.endswith(".pack") for k in keys) and any(not k.endswith(".pack") for k in keys)
    assert backend.chunk_items(encode_segment("mixed"))
    latest = graph.get_state(cfg("mixed")).config["configurable"]["checkpoint_id"]
    [item] = [
        i
        for i in backend.items()
        if i["sk"]["S"].startswith("c#")
        and "h" in i
        and i["pk"]["S"] == "mixed"
        and schema.parse_row(i).checkpoint_id == latest
    ]
    body = codec.unpack(codec.unframe(item["b"]["B"], key="", kind=b"C"), key="")
    entry = body["ch"]["parts"]
    assert body["f"] == 5 and entry[0] == "x" and entry[6]  # names a pack
    assert {-2, -1} <= set(entry[7][0::3])  # an item and a loose blob
    tup = backend.saver().get_tuple(cfg("mixed"))
    assert tup is not None
    assert (
        tup.checkpoint["channel_values"]["parts"] == graph.get_state(cfg("mixed")).values["parts"]
    )


class Parts(TypedDict):
    parts: Annotated[list[str], lambda a, b: a + b]


def _list_graph(saver: Any) -> Any:
    builder = StateGraph(Parts)
    builder.add_node("noop", lambda s: {})
    builder.add_edge(START, "noop")
    return builder.compile(checkpointer=saver)


def test_the_async_saver_writes_and_reads_chunk_items(server_backend: Backend) -> None:
    async def run() -> int:
        async with server_backend.async_saver() as saver:
            graph = build_chat(saver)
            for turn in range(25):
                await graph.ainvoke(user(turn), cfg("achat"))
        async with server_backend.async_saver() as fresh:
            tup = await fresh.aget_tuple(cfg("achat"))
            assert tup is not None
            return len(tup.checkpoint["channel_values"]["messages"])

    assert asyncio.run(run()) == 50
    assert server_backend.chunk_items(encode_segment("achat"))
    assert loose_blobs(server_backend, "achat") == []
    # what the sync saver reads of it is the same
    state = build_chat(server_backend.saver()).get_state(cfg("achat"))
    assert len(state.values["messages"]) == 50


def test_a_damaged_or_deleted_chunk_item_is_reported(inproc_backend: Backend) -> None:
    from langgraph_s3.errors import CorruptObjectError, MissingObjectError

    chat(inproc_backend.saver(), "dmg", 25)
    ddb = inproc_backend.dynamodb()
    items = [i for i in inproc_backend.items() if i["sk"]["S"].startswith("b#")]
    victim = items[-1]
    ddb.put_item(
        TableName=inproc_backend.table,
        Item={**victim, "v": {"B": codec.frame(codec.KIND_BLOB, b"other", 3)}},
    )
    with pytest.raises(CorruptObjectError):
        list(build_chat(inproc_backend.saver()).get_state_history(cfg("dmg")))
    ddb.delete_item(TableName=inproc_backend.table, Key={"pk": victim["pk"], "sk": victim["sk"]})
    with pytest.raises(MissingObjectError):
        list(build_chat(inproc_backend.saver()).get_state_history(cfg("dmg")))


def test_delete_thread_deletes_its_chunk_items_only(inproc_backend: Backend) -> None:
    saver = inproc_backend.saver()
    chat(saver, "gone", 20)
    chat(saver, "kept", 20)
    kept = inproc_backend.chunk_items(encode_segment("kept"))
    assert inproc_backend.chunk_items(encode_segment("gone")) and kept
    saver.delete_thread("gone")
    assert inproc_backend.chunk_items(encode_segment("gone")) == {}
    assert inproc_backend.chunk_items(encode_segment("kept")) == kept
