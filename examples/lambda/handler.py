"""AWS Lambda handler of the human-approval agent (API Gateway HTTP API, payload 2.0).

Routes:

* ``POST /threads`` ``{"request": "refund order A-1042"}`` starts a thread and returns
  its id and the action waiting for approval (201).
* ``POST /threads/{id}/decision`` ``{"approve": true|false, "by": "alice"}`` resumes
  the thread with ``Command(resume=...)``. A thread that is no longer pending, or a
  decision that loses a race with another one, gets 409 and changes nothing.
* ``GET /threads/{id}`` returns the thread's status.

Configuration (environment):

* ``CHECKPOINT_URL`` = ``s3://bucket/prefix?table=t&region=r`` (the storage stack's
  ``ConnectionString`` output), or ``CHECKPOINT_BUCKET``, ``CHECKPOINT_TABLE`` and
  optionally ``CHECKPOINT_PREFIX``. ``AWS_ENDPOINT_URL`` points boto3 elsewhere (moto).
* ``CHECKPOINT_KMS_KEY``: the ARN of the KMS key of client-side encryption (the
  storage stack's ``ClientSideKeyArn``); checkpoints are then sealed with
  ``encryption=KmsKeyRing(ARN)``. Unset or empty: no client-side encryption.
* ``CHECKPOINT_PREVIOUS_KMS_KEY``: during a rotation to another KMS key, the key
  ``CHECKPOINT_KMS_KEY`` replaces (the storage stack's ``PreviousClientSideKeyArn``):
  ``KmsKeyRing(ARN, previous=[PREVIOUS])`` still opens data keys wrapped under it.
* ``ACTIONS_TABLE``: optional ledger the default executor writes each execution to.
* ``APPROVAL_TIMEOUT_SECONDS``: how long a decision is accepted (default 7 days).
* ``APPROVAL_AGENT_DRAFTER``: ``module:function`` replacing the default drafter.
* ``APPROVAL_AGENT_NOW``: tests and demos only: the current time (ISO-8601 or epoch
  seconds) instead of the system clock, to simulate a decision days later.

Importing this module is cheap: LangGraph, boto3 and the saver are imported and
created on the first request that needs them, then reused by every later request
the container serves.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    from langgraph_s3.sealing import KmsKeyRing

DEFAULT_APPROVAL_TIMEOUT = 7 * 24 * 3600.0
_THREAD_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PATH = re.compile(r"^/threads(?:/(?P<id>[^/]+)(?P<decision>/decision)?)?/?$")
_MAX_REQUEST = 2000


class HttpError(Exception):
    """An error response: status code, machine-readable code and message."""

    def __init__(
        self, status: int, code: str, message: str, extra: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.extra = dict(extra or {})


@dataclass
class Runtime:
    """Everything a container builds once and reuses across invocations."""

    saver: Any
    graph: Any
    approval_timeout: float


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The container's saver and graph, created on first use.

    Lambda runs one request at a time per container, but the lock keeps this
    correct when the module is used from threads (local servers, tests).
    """
    global _runtime
    if _runtime is None:
        with _runtime_lock:
            if _runtime is None:
                _runtime = _build_runtime(os.environ)
    return _runtime


def storage_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """``S3Saver`` arguments from the environment.

    Args:
        env: ``CHECKPOINT_URL`` or ``CHECKPOINT_BUCKET``/``CHECKPOINT_TABLE``/
            ``CHECKPOINT_PREFIX``; ``CHECKPOINT_KMS_KEY``, ``CHECKPOINT_PREVIOUS_KMS_KEY``.

    Returns:
        ``bucket``, ``table``, ``prefix``; from a URL, ``region_name`` and
        ``endpoint_url``; with a KMS key, ``encryption``.
    """
    url = env.get("CHECKPOINT_URL")
    if url:
        from langgraph_s3.connection import parse_conn_string

        settings = parse_conn_string(url)
    else:
        bucket, table = env.get("CHECKPOINT_BUCKET"), env.get("CHECKPOINT_TABLE")
        if not bucket or not table:
            raise RuntimeError(
                "set CHECKPOINT_URL (the storage stack's ConnectionString output) or "
                "CHECKPOINT_BUCKET and CHECKPOINT_TABLE"
            )
        settings = {"bucket": bucket, "table": table, "prefix": env.get("CHECKPOINT_PREFIX", "")}
    kms_key = env.get("CHECKPOINT_KMS_KEY", "").strip()
    previous = env.get("CHECKPOINT_PREVIOUS_KMS_KEY", "").strip()
    if kms_key or previous:
        settings["encryption"] = _key_ring(kms_key, previous, settings)
    return settings


