"""Run LangGraph's own checkpointer tests against S3Saver and AsyncS3Saver.

    python upstream/harness.py [pytest args...]

Takes the tests from the released ``langgraph`` sdist of the installed version
(downloaded once with pip into ``.upstream-cache/``), and runs every test that
takes upstream's ``sync_checkpointer`` or ``async_checkpointer`` fixture with our
savers plugged in (``lgs3_upstream_plugin.py``) on moto. ``run.py test`` calls it
after the project's own suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE.parent / ".upstream-cache"


def sdist_tree(package: str = "langgraph") -> Path:
    """The unpacked sdist of the installed ``package``, fetched on first use."""
    ver = version(package)
    tree = CACHE / f"{package}-{ver}"
    if (tree / "tests" / "conftest.py").exists():
        return tree
    CACHE.mkdir(exist_ok=True)
    archive = CACHE / f"{package}-{ver}.tar.gz"
    if not archive.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                str(CACHE),
                f"{package}=={ver}",
            ],
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    return tree


def main(argv: list[str]) -> int:
    tree = sdist_tree()
    env = {
        **os.environ,
        "NO_DOCKER": "true",
        "PYTHONPATH": os.pathsep.join([str(HERE), str(tree)]),
    }
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "lgs3_upstream_plugin",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:asyncio",
        "-q",
        "--no-header",
        "-o",
        "addopts=--strict-markers",
        "-n",
        "2",
        "-rfEs",
        *argv,
    ]
    if not any(a.startswith("tests") for a in argv):
        cmd.append("tests")
    result = subprocess.run(cmd, cwd=tree, env=env)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
