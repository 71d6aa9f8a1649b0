"""pytest plugin: LangGraph's own checkpointer tests with S3Saver and AsyncS3Saver.

Loaded by ``upstream/harness.py`` into a pytest run inside the unpacked ``langgraph``
sdist. Upstream's ``sync_checkpointer`` / ``async_checkpointer`` fixtures build their
"memory" saver; this plugin makes that saver ours: S3Saver on moto in-process
(serialized) through ``tests.conftest._checkpointer_memory``, and AsyncS3Saver over
HTTP to a moto server (one process per worker) through a replacement of the
``async_checkpointer`` fixture. It keeps only the tests that take those fixtures with
the "memory" parameter, deselects the documented exclusions, and runs the documented
races again when they fail (pytest-rerunfailures).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
from fake_aws_env import use_fake_aws

use_fake_aws()

from upstream_exclusions import EXCLUDED, RACE_RERUNS, RACES, SKIPPED_MODULES  # noqa: E402


def _keep_request_ids_off_pinned_uuid4() -> None:
    """Give botocore a private view of ``uuid`` taken before any test patches it.

    Upstream's ``deterministic_uuids`` fixture pins ``uuid.uuid4`` so that message ids
    are predictable. botocore draws an invocation id from ``uuid.uuid4`` for every
    request it sends, so any saver that speaks HTTP would consume the pinned ids and
    shift the messages' ids. Request ids are transport, not graph state.
    """
    import types
    import uuid

    import botocore.endpoint
    import botocore.handlers

    frozen = types.ModuleType("uuid")
    frozen.__dict__.update(vars(uuid))
    botocore.endpoint.uuid = frozen  # type: ignore[attr-defined]
    botocore.handlers.uuid = frozen  # type: ignore[attr-defined]


_keep_request_ids_off_pinned_uuid4()

FIXTURES = {"sync_checkpointer": "S3Saver", "async_checkpointer": "AsyncS3Saver"}
_server: Any = None
#: Modules that skipped themselves at collection and are not in ``SKIPPED_MODULES``.
_unlisted_skips: list[str] = []


def _names() -> tuple[str, str]:
    # uuid4 is pinned by upstream's deterministic_uuids fixture: take names from os.urandom.
    tag = os.urandom(6).hex()
    return f"lgs3-up-{tag}", f"lgs3-up-{tag}"


_SERVER = """
import sys
from langgraph_s3.local import local_endpoint
with local_endpoint() as url:
    print(url, flush=True)
    sys.stdin.read()
"""


def _server_url() -> str:
    """The URL of this worker's moto server, started on first use.

    The server runs in a process of its own, as S3 and DynamoDB do: in-process, its
    growing heap made the test process's garbage collector pause for ~0.17 s now and
    then, which upstream's stream-timing tests see as a late chunk.
    """
    global _server
    if _server is None:
        import subprocess

        _server = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert _server.stdout is not None
        _server.url = _server.stdout.readline().strip()
    return str(_server.url)


def _slow_memory_saver(latency: float) -> Any:
    """Upstream's own memory saver with ``latency`` seconds added to every call.

    The reference for timing evidence (``LGS3_UPSTREAM_REFERENCE_LATENCY``): a test
    that fails with it fails because of round-trip time, not because of our saver.
    """
    import time

    from tests.conftest_checkpointer import MemorySaverAssertImmutable  # type: ignore

    class SlowMemorySaver(MemorySaverAssertImmutable):  # type: ignore[misc]
        pass

    base = MemorySaverAssertImmutable
    for name in ("get_tuple", "put", "put_writes"):
        sync = getattr(base, name)

        def slow(self: Any, *a: Any, __f: Any = sync, **k: Any) -> Any:
            time.sleep(latency)
            return __f(self, *a, **k)

        async def aslow(self: Any, *a: Any, __f: Any = sync, **k: Any) -> Any:
            await asyncio.sleep(latency)
            return __f(self, *a, **k)

        setattr(SlowMemorySaver, name, slow)
        setattr(SlowMemorySaver, f"a{name}", aslow)
    return SlowMemorySaver()


#: Set by ``harness.py`` for its second run of LangGraph's suite: both savers then seal
#: everything (``encryption=``, a static key ring with a key per test).
ENCRYPTION_ENV = "LGS3_UPSTREAM_ENCRYPTION"


def _options() -> dict[str, Any]:
    if not os.environ.get(ENCRYPTION_ENV):
        return {}
    from langgraph_s3.sealing import StaticKeyRing

    return {"encryption": StaticKeyRing({"upstream": os.urandom(32)}, current="upstream")}


@contextmanager
def _our_saver() -> Iterator[Any]:
    """Upstream's sync "memory" saver: S3Saver on moto in-process, serialized."""
    latency = os.environ.get("LGS3_UPSTREAM_REFERENCE_LATENCY")
    if latency:
        yield _slow_memory_saver(float(latency))
        return
    from moto import mock_aws

    from langgraph_s3 import S3Saver
    from langgraph_s3.local import serialize_moto

    serialize_moto()
    bucket, table = _names()
    with mock_aws():
        saver = S3Saver(bucket=bucket, table=table, region_name="us-east-1", **_options())
        saver.setup()
        try:
            yield saver
        finally:
            saver.close()


