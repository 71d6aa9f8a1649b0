"""Check that langgraph-s3[async] installs beside the AWS LangGraph stack without
holding it back.

    python tools/check_resolution.py

Asks pip (dry run, nothing installed) to resolve this project with its ``async``
extra together with ``langgraph-checkpoint-aws`` and ``langchain-aws``, and fails
unless pip picks the newest release of each of those two and resolves within the
time limit. Needs the package index; ``run.py test`` runs it after the tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEIGHBOURS = ("langgraph-checkpoint-aws", "langchain-aws")
LIMIT_SECONDS = 120.0


def newest(package: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # First line: "NAME (VERSION)"
    return out.splitlines()[0].split("(", 1)[1].rstrip(")")


def resolve() -> tuple[dict[str, str], float]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                "--quiet", "--disable-pip-version-check", "--report", str(report),
                f"{ROOT}[async]", *NEIGHBOURS,
            ],
            check=True,
        )  # fmt: skip
        elapsed = time.perf_counter() - started
        chosen = {
            item["metadata"]["name"].lower(): item["metadata"]["version"]
            for item in json.loads(report.read_text())["install"]
        }
    return chosen, elapsed


def main() -> int:
    chosen, elapsed = resolve()
    problems = []
    for package in NEIGHBOURS:
        want = newest(package)
        got = chosen.get(package)
        print(f"{package}: resolved {got}, newest {want}")
        if got != want:
            problems.append(f"{package} {got} is not the newest release {want}")
    print(f"boto3 {chosen.get('boto3')}, aiobotocore {chosen.get('aiobotocore')}; "
          f"resolved in {elapsed:.1f} s")  # fmt: skip
    if elapsed > LIMIT_SECONDS:
        problems.append(f"resolution took {elapsed:.0f} s (limit {LIMIT_SECONDS:.0f} s)")
    for problem in problems:
        print("FAIL:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
