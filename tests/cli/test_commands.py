"""The ``langgraph-s3`` commands end to end, through the console script, on a moto server.

One thread made by a real graph (paused on an interrupt, then forked by
``update_state`` on an older checkpoint) is inspected, exported and imported, checked
and damaged; a SqliteSaver database and a DynamoDBSaver table are migrated and their
threads resumed on S3Saver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from langgraph_checkpoint_aws import DynamoDBSaver

from langgraph_s3 import S3Saver
from tests.conftest import REGION, Backend, create_keyed_table
from tests.graphs.test_graphs import Calls, build_approval, cfg, history_summary

SCRIPT = Path(sys.executable).with_name("langgraph-s3")


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "langgraph_s3"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "200"}
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, timeout=120, input=stdin
    )


def url(backend: Backend, prefix: str = "") -> str:
    return (
        f"s3://{backend.bucket}/{prefix}?table={backend.table}&region={REGION}"
        f"&endpoint_url={backend.endpoint_url}"
    )


def forked_thread(saver: Any, thread: str) -> list[str]:
    """Pause on the interrupt, then fork from the first checkpoint: returns the ids."""
    graph = build_approval(saver, Calls())
    graph.invoke({"request": "r1"}, cfg(thread))
    history = list(graph.get_state_history(cfg(thread)))
    oldest = history[-1].config
    graph.update_state(oldest, {"request": "forked"})
    return [s.config["configurable"]["checkpoint_id"] for s in history]


@pytest.fixture
def thread(server_backend: Backend) -> tuple[Backend, list[str]]:
    with S3Saver(
        bucket=server_backend.bucket,
        table=server_backend.table,
        region_name=REGION,
        endpoint_url=server_backend.endpoint_url,
        index_inline_limit=0,
    ) as saver:  # fmt: skip (bodies in S3, so there are objects to damage)
        ids = forked_thread(saver, "t1")
    return server_backend, ids


def test_read_commands_and_their_json(thread: tuple[Backend, list[str]]) -> None:
    backend, ids = thread
    where = url(backend)
    listed = run("--url", where, "threads", "--json")
    assert listed.returncode == 0, listed.stderr
    (summary,) = json.loads(listed.stdout)
    assert summary["thread_id"] == "t1" and summary["checkpoints"] == len(ids) + 1
    waiting = json.loads(run("--url", where, "threads", "--interrupted", "--json").stdout)
    assert waiting == []  # the fork is the latest checkpoint, and it has no interrupt

    rows = json.loads(run("--url", where, "history", "t1", "--json").stdout)
    assert {r["checkpoint_id"] for r in rows} >= set(ids)
    forks = [
        p for p in {r["parent_id"] for r in rows} if sum(r["parent_id"] == p for r in rows) > 1
    ]
    assert forks == [ids[-1]]  # the first checkpoint has two children
    tree = run("--url", where, "history", "t1")
    assert tree.returncode == 0 and "fork: 2 branches" in tree.stdout

    paused = json.loads(run("--url", where, "show", "t1", ids[0], "--json").stdout)
    assert paused["interrupts"][0]["value"]["question"] == "approve?"
    assert paused["values"]["draft"] == "refund r1"
    one = json.loads(run("--url", where, "show", "t1", "--channel", "request", "--json").stdout)
    assert one["values"] == {"request": "forked"}

    changes = json.loads(run("--url", where, "diff", "t1", ids[-1], ids[0], "--json").stdout)
    assert changes["added"]["request"] == "r1" and changes["added"]["draft"] == "refund r1"
    assert "__start__" in changes["removed"]

    figures = json.loads(run("--url", where, "stats", "--json").stdout)
    assert figures["threads"] == 1 and figures["checkpoints"] == len(ids) + 1
    assert figures["monthly_storage_usd"] >= 0 and figures["prices"]["s3_gb_month"] > 0
    one = json.loads(run("--url", where, "stats", "t1", "--json").stdout)
    assert one["checkpoints"] == len(ids) + 1 and one["compression_ratio"] > 1
    assert one["bytes_uncompressed"] > one["object_bytes"]
    assert "compression_ratio" not in figures  # reading every object back is opt-in
    every = json.loads(run("--url", where, "stats", "--measure", "--json").stdout)
    assert {k: every[k] for k in one} == one  # one thread: the same figures

    checked = run("--url", where, "verify", "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["damaged"] == []
    assert run("--url", where, "show", "no-such-thread").returncode == 1


def test_export_import_round_trips_a_thread(
    thread: tuple[Backend, list[str]], tmp_path: Path
) -> None:
    backend, _ = thread
    archive = tmp_path / "t1.jsonl"
    exported = run("--url", url(backend), "export", "t1", "-o", str(archive))
    assert exported.returncode == 0, exported.stderr
    imported = run("--url", url(backend, "restored/"), "import", str(archive))
    assert imported.returncode == 0, imported.stderr
    again = run("--url", url(backend, "restored/"), "import", str(archive))
    assert again.returncode == 1 and "ThreadExistsError" in again.stderr

    def history(prefix: str) -> list[Any]:
        saver = backend.saver(prefix=prefix)
        snaps = list(build_approval(saver, Calls()).get_state_history(cfg("t1")))
        return [(s.config, s.parent_config, s.values, s.metadata, s.next, s.tasks) for s in snaps]

    assert history("restored/") == history("")
    assert run("--url", url(backend), "import", str(tmp_path / "missing")).returncode == 2
    (tmp_path / "bad.jsonl").write_text('{"format": "other"}\n')
    bad = run("--url", url(backend, "x/"), "import", str(tmp_path / "bad.jsonl"))
    assert bad.returncode == 2 and "not a langgraph-s3-archive" in bad.stderr


def test_export_import_round_trips_chunk_items(server_backend: Backend, tmp_path: Path) -> None:
    """A thread whose values are chunk items (a 30 KB request compresses to a small
    chunk) exports and imports into a thread that reads the same, its chunks items
    again."""
    request = "#1 " + "".join(f"{i:06d}" for i in range(5_000))
    build_approval(server_backend.saver(), Calls()).invoke({"request": request}, cfg("big"))
    assert server_backend.chunk_items("big")
    archive = tmp_path / "big.jsonl"
    assert run("--url", url(server_backend), "export", "big", "-o", str(archive)).returncode == 0
    imported = run("--url", url(server_backend, "restored/"), "import", str(archive))
    assert imported.returncode == 0, imported.stderr
    assert server_backend.chunk_items("restored/big")

    def history(prefix: str) -> list[Any]:
        saver = server_backend.saver(prefix=prefix)
        snaps = list(build_approval(saver, Calls()).get_state_history(cfg("big")))
        return [(s.config, s.parent_config, s.values, s.metadata, s.next, s.tasks) for s in snaps]

    assert history("restored/") == history("")


def test_changing_commands_ask_first_and_verify_finds_damage(
    thread: tuple[Backend, list[str]],
) -> None:
    backend, _ = thread
    where = url(backend)
    dry = run("--url", where, "delete", "t1", "--dry-run")
    assert dry.returncode == 0 and "would delete" in dry.stdout
    refused = run("--url", where, "delete", "t1", stdin="n\n")
    assert refused.returncode == 1
    assert run("--url", where, "copy", "t1", "t2", "--yes").returncode == 0
    assert run("--url", where, "prune", "t2", "--yes").returncode == 0
    threads = {
        t["thread_id"]: t for t in json.loads(run("--url", where, "threads", "--json").stdout)
    }
    assert threads["t2"]["checkpoints"] < threads["t1"]["checkpoints"]

    s3 = backend.s3()
    body = next(k for k in backend.object_keys() if k.startswith("t1/c/"))
    s3.delete_object(Bucket=backend.bucket, Key=body)
    damaged = run("--url", where, "verify", "t1", "--json")
    assert damaged.returncode == 1
    assert json.loads(damaged.stdout)["damaged"][0]["thread_id"] == "t1"
    assert run("--url", where, "delete", "t1", "--yes").returncode == 0
    assert [
        t["thread_id"] for t in json.loads(run("--url", where, "threads", "--json").stdout)
    ] == ["t2"]


def test_verify_reports_an_item_that_does_not_say_which_checkpoint_it_is(
    server_backend: Backend,
) -> None:
    """A long thread id's key holds it hashed, so its checkpoint items keep ``th``
    (layout 9); one without it is reported as damaged under its partition key."""
    long_id = "t" * 200
    with server_backend.saver() as saver:
        ids = forked_thread(saver, long_id)
    item = next(i for i in server_backend.items() if "h" in i and "th" in i)
    server_backend.dynamodb().update_item(
        TableName=server_backend.table,
        Key={"pk": item["pk"], "sk": item["sk"]},
        UpdateExpression="REMOVE th",
    )
    checked = run("--url", url(server_backend), "verify", "--json")
    assert checked.returncode == 1, checked.stderr
    [found] = json.loads(checked.stdout)["damaged"]
    assert found["thread_id"] == item["pk"]["S"] and found["checkpoint_id"] in ids
    assert "names no thread" in found["error"]


def test_migrate_from_sqlite_and_resume_on_s3(server_backend: Backend, tmp_path: Path) -> None:
    """A SqliteSaver database written by a real graph (interrupt and fork) is copied;
    both threads then resume on S3Saver exactly as they resume on SqliteSaver."""
    database = tmp_path / "checkpoints.db"
    with SqliteSaver.from_conn_string(str(database)) as sqlite:
        forked_thread(sqlite, "a")
        build_approval(sqlite, Calls()).invoke({"request": "r2"}, cfg("b"))
    migrated = run(
        "--url", url(server_backend), "migrate", "--from", f"sqlite:///{database}", "--json"
    )
    assert migrated.returncode == 0, migrated.stderr
    assert sorted(c["thread_id"] for c in json.loads(migrated.stdout)) == ["a", "b"]

    for thread in ("a", "b"):
        with SqliteSaver.from_conn_string(str(database)) as sqlite:
            expected = resumed(sqlite, thread)
        assert resumed(server_backend.saver(), thread) == expected
    unknown = run("--url", url(server_backend), "migrate", "--from", "ftp://x")
    assert unknown.returncode == 2 and "sqlite:///" in unknown.stderr


def resumed(saver: Any, thread: str) -> list[list[dict[str, Any]]]:
    """A thread's history, then its history after approving the interrupt."""
    graph = build_approval(saver, Calls())
    before = history_summary(graph.get_state_history(cfg(thread)))
    graph.invoke(Command(resume=True), cfg(thread))
    return [before, history_summary(graph.get_state_history(cfg(thread)))]


