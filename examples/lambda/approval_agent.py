"""A human-approval agent: draft an action, pause for approval, then carry it out or not.

The graph is ``draft -> approval -> act``:

* ``draft`` asks the drafter for an action (a deterministic rule-based drafter by
  default; plug in a real model with ``build_graph(drafter=...)`` or the
  ``APPROVAL_AGENT_DRAFTER=module:function`` environment variable);
* ``approval`` pauses on ``interrupt()`` until a human decides; the decision and its
  time come in with ``Command(resume={"approve": ..., "decided_at": ...})`` so the
  node itself never reads a clock;
* ``act`` carries the action out (through the executor) only if it was approved in
  time, and records the receipt in ``actions_executed``.

``act`` runs in the superstep *after* the checkpoint that records the decision. With
``durability="sync"`` that checkpoint is committed before ``act`` starts, so a second
run resuming the same approval is stopped by ``CheckpointConflictError`` before it
can carry the action out again (see docs/concurrency.md).
"""

from __future__ import annotations

import importlib
import json
import operator
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

#: Status names returned by the API.
PENDING = "pending_approval"
COMPLETED = "completed"
REJECTED = "rejected"
EXPIRED = "expired"
IN_PROGRESS = "in_progress"

Drafter = Callable[[str], str]


class ApprovalState(TypedDict, total=False):
    """The thread's state; times are epoch seconds from the handler's clock."""

    request: str
    requested_at: float
    deadline: float
    action: str
    decision: str  # "approved" | "rejected" | "expired"
    decided_at: float
    decided_by: str | None
    outcome: str  # "executed" | "abandoned"
    # A list with an add reducer: every execution appends, so a second execution
    # of the action would show up here instead of overwriting the first receipt.
    actions_executed: Annotated[list[dict[str, Any]], operator.add]


@dataclass(frozen=True)
class ActionRequest:
    """What the executor is asked to carry out."""

    thread_id: str
    action: str
    #: Stable for the thread's one action: a real downstream system should refuse a
    #: second request with the same key (at-least-once delivery is still possible
    #: if a container dies after the side effect and before its checkpoint).
    idempotency_key: str
    decided_at: float


Executor = Callable[[ActionRequest], dict[str, Any]]


def draft_action(request: str) -> str:
    """Deterministic stand-in for a model: turn a request into a concrete action.

    Args:
        request: What the user asked for, e.g. ``"refund order A-1042"``.

    Returns:
        The action a human is asked to approve.
    """
    text = " ".join(request.split())
    if text.lower().startswith("refund "):
        return f"Issue a full refund for {text[len('refund ') :]} and email the customer"
    return f"Carry out: {text}"


def load_drafter(spec: str | None) -> Drafter:
    """The drafter named by ``module:function`` (e.g. ``my_llm:draft``), or the default.

    Args:
        spec: ``"module:function"``; empty or ``None`` selects :func:`draft_action`.
    """
    if not spec:
        return draft_action
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise ValueError(f"APPROVAL_AGENT_DRAFTER must look like 'module:function', got {spec!r}")
    drafter = getattr(importlib.import_module(module_name), function_name)
    if not callable(drafter):
        raise ValueError(f"{spec!r} is not callable")
    return drafter  # type: ignore[no-any-return]


def make_executor(dynamodb_client: Any = None, table: str | None = None) -> Executor:
    """The default executor: log the action and, if a table is given, record it there.

    The ledger table stands for the system that carries actions out (a payments API,
    a ticketing system). Every execution is a new item, so a duplicate would be
    visible rather than silently merged.

    Args:
        dynamodb_client: boto3 DynamoDB client used for the ledger.
        table: Ledger table with keys ``thread_id`` (S, HASH) and ``execution_id``
            (S, RANGE); ``None`` only logs.
    """

    def execute(request: ActionRequest) -> dict[str, Any]:
        receipt = {
            "execution_id": uuid.uuid4().hex,
            "action": request.action,
            "idempotency_key": request.idempotency_key,
            "executed_at": request.decided_at,
        }
        if table:
            dynamodb_client.put_item(
                TableName=table,
                Item={
                    "thread_id": {"S": request.thread_id},
                    "execution_id": {"S": receipt["execution_id"]},
                    "action": {"S": request.action},
                    "idempotency_key": {"S": request.idempotency_key},
                    "executed_at": {"N": repr(request.decided_at)},
                },
            )
        # One JSON line per execution: CloudWatch Logs (and the tests) can count them.
        print(
            json.dumps({"event": "action_executed", "thread_id": request.thread_id, **receipt}),
            flush=True,
        )
        return receipt

    return execute