def _key_ring(kms_key: str, previous: str, settings: Mapping[str, Any]) -> KmsKeyRing:
    """``CHECKPOINT_KMS_KEY`` and ``CHECKPOINT_PREVIOUS_KMS_KEY`` as a ``KmsKeyRing``."""
    from langgraph_s3.sealing import KmsKeyRing
    from langgraph_s3.sealing.kms import check_kms_key

    if "encryption" in settings:
        raise RuntimeError(
            "CHECKPOINT_KMS_KEY or CHECKPOINT_PREVIOUS_KMS_KEY beside kms_key= in "
            "CHECKPOINT_URL: name the key once"
        )
    if not kms_key:
        raise RuntimeError(
            "CHECKPOINT_PREVIOUS_KMS_KEY needs CHECKPOINT_KMS_KEY, the key that replaces it"
        )
    # An alias or a malformed ARN is refused here, before any request.
    old = [check_kms_key(previous, what="CHECKPOINT_PREVIOUS_KMS_KEY")] if previous else []
    return KmsKeyRing(check_kms_key(kms_key, what="CHECKPOINT_KMS_KEY"), previous=old)


def _build_runtime(env: Mapping[str, str]) -> Runtime:
    # Heavy imports live here so that importing the module (and answering a
    # malformed request) costs next to nothing.
    import approval_agent
    import boto3
    from botocore.config import Config

    from langgraph_s3 import S3Saver

    settings = storage_settings(env)
    client_args = {
        "region_name": settings.pop("region_name", None),
        "endpoint_url": settings.pop("endpoint_url", None),
        # Fail fast inside API Gateway's 30 s limit; standard mode retries throttling.
        "config": Config(
            connect_timeout=3,
            read_timeout=10,
            retries={"mode": "standard", "max_attempts": 4},
            max_pool_connections=16,
        ),
    }
    s3 = boto3.client("s3", **client_args)
    dynamodb = boto3.client("dynamodb", **client_args)
    if "encryption" in settings:
        # Data keys come from KMS: the same timeouts and retries as the other clients.
        settings["kms_client"] = boto3.client("kms", **client_args)
    saver = S3Saver(s3_client=s3, dynamodb_client=dynamodb, **settings)
    graph = approval_agent.build_graph(
        saver,
        drafter=approval_agent.env_drafter(),
        executor=approval_agent.make_executor(dynamodb, env.get("ACTIONS_TABLE") or None),
    )
    timeout = float(env.get("APPROVAL_TIMEOUT_SECONDS") or DEFAULT_APPROVAL_TIMEOUT)
    return Runtime(saver=saver, graph=graph, approval_timeout=timeout)


def now() -> float:
    """The current time in epoch seconds; ``APPROVAL_AGENT_NOW`` overrides it (tests)."""
    fake = os.environ.get("APPROVAL_AGENT_NOW")
    if not fake:
        return time.time()
    try:
        return float(fake)
    except ValueError:
        return datetime.fromisoformat(fake.replace("Z", "+00:00")).timestamp()


# --------------------------------------------------------------------- HTTP
def _response(status: int, body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"content-type": "application/json"},
        "body": json.dumps(body),
    }


