"""Names every request of the index shares: item and key types, and primary keys."""

from __future__ import annotations

from typing import Any

from langgraph_s3.core.schema import PK, SK, s

Item = dict[str, Any]
Key = dict[str, Any]


def key(pk: str, sk: str) -> Key:
    """The primary key of an item."""
    return {PK: s(pk), SK: s(sk)}
