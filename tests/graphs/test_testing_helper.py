"""``langgraph_s3.testing``: what a user testing their own graph gets."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_s3 import AsyncS3Saver, S3Saver

# As a user's conftest.py would; the helpers are imported where used, after pytest
# has loaded the plugin.
pytest_plugins = ["langgraph_s3.testing"]


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def build(saver: Any) -> Any:
    def ask(state: State) -> State:
        return {"log": [f"answer:{interrupt('ok?')}"]}

    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    return g.compile(checkpointer=saver)


CFG = {"configurable": {"thread_id": "user-test"}}


def run_and_resume(saver: Any) -> list[str]:
    graph = build(saver)
    graph.invoke({"log": ["in"]}, CFG)
    assert graph.get_state(CFG).next == ("ask",)
    return list(graph.invoke(Command(resume="yes"), CFG)["log"])


def test_local_saver_in_process_and_as_a_server() -> None:
    from langgraph_s3.testing import local_saver

    for server in (False, True):
        with local_saver(server=server) as saver:
            assert isinstance(saver, S3Saver)
            assert run_and_resume(saver) == ["in", "answer:yes"]


def test_each_local_saver_has_its_own_storage() -> None:
    from langgraph_s3.testing import local_saver

    with local_saver() as first:
        run_and_resume(first)
        with local_saver() as second:
            assert second.bucket != first.bucket
            assert second.get_tuple(CFG) is None


def test_the_s3_saver_fixture(s3_saver: S3Saver) -> None:
    assert run_and_resume(s3_saver) == ["in", "answer:yes"]


async def test_the_async_helper_and_fixture(async_s3_saver: AsyncS3Saver) -> None:
    from langgraph_s3.testing import local_async_saver

    graph = build(async_s3_saver)
    await graph.ainvoke({"log": ["in"]}, CFG)
    done = await graph.ainvoke(Command(resume="yes"), CFG)
    assert done["log"] == ["in", "answer:yes"]
    async with local_async_saver() as other:
        assert await other.aget_tuple(CFG) is None