def build_graph(
    checkpointer: Any,
    *,
    drafter: Drafter | None = None,
    executor: Executor | None = None,
) -> Any:
    """Compile the approval graph.

    Args:
        checkpointer: Where threads are kept (an ``S3Saver`` in the Lambda).
        drafter: Turns a request into an action; :func:`draft_action` by default.
        executor: Carries an approved action out; logs only by default.

    Returns:
        The compiled graph.
    """
    drafter = drafter or draft_action
    executor = executor or make_executor()

    def draft(state: ApprovalState) -> ApprovalState:
        return {"action": drafter(state["request"])}

    def approval(state: ApprovalState) -> ApprovalState:
        answer = interrupt(
            {
                "question": "Approve this action?",
                "action": state["action"],
                "deadline": iso(state["deadline"]),
            }
        )
        decided_at = float(answer["decided_at"])
        if decided_at > state["deadline"]:
            decision = "expired"
        else:
            decision = "approved" if answer["approve"] is True else "rejected"
        return {"decision": decision, "decided_at": decided_at, "decided_by": answer.get("by")}

    def act(state: ApprovalState, config: RunnableConfig) -> ApprovalState:
        if state["decision"] != "approved":
            return {"outcome": "abandoned"}
        thread_id = str(config["configurable"]["thread_id"])
        receipt = executor(
            ActionRequest(
                thread_id=thread_id,
                action=state["action"],
                idempotency_key=f"{thread_id}:action",
                decided_at=state["decided_at"],
            )
        )
        return {"outcome": "executed", "actions_executed": [receipt]}

    builder = StateGraph(ApprovalState)
    builder.add_node("draft", draft)
    builder.add_node("approval", approval)
    builder.add_node("act", act)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approval")
    builder.add_edge("approval", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=checkpointer)


def status_of(values: Mapping[str, Any], pending: bool) -> str:
    """The API status of a thread from its state values.

    Args:
        values: The thread's latest state.
        pending: True if the thread is paused on the approval interrupt.
    """
    if pending:
        return PENDING
    if values.get("outcome") == "executed":
        return COMPLETED
    if values.get("outcome") == "abandoned":
        return EXPIRED if values.get("decision") == "expired" else REJECTED
    # Decided but the action step has not committed (e.g. the container died).
    return IN_PROGRESS


def iso(ts: float | None) -> str | None:
    """Epoch seconds as an ISO-8601 UTC string (``None`` stays ``None``)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def describe(thread_id: str, values: Mapping[str, Any], pending: bool) -> dict[str, Any]:
    """The JSON view of a thread that the API returns.

    Args:
        thread_id: The thread.
        values: Its latest state values.
        pending: True if it waits for a decision.
    """
    decided_at = values.get("decided_at")
    requested_at = values.get("requested_at")
    return {
        "thread_id": thread_id,
        "status": status_of(values, pending),
        "request": values.get("request"),
        "action": values.get("action"),
        "requested_at": iso(requested_at),
        "deadline": iso(values.get("deadline")),
        "decision": values.get("decision"),
        "decided_at": iso(decided_at),
        "decided_by": values.get("decided_by"),
        "waited_seconds": (
            None if decided_at is None or requested_at is None else decided_at - requested_at
        ),
        "actions_executed": values.get("actions_executed", []),
    }


def env_drafter() -> Drafter:
    """The drafter selected by ``APPROVAL_AGENT_DRAFTER`` (default: :func:`draft_action`)."""
    return load_drafter(os.environ.get("APPROVAL_AGENT_DRAFTER"))
