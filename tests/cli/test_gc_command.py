"""``langgraph-s3 gc`` through the console script: the storage stack's connection
string, and the documented exit codes (0 ok, 1 damage, 2 usage, 3 storage or access)
with a one-line message instead of a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REGION, Backend

SCRIPT = Path(sys.executable).with_name("langgraph-s3")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "langgraph_s3"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_console_script_is_installed() -> None:
    assert SCRIPT.exists() or shutil.which("langgraph-s3"), "pip install -e . makes it"


def test_gc_with_a_connection_string_and_its_exit_codes(server_backend: Backend) -> None:
    url = (
        f"s3://{server_backend.bucket}?table={server_backend.table}&region={REGION}"
        f"&endpoint_url={server_backend.endpoint_url}"
    )
    ok = run("--url", url, "gc", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["errors"] == []
    assert "\r" not in ok.stderr  # no progress bar when stderr is not a terminal

    usage = run("--url", url, "gc", "--idle-ttl", "0s")
    assert usage.returncode == 2 and "--idle-ttl must be longer than 0" in usage.stderr
    assert run("--bucket", "b", "gc").returncode == 2  # no table

    missing = url.replace(server_backend.table, "no-such-table")
    storage = run("--connection-string", missing, "gc")
    assert storage.returncode == 3
    assert "StorageNotFoundError" in storage.stderr and "no-such-table" in storage.stderr
    assert "Traceback" not in storage.stderr
    debug = run("--connection-string", missing, "--debug", "gc")
    assert debug.returncode != 0 and "Traceback" in debug.stderr
