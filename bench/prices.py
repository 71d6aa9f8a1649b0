"""The price table the cost estimates use: AWS us-east-1, list prices, no free tier.

Compiled on 2026-11-21 from the public AWS pricing pages named in ``SOURCES``
(the benchmark machine has no web access, so the numbers were transcribed, not
fetched: re-check them before quoting a dollar figure). DynamoDB on-demand
request prices are those in force since the 50% on-demand price cut of
2024-11-01; S3 Standard request and storage prices have been unchanged since
2016-12-01.

How requests are billed (see ``capacity.py`` for the unit rules):

* S3: PUT, COPY, POST and LIST requests at one rate, GET and all other requests
  at another; DELETE is free. Storage per GB-month of object bytes.
* DynamoDB on-demand: write request units (1 KB each) and read request units
  (4 KB strongly consistent, 8 KB eventually consistent); a transactional write
  costs 2 WRU per KB. Storage per GB-month of item bytes plus 100 bytes per item
  (and per global-secondary-index entry).
"""

from __future__ import annotations

from typing import Any

PRICES_DATE = "2026-11-21"
REGION = "us-east-1"
GB = 1024**3

PRICES: dict[str, float] = {
    # S3 Standard
    "s3_put_per_1k": 0.005,  # PUT, COPY, POST, LIST requests, per 1,000
    "s3_get_per_1k": 0.0004,  # GET, SELECT and all other requests, per 1,000
    "s3_storage_gb_month": 0.023,  # first 50 TB / month
    # DynamoDB, on-demand capacity, Standard table class
    "ddb_wru_per_million": 0.625,
    "ddb_rru_per_million": 0.125,
    "ddb_storage_gb_month": 0.25,  # beyond the 25 GB free tier (ignored here)
    # AWS KMS symmetric key requests (GenerateDataKey, Decrypt, ReEncrypt); the
    # key itself ($1 per month) is not per superstep and left out.
    "kms_per_10k": 0.03,
}

SOURCES = [
    "https://aws.amazon.com/s3/pricing/ (Storage: S3 Standard; Requests & data retrievals)",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/ (read/write request units, storage)",
    "https://aws.amazon.com/about-aws/whats-new/2024/11/amazon-dynamo-db-reduces-prices-"
    "on-demand-throughput-global-tables/ (on-demand prices since 2024-11-01)",
    "https://aws.amazon.com/kms/pricing/ (requests: $0.03 per 10,000)",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
    "CapacityUnitCalculations.html (item size and unit rules, transactions 2x)",
]

#: S3 request classes as S3 prices them.
S3_TIER1 = {
    "PutObject",
    "CopyObject",
    "ListObjectsV2",
    "ListObjects",
    "CreateMultipartUpload",
    "UploadPart",
    "CompleteMultipartUpload",
    "PostObject",
}
S3_FREE = {"DeleteObject", "DeleteObjects"}

DDB_ITEM_OVERHEAD = 100


def request_cost(phase: dict[str, Any]) -> float:
    """Dollars for the requests of one phase (figures from ``runner.phase_figures``)."""
    return float(
        phase["s3_tier1"] * PRICES["s3_put_per_1k"] / 1000
        + phase["s3_tier2"] * PRICES["s3_get_per_1k"] / 1000
        + phase["wru"] * PRICES["ddb_wru_per_million"] / 1e6
        + phase["rru"] * PRICES["ddb_rru_per_million"] / 1e6
        + phase.get("kms_requests", 0) * PRICES["kms_per_10k"] / 10_000
    )


def storage_cost_month(storage: dict[str, Any]) -> float:
    """Dollars per month to keep what a workload stored (AWS savers only)."""
    s3 = storage.get("s3_bytes", 0)
    ddb = (
        storage.get("ddb_bytes", 0)
        + DDB_ITEM_OVERHEAD * storage.get("ddb_items", 0)
        + storage.get("gsi_bytes", 0)
        + DDB_ITEM_OVERHEAD * storage.get("gsi_entries", 0)
    )
    return float(
        s3 / GB * PRICES["s3_storage_gb_month"] + ddb / GB * PRICES["ddb_storage_gb_month"]
    )


def per_million_supersteps(phase: dict[str, Any], storage: dict[str, Any]) -> dict[str, float]:
    """Request cost, one month of storage, and their sum, per million supersteps."""
    steps = max(1, phase["supersteps"])
    requests = request_cost(phase) / steps * 1e6
    store = storage_cost_month(storage) / steps * 1e6
    return {"requests": requests, "storage_month": store, "total": requests + store}


def table_markdown() -> str:
    rows = [
        ("S3 PUT/COPY/POST/LIST", f"${PRICES['s3_put_per_1k']} per 1,000 requests"),
        ("S3 GET and other requests", f"${PRICES['s3_get_per_1k']} per 1,000 requests"),
        ("S3 Standard storage", f"${PRICES['s3_storage_gb_month']} per GB-month"),
        ("DynamoDB on-demand write", f"${PRICES['ddb_wru_per_million']} per million WRU"),
        ("DynamoDB on-demand read", f"${PRICES['ddb_rru_per_million']} per million RRU"),
        ("DynamoDB transactional write/read", "2 WRU per KB / 2 RRU per 4 KB"),
        ("DynamoDB storage", f"${PRICES['ddb_storage_gb_month']} per GB-month (+100 B/item)"),
    ]
    lines = ["| item | price (us-east-1) |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(lines)
