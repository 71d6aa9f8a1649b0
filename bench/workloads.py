"""The graphs of the benchmark, identical for every saver.

Every value is derived from :mod:`textgen` with fixed seeds, so each saver stores
exactly the same states (message ids included) and only the saver differs.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send, interrupt

from textgen import seeded, text


@dataclass(frozen=True)
class Sizes:
    """Workload sizes; ``quick`` shrinks the counts, never the values themselves."""

    approvals: int
    chat_turns: int
    fanout_runs: int
    fanout_branches: int
    doc_bytes: int
    doc_steps: int
    growth_samples: int
    agent_threads: int

    @classmethod
    def pick(cls, quick: bool) -> Sizes:
        if quick:
            return cls(2, 20, 2, 10, 5_000_000, 4, 5, 2)
        return cls(5, 200, 5, 10, 5_000_000, 20, 20, 5)


# --------------------------------------------------------------- (a) approval
class ApprovalState(TypedDict, total=False):
    request: str
    context: list[str]
    draft: str
    decision: str
    outcome: str


def approval_request(i: int) -> str:
    """The ticket that starts approval thread ``i`` (~800 characters)."""
    return text(seeded("approval-request", i), 800)


def build_approval() -> StateGraph[Any]:
    """retrieve -> draft -> approval (interrupt) -> act."""

    def retrieve(state: ApprovalState) -> ApprovalState:
        rng = seeded("approval-context", state["request"][:40])
        # Ten retrieved passages of 1-1.5 KB: a typical RAG context.
        return {"context": [text(rng, rng.randint(1000, 1500)) for _ in range(10)]}

    def draft(state: ApprovalState) -> ApprovalState:
        return {"draft": text(seeded("approval-draft", state["request"][:40]), 1200)}

    def approval(state: ApprovalState) -> ApprovalState:
        answer = interrupt({"question": "Approve this action?", "draft": state["draft"][:200]})
        return {"decision": "approved" if answer else "rejected"}

    def act(state: ApprovalState) -> ApprovalState:
        return {"outcome": f"{state['decision']}: {state['draft'][:80]}"}

    builder = StateGraph(ApprovalState)
    builder.add_node("retrieve", retrieve)
    builder.add_node("draft", draft)
    builder.add_node("approval", approval)
    builder.add_node("act", act)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "draft")
    builder.add_edge("draft", "approval")
    builder.add_edge("approval", "act")
    builder.add_edge("act", END)
    return builder


# ------------------------------------------------------------------ (b) chat
class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def user_message(turn: int) -> HumanMessage:
    """The user's message of ``turn`` (300-1500 characters)."""
    rng = seeded("chat-user", turn)
    return HumanMessage(content=text(rng, rng.randint(300, 1500)), id=f"human-{turn}")


