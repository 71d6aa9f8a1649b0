"""The ``langgraph_s3`` logger: requests at DEBUG, conflicts at WARNING."""

from __future__ import annotations

import logging
import os
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_s3 import CheckpointConflictError
from tests.conftest import Backend

ROOT = {"configurable": {"thread_id": "logged", "checkpoint_ns": ""}}


def _put(saver: Any, config: Any, value: str) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": saver.get_next_version(None, None)}
    return saver.put(config, cp, {"step": 0}, dict(cp["channel_versions"]))


def test_each_request_is_a_debug_line(
    inproc_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    saver = inproc_backend.saver()
    with caplog.at_level(logging.DEBUG, logger="langgraph_s3"):
        _put(saver, ROOT, os.urandom(50_000).hex())  # incompressible blobs
        saver.get_tuple(ROOT)
    lines = [r.getMessage() for r in caplog.records if r.name == "langgraph_s3"]
    uploads = [line for line in lines if line.startswith("put_object ")]
    assert uploads and all(" ok " in line and " ms" in line for line in uploads)
    assert any(int(line.split(" bytes")[0].split()[-1]) > 1000 for line in uploads)
    assert any(line.startswith("transact_write_items ") for line in lines)
    assert any(line.startswith("query ") for line in lines)


def test_a_conflict_is_a_warning(inproc_backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    saver = inproc_backend.saver()
    _put(saver, ROOT, "first")
    stale = saver.get_tuple(ROOT)  # a run reads the head ...
    assert stale is not None
    fresh = saver.get_tuple(ROOT)
    assert fresh is not None
    _put(saver, fresh.config, "other run")  # ... another run continues it first
    with (
        caplog.at_level(logging.WARNING, logger="langgraph_s3"),
        pytest.raises(CheckpointConflictError),
    ):
        _put(saver, stale.config, "late")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and "conflict" in warnings[0].getMessage()
    assert "logged" in warnings[0].getMessage()


def test_silent_until_the_application_configures_logging() -> None:
    """With no logging configured, a conflict prints nothing (no last-resort output)."""
    import subprocess
    import sys

    script = (
        "import logging, sys\n"
        "from langgraph_s3.logs import log\n"
        "log.warning('conflict: test')\n"
        "print('handlers', [type(h).__name__ for h in log.handlers])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "NullHandler" in done.stdout
