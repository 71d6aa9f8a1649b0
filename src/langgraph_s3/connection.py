"""Connection strings and client settings shared by both savers, the collector and
the command line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlparse

from langgraph_s3.errors import InvalidConfigError

#: What ``s3://`` connection strings take after ``?``.
CONN_STRING_OPTIONS = (
    "table", "region", "endpoint_url", "compression_level", "kms_key", "previous_kms_key",
)  # fmt: skip
#: Other savers' spellings of those options, which difflib alone would not map.
_OTHER_SPELLINGS = {"table_name": "table", "region_name": "region", "endpoint": "endpoint_url"}


def check_url_options(url: str, query: Mapping[str, str], valid: Iterable[str]) -> None:
    """Refuse an option a URL does not take, naming the closest valid one."""
    valid = list(valid)
    for name in query:
        if name in valid:
            continue
        import difflib  # only for this message: every process would pay for its import

        close = [_OTHER_SPELLINGS[name]] if _OTHER_SPELLINGS.get(name) in valid else []
        close = close or difflib.get_close_matches(name, valid, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise InvalidConfigError(
            f"unknown option {name!r} in {url!r}: {hint}options are {', '.join(valid)}"
        )


def check_endpoint_url(endpoint_url: str) -> None:
    """Refuse an endpoint without a scheme (``localhost:5000``), which botocore would
    reject deep inside client creation."""
    parsed = urlparse(endpoint_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        example = "localhost:5000" if "://" in endpoint_url else endpoint_url
        raise InvalidConfigError(
            f"endpoint URL {endpoint_url!r} needs http:// or https:// and a host, "
            f"e.g. 'http://{example}'"
        )


def parse_conn_string(conn_string: str) -> dict[str, Any]:
    """Parse ``s3://bucket/prefix?table=t&region=r&endpoint_url=u`` into saver arguments.

    ``kms_key=ARN`` (and ``previous_kms_key=ARN``, repeatable) give the saver
    client-side encryption: ``encryption=KmsKeyRing(kms_key, previous=...)``.
    """
    url = urlparse(conn_string)
    if url.scheme != "s3" or not url.netloc:
        raise InvalidConfigError(
            f"connection string {conn_string!r} must look like "
            "'s3://bucket/optional/prefix?table=my-table&region=us-east-1'"
        )
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    check_url_options(conn_string, query, CONN_STRING_OPTIONS)
    if "table" not in query:
        raise InvalidConfigError(f"connection string {conn_string!r} needs '?table=...'")
    args: dict[str, Any] = {
        "bucket": url.netloc,
        "prefix": url.path.lstrip("/"),
        "table": query["table"],
        "region_name": query.get("region"),
        "endpoint_url": query.get("endpoint_url"),
    }
    if args["endpoint_url"] is not None:
        check_endpoint_url(args["endpoint_url"])
    if "compression_level" in query:
        try:
            args["compression_level"] = int(query["compression_level"])
        except ValueError as exc:
            raise InvalidConfigError("compression_level must be an integer") from exc
    previous = parse_qs(url.query).get("previous_kms_key", [])
    if "kms_key" in query:
        from langgraph_s3.sealing.kms import KmsKeyRing

        args["encryption"] = KmsKeyRing(query["kms_key"], previous=previous)
    elif previous:
        raise InvalidConfigError(
            f"connection string {conn_string!r} names previous_kms_key without kms_key: "
            "add kms_key=ARN, the key that wraps new data keys"
        )
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
