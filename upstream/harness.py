"""Run LangGraph's own checkpointer tests against S3Saver and AsyncS3Saver.

    python upstream/harness.py [pytest args...]

Takes the tests from the released ``langgraph`` sdist of the installed version
(downloaded once with pip into ``.upstream-cache/``), and runs every test that
takes upstream's ``sync_checkpointer`` or ``async_checkpointer`` fixture with our
savers plugged in (``lgs3_upstream_plugin.py``) on moto. Then the tests of the
``langgraph-checkpoint`` sdist that exercise a saver through its public API
(``lgs3_checkpoint_plugin.py``). ``run.py test`` calls it after the project's own
suite.
"""

from __future__ import annotations

import os
import re
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
    name = package.replace("-", "_")  # sdists name themselves like this
    tree = CACHE / f"{name}-{ver}"
    if (tree / "tests" / "__init__.py").exists():
        return tree
    CACHE.mkdir(exist_ok=True)
    archive = CACHE / f"{name}-{ver}.tar.gz"
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


def stale_listings(tree: Path) -> list[str]:
    """The tests (and skipped modules) ``upstream_exclusions.py`` lists that ``tree``'s
    suite no longer defines: a test upstream renamed would otherwise stay listed and
    silently lose its rerun (or come back unannounced)."""
    from upstream_exclusions import EXCLUDED, RACES, SKIPPED_MODULES

    stale = [path for path in SKIPPED_MODULES if not (tree / path).is_file()]
    for nodeid in [*EXCLUDED, *RACES]:
        path, _, name = nodeid.partition("::")
        func = name.split("[", 1)[0]
        source = tree / path
        defined = re.compile(rf"^\s*(async\s+)?def {re.escape(func)}\(", re.M)
        if not source.is_file() or not defined.search(source.read_text()):
            stale.append(nodeid)
    return stale


def run_suite(
    package: str,
    plugin: str,
    argv: list[str],
    asyncio: str = "anyio",
    extra_env: dict[str, str] | None = None,
) -> int:
    """Run ``package``'s sdist tests (or ``argv``'s selection) with ``plugin`` loaded.

    ``asyncio`` names the plugin the suite runs its async tests with: langgraph's use
    anyio (pytest-asyncio must stay out of the way), langgraph-checkpoint's
    pytest-asyncio.
    """
    tree = sdist_tree(package)
    if package == "langgraph" and (stale := stale_listings(tree)):
        print(
            f"upstream/upstream_exclusions.py lists tests that langgraph {version(package)} "
            f"does not define: {stale}; remove them, or list them under their new names",
            file=sys.stderr,
        )
        return 2
    env = {
        **os.environ,
        "NO_DOCKER": "true",
        # The caller's PYTHONPATH after ours (a checkout's src/ over an installed copy).
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(HERE), str(tree), os.environ.get("PYTHONPATH", "")) if p
        ),
        **(extra_env or {}),
    }
    cmd = [
        sys.executable, "-m", "pytest", "-p", plugin, "-p", "no:cacheprovider",
        "-q", "--no-header", "-o", "addopts=--strict-markers", "-n", "2", "-rfEs",
    ]  # fmt: skip
    cmd += ["-p", "no:asyncio"] if asyncio == "anyio" else ["-o", "asyncio_mode=auto"]
    cmd += argv
    if not any(a.startswith("tests") for a in argv):
        cmd.append("tests")
    return subprocess.run(cmd, cwd=tree, env=env).returncode


def main(argv: list[str]) -> int:
    """LangGraph's checkpointer tests, then langgraph-checkpoint's public-API tests.

    With arguments, only the ``langgraph`` suite runs, with them (a selection).
    """
    graph = run_suite("langgraph", "lgs3_upstream_plugin", argv)
    if argv:
        return graph
    # The same suite again with both savers sealing everything (issue 24).
    print("LangGraph's tests again, with encryption= on both savers:", flush=True)
    sealed = run_suite(
        "langgraph", "lgs3_upstream_plugin", [], extra_env={"LGS3_UPSTREAM_ENCRYPTION": "1"}
    )
    checkpoint = run_suite(
        "langgraph-checkpoint", "lgs3_checkpoint_plugin", ["-n", "0", "tests/test_memory.py"],
        asyncio="pytest-asyncio",
    )  # fmt: skip
    return graph or sealed or checkpoint


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
