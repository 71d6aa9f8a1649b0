"""langgraph-checkpoint-conformance, every capability it detects, for both savers."""

from __future__ import annotations

from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES, DetectedCapabilities

from tests.conftest import Backend


def _assert_full(report: object, saver: object) -> None:
    detected = DetectedCapabilities.from_instance(saver)  # type: ignore[arg-type]
    assert detected.detected == ALL_CAPABILITIES, f"not detected: {detected.missing}"
    results = report.results  # type: ignore[attr-defined]
    failures = {name: r.failures for name, r in results.items() if r.passed is not True}
    assert not failures, failures
    assert all(r.tests_passed > 0 for r in results.values())


async def test_sync_saver_conformance(backend: Backend) -> None:
    made = []

    @checkpointer_test(name=f"S3Saver-{backend.mode}")
    async def factory() -> AsyncIterator[object]:
        saver = backend.saver()
        made.append(saver)
        yield saver

    report = await validate(factory)
    _assert_full(report, made[0])


async def test_async_saver_conformance(server_backend: Backend) -> None:
    made = []

    @checkpointer_test(name="AsyncS3Saver-server")
    async def factory() -> AsyncIterator[object]:
        async with server_backend.async_saver() as saver:
            made.append(saver)
            yield saver

    report = await validate(factory)
    _assert_full(report, made[0])


async def test_sealed_saver_conformance(inproc_backend: Backend) -> None:
    """The same kit on a saver with ``encryption=`` (in-process moto)."""
    import os

    from langgraph_s3 import Encryption
    from langgraph_s3.sealing import StaticKeyRing

    enc = Encryption(StaticKeyRing({"ring": os.urandom(32)}, current="ring"))
    made = []

    @checkpointer_test(name="S3Saver-sealed")
    async def factory() -> AsyncIterator[object]:
        saver = inproc_backend.saver(encryption=enc)
        made.append(saver)
        yield saver

    report = await validate(factory)
    _assert_full(report, made[0])