def test_migrate_from_dynamodb_saver_and_resume_on_s3(server_backend: Backend) -> None:
    """DynamoDBSaver (langgraph-checkpoint-aws) lists checkpoints of one thread only;
    migrate finds its threads by scanning its table, then copies them exactly."""
    table = server_backend.table + "-ddbsaver"
    create_keyed_table(server_backend.dynamodb(), table, "PK", "SK")
    endpoint = server_backend.endpoint_url or ""

    def source() -> DynamoDBSaver:
        return DynamoDBSaver(table_name=table, region_name=REGION, endpoint_url=endpoint)

    forked_thread(source(), "a")
    build_approval(source(), Calls()).invoke({"request": "r2"}, cfg("b/with:odd chars"))
    origin = f"dynamodb://{table}?region={REGION}&endpoint_url={endpoint}"
    migrated = run("--url", url(server_backend), "migrate", "--from", origin, "--json")
    assert migrated.returncode == 0, migrated.stderr
    copied = {c["thread_id"]: c for c in json.loads(migrated.stdout)}
    assert sorted(copied) == ["a", "b/with:odd chars"]
    assert copied["a"]["checkpoints"] == len(list(source().list(cfg("a"))))
    for thread in copied:
        expected = resumed(source(), thread)
        assert resumed(server_backend.saver(), thread) == expected
    typo = run("--url", url(server_backend), "migrate", "--from", f"dynamodb://{table}?regoin=x")
    assert typo.returncode == 2 and "regoin" in typo.stderr and "region" in typo.stderr