@asynccontextmanager
async def _our_async_saver() -> AsyncIterator[Any]:
    """Upstream's async "memory" saver: AsyncS3Saver over HTTP to this worker's moto
    server, with its clients open before the test starts, as upstream's Postgres
    fixtures open their connection first (a few tests time their first chunk)."""
    latency = os.environ.get("LGS3_UPSTREAM_REFERENCE_LATENCY")
    if latency:
        yield _slow_memory_saver(float(latency))
        return
    from langgraph_s3 import AsyncS3Saver, S3Saver

    url = _server_url()
    bucket, table = _names()
    S3Saver(bucket=bucket, table=table, region_name="us-east-1", endpoint_url=url).setup()
    async with AsyncS3Saver(
        bucket=bucket, table=table, region_name="us-east-1", endpoint_url=url, **_options()
    ) as saver:
        await saver.aget_tuple({"configurable": {"thread_id": "fixture-warm-up"}})
        yield saver


def _async_fixture(conftest: Any) -> Any:
    """Upstream's ``async_checkpointer`` fixture, same parameters, with our "memory"."""
    original = conftest.async_checkpointer

    @pytest.fixture(scope="function", params=_fixture_params(original))
    async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        if request.param != "memory":
            pytest.skip("the harness runs the memory parameter only")
        async with _our_async_saver() as saver:
            yield saver

    return async_checkpointer


def _fixture_params(fixture: Any) -> list[Any]:
    marker = getattr(fixture, "_fixture_function_marker", None)
    params = getattr(marker, "params", None)
    if not params:
        raise RuntimeError("cannot read the params of upstream's async_checkpointer fixture")
    return list(params)


@pytest.hookimpl(tryfirst=True)
def pytest_plugin_registered(plugin: Any, manager: Any) -> None:
    # Before pytest reads the fixtures of upstream's conftest, put ours in its place.
    if getattr(plugin, "__name__", None) == "tests.conftest":
        plugin.async_checkpointer = _async_fixture(plugin)


def _uses(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    for fixture in FIXTURES:
        if fixture in getattr(item, "fixturenames", ()):
            if callspec is None or callspec.params.get(fixture) == "memory":
                return fixture
            return "other-param"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    conftest = sys.modules["tests.conftest"]
    conftest._checkpointer_memory = _our_saver  # type: ignore[attr-defined]
    keep, drop = [], []
    for item in items:
        fixture = _uses(item)
        if fixture in FIXTURES and item.nodeid not in EXCLUDED:
            keep.append(item)
            if item.nodeid.split("[", 1)[0] in RACES:
                item.add_marker(pytest.mark.flaky(reruns=RACE_RERUNS))
        else:
            drop.append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_runtest_setup(item: pytest.Item) -> None:
    import gc

    # Everything alive before a test (upstream's large test modules, botocore's
    # service models) is moved out of the collector's sight: otherwise a full
    # collection pauses the process for ~0.15 s now and then, which upstream's
    # stream-timing tests see as a late chunk. InMemorySaver allocates so little that
    # it rarely meets one; any saver that parses HTTP responses does.
    gc.freeze()
    fixture = _uses(item)
    item.user_properties.append(("saver", FIXTURES.get(fixture or "", "?")))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # A module that skips itself hides every test in it, ours included: only the
    # listed ones (with their evidence) may. Under xdist the controller is told of
    # every worker's skipped collection, once; it decides the exit status.
    if report.skipped and report.nodeid not in SKIPPED_MODULES:
        _unlisted_skips.append(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    counts: Counter[tuple[str, str]] = Counter()
    for outcome, reports in terminalreporter.stats.items():
        for rep in reports:
            if not isinstance(rep, pytest.TestReport):
                continue
            if rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed"):
                saver = dict(rep.user_properties).get("saver", "?")
                counts[(saver, outcome)] += 1
    for saver in ("S3Saver", "AsyncS3Saver"):
        parts = ", ".join(
            f"{n} {outcome}" for (s, outcome), n in sorted(counts.items()) if s == saver
        )
        sealed = " (encryption=)" if os.environ.get(ENCRYPTION_ENV) else ""
        terminalreporter.write_line(
            f"upstream langgraph tests with {saver}{sealed}: {parts or 'none'}"
        )
    terminalreporter.write_line(
        f"upstream tests excluded: {len(EXCLUDED)}; races run again on failure: "
        f"{len(RACES)}; modules upstream skips here: {len(SKIPPED_MODULES)} "
        "(upstream/upstream_exclusions.py)"
    )
    for nodeid in _unlisted_skips:
        terminalreporter.write_line(
            f"ERROR: upstream module {nodeid} skipped itself and is not in "
            "SKIPPED_MODULES: find out why (it may hide tests of ours), then fix the "
            "harness or list it with the reason and the evidence"
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _unlisted_skips and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if _server is not None:
        assert _server.stdin is not None
        _server.stdin.close()
        _server.wait(timeout=30)
