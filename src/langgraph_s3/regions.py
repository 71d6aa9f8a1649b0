"""Cross-region configuration: which region owns writes, and how replicas read.

See ``docs/cross-region.md`` for the guarantees and their limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from langgraph_s3.errors import InvalidConfigError

ReadPolicy = Literal["wait", "home", "fail"]


@dataclass(frozen=True)
class CrossRegion:
    """How a saver behaves in a multi-region deployment.

    Args:
        home_region: The region that owns every thread's writes until a thread is
            claimed by another region (``saver.claim_thread``).
        read_policy: What a replica region does when its index names an object its
            bucket does not have yet: ``"wait"`` (poll with backoff up to
            ``max_wait`` seconds), ``"home"`` (read it from ``home_bucket`` in the
            home region) or ``"fail"`` (raise ``NotYetReplicatedError`` at once).
        max_wait: Longest wait, in seconds, of the ``"wait"`` policy.
        home_bucket: The home region's bucket, for the ``"home"`` policy.
    """

    home_region: str
    read_policy: ReadPolicy = "wait"
    max_wait: float = 60.0
    home_bucket: str | None = None

    def __post_init__(self) -> None:
        if self.read_policy not in ("wait", "home", "fail"):
            raise InvalidConfigError(
                f"read_policy must be 'wait', 'home' or 'fail', got {self.read_policy!r}"
            )
        if self.read_policy == "home" and not self.home_bucket:
            raise InvalidConfigError("read_policy='home' needs home_bucket (the home region's)")
        if self.max_wait < 0:
            raise InvalidConfigError("max_wait must be >= 0 seconds")
