#!/usr/bin/env python3
"""The two commands of the quickstart, on a machine with only Python 3.11:

    python3 run.py demo     # set up .venv if needed, then run the demo
    python3 run.py test     # set up .venv if needed, then run all the tests

``test`` measures the core's coverage by its own tests (``tests/core``: line and
branch coverage of ``langgraph_s3.core``, at least 95% of lines), runs the project's
suite (``tests/``), then LangGraph's own checkpointer
tests against S3Saver and AsyncS3Saver (``upstream/harness.py``), then checks that
``langgraph-s3[async]`` resolves beside the newest ``langgraph-checkpoint-aws`` and
``langchain-aws`` (``tools/check_resolution.py``), and fails if any of them fails.
With extra arguments it runs only the project's suite with them
(``python3 run.py test -k conformance``); ``python3 run.py upstream [pytest args]``
runs only LangGraph's tests.

Set-up creates ``.venv`` beside this file and installs the package with its
``async`` and ``testing`` extras and the ``dev`` dependency group of
``pyproject.toml``; it is redone only when ``pyproject.toml`` changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".langgraph-s3-installed"


def ensure_env() -> None:
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not (BIN / "python").exists():
        print(f"creating {VENV} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("installing langgraph-s3 with its async and testing extras and dev group ...", flush=True)
    # The group is read here rather than with `pip install --group`, which needs a
    # newer pip than the one a fresh Python 3.11 venv brings.
    with open(ROOT / "pyproject.toml", "rb") as f:
        dev = tomllib.load(f)["dependency-groups"]["dev"]
    subprocess.run(
        [
            str(BIN / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "-e", f"{ROOT}[async,testing]", *dev,
        ],
        check=True,
    )  # fmt: skip
    STAMP.write_text(wanted)


def core_coverage(python: str) -> int:
    """Line and branch coverage of the core by its own tests (no moto): printed, and
    failing under the ``fail_under`` of ``[tool.coverage.report]`` in pyproject.toml."""
    print("core coverage by tests/core (no moto):", flush=True)
    # -n 0: coverage does not follow pytest-xdist's workers.
    run = [python, "-m", "coverage", "run", "-m", "pytest", "tests/core", "-q", "-n", "0"]
    code = subprocess.run(run, cwd=ROOT).returncode
    report = subprocess.run([python, "-m", "coverage", "report"], cwd=ROOT).returncode
    return code or report


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test", "upstream"):
        print(__doc__)
        return 2
    ensure_env()
    python = str(BIN / "python")
    if argv[0] == "demo":
        return subprocess.run([str(BIN / "langgraph-s3"), "demo", *argv[1:]], cwd=ROOT).returncode
    if argv[0] == "upstream":
        return subprocess.run([python, "upstream/harness.py", *argv[1:]], cwd=ROOT).returncode
    if argv[1:]:
        return subprocess.run([python, "-m", "pytest", *argv[1:]], cwd=ROOT).returncode
    coverage = core_coverage(python)
    ours = subprocess.run([python, "-m", "pytest"], cwd=ROOT).returncode
    upstream = subprocess.run([python, "upstream/harness.py"], cwd=ROOT).returncode
    resolution = subprocess.run([python, "tools/check_resolution.py"], cwd=ROOT).returncode
    verdict = {0: "passed"}
    print(
        f"core coverage: {verdict.get(coverage, 'FAILED')}; "
        f"project tests: {verdict.get(ours, 'FAILED')}; "
        f"LangGraph's tests: {verdict.get(upstream, 'FAILED')}; "
        f"resolution beside the AWS stack: {verdict.get(resolution, 'FAILED')}"
    )
    return coverage or ours or upstream or resolution


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
