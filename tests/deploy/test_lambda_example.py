"""The Lambda example end to end: every invocation runs in a fresh interpreter.

Each call of the handler is a new ``python`` process (a cold container) talking to
a moto server over HTTP, so nothing survives between invocations except what the
saver stored in S3 and DynamoDB. The clock is simulated with ``APPROVAL_AGENT_NOW``
so a decision can arrive days after the thread started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

import langgraph_s3
from tests.conftest import create_keyed_table

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "lambda"
RUNNER = Path(__file__).with_name("lambda_invoke.py")
REGION = "us-east-1"
T0 = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """A moto server of our own, reached over real HTTP by the subprocesses."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@dataclass
class Invocation:
    """One cold invocation: HTTP status, JSON body, what it logged and imported."""

    status: int
    body: dict[str, Any]
    logs: list[dict[str, Any]]
    loaded: dict[str, bool]

    @property
    def executions(self) -> list[dict[str, Any]]:
        return [line for line in self.logs if line.get("event") == "action_executed"]


@dataclass
class App:
    """A deployed copy of the example: bucket, table and action ledger in moto."""

    endpoint: str
    bucket: str = field(default_factory=lambda: f"ckpt-{uuid.uuid4().hex[:12]}")
    table: str = field(default_factory=lambda: f"ckpt-{uuid.uuid4().hex[:12]}")
    ledger: str = field(default_factory=lambda: f"ledger-{uuid.uuid4().hex[:12]}")
    prefix: str = "approvals/"

    def env(self, now: datetime, extra: dict[str, str] | None = None) -> dict[str, str]:
        # Built from scratch: no real credentials, profiles or config files can leak in.
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
            "CHECKPOINT_URL": f"s3://{self.bucket}/{self.prefix}?table={self.table}",
            "ACTIONS_TABLE": self.ledger,
            "APPROVAL_AGENT_NOW": now.isoformat(),
            "APPROVAL_TIMEOUT_SECONDS": str(7 * 24 * 3600),
            "PYTHONDONTWRITEBYTECODE": "1",
            # The langgraph-s3 under test, not whichever one the interpreter has installed.
            "PYTHONPATH": str(Path(langgraph_s3.__file__).parents[1]),
        }
        env.update(extra or {})
        return env

    def spawn(
        self, event: dict[str, Any], now: datetime, extra: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(RUNNER), str(EXAMPLE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(now, extra),
            cwd=str(EXAMPLE),
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(event))
        proc.stdin.close()
        return proc

    @staticmethod
    def collect(proc: subprocess.Popen[str]) -> Invocation:
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=120)
        assert proc.returncode == 0, f"invocation crashed:\n{err}"
        lines = out.strip().splitlines()
        assert lines and lines[-1].startswith("RESULT "), out + err
        result = json.loads(lines[-1][len("RESULT ") :])
        logs = [json.loads(line) for line in lines[:-1] if line.startswith("{")]
        response = result["response"]
        assert response["headers"]["content-type"] == "application/json"
        return Invocation(
            response["statusCode"], json.loads(response["body"]), logs, result["loaded"]
        )

    def invoke(
        self, event: dict[str, Any], now: datetime, extra: dict[str, str] | None = None
    ) -> Invocation:
        return self.collect(self.spawn(event, now, extra))

    def ledger_items(self, thread_id: str) -> list[dict[str, Any]]:
        ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=self.endpoint)
        items: list[dict[str, Any]] = ddb.query(
            TableName=self.ledger,
            KeyConditionExpression="thread_id = :t",
            ExpressionAttributeValues={":t": {"S": thread_id}},
            ConsistentRead=True,
        )["Items"]
        return items

    def history(self, thread_id: str) -> list[Any]:
        from langgraph_s3 import S3Saver

        saver = S3Saver(
            bucket=self.bucket,
            table=self.table,
            prefix=self.prefix,
            region_name=REGION,
            endpoint_url=self.endpoint,
        )
        return list(saver.list({"configurable": {"thread_id": thread_id}}))


@pytest.fixture
def app(endpoint: str) -> App:
    """Storage made the way a developer would (saver.setup) plus the action ledger."""
    from langgraph_s3 import S3Saver

    a = App(endpoint)
    S3Saver(
        bucket=a.bucket, table=a.table, prefix=a.prefix, region_name=REGION, endpoint_url=endpoint
    ).setup()
    ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
    create_keyed_table(ddb, a.ledger, "thread_id", "execution_id")
    return a


# ------------------------------------------------------------------ events
def api_event(
    method: str, route: str, thread_id: str | None = None, body: Any = None
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event for one of the template's routes."""
    path = route.replace("{id}", thread_id or "")
    return {
        "version": "2.0",
        "routeKey": f"{method} {route}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "pathParameters": {"id": thread_id} if thread_id else None,
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1"},
            "routeKey": f"{method} {route}",
            "stage": "$default",
        },
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
    }


def start(request: str = "refund order A-1042") -> dict[str, Any]:
    return api_event("POST", "/threads", body={"request": request})


