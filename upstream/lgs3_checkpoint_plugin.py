"""pytest plugin: langgraph-checkpoint's own saver tests, with S3Saver as the saver.

Loaded by ``upstream/harness.py`` into a pytest run inside the unpacked
``langgraph-checkpoint`` sdist. Its ``tests/test_memory.py`` builds its saver with
``InMemorySaver()``; for the tests that use the saver only through the public
``BaseCheckpointSaver`` API (listed in ``PUBLIC_API``), the plugin makes that name
build an S3Saver on moto in-process instead. Every other test of the sdist is
deselected, with the reason in ``NOT_APPLICABLE``: they read or write
``InMemorySaver``'s own dictionaries, subclass it, or test the serializer.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
from fake_aws_env import use_fake_aws

use_fake_aws()

PUBLIC_API = {
    "tests/test_memory.py::TestMemorySaver::test_combined_metadata",
    "tests/test_memory.py::TestMemorySaver::test_search",
    "tests/test_memory.py::TestMemorySaver::test_asearch",
    "tests/test_memory.py::TestInMemorySaverDeltaChannel::"
    "test_get_channel_writes_without_checkpoint_id_reads_the_latest",
}

NOT_APPLICABLE = {
    "tests/test_memory.py::test_memory_saver": "asserts isinstance(saver, InMemorySaver)",
    "tests/test_memory.py::test_memory_saver_": "InMemorySaver's serializer warnings",
    "tests/test_memory.py::TestInMemorySaverDeltaChannel::test_load_blobs": (
        "calls InMemorySaver._load_blobs and writes its blobs dict"
    ),
    "tests/test_memory.py::TestInMemorySaverDeltaChannel::test_get_channel_writes_collects": (
        "writes InMemorySaver's storage and writes dicts directly"
    ),
    "tests/test_memory.py::TestInMemorySaverDeltaChannel::test_get_channel_writes_at_root": (
        "writes InMemorySaver's storage and writes dicts directly"
    ),
    "tests/test_memory.py::TestBaseFallbackGetChannelWrites": (
        "subclasses InMemorySaver to test the base class's fallback"
    ),
    "tests/test_memory.py::TestPreDeltaBlobTerminator": "writes InMemorySaver's dicts directly",
    "tests/test_encrypted.py": "the encrypted serializer, no saver",
    "tests/test_jsonplus.py": "the serializer, no saver",
    "tests/test_redis_cache.py": "the Redis cache, no saver",
    "tests/test_store.py": "the store, no saver",
}


class _Saver:
    """Stands in for ``InMemorySaver`` in the module under test: calling it gives a
    ready S3Saver on its own bucket and table inside the running moto mock."""

    def __call__(self, **_: Any) -> Any:
        from langgraph_s3 import S3Saver

        tag = os.urandom(6).hex()
        saver = S3Saver(bucket=f"lgs3-cp-{tag}", table=f"lgs3-cp-{tag}", region_name="us-east-1")
        saver.setup()
        return saver


_mock: Any = None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep = [item for item in items if item.nodeid.split("[")[0] in PUBLIC_API]
    unlisted = [
        item.nodeid
        for item in items
        if item not in keep and not any(item.nodeid.startswith(p) for p in NOT_APPLICABLE)
    ]
    if unlisted:
        # A new upstream test must be placed in one list or the other, never ignored.
        raise pytest.UsageError(f"unclassified langgraph-checkpoint tests: {unlisted}")
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep
    sys.modules["tests.test_memory"].InMemorySaver = _Saver()  # type: ignore[attr-defined]


def pytest_runtest_setup(item: pytest.Item) -> None:
    global _mock
    from moto import mock_aws

    from langgraph_s3.local import serialize_moto

    serialize_moto()
    _mock = mock_aws()
    _mock.start()


def pytest_runtest_teardown(item: pytest.Item) -> None:
    global _mock
    if _mock is not None:
        _mock.stop()
        _mock = None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    passed = len(terminalreporter.stats.get("passed", []))
    failed = len(terminalreporter.stats.get("failed", []))
    terminalreporter.write_line(
        f"langgraph-checkpoint public-API tests with S3Saver: {passed} passed, {failed} failed "
        f"({len(PUBLIC_API)} selected; the rest test InMemorySaver's internals or no saver, "
        "see upstream/lgs3_checkpoint_plugin.py)"
    )
