"""Connection strings and client settings shared by both savers, the collector and
the command line."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from langgraph_s3.errors import InvalidConfigError


def parse_conn_string(conn_string: str) -> dict[str, Any]:
    """Parse ``s3://bucket/prefix?table=t&region=r&endpoint_url=u`` into saver arguments."""
    url = urlparse(conn_string)
    if url.scheme != "s3" or not url.netloc:
        raise InvalidConfigError(
            f"connection string {conn_string!r} must look like "
            "'s3://bucket/optional/prefix?table=my-table&region=us-east-1'"
        )
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    unknown = set(query) - {"table", "region", "endpoint_url", "compression_level"}
    if unknown:
        raise InvalidConfigError(f"unknown connection string option(s): {sorted(unknown)}")
    if "table" not in query:
        raise InvalidConfigError(f"connection string {conn_string!r} needs '?table=...'")
    args: dict[str, Any] = {
        "bucket": url.netloc,
        "prefix": url.path.lstrip("/"),
        "table": query["table"],
        "region_name": query.get("region"),
        "endpoint_url": query.get("endpoint_url"),
    }
    if "compression_level" in query:
        try:
            args["compression_level"] = int(query["compression_level"])
        except ValueError as exc:
            raise InvalidConfigError("compression_level must be an integer") from exc
    return args


def merge_config(ours: Any, theirs: Any) -> Any:
    """``theirs`` (a user's botocore Config) over ``ours``; retry settings key by key,
    so ``retries={"max_attempts": 8}`` keeps the saver's standard retry mode."""
    if theirs is None:
        return ours
    merged = ours.merge(theirs)
    if ours.retries and theirs.retries:
        merged.retries = {**ours.retries, **theirs.retries}
    return merged
