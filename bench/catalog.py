"""The savers the benchmark compares, named once for run.py, runner.py and report.py.

Standard library only: ``run.py`` reads it before any virtual environment exists.
"""

from __future__ import annotations

#: Every saver, in the order of the report's tables.
SAVERS = ("s3", "async", "dynamodb", "memory", "sqlite")
#: This project's savers: the ones the targets judge.
PROJECT = ("s3", "async")
#: The savers that talk to S3/DynamoDB (they get the protocol probes and a cost).
AWS = ("s3", "async", "dynamodb")
#: Non-default configurations, run beside the defaults on the workloads where they
#: show a trade-off (whenever S3Saver runs), and shown in the tables and beside the
#: targets they trade, never in a verdict: saver kind -> workloads.
VARIANTS = {"s3-inline": ("a", "f"), "s3-sealed": ("a", "b", "f")}
#: ``s3-inline``: the index item holds checkpoint bodies up to 8 KiB, so (a)'s
#: 12.5 KB context needs no blob (bench/README.md, "What the targets cost"), and
#: (f)'s checkpoints before their message list passes the 16 KiB value threshold
#: need no S3 PUT (larger transactional items instead).
INLINE_VARIANT_LIMIT = 8192
#: ``s3-sealed``: client-side encryption (issue 24) with a KMS key ring on the moto
#: server's KMS: what sealing costs per superstep, and the KMS requests per cold
#: thread (a new saver per invocation in (f), as on Lambda).
LABELS = {
    "s3": "S3Saver",
    "async": "AsyncS3Saver",
    "aiobotocore": "aiobotocore alone (AsyncS3Saver's floor)",
    "dynamodb": "DynamoDBSaver",
    "memory": "InMemorySaver",
    "sqlite": "SqliteSaver",
    "s3-inline": "S3Saver, index_inline_limit=8 KiB",
    "s3-sealed": "S3Saver, encryption=KmsKeyRing",
}

#: Latency profiles (``run.py --latency-profile``): milliseconds injected before every
#: request, per service; services not named get ``--latency-ms``. ``aws`` follows the
#: figures issue 22 plans with: S3 first byte 20-40 ms, taken at its middle, 30 ms
#: (applied to every S3 request: small PUTs are not faster than GETs on S3), and
#: DynamoDB single-digit milliseconds, 5 ms per request. ``express`` is S3 Express
#: One Zone (``run.py --storage-class express`` picks it by default): AWS documents
#: "consistent single-digit millisecond first-byte read and write request latencies"
#: for it, taken as 5 ms like DynamoDB's (the "up to 10x faster" than S3 Standard
#: would be 3 ms against ``aws``'s 30), for a client in the bucket's Availability Zone.
LATENCY_PROFILES: dict[str, dict[str, float]] = {
    "uniform": {},
    "aws": {"s3": 30.0, "dynamodb": 5.0},
    "express": {"s3": 5.0, "dynamodb": 5.0},
}


def latency_text(latency_ms: float, profile: str) -> str:
    """How a run's latency is described in the report."""
    per_service = LATENCY_PROFILES.get(profile, {})
    if not per_service:
        return f"{latency_ms:g} ms before every AWS request"
    parts = ", ".join(f"{service} {ms:g} ms" for service, ms in per_service.items())
    return f"profile `{profile}`: {parts} before every request (others {latency_ms:g} ms)"
