#!/usr/bin/env python3
"""The two commands of the quickstart, on a machine with only Python 3.11:

    python3 run.py demo     # set up .venv if needed, then run the demo
    python3 run.py test     # set up .venv if needed, then run all the tests

``test`` runs, and fails if any of them fails:

1. the core's line and branch coverage by its own tests (``tests/core``, no moto;
   at least 95% of lines);
2. the project's suite (``tests/``);
3. ``tests/storage/test_aioboto3_clients.py`` again in ``.venv-aioboto3``, where
   aioboto3 (which pins an older aiobotocore than our ``async`` extra) is installed;
4. ``tests/deploy/test_agent_server.py`` in ``.venv-agent-server``, where LangGraph's
   Agent Server (``langgraph dev``) is installed, serving a graph with
   ``langgraph_s3.server.checkpointer``;
5. the project's suite on Python 3.13 in ``.venv-3.13``, when a ``python3.13`` is on
   PATH or under pyenv (otherwise it says the leg was not run);
6. LangGraph's own checkpointer tests against S3Saver and AsyncS3Saver
   (``upstream/harness.py``);
7. that ``langgraph-s3[async]`` resolves beside the newest ``langgraph-checkpoint-aws``
   and ``langchain-aws`` (``tools/check_resolution.py``).

With extra arguments it runs only the project's suite with them
(``python3 run.py test -k conformance``); ``python3 run.py upstream [pytest args]``
runs only LangGraph's tests.

Set-up creates ``.venv`` beside this file and installs the package with its
``async`` and ``testing`` extras and the ``dev`` dependency group of
``pyproject.toml``; each venv is re-installed only when ``pyproject.toml`` or its
requirement list changes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")


def dev_group() -> list[str]:
    # The group is read here rather than with `pip install --group`, which needs a
    # newer pip than the one a fresh Python 3.11 venv brings.
    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["dependency-groups"]["dev"])


def ensure_venv(path: Path, interpreter: str | None, requirements: list[str]) -> Path:
    """``path`` with ``requirements`` installed (redone only when they or pyproject.toml
    change); its python."""
    bin_dir = path / ("Scripts" if os.name == "nt" else "bin")
    stamp = path / ".langgraph-s3-installed"
    wanted = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + "\n".join(requirements).encode()
    ).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return bin_dir / "python"
    if not (bin_dir / "python").exists():
        print(f"creating {path} ...", flush=True)
        if interpreter is None:
            venv.EnvBuilder(with_pip=True).create(path)
        else:
            subprocess.run([interpreter, "-m", "venv", str(path)], check=True)
    print(f"installing into {path.name}: {' '.join(requirements[:3])} ...", flush=True)
    subprocess.run(
        [
            str(bin_dir / "python"), "-m", "pip", "install", "--quiet",
            "--disable-pip-version-check", *requirements,
        ],
        check=True,
    )  # fmt: skip
    stamp.write_text(wanted)
    return bin_dir / "python"


def ensure_env() -> None:
    ensure_venv(VENV, None, ["-e", f"{ROOT}[async,testing]", *dev_group()])


def pinned(*names: str) -> list[str]:
    """The dev group's requirements for these distributions."""
    return [r for r in dev_group() if re.split(r"[<>=\[ ]", r, maxsplit=1)[0] in names]


#: aioboto3's newest release; it pins aiobotocore 2.25, so it gets its own venv.
AIOBOTO3 = "aioboto3==15.5.0"


def aioboto3_check() -> int:
    """Run tests/storage/test_aioboto3_clients.py where aioboto3 is installed: our
    package without the ``async`` extra beside aioboto3, whose aiobotocore pin wins."""
    print(f"AsyncS3Saver with {AIOBOTO3} sessions and clients (.venv-aioboto3):", flush=True)
    python = ensure_venv(
        ROOT / ".venv-aioboto3",
        None,
        [AIOBOTO3, "-e", f"{ROOT}[testing]",
         *pinned("pytest", "pytest-asyncio", "pytest-xdist", "langgraph")],
    )  # fmt: skip
    env = {**os.environ, "LGS3_REQUIRE_AIOBOTO3": "1"}
    test = "tests/storage/test_aioboto3_clients.py"
    return subprocess.run(
        [str(python), "-m", "pytest", test, "-q", "-n", "0"], cwd=ROOT, env=env
    ).returncode