def decision(thread_id: str, approve: Any, by: str = "alice") -> dict[str, Any]:
    return api_event("POST", "/threads/{id}/decision", thread_id, {"approve": approve, "by": by})


def status(thread_id: str) -> dict[str, Any]:
    return api_event("GET", "/threads/{id}", thread_id)


def started_thread(app: App) -> str:
    first = app.invoke(start(), T0)
    assert first.status == 201, first.body
    assert first.body["status"] == "pending_approval"
    return str(first.body["thread_id"])


# ------------------------------------------------------------------- tests
def test_approved_days_later_runs_the_action_exactly_once(app: App) -> None:
    first = app.invoke(start("refund order A-1042"), T0)
    assert first.status == 201, first.body
    thread = first.body["thread_id"]
    assert first.body["status"] == "pending_approval"
    assert first.body["approval"]["action"] == (
        "Issue a full refund for order A-1042 and email the customer"
    )
    assert first.body["requested_at"] == "2030-01-07T09:00:00Z"
    assert first.body["deadline"] == "2030-01-14T09:00:00Z"
    assert first.executions == [] and first.body["actions_executed"] == []

    later = app.invoke(status(thread), T0 + timedelta(hours=5))
    assert later.status == 200
    assert later.body["status"] == "pending_approval"
    assert later.body["approval"]["question"] == "Approve this action?"
    pending_checkpoint = later.body["checkpoint_id"]

    approved = app.invoke(decision(thread, True), T0 + timedelta(days=3))
    assert approved.status == 200, approved.body
    assert approved.body["status"] == "completed"
    assert approved.body["decision"] == "approved"
    assert approved.body["decided_by"] == "alice"
    assert approved.body["decided_at"] == "2030-01-10T09:00:00Z"
    assert approved.body["waited_seconds"] == 3 * 24 * 3600
    assert len(approved.executions) == 1
    assert len(approved.body["actions_executed"]) == 1
    receipt = approved.body["actions_executed"][0]
    assert receipt["execution_id"] == approved.executions[0]["execution_id"]
    assert receipt["idempotency_key"] == f"{thread}:action"

    done = app.invoke(status(thread), T0 + timedelta(days=3, minutes=1))
    assert done.status == 200
    assert done.body["status"] == "completed"
    assert done.body["approval"] is None
    assert done.body["actions_executed"] == [receipt]
    assert done.body["checkpoint_id"] > pending_checkpoint

    again = app.invoke(decision(thread, True), T0 + timedelta(days=3, minutes=2))
    assert again.status == 409
    assert again.body["error"] == "already_decided"
    assert again.body["status"] == "completed"
    assert again.executions == []

    ledger = app.ledger_items(thread)
    assert [i["execution_id"]["S"] for i in ledger] == [receipt["execution_id"]]
    assert app.invoke(status(thread), T0 + timedelta(days=4)).body["actions_executed"] == [receipt]


def test_rejected_thread_abandons_the_action(app: App) -> None:
    thread = started_thread(app)

    rejected = app.invoke(decision(thread, False, by="bob"), T0 + timedelta(hours=20))
    assert rejected.status == 200, rejected.body
    assert rejected.body["status"] == "rejected"
    assert rejected.body["decision"] == "rejected"
    assert rejected.body["decided_by"] == "bob"
    assert rejected.body["actions_executed"] == []
    assert rejected.executions == []

    shown = app.invoke(status(thread), T0 + timedelta(days=1))
    assert shown.body["status"] == "rejected"

    late_approval = app.invoke(decision(thread, True), T0 + timedelta(days=1))
    assert late_approval.status == 409
    assert late_approval.body["error"] == "already_decided"
    assert late_approval.body["status"] == "rejected"
    assert late_approval.executions == []
    assert app.ledger_items(thread) == []


def test_approval_after_the_deadline_expires_the_thread(app: App) -> None:
    thread = started_thread(app)

    late = app.invoke(decision(thread, True), T0 + timedelta(days=8))
    assert late.status == 200, late.body
    assert late.body["status"] == "expired"
    assert late.body["actions_executed"] == []
    assert late.executions == []
    assert app.ledger_items(thread) == []


