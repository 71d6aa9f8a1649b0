"""Waiting for replication: what a read in a replica region does when the index names
data that has not arrived there yet (docs/cross-region.md, "Reads: index ahead of
objects"). Objects and chunk items wait the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from langgraph_s3.operations import Flow, Sleep, perform

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

K = TypeVar("K")


def wait_for(
    core: SaverCore,
    missing: Sequence[K],
    read: Callable[[list[K]], Flow[Sequence[bytes | None]]],
) -> Flow[tuple[float, dict[K, bytes]]]:
    """Read ``missing`` again with ``read`` (one answer per key, None: still missing),
    with backoff from 50 ms doubling to 5 s, until all arrived or ``max_wait`` seconds
    passed. Result: the seconds waited, and what arrived by key."""
    assert core.cross_region is not None
    max_wait = core.cross_region.max_wait
    arrived: dict[K, bytes] = {}
    left = list(missing)
    waited, delay = 0.0, 0.05
    while left and waited < max_wait:
        step = min(delay, max_wait - waited)
        yield from perform(Sleep(step))
        waited += step
        delay = min(delay * 2, 5.0)
        got = yield from read(left)
        arrived.update({k: body for k, body in zip(left, got, strict=True) if body is not None})
        left = [k for k in left if k not in arrived]
    return waited, arrived