#: The Agent Server releases tests/deploy/test_agent_server.py passes with. The server
#: brings a large stack with narrow pins of its own (grpcio, grpcio-tools, protobuf,
#: langgraph-runtime-inmem), kept out of .venv; bump these together after a green run.
AGENT_SERVER = [
    "langgraph-cli[inmem]==0.4.40",
    "langgraph-api==0.16.7",
    "langgraph-runtime-inmem==0.36.7",
    "langgraph-sdk==0.4.14",
]


def agent_server_check() -> int:
    """Run tests/deploy/test_agent_server.py where the Agent Server is installed: it
    starts ``langgraph dev`` with our checkpointer factory against a local moto."""
    print("langgraph dev with langgraph_s3.server.checkpointer (.venv-agent-server):", flush=True)
    python = ensure_venv(
        ROOT / ".venv-agent-server",
        None,
        [*AGENT_SERVER, "-e", f"{ROOT}[async,testing]",
         *pinned("pytest", "pytest-asyncio", "pytest-xdist")],
    )  # fmt: skip
    env = {**os.environ, "LGS3_REQUIRE_AGENT_SERVER": "1"}
    test = "tests/deploy/test_agent_server.py"
    return subprocess.run(
        [str(python), "-m", "pytest", test, "-q", "-n", "0", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
    ).returncode


def find_python(version: str) -> str | None:
    """A working interpreter of ``version`` (e.g. "3.13") on PATH or under pyenv."""
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(
        str(p) for p in Path.home().glob(f".pyenv/versions/{version}*/bin/python{version}")
    )
    for candidate in candidates:
        # A pyenv shim is on PATH even when that version is not selected; it then fails.
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return None


#: The other Python the classifiers claim; the suite runs there too when it exists.
OTHER_PYTHON = "3.13"


def other_python_leg() -> int | None:
    """Our suite on Python 3.13 in .venv-3.13, or None when no 3.13 is installed."""
    interpreter = find_python(OTHER_PYTHON)
    if interpreter is None:
        print(f"Python {OTHER_PYTHON} leg NOT RUN: no python{OTHER_PYTHON} on this machine")
        return None
    print(f"project tests on Python {OTHER_PYTHON} ({interpreter}):", flush=True)
    python = ensure_venv(
        ROOT / f".venv-{OTHER_PYTHON}", interpreter, ["-e", f"{ROOT}[async,testing]", *dev_group()]
    )
    return subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=ROOT
    ).returncode


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
    aioboto3 = aioboto3_check()
    agent_server = agent_server_check()
    other = other_python_leg()
    upstream = subprocess.run([python, "upstream/harness.py"], cwd=ROOT).returncode
    resolution = subprocess.run([python, "tools/check_resolution.py"], cwd=ROOT).returncode
    verdict = {0: "passed", None: "not run (no interpreter)"}
    print(
        f"core coverage: {verdict.get(coverage, 'FAILED')}; "
        f"project tests: {verdict.get(ours, 'FAILED')}; "
        f"with aioboto3: {verdict.get(aioboto3, 'FAILED')}; "
        f"behind the Agent Server: {verdict.get(agent_server, 'FAILED')}; "
        f"on Python {OTHER_PYTHON}: {verdict.get(other, 'FAILED')}; "
        f"LangGraph's tests: {verdict.get(upstream, 'FAILED')}; "
        f"resolution beside the AWS stack: {verdict.get(resolution, 'FAILED')}"
    )
    return coverage or ours or aioboto3 or agent_server or other or upstream or resolution


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
