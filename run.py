#!/usr/bin/env python3
"""The two commands of the quickstart, on a machine with only Python 3.11:

    python3 run.py demo     # set up .venv if needed, then run the demo
    python3 run.py test     # set up .venv if needed, then run the test suite

Set-up creates ``.venv`` beside this file and installs the package with its
``async`` and ``dev`` extras; it is redone only when ``pyproject.toml`` changes.
Extra arguments are passed on (``python3 run.py test -k conformance``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
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
    print("installing langgraph-s3 with its async and dev extras ...", flush=True)
    subprocess.run(
        [
            str(BIN / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-e",
            f"{ROOT}[async,dev]",
        ],
        check=True,
    )
    STAMP.write_text(wanted)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print(__doc__)
        return 2
    ensure_env()
    if argv[0] == "demo":
        cmd = [str(BIN / "langgraph-s3"), "demo", *argv[1:]]
    else:
        cmd = [str(BIN / "python"), "-m", "pytest", *argv[1:]]
    return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
