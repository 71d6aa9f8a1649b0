"""Every command with bad input, through the console script on a moto server: the
README's exit code, one line on stderr saying what to type next, no traceback, and
nothing created or half-written.

The storage each case names is built per test (a thread ``t1`` written with the
default serializer, ``secret`` with an EncryptedSerializer), so every case runs
against real S3/DynamoDB semantics.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_s3 import S3Saver
from langgraph_s3.archive import export_thread, import_thread
from tests.cli import serdes
from tests.cli.test_commands import SCRIPT
from tests.conftest import REGION, Backend

ENCRYPTED = "tests.cli.serdes:encrypted"
LONG = "x" * 5000


def run(*args: str, env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script with ``args``; ``env`` changes the environment (None: unset)."""
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "langgraph_s3"]
    changed = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "200",
               **(env or {})}  # fmt: skip
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=120,
        env={k: v for k, v in changed.items() if v is not None}, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def put(saver: S3Saver, thread: str, value: Any) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"x": value}
    cp["channel_versions"] = {"x": saver.get_next_version(None, None)}
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saver.put(config, cp, {"step": 0, "source": "input"}, cp["channel_versions"])


@dataclass
class World:
    """The storage of one test and the files around it."""

    backend: Backend
    tmp: Path
    archive: Path = field(init=False)

    def url(self, **changes: str) -> str:
        query = {"table": self.backend.table, "region": REGION,
                 "endpoint_url": self.backend.endpoint_url or "", **changes}  # fmt: skip
        bucket = query.pop("bucket", self.backend.bucket)
        return f"s3://{bucket}?" + "&".join(f"{k}={v}" for k, v in query.items() if v)

    def threads(self) -> list[str]:
        listed = run("--url", self.url(), "threads", "--json")
        assert listed.returncode == 0, listed.stderr
        return sorted(t["thread_id"] for t in json.loads(listed.stdout))


@pytest.fixture
def world(server_backend: Backend, tmp_path: Path) -> World:
    w = World(server_backend, tmp_path)
    with S3Saver(
        bucket=server_backend.bucket, table=server_backend.table, region_name=REGION,
        endpoint_url=server_backend.endpoint_url,
    ) as saver:  # fmt: skip
        saver.setup()
        put(saver, "t1", 1)
        put(saver, "t1", LONG)
        # In-process: `export` (what the command runs) is tested in test_commands; a
        # process per test here cost 1-2.5 s of every test's setup.
        w.archive = tmp_path / "t1.lgs3"
        with w.archive.open("w") as f:
            export_thread(saver, "t1", f)
    with S3Saver(
        bucket=server_backend.bucket, table=server_backend.table, region_name=REGION,
        endpoint_url=server_backend.endpoint_url, serde=serdes.encrypted(),
    ) as saver:  # fmt: skip
        put(saver, "secret", {"card": "4111"})
    return w


