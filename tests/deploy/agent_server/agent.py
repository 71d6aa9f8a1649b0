"""The graph the Agent Server test serves: a request waits for an approval.

Loaded by the server from the file path in ``langgraph.json`` (``./agent.py:graph``),
so it imports nothing from the tests.
"""

from __future__ import annotations

import operator
import time
from typing import Annotated, TypedDict

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt


class State(TypedDict):
    request: str
    log: Annotated[list[str], operator.add]


def draft(state: State) -> dict[str, list[str]]:
    if state["request"].startswith("slow"):
        time.sleep(3)  # a run the test can roll back while it is still running
    return {"log": [f"drafted {state['request']}"]}


def approve(state: State) -> dict[str, list[str]]:
    decision = interrupt(f"approve {state['request']}?")
    return {"log": [f"{state['request']}: {decision}"]}


builder = StateGraph(State)
builder.add_node("draft", draft)
builder.add_node("approve", approve)
builder.add_edge(START, "draft")
builder.add_edge("draft", "approve")
# No checkpointer here: the server compiles the graph with the one langgraph.json names.
graph = builder.compile()
