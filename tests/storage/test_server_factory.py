"""The Agent Server's checkpointer factory on a moto server: what a graph run through a
saver from ``langgraph_s3.server.checkpointer`` stores, a plain ``S3Saver`` on the same
connection string reads, under the string's prefix.

The factory behind a running ``langgraph dev`` is ``tests/deploy/test_agent_server.py``.
"""

from __future__ import annotations

import pytest
from langgraph.types import Command

from langgraph_s3 import S3Saver
from langgraph_s3.server import CONNECTION_STRING_VAR, checkpointer
from tests.conftest import REGION, Backend
from tests.graphs.test_graphs import Calls, build_approval, cfg


async def test_what_the_factory_stores_a_plain_saver_reads(
    server_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = (
        f"s3://{server_backend.bucket}/served/?table={server_backend.table}&region={REGION}"
        f"&endpoint_url={server_backend.endpoint_url}"
    )
    monkeypatch.setenv(CONNECTION_STRING_VAR, url)
    calls = Calls()
    async with checkpointer() as saver:
        graph = build_approval(saver, calls)
        await graph.ainvoke({"request": "r1"}, cfg("t"))
        await graph.ainvoke(Command(resume=True), cfg("t"))
        final = (await graph.aget_state(cfg("t"))).values
    assert calls["act"] == 1
    assert final["decision"] == "approved"

    with S3Saver.from_conn_string(url) as plain:
        latest = plain.get_tuple(cfg("t"))
    assert latest is not None
    assert {k: latest.checkpoint["channel_values"][k] for k in final} == final
    assert all(key.startswith("served/") for key in server_backend.object_keys())
    assert all(item["pk"]["S"].startswith("served/") for item in server_backend.items())