def assert_one_line(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """The exit code, exactly one line on stderr holding each needle, no traceback."""
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    # Advice for a shell, not for Python code.
    for python in ("saver.setup()", "region_name", "session=", "serde=", "claim_thread()"):
        assert python not in lines[0], lines[0]


Case = Callable[[World], tuple[list[str], int, list[str]]]

#: (arguments, exit code, what the line says) for one world.
CASES: dict[str, Case] = {
    "no storage named": lambda w: (["threads"], 2, ["--url"]),
    "endpoint without scheme": lambda w: (
        ["--bucket", "b-x", "--table", "t", "--endpoint-url", "127.0.0.1:5077", "threads"],
        2, ["http://127.0.0.1:5077"]),
    "unknown profile": lambda w: (["--url", w.url(), "--profile", "nope", "threads"], 2,
                                  ["'nope'", "--profile"]),
    "unknown region (a 5xx)": lambda w: (["--url", w.url(region="mars-north-7"), "threads"],
                                         3, ["--region"]),
    "misspelt url option": lambda w: (["--url", f"s3://b-x?tabel={w.backend.table}", "threads"],
                                      2, ["'tabel'", "did you mean 'table'"]),
    "not an s3 url": lambda w: (["--url", "http://b-x", "threads"], 2, ["s3://"]),
    "invalid bucket name": lambda w: (["--url", w.url(bucket="My_Bucket"), "threads"], 2,
                                      ["not a valid S3 bucket name"]),
    "missing table": lambda w: (["--url", w.url(table="no-such-table"), "threads"], 3,
                                ["'no-such-table' does not exist", "`langgraph-s3 setup`",
                                 "--region"]),
    # The bucket is found missing by the first S3 request (t1 lives in the index alone;
    # the collector lists the bucket).
    "missing bucket": lambda w: (["--url", w.url(bucket="no-such-bucket-x"), "gc", "--dry-run"],
                                 3, ["'no-such-bucket-x' does not exist", "`langgraph-s3 setup`"]),
    "unreachable endpoint": lambda w: (
        ["--url", w.url(endpoint_url="http://127.0.0.1:9"), "threads"], 3, ["--endpoint-url"]),
    "bad --serde": lambda w: (["--url", w.url(), "--serde", "no_such_module:x", "threads"], 2,
                              ["--serde", "no_such_module"]),
    "--serde not a serializer": lambda w: (["--url", w.url(), "--serde", "os:sep",
                                            "threads"], 2, ["not a serializer"]),
    "show unknown thread": lambda w: (["--url", w.url(), "show", "nosuch"], 1, ["'nosuch'"]),
    "history unknown thread": lambda w: (["--url", w.url(), "history", "nosuch"], 1,
                                         ["'nosuch'"]),
    "stats unknown thread": lambda w: (["--url", w.url(), "stats", "nosuch"], 1, ["'nosuch'"]),
    "diff unknown checkpoint": lambda w: (["--url", w.url(), "diff", "t1", "a", "b"], 1, []),
    "verify unknown thread": lambda w: (["--url", w.url(), "verify", "nosuch"], 1,
                                        ["'nosuch'", "langgraph-s3 threads"]),
    "delete unknown thread": lambda w: (["--url", w.url(), "delete", "nosuch", "--yes"], 1,
                                        ["'nosuch'"]),
    "copy unknown thread": lambda w: (["--url", w.url(), "copy", "nosuch", "newthing",
                                       "--yes"], 1, ["'nosuch'"]),
    "prune unknown thread": lambda w: (["--url", w.url(), "prune", "t1", "nosuch", "--yes"], 1,
                                       ["'nosuch'"]),
    "prune bad strategy": lambda w: (["--url", w.url(), "prune", "t1", "--strategy", "all"], 2,
                                     ["keep_latest"]),
    "claim unknown thread": lambda w: (["--url", w.url(), "--region", "eu-west-1", "claim",
                                        "nosuch", "--home-region", REGION, "--yes"], 1,
                                       ["'nosuch'"]),
    "claim without region": lambda w: (["--bucket", w.backend.bucket, "--table",
                                        w.backend.table, "--endpoint-url",
                                        w.backend.endpoint_url or "", "claim", "t1",
                                        "--home-region", REGION, "--yes"], 2, ["--region"]),
    "export unknown thread": lambda w: (["--url", w.url(), "export", "nosuch", "-o",
                                         str(w.tmp / "nosuch.lgs3")], 1, ["'nosuch'"]),
    "export, endpoint down": lambda w: (["--url", w.url(endpoint_url="http://127.0.0.1:9"),
                                         "export", "t1", "-o", str(w.archive)], 3,
                                        ["--endpoint-url"]),
    "export into a missing directory": lambda w: (
        ["--url", w.url(), "export", "t1", "-o", str(w.tmp / "no" / "t1.lgs3")], 2, ["-o"]),
    "import onto an existing thread": lambda w: (["--url", w.url(), "import", str(w.archive)],
                                                 1, ["ThreadExistsError", "--thread-id"]),
    "import a missing file": lambda w: (["--url", w.url(), "import", str(w.tmp / "none")], 2,
                                        ["does not exist", "langgraph-s3 import --help"]),
    "unknown option": lambda w: (["--url", w.url(), "threads", "--limt", "3"], 2,
                                 ["--limt", "langgraph-s3 threads --help"]),
    "missing argument": lambda w: (["--url", w.url(), "show"], 2, ["THREAD"]),
    "unknown command": lambda w: (["--url", w.url(), "shwo"], 2, ["shwo"]),
    "gc zero idle ttl": lambda w: (["--url", w.url(), "gc", "--idle-ttl", "0s"], 2,
                                   ["--idle-ttl"]),
    "migrate from a missing directory": lambda w: (
        ["--url", w.url(), "migrate", "--from", "sqlite:////nonexistent-dir/x.db"], 2,
        ["no SQLite database", "--from"]),
    "migrate from a missing table": lambda w: (
        ["--url", w.url(), "migrate", "--from",
         f"dynamodb://nope-table?region={REGION}&endpoint_url={w.backend.endpoint_url}"], 3,
        ["'nope-table' does not exist"]),
    "migrate from a misspelt dynamodb option": lambda w: (
        ["--url", w.url(), "migrate", "--from", "dynamodb://t?regoin=x"], 2,
        ["'regoin'", "did you mean 'region'"]),
    "migrate from an unreachable postgres": lambda w: (
        ["--url", w.url(), "migrate", "--from", "postgresql://u:pw@127.0.0.1:9/db"], 3,
        ["PostgreSQL at 127.0.0.1:9", "--from"]),
    "migrate from an unknown scheme": lambda w: (
        ["--url", w.url(), "migrate", "--from", "ftp://x"], 2, ["sqlite:///"]),
    "a KMS alias as --kms-key": lambda w: (["--url", w.url(), "--kms-key", "alias/app",
                                            "show", "t1"], 2, ["alias"]),
    "rekey to a KMS alias": lambda w: (["--url", w.url(), "rekey", "--kms-key", "alias/app"],
                                       2, ["alias"]),
    "delete-tenant with an empty id": lambda w: (["--url", w.url(), "delete-tenant", "",
                                                  "--yes"], 2, ["tenant"]),
    "encrypted thread without --serde": lambda w: (["--url", w.url(), "show", "secret"], 2,
                                                   ["--serde", "UndecodableValueError"]),
    "encrypted thread, wrong key": lambda w: (
        ["--url", w.url(), "--serde", "tests.cli.serdes:other_key", "export", "secret"], 2,
        ["--serde"]),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_with_the_readme_exit_code(world: World, name: str) -> None:
    args, code, needles = CASES[name](world)
    assert_one_line(run(*args), code, *needles)


def test_unknown_threads_create_nothing(world: World) -> None:
    before = world.threads()
    assert before == ["secret", "t1"]
    for args in (["copy", "nosuch", "newthing", "--yes"], ["--region", "eu-west-1", "claim",
                 "nosuch", "--home-region", REGION, "--yes"], ["export", "nosuch", "-o",
                 str(world.tmp / "nosuch.lgs3")]):  # fmt: skip
        assert run("--url", world.url(), *args).returncode == 1
    assert world.threads() == before
    assert not (world.tmp / "nosuch.lgs3").exists()


def test_export_never_leaves_a_partial_file(world: World) -> None:
    """A failed export leaves the previous file as it was, and nothing beside it."""
    before = world.archive.read_bytes()
    down = run("--url", world.url(endpoint_url="http://127.0.0.1:9"), "export", "t1", "-o",
               str(world.archive))  # fmt: skip
    assert down.returncode == 3
    assert world.archive.read_bytes() == before
    assert sorted(p.name for p in world.tmp.iterdir()) == ["t1.lgs3"]
    to_stdout = run("--url", world.url(), "export", "nosuch")
    assert to_stdout.returncode == 1 and to_stdout.stdout == ""


@pytest.mark.parametrize("cut", ["mid-line", "at a line end", "damaged value"])
def test_a_bad_archive_imports_nothing(world: World, cut: str) -> None:
    lines = world.archive.read_text().splitlines(keepends=True)
    assert len(lines) == 3  # header and two checkpoints
    if cut == "mid-line":
        text = "".join(lines)[: len(lines[0]) + len(lines[1]) + len(lines[2]) // 2]
    elif cut == "at a line end":
        text = "".join(lines[:2])
    else:
        record = json.loads(lines[2])
        record["checkpoint"][1] = "not base64!"
        text = "".join(lines[:2]) + json.dumps(record) + "\n"
    bad = world.tmp / "bad.lgs3"
    bad.write_text(text)
    done = run("--url", world.url(), "import", str(bad), "--thread-id", "restored")
    assert_one_line(done, 2, "nothing was imported", "export the thread again")
    assert "restored" not in world.threads()


def test_serde_option_reads_encrypted_threads(world: World) -> None:
    """--serde (or LANGGRAPH_S3_SERDE) reads, verifies, exports and imports a thread
    written with an EncryptedSerializer; without it verify says so, not damage."""
    shown = run("--url", world.url(), "--serde", ENCRYPTED, "show", "secret", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["values"] == {"x": {"card": "4111"}}
    env = {"LANGGRAPH_S3_SERDE": ENCRYPTED}
    assert run("--url", world.url(), "verify", "secret", env=env).returncode == 0
    plain = run("--url", world.url(), "verify", "--json")
    assert plain.returncode == 2, plain.stderr
    report = json.loads(plain.stdout)
    assert report["damaged"] == [] and [u["thread_id"] for u in report["undecodable"]] == ["secret"]
    assert "not damage" in plain.stderr and "--serde" in plain.stderr
    archive = world.tmp / "secret.lgs3"
    assert (
        run("--url", world.url(), "export", "secret", "-o", str(archive), env=env).returncode == 0
    )
    # values stay encrypted in the archive: the serializer's bytes, not msgpack holding
    # "4111" (the text itself may hold "4111" by chance: checkpoint ids are random)
    records = [json.loads(line) for line in archive.read_text().splitlines()[1:]]
    values = [v for r in records for v in (r["checkpoint"], r["metadata"])]
    values += [w[2] for r in records for w in r["writes"]]
    assert values and all(kind.endswith("+aes") for kind, _ in values)
    assert not any(b"4111" in base64.b64decode(data) for _, data in values)
    imported = run("--url", world.url(), "import", str(archive), "--thread-id", "s2", env=env)
    assert imported.returncode == 0, imported.stderr
    again = run("--url", world.url(), "--serde", ENCRYPTED, "show", "s2", "--json")
    assert json.loads(again.stdout)["values"] == {"x": {"card": "4111"}}


def test_show_cuts_long_strings_only_in_the_overview(world: World) -> None:
    overview = run("--url", world.url(), "show", "t1")
    assert overview.returncode == 0 and "<5000 chars>" in overview.stdout
    for args in (["--json"], ["--channel", "x"], ["--channel", "x", "--json"]):
        whole = run("--url", world.url(), "show", "t1", *args)
        assert whole.returncode == 0 and LONG in whole.stdout and "chars>" not in whole.stdout


def test_no_credentials_and_no_region(world: World, tmp_path: Path) -> None:
    nowhere = str(tmp_path / "none")
    bare: dict[str, str | None] = {
        "AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None, "AWS_SESSION_TOKEN": None,
        "AWS_PROFILE": None, "AWS_CONFIG_FILE": nowhere, "AWS_SHARED_CREDENTIALS_FILE": nowhere,
        "AWS_EC2_METADATA_DISABLED": "true",
    }  # fmt: skip
    assert_one_line(run("--url", world.url(), "threads", env=bare), 3, "credentials",
                    "--profile")  # fmt: skip
    no_region: dict[str, str | None] = {
        "AWS_DEFAULT_REGION": None, "AWS_REGION": None, "AWS_CONFIG_FILE": nowhere}  # fmt: skip
    done = run("--url", world.url(region=""), "threads", env=no_region)
    assert_one_line(done, 2, "--region")


def test_missing_sqlite_source_is_not_created(world: World) -> None:
    typo = world.tmp / "typo.db"
    assert_one_line(run("--url", world.url(), "migrate", "--from", f"sqlite:///{typo}"), 2,
                    str(typo))  # fmt: skip
    assert not typo.exists()


def sqlite_source(path: Path, threads: dict[str, int], pad: int = 0) -> str:
    """A SqliteSaver database holding ``threads`` (id: number of chained checkpoints),
    each value followed by ``pad`` random bytes in hex (20_000: a value that needs S3)."""
    with SqliteSaver.from_conn_string(str(path)) as sqlite:
        for thread, count in threads.items():
            conf: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            version = None
            for step in range(count):
                version = sqlite.get_next_version(version, None)
                cp = empty_checkpoint()
                cp["channel_values"] = {"x": f"{thread}{step}{os.urandom(pad).hex()}"}
                cp["channel_versions"] = {"x": version}
                conf = sqlite.put(conf, cp, {"step": step}, cp["channel_versions"])
    return f"sqlite:///{path}"


def test_migrate_resumes_and_says_what_it_did(world: World) -> None:
    """Threads already migrated with the same history are skipped, one half-copied by
    a run that stopped is copied again, a thread with another history fails alone
    (exit 1) and the others are still migrated."""
    source = sqlite_source(world.tmp / "source.db", {"a": 1, "b": 2, "t1": 1, "half": 3})
    first = run("--url", world.url(), "migrate", "--from", source, "--thread", "a")
    assert first.returncode == 0 and "a: migrated" in first.stdout
    # "half" as a stopped run leaves it: its first checkpoint only.
    with SqliteSaver.from_conn_string(source[len("sqlite:///") :]) as sqlite:
        buffer = io.StringIO()
        export_thread(sqlite, "half", buffer)
    header, *records = buffer.getvalue().splitlines(keepends=True)
    partial = json.dumps({**json.loads(header), "checkpoints": 1}) + "\n" + records[0]
    with world.backend.saver() as target:
        import_thread(target, io.StringIO(partial))
    # t1 already exists in the target with another history.
    second = run("--url", world.url(), "migrate", "--from", source, "--json")
    assert second.returncode == 1, second.stderr
    status = {r["thread_id"]: r["status"] for r in json.loads(second.stdout)}
    assert status == {"a": "skipped", "b": "migrated", "t1": "failed", "half": "completed"}
    assert "t1: not migrated" in second.stderr and "1 failed" in second.stderr
    assert world.threads() == ["a", "b", "half", "secret", "t1"]
    with world.backend.saver() as target:
        assert len(list(target.list({"configurable": {"thread_id": "half"}}))) == 3
    third = run("--url", world.url(), "migrate", "--from", source, "--thread", "half")
    assert third.returncode == 0 and "half: skipped" in third.stdout
    missing = run("--url", world.url(), "migrate", "--from", source, "--thread", "nosuch")
    assert missing.returncode == 1 and "'nosuch'" in missing.stderr


def test_migrate_stopped_by_a_storage_error_says_what_is_left(world: World) -> None:
    # The table is there, the bucket is not: the first thread's first write, whose value
    # needs S3, fails.
    source = sqlite_source(world.tmp / "two.db", {"a": 1, "b": 1}, pad=20_000)
    target = world.url(bucket="no-such-bucket-y")
    stopped = run("--url", target, "migrate", "--from", source)
    assert stopped.returncode == 3 and "Traceback" not in stopped.stderr
    summary, error = stopped.stderr.strip().splitlines()
    assert "migrated 0 thread(s)" in summary and "stopped before 2 thread(s): " in summary
    assert {"a", "b"} == set(summary.split(": ", 1)[1].split(" (")[0].split(", "))
    assert "run the same command again to resume" in summary
    assert error.startswith("error: StorageNotFoundError") and "no-such-bucket-y" in error


def test_demo_is_a_command_like_the_others(world: World) -> None:
    helped = run("demo", "--help")
    assert helped.returncode == 0 and "Usage: langgraph-s3 demo" in helped.stdout
    assert "python -m" not in helped.stdout and "<bool>" not in helped.stdout
    bad = run("--endpoint-url", "localhost:1", "demo")
    assert_one_line(bad, 2, "http://")