@pytest.mark.parametrize(
    "schedule",
    ["both-saw-pending", "stale-pending-check", "unsynchronised"],
)
def test_racing_approvals_execute_once(app: App, tmp_path: Path, schedule: str) -> None:
    """Two containers approve the same thread at once; the action runs once.

    ``both-saw-pending``: both pass the pending check before either resumes, so only
    the saver's conditional commit can stop one. ``stale-pending-check``: "ben"
    passes the pending check, then "ann" commits her decision before "ben" resumes
    (the case where resuming "the latest checkpoint" would run the action again).
    ``unsynchronised``: no choreography at all.
    """
    thread = started_thread(app)
    roles = {
        "both-saw-pending": {"ann": "peer", "ben": "peer"},
        "stale-pending-check": {"ann": "early", "ben": "late"},
        "unsynchronised": {},
    }[schedule]
    when = T0 + timedelta(days=2)
    procs = {}
    for who in ("ann", "ben"):
        extra = {}
        if who in roles:
            extra = {"LAMBDA_TEST_SYNC_DIR": str(tmp_path), "LAMBDA_TEST_ROLE": roles[who]}
        procs[who] = app.spawn(decision(thread, True, by=who), when, extra)
    results = {who: app.collect(proc) for who, proc in procs.items()}

    assert sorted(r.status for r in results.values()) == [200, 409], {
        who: r.body for who, r in results.items()
    }
    winner = next(r for r in results.values() if r.status == 200)
    loser = next(r for r in results.values() if r.status == 409)
    if schedule == "both-saw-pending":
        assert len(list(tmp_path.iterdir())) == 2  # both really passed the pending check
        assert loser.body["error"] == "conflict"
    elif schedule == "stale-pending-check":
        assert {p.name for p in tmp_path.iterdir()} == {
            "late-checked",
            "early-committed",
            "late-resumed",
        }
        assert results["ann"].status == 200
        assert results["ben"].body["error"] == "conflict"
    else:
        assert loser.body["error"] in ("conflict", "already_decided")
    assert winner.body["status"] == "completed"
    assert sum(len(r.executions) for r in results.values()) == 1
    assert len(app.ledger_items(thread)) == 1

    final = app.invoke(status(thread), when + timedelta(minutes=1))
    assert final.body["status"] == "completed"
    assert final.body["decided_by"] == winner.body["decided_by"]
    assert final.body["actions_executed"] == winner.body["actions_executed"]
    # One linear history: no two checkpoints continue from the same parent.
    parents = [t.parent_config["configurable"]["checkpoint_id"] for t in app.history(thread)[:-1]]
    assert len(parents) == len(set(parents))


def test_bad_requests_are_answered_without_loading_langgraph(app: App) -> None:
    unknown = app.invoke(api_event("DELETE", "/threads/{id}", "x"), T0)
    assert unknown.status == 404
    bad_json = api_event("POST", "/threads")
    bad_json["body"] = "{not json"
    malformed = app.invoke(bad_json, T0)
    assert malformed.status == 400
    not_bool = app.invoke(decision("abc", "yes"), T0)
    assert not_bool.status == 400
    assert "approve" in not_bool.body["message"]
    for result in (unknown, malformed, not_bool):
        assert result.loaded == {"langgraph": False, "boto3": False, "langgraph_s3": False}


def test_unknown_thread_is_404_and_loads_the_runtime_once(app: App) -> None:
    missing = app.invoke(status("no-such-thread"), T0)
    assert missing.status == 404
    assert missing.body["error"] == "not_found"
    assert missing.loaded["langgraph"] is True
    assert app.invoke(decision("no-such-thread", True), T0).status == 404


def test_a_client_chosen_thread_id_starts_once(app: App) -> None:
    body = {"request": "refund order C-9", "thread_id": "order-C-9"}
    first = app.invoke(api_event("POST", "/threads", body=body), T0)
    assert first.status == 201, first.body
    assert first.body["thread_id"] == "order-C-9"
    assert first.body["status"] == "pending_approval"
    again = app.invoke(api_event("POST", "/threads", body=body), T0 + timedelta(minutes=1))
    assert again.status == 409
    assert again.body["error"] == "thread_exists"
    shown = app.invoke(status("order-C-9"), T0 + timedelta(minutes=2))
    assert shown.body["requested_at"] == "2030-01-07T09:00:00Z"  # the first start, untouched


def test_with_a_kms_key_the_threads_are_sealed_and_decided_across_containers(app: App) -> None:
    """CHECKPOINT_KMS_KEY (the template's ClientSideKeyArn): each cold container opens
    the thread with the key; the stored thread has a data key wrapped under it, and a
    saver without the key cannot read it."""
    from langgraph_s3 import S3Saver, SealedObjectError

    kms = boto3.client("kms", region_name=REGION, endpoint_url=app.endpoint)
    arn = kms.create_key()["KeyMetadata"]["Arn"]
    sealed = {"CHECKPOINT_KMS_KEY": arn}
    first = app.invoke(start("refund order K-1"), T0, sealed)
    assert first.status == 201, first.body
    thread = first.body["thread_id"]
    approved = app.invoke(decision(thread, True), T0 + timedelta(days=1), sealed)
    assert approved.status == 200, approved.body
    assert approved.body["status"] == "completed" and len(approved.executions) == 1

    ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=app.endpoint)
    items = ddb.query(
        TableName=app.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"{app.prefix}{thread}"}},
    )["Items"]
    assert [i["kek"]["S"] for i in items if "kek" in i] == [arn]  # one data key, this KMS key
    plain = S3Saver(bucket=app.bucket, table=app.table, prefix=app.prefix,
                    region_name=REGION, endpoint_url=app.endpoint)  # fmt: skip
    with pytest.raises(SealedObjectError):
        plain.get_tuple({"configurable": {"thread_id": thread}})