def _json_body(event: Mapping[str, Any]) -> dict[str, Any]:
    raw = event.get("body") or ""
    if event.get("isBase64Encoded"):
        raw = base64.b64decode(raw).decode("utf-8")
    try:
        body = json.loads(raw or "{}")
    except ValueError as exc:
        raise HttpError(400, "bad_request", f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise HttpError(400, "bad_request", "body must be a JSON object")
    return body


def _thread_id(value: Any) -> str:
    if not isinstance(value, str) or not _THREAD_ID.fullmatch(value):
        raise HttpError(400, "bad_request", "thread id must be 1-64 characters of A-Z a-z 0-9 _ -")
    return value


def _route(event: Mapping[str, Any]) -> tuple[str, str | None]:
    """(route name, thread id) from the route key, or from method and path."""
    http = event.get("requestContext", {}).get("http", {})
    method = str(http.get("method") or event.get("httpMethod") or "").upper()
    route_key = event.get("routeKey")
    params = event.get("pathParameters") or {}
    known = {
        "POST /threads": "start",
        "POST /threads/{id}/decision": "decide",
        "GET /threads/{id}": "status",
    }
    if route_key in known:
        return known[route_key], params.get("id")
    # "$default" route or a local test event: match the path ourselves.
    match = _PATH.match(str(event.get("rawPath") or http.get("path") or ""))
    if match:
        thread = unquote(match["id"]) if match["id"] else None
        if method == "POST" and thread is None:
            return "start", None
        if method == "POST" and match["decision"]:
            return "decide", thread
        if method == "GET" and thread is not None and not match["decision"]:
            return "status", thread
    raise HttpError(404, "not_found", f"no route for {method} {event.get('rawPath')}")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point for API Gateway HTTP API (payload format 2.0) events.

    Args:
        event: The API Gateway event.
        context: The Lambda context (unused).

    Returns:
        An HTTP API response: ``statusCode``, ``headers`` and a JSON ``body``.
    """
    try:
        route, thread = _route(event)
        if route == "start":
            return start_thread(_json_body(event))
        if route == "decide":
            return decide(_thread_id(thread), _json_body(event))
        return thread_status(_thread_id(thread))
    except HttpError as exc:
        return _response(exc.status, {"error": exc.code, "message": str(exc), **exc.extra})


# ----------------------------------------------------------------- routes
def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _snapshot(rt: Runtime, thread_id: str) -> Any:
    snapshot = rt.graph.get_state(_config(thread_id))
    if not snapshot.values:
        raise HttpError(404, "not_found", f"thread {thread_id!r} does not exist")
    return snapshot


def start_thread(body: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /threads``: draft the action and pause for approval.

    Args:
        body: ``{"request": str, "thread_id": optional str}``.
    """
    request = body.get("request")
    if not isinstance(request, str) or not request.strip() or len(request) > _MAX_REQUEST:
        raise HttpError(400, "bad_request", f"'request' must be a text of 1-{_MAX_REQUEST} chars")
    thread_id = _thread_id(body["thread_id"]) if "thread_id" in body else uuid.uuid4().hex
    rt = get_runtime()
    from langgraph_s3 import CheckpointConflictError, continuation

    if "thread_id" in body and rt.graph.get_state(_config(thread_id)).values:
        raise HttpError(409, "thread_exists", f"thread {thread_id!r} already exists")
    started = now()
    try:
        # continuation(): if another request creates this thread meanwhile, this run's
        # first checkpoint is refused instead of starting a second history beside it.
        values = rt.graph.invoke(
            {
                "request": request,
                "requested_at": started,
                "deadline": started + rt.approval_timeout,
            },
            continuation(_config(thread_id)),
            durability="sync",
        )
    except CheckpointConflictError as exc:
        # The same client-chosen thread id started twice at once: the other won.
        raise HttpError(409, "conflict", str(exc)) from exc
    import approval_agent

    # invoke returns the state plus the interrupt it stopped on: no need to read back.
    interrupts = values.pop("__interrupt__", [])
    view = approval_agent.describe(thread_id, values, pending=bool(interrupts))
    view["approval"] = interrupts[0].value if interrupts else None
    return _response(201, view)


def decide(thread_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /threads/{id}/decision``: approve or reject the pending action.

    The thread must still be pending, and the resume is pinned to the checkpoint
    that was seen pending with ``continuation()``: the saver then commits the
    decision only if that checkpoint is still the head, so of two racing decisions
    exactly one wins.

    Args:
        thread_id: The thread.
        body: ``{"approve": bool, "by": optional str}``.
    """
    approve = body.get("approve")
    if not isinstance(approve, bool):
        raise HttpError(400, "bad_request", "'approve' must be true or false")
    by = body.get("by")
    if by is not None and (not isinstance(by, str) or len(by) > 200):
        raise HttpError(400, "bad_request", "'by' must be a text of at most 200 chars")
    rt = get_runtime()
    import approval_agent
    from langgraph.types import Command

    from langgraph_s3 import CheckpointConflictError, continuation

    snapshot = _snapshot(rt, thread_id)
    if not snapshot.interrupts:
        status = approval_agent.status_of(snapshot.values, pending=False)
        raise HttpError(
            409,
            "already_decided",
            f"thread {thread_id!r} is not waiting for a decision (status {status})",
            {"status": status},
        )
    decision = {"approve": approve, "decided_at": now(), "by": by}
    try:
        # Pinning the resume to the checkpoint seen pending matters: resuming "the
        # latest" could pick up a checkpoint another decision committed meanwhile and
        # run its `act` step a second time, and a plain pinned resume would fork the
        # thread (LangGraph's time travel). continuation() commits only while the
        # checkpoint seen pending is the head. durability="sync" commits the decision
        # before `act` starts, so the loser of a race stops before the side effect.
        values = rt.graph.invoke(
            Command(resume=decision), continuation(snapshot.config), durability="sync"
        )
    except CheckpointConflictError as exc:
        raise HttpError(
            409, "conflict", f"another decision on thread {thread_id!r} was committed first"
        ) from exc
    values = {k: v for k, v in values.items() if k != "__interrupt__"}
    return _response(200, approval_agent.describe(thread_id, values, pending=False))


def thread_status(thread_id: str) -> dict[str, Any]:
    """``GET /threads/{id}``: the thread's status and history-relevant fields.

    Args:
        thread_id: The thread.
    """
    rt = get_runtime()
    import approval_agent

    snapshot = _snapshot(rt, thread_id)
    view = approval_agent.describe(thread_id, snapshot.values, bool(snapshot.interrupts))
    view["approval"] = snapshot.interrupts[0].value if snapshot.interrupts else None
    view["checkpoint_id"] = snapshot.config["configurable"]["checkpoint_id"]
    return _response(200, view)