def build_chat() -> StateGraph[Any]:
    """One node: a deterministic fake model answering every user message."""

    def agent(state: ChatState) -> dict[str, Any]:
        turn = sum(1 for m in state["messages"] if m.type == "human")
        rng = seeded("chat-ai", turn)
        content = text(rng, rng.randint(300, 1500))
        tokens_in = sum(len(str(m.content)) for m in state["messages"]) // 4
        reply = AIMessage(
            content=content,
            id=f"ai-{turn}",
            response_metadata={"model_name": "fake-model-1", "finish_reason": "stop"},
            usage_metadata={
                "input_tokens": tokens_in,
                "output_tokens": len(content) // 4,
                "total_tokens": tokens_in + len(content) // 4,
            },
        )
        return {"messages": [reply]}

    builder = StateGraph(ChatState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder


# --------------------------------------------------------------- (c) fan-out
class FanState(TypedDict, total=False):
    topic: str
    results: Annotated[list[str], operator.add]
    summary: str


class WorkerInput(TypedDict):
    topic: str
    part: int


def build_fanout(branches: int) -> StateGraph[Any]:
    """plan -> ``branches`` x worker (Send) -> reduce."""

    def plan(state: FanState) -> FanState:
        return {"summary": ""}

    def route(state: FanState) -> list[Send]:
        return [Send("worker", {"topic": state["topic"], "part": i}) for i in range(branches)]

    def worker(state: WorkerInput) -> FanState:
        rng = seeded("fan-worker", state["topic"][:30], state["part"])
        return {"results": [text(rng, rng.randint(600, 1400))]}

    def reduce(state: FanState) -> FanState:
        return {"summary": " | ".join(r[:60] for r in state["results"])}

    builder = StateGraph(FanState)
    builder.add_node("plan", plan)
    builder.add_node("worker", worker)
    builder.add_node("reduce", reduce)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", route, ["worker"])
    builder.add_edge("worker", "reduce")
    builder.add_edge("reduce", END)
    return builder


def fanout_topic(i: int) -> str:
    return text(seeded("fan-topic", i), 400)


# -------------------------------------------------------------- (d) document
class DocState(TypedDict, total=False):
    doc: str
    remaining: int
    edits: int


def document(size: int) -> str:
    """The initial document of workload (d)."""
    return text(seeded("document"), size)


def edit_document(doc: str, edit_no: int) -> str:
    """Rewrite about 1% of ``doc`` in four spans at pseudo-random places."""
    rng = seeded("doc-edit", edit_no)
    span = len(doc) // 100 // 4
    for _ in range(4):
        pos = rng.randrange(0, len(doc) - span)
        doc = doc[:pos] + text(rng, span) + doc[pos + span :]
    return doc


def build_document() -> StateGraph[Any]:
    """``edit`` loops while ``remaining`` > 0; each pass edits ~1% of the document."""

    def edit(state: DocState) -> DocState:
        n = state.get("edits", 0)
        return {
            "doc": edit_document(state["doc"], n),
            "remaining": state["remaining"] - 1,
            "edits": n + 1,
        }

    def route(state: DocState) -> str:
        return "edit" if state.get("remaining", 0) > 0 else END

    builder = StateGraph(DocState)
    builder.add_node("edit", edit)
    builder.add_conditional_edges(START, route, ["edit", END])
    builder.add_conditional_edges("edit", route, ["edit", END])
    return builder


# ------------------------------------------------------- (f) small-state agent
#: Tool rounds the fake model asks for in each user turn of a thread (issue 22's
#: small-state agents: 4-6 tool calls per conversation, outputs of 1-10 KB).
AGENT_ROUNDS = (3, 2)
#: The tool whose call waits for a human (the round's ``interrupt()``).
APPROVAL_TOOL = "update_ticket"
_AGENT_TOOLS = ("search_kb", "get_customer", APPROVAL_TOOL, "list_orders", "get_invoice")


def agent_user_message(thread: int, turn: int) -> HumanMessage:
    """The user's message of ``turn`` on agent thread ``thread`` (200-600 characters)."""
    rng = seeded("agent-user", thread, turn)
    return HumanMessage(content=text(rng, rng.randint(200, 600)), id=f"human-{thread}-{turn}")


def agent_tool_output(thread: int, turn: int, round_no: int) -> str:
    """What a tool returns: 1-10 KB of text."""
    rng = seeded("agent-tool", thread, turn, round_no)
    return text(rng, rng.randint(1000, 10_000))


def agent_tool_name(turn: int, round_no: int) -> str:
    """The tool of a round; the last round of the first turn needs approval."""
    return _AGENT_TOOLS[sum(AGENT_ROUNDS[:turn]) + round_no]


def build_agent(thread: int) -> StateGraph[Any]:
    """A ReAct loop: ``agent`` calls a tool per round, ``tools`` answers, then a reply.

    The fake model decides from the state alone (the turn is the number of human
    messages, the round the number of tool messages since the last one), so a saver
    that resumes the thread in a new instance continues exactly where it stopped.
    """

    def position(messages: list[AnyMessage]) -> tuple[int, int]:
        last_human = max(i for i, m in enumerate(messages) if m.type == "human")
        turn = sum(1 for m in messages if m.type == "human") - 1
        return turn, sum(1 for m in messages[last_human:] if m.type == "tool")

    def agent(state: ChatState) -> dict[str, Any]:
        turn, round_no = position(state["messages"])
        rng = seeded("agent-ai", thread, turn, round_no)
        tokens_in = sum(len(str(m.content)) for m in state["messages"]) // 4
        done = round_no >= AGENT_ROUNDS[turn]
        content = text(rng, rng.randint(300, 900) if done else rng.randint(80, 240))
        calls = []
        if not done:
            calls.append(
                {
                    "name": agent_tool_name(turn, round_no),
                    "args": {"query": text(rng, 60), "limit": 20},
                    "id": f"call-{thread}-{turn}-{round_no}",
                    "type": "tool_call",
                }
            )
        reply = AIMessage(
            content=content,
            id=f"ai-{thread}-{turn}-{round_no}",
            tool_calls=calls,
            response_metadata={
                "model_name": "fake-model-1",
                "finish_reason": "stop" if done else "tool_calls",
            },
            usage_metadata={
                "input_tokens": tokens_in,
                "output_tokens": len(content) // 4,
                "total_tokens": tokens_in + len(content) // 4,
            },
        )
        return {"messages": [reply]}

    def route(state: ChatState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    def tools(state: ChatState) -> dict[str, Any]:
        turn, round_no = position(state["messages"])
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        if call["name"] == APPROVAL_TOOL and not interrupt(
            {"question": f"Run {call['name']}?", "args": call["args"]}
        ):
            content = "rejected by the reviewer"
        else:
            content = agent_tool_output(thread, turn, round_no)
        result = ToolMessage(
            content=content,
            tool_call_id=call["id"],
            name=call["name"],
            id=f"tool-{thread}-{turn}-{round_no}",
        )
        return {"messages": [result]}

    builder = StateGraph(ChatState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder
