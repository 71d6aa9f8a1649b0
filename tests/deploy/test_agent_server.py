"""``langgraph dev`` (LangGraph's Agent Server) with ``langgraph_s3.server.checkpointer``.

The server is started as a user would start it: in a directory holding the README's
``langgraph.json`` (read from the section "Serving with LangGraph's Agent Server", so
the two cannot drift) and a graph that pauses for an approval, with the storage named
by ``CHECKPOINT_CONNECTION_STRING`` pointing at a local moto server. The test drives it
with ``langgraph-sdk`` through interrupt, resume, history, a fork with
``update_state`` on an old checkpoint, ``threads.copy``, a run rolled back by
``multitask_strategy="rollback"``, a restart that resumes the fork, and a restart on a
fresh directory (the thread-record caveat), then reads the thread back through a plain
``S3Saver``: the server's checkpoints are ours, in S3 and DynamoDB, not its default
checkpointer's. Nothing in the server's process may look up or connect to a host
other than loopback (``agent_server/netguard``).

The server's dependencies (langgraph-api, langgraph-runtime-inmem) pin what ours do not,
so ``python3 run.py test`` runs this module in ``.venv-agent-server`` with
``LGS3_REQUIRE_AGENT_SERVER=1``, which turns a missing server into a failure; in the
main environment the module is skipped, and that skip hides nothing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import langgraph_sdk
import pytest

from langgraph_s3 import S3Saver
from tests.conftest import REGION, Backend

# langgraph-sdk comes with langgraph, so it is in every venv; the server is not.
if importlib.util.find_spec("langgraph_api") is None:
    if os.environ.get("LGS3_REQUIRE_AGENT_SERVER") == "1":
        raise ImportError("langgraph-api is not installed: pip install 'langgraph-cli[inmem]'")
    pytest.skip(
        "the Agent Server needs its own venv; run.py test runs this module in .venv-agent-server",
        allow_module_level=True,
    )

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "agent_server"
PREFIX = "agents/"
#: How long the server may take to answer /ok after it was started.
START_TIMEOUT = 90.0

# Off for the server's process: LangSmith tracing, the CLI's analytics, the PyPI
# version check; no key, so no licence or metadata reporting (langgraph_api.metadata).
QUIET = {
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "DO_NOT_TRACK": "1",
}
UNSET = (
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGGRAPH_API_KEY",
    "LANGSMITH_CONTROL_PLANE_API_KEY",
    "LANGGRAPH_CLOUD_LICENSE_KEY",
    "LANGSMITH_ENDPOINT",
    "LANGCHAIN_ENDPOINT",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
)


def readme_langgraph_json() -> str:
    """The ```json block of the README's Agent Server section, verbatim."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Serving with LangGraph's Agent Server", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```json\n(.*?)```", section, re.S)
    assert match, "the README's Agent Server section lost its langgraph.json snippet"
    return match.group(1)


def make_app(where: Path) -> Path:
    """A server directory as a user has it: langgraph.json and the graph's file."""
    where.mkdir(parents=True)
    (where / "langgraph.json").write_text(readme_langgraph_json(), encoding="utf-8")
    shutil.copy(HERE / "agent.py", where / "agent.py")
    return where


class ServerExited(RuntimeError):
    """``langgraph dev`` exited before it answered; the message holds its log's end."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class AgentServer:
    """``langgraph dev`` in ``app``, no browser, no reload, on a free loopback port."""

    def __init__(self, app: Path, env: dict[str, str], log: Path) -> None:
        self.app, self.env, self.log = app, env, log
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        langgraph = Path(sys.executable).with_name("langgraph")
        command = [
            str(langgraph), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
            "--port", str(port), "--server-log-level", "INFO",
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            log.write(f"\n=== {' '.join(command)} in {self.app}\n".encode())
            self.process = subprocess.Popen(
                command, cwd=self.app, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        import httpx

        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerExited(
                    f"langgraph dev exited with {self.process.returncode}:\n{self.tail()}"
                )
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        pytest.fail(f"langgraph dev did not answer /ok within {START_TIMEOUT} s:\n{self.tail()}")

    def stop(self) -> None:
        """Stop it as Ctrl-C does: the server saves its thread records and exits the
        checkpointer factory."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"langgraph dev did not stop within 30 s of SIGINT:\n{self.tail()}")

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]

    def client(self) -> Any:
        return langgraph_sdk.get_sync_client(url=self.url, api_key=None)


@contextmanager
def running(server: AgentServer) -> Iterator[Any]:
    server.start()
    try:
        yield server.client()
    finally:
        server.stop()


def server_env(backend: Backend, netguard_log: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(QUIET)
    env.update(
        CHECKPOINT_CONNECTION_STRING=(
            f"s3://{backend.bucket}/{PREFIX}?table={backend.table}&region={REGION}"
            f"&endpoint_url={backend.endpoint_url}"
        ),
        # Fake credentials for moto; the tests' conftest set them in this process.
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        PYTHONPATH=os.pathsep.join([str(HERE / "netguard"), str(ROOT)]),
        LGS3_NETGUARD_LOG=str(netguard_log),
    )
    return env


def stored(saver: S3Saver, thread_id: str) -> dict[str, Any]:
    """checkpoint id -> (parent id, metadata, channel values), read from S3/DynamoDB."""
    return {
        t.config["configurable"]["checkpoint_id"]: (
            (t.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
            t.metadata,
            t.checkpoint["channel_values"],
        )
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    }


def ids(history: list[dict[str, Any]]) -> set[str]:
    return {state["checkpoint"]["checkpoint_id"] for state in history}


def run_ids(saver: S3Saver, thread_id: str) -> set[str]:
    return {metadata.get("run_id") for _, metadata, _ in stored(saver, thread_id).values()}


def rolled_back_by_a_second_run(client: Any, saver: S3Saver, server: AgentServer) -> None:
    """``multitask_strategy="rollback"``: a run started while another is still running
    cancels it, and the server deletes the first run's checkpoints through the saver's
    ``adelete_for_runs`` (our ``by_run`` index)."""
    thread_id = client.threads.create(graph_id="agent")["thread_id"]
    first = client.runs.create(thread_id, "agent", input={"request": "slow refund"})["run_id"]
    deadline = time.monotonic() + 30
    while first not in run_ids(saver, thread_id):  # its input checkpoint is written
        assert time.monotonic() < deadline, f"the first run wrote nothing:\n{server.tail()}"
        time.sleep(0.1)
    second = client.runs.create(
        thread_id, "agent", input={"request": "refund 90 EUR"}, multitask_strategy="rollback"
    )["run_id"]
    client.runs.join(thread_id, second)
    assert run_ids(saver, thread_id) == {second}
    assert client.threads.get_state(thread_id)["values"]["log"] == ["drafted refund 90 EUR"]
    assert [run["run_id"] for run in client.runs.list(thread_id)] == [second]


def test_a_thread_through_the_agent_server(server_backend: Backend, tmp_path: Path) -> None:
    """Interrupt, resume, history, fork, copy, rollback and two restarts through
    ``langgraph dev``; every checkpoint the server shows is one a plain S3Saver reads."""
    netguard_log = tmp_path / "outside-hosts.log"
    env = server_env(server_backend, netguard_log)
    server = AgentServer(make_app(tmp_path / "app"), env, tmp_path / "server.log")
    saver = server_backend.saver(prefix=PREFIX)

    with running(server) as client:
        thread_id = client.threads.create(graph_id="agent")["thread_id"]
        paused = client.runs.wait(thread_id, "agent", input={"request": "refund 30 EUR"})
        assert paused["__interrupt__"][0]["value"] == "approve refund 30 EUR?", server.tail()
        waiting = client.threads.get_state(thread_id)
        assert waiting["next"] == ["approve"]
        waiting_id = waiting["checkpoint"]["checkpoint_id"]

        done = client.runs.wait(thread_id, "agent", command={"resume": "approved"})
        assert done["log"] == ["drafted refund 30 EUR", "refund 30 EUR: approved"]
        history = client.threads.get_history(thread_id, limit=100)
        assert [s["metadata"]["step"] for s in history] == [2, 1, 0, -1]
        in_s3 = stored(saver, thread_id)
        assert set(in_s3) == ids(history)
        # The server's adapter adds graph_id and the run id to the metadata it hands us.
        assert in_s3[waiting_id][1]["graph_id"] == "agent"

        # Time travel: a fork from the checkpoint that waited for the approval.
        forked = client.threads.update_state(
            thread_id, {"request": "refund 50 EUR"}, checkpoint_id=waiting_id
        )
        fork_id = forked["checkpoint"]["checkpoint_id"]
        assert stored(saver, thread_id)[fork_id][0] == waiting_id
        paused = client.runs.wait(thread_id, "agent", input=None)
        assert paused["__interrupt__"][0]["value"] == "approve refund 50 EUR?"

        copy_id = client.threads.copy(thread_id)["thread_id"]
        assert set(stored(saver, copy_id)) == set(stored(saver, thread_id))

        rolled_back_by_a_second_run(client, saver, server)

    # A restart on the same directory: the server finds the thread and resumes the fork.
    with running(server) as client:
        assert client.threads.get_state(thread_id)["next"] == ["approve"]
        done = client.runs.wait(thread_id, "agent", command={"resume": "rejected"})
        assert done["log"] == ["drafted refund 30 EUR", "refund 50 EUR: rejected"]
        history = client.threads.get_history(thread_id, limit=100)

    in_s3 = stored(saver, thread_id)
    assert set(in_s3) == ids(history)
    latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    assert latest is not None
    assert latest.checkpoint["channel_values"]["log"] == done["log"]
    assert (
        latest.config["configurable"]["checkpoint_id"] == history[0]["checkpoint"]["checkpoint_id"]
    )

    # A fresh server directory knows no thread, though its checkpoints are in S3; it is
    # recreated with its graph_id metadata as the README says, and reads them back.
    fresh = AgentServer(make_app(tmp_path / "fresh"), env, tmp_path / "server.log")
    with running(fresh) as client:
        with pytest.raises(langgraph_sdk.errors.NotFoundError):
            client.threads.get(thread_id)
        client.threads.create(thread_id=thread_id, metadata={"graph_id": "agent"})
        assert client.threads.get_state(thread_id)["values"]["log"] == done["log"]
        assert ids(client.threads.get_history(thread_id, limit=100)) == set(in_s3)
        paused = client.runs.wait(thread_id, "agent", input={"request": "refund 70 EUR"})
        assert paused["__interrupt__"][0]["value"] == "approve refund 70 EUR?"
        done = client.runs.wait(thread_id, "agent", command={"resume": "approved"})
        history = client.threads.get_history(thread_id, limit=100)
    assert done["log"][-2:] == ["drafted refund 70 EUR", "refund 70 EUR: approved"]
    assert set(stored(saver, thread_id)) == ids(history)

    assert "Using custom checkpointer: AsyncS3Saver" in server.tail(10**7)
    outside = netguard_log.read_text() if netguard_log.exists() else ""
    assert outside == "", f"the server tried to reach hosts other than loopback:\n{outside}"


def test_the_server_refuses_to_start_without_the_connection_string(
    server_backend: Backend, tmp_path: Path
) -> None:
    """Without CHECKPOINT_CONNECTION_STRING the server stops at start-up with our
    InvalidConfigError, which says what to set."""
    env = server_env(server_backend, tmp_path / "outside-hosts.log")
    del env["CHECKPOINT_CONNECTION_STRING"]
    server = AgentServer(make_app(tmp_path / "app"), env, tmp_path / "server.log")
    with pytest.raises(ServerExited):
        server.start()
    assert "InvalidConfigError: CHECKPOINT_CONNECTION_STRING is not set" in server.tail(10**7)
