"""AsyncS3Saver with what aioboto3 users already have: an ``aioboto3.Session`` passed as
``session=``, and clients they created with it.

aioboto3 (15.5, its latest release) pins aiobotocore 2.25 and an older botocore, so it
cannot be installed beside our ``async`` extra (aiobotocore 3). ``python3 run.py test``
therefore runs this module a second time in ``.venv-aioboto3``, where aioboto3 is
installed and ``LGS3_REQUIRE_AIOBOTO3=1`` turns a missing aioboto3 into a failure; in
the main environment the module is skipped, and that skip hides nothing.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_s3 import AsyncS3Saver
from tests.conftest import REGION, Backend
from tests.graphs.test_graphs import Calls, build_approval, cfg, history_summary

if os.environ.get("LGS3_REQUIRE_AIOBOTO3") == "1":
    import aioboto3
else:
    aioboto3 = pytest.importorskip(
        "aioboto3",
        reason="aioboto3 pins aiobotocore 2.x; run.py test runs this module in .venv-aioboto3",
    )


def reference_history() -> list[dict[str, Any]]:
    graph = build_approval(InMemorySaver(), Calls())
    graph.invoke({"request": "r1"}, cfg("t"))
    graph.invoke(Command(resume=True), cfg("t"))
    return history_summary(graph.get_state_history(cfg("t")))


async def test_an_aioboto3_session_and_clients_made_with_it(server_backend: Backend) -> None:
    """A run pauses on an interrupt through a saver built on an aioboto3 Session; a new
    saver on clients the user made with aioboto3 resumes it; the history is
    InMemorySaver's, and the side effect ran once."""
    session = aioboto3.Session()
    where = {"region_name": REGION, "endpoint_url": server_backend.endpoint_url}
    calls = Calls()
    async with AsyncS3Saver(
        bucket=server_backend.bucket, table=server_backend.table, session=session, **where
    ) as saver:
        paused = await build_approval(saver, calls).ainvoke({"request": "r1"}, cfg("t"))
    assert paused["__interrupt__"][0].value["question"] == "approve?"
    assert calls["act"] == 0

    async with session.client("s3", **where) as s3, session.client("dynamodb", **where) as ddb:
        saver = AsyncS3Saver(
            bucket=server_backend.bucket, table=server_backend.table, s3_client=s3,
            dynamodb_client=ddb,
        )  # fmt: skip
        graph = build_approval(saver, calls)
        done = await graph.ainvoke(Command(resume=True), cfg("t"))
        history = [snap async for snap in graph.aget_state_history(cfg("t"))]
    assert done["outcome"] == "recorded approved; did refund r1"
    assert calls["act"] == 1
    assert history_summary(history) == reference_history()
