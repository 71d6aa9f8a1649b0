"""The price tables the cost estimates use: AWS us-east-1, list prices, no free tier.

Two S3 storage classes (``run.py --storage-class``): ``standard`` (S3 Standard, a
general purpose bucket: the default) and ``express`` (S3 Express One Zone, a
directory bucket). DynamoDB prices are the same in both.

S3 Standard and DynamoDB were compiled on 2026-11-21 from the public AWS pricing
pages named in ``SOURCES``; S3 Express One Zone on 2026-11-25 (``EXPRESS_DATE``).
The benchmark machine has no web access, so the numbers were transcribed from
stored copies of those pages, not fetched: re-check them before quoting a dollar
figure. DynamoDB on-demand request prices are those in force since the 50%
on-demand price cut of 2024-11-01; S3 Standard request and storage prices have
been unchanged since 2016-12-01; S3 Express One Zone prices are those after its
price reduction of April 2025.

How requests are billed (see ``capacity.py`` for the unit rules):

* S3: PUT, COPY, POST and LIST requests at one rate, GET and all other requests
  at another; DELETE is free. Storage per GB-month of object bytes.
* S3 Express One Zone adds a per-GB charge for data uploaded (PUT-class requests
  with a body) and retrieved (GET), see ``EXPRESS_FREE_BYTES_PER_REQUEST`` for
  which bytes of a request it applies to.
* DynamoDB on-demand: write request units (1 KB each) and read request units
  (4 KB strongly consistent, 8 KB eventually consistent); a transactional write
  costs 2 WRU per KB. Storage per GB-month of item bytes plus 100 bytes per item
  (and per global-secondary-index entry).
"""

from __future__ import annotations

from typing import Any

PRICES_DATE = "2026-11-21"
EXPRESS_DATE = "2026-11-25"
REGION = "us-east-1"
GB = 1024**3

#: ``run.py --storage-class``: the S3 storage class whose prices are applied.
STORAGE_CLASSES = ("standard", "express")
CLASS_LABELS = {"standard": "S3 Standard", "express": "S3 Express One Zone"}

PRICES: dict[str, float] = {
    # S3 Standard
    "s3_put_per_1k": 0.005,  # PUT, COPY, POST, LIST requests, per 1,000
    "s3_get_per_1k": 0.0004,  # GET, SELECT and all other requests, per 1,000
    "s3_storage_gb_month": 0.023,  # first 50 TB / month
    "s3_upload_per_gb": 0.0,  # S3 Standard has no per-GB upload charge
    "s3_retrieval_per_gb": 0.0,  # nor a retrieval charge (data transfer in-region is free)
    # DynamoDB, on-demand capacity, Standard table class
    "ddb_wru_per_million": 0.625,
    "ddb_rru_per_million": 0.125,
    "ddb_storage_gb_month": 0.25,  # beyond the 25 GB free tier (ignored here)
    # AWS KMS symmetric key requests (GenerateDataKey, Decrypt, ReEncrypt); the
    # key itself ($1 per month) is not per superstep and left out.
    "kms_per_10k": 0.03,
}

#: S3 Express One Zone (directory bucket), us-east-1, after the April 2025 reduction.
#: All five figures are in the worked example of the S3 FAQ (Example 1: "10 GB-Month x
#: $0.11", "$0.00113/1,000" PUTs, "$0.00003/1,000" GETs, DELETE "$0.00 (no charge)",
#: uploads "x $0.0032" and retrievals "x $0.0006" per GB); the pricing page itself
#: renders its cells from a template in the stored copy, so they could not be read
#: there. Not confirmed: whether ``CreateSession`` (one per client and bucket every
#: 5 minutes on a real directory bucket; moto does not emulate it) is billed.
EXPRESS_S3: dict[str, float] = {
    "s3_put_per_1k": 0.00113,  # PUT, COPY, POST, LIST requests, per 1,000
    "s3_get_per_1k": 0.00003,  # GET and all other requests, per 1,000
    "s3_storage_gb_month": 0.11,
    "s3_upload_per_gb": 0.0032,  # bytes of PUT-class requests with a body
    "s3_retrieval_per_gb": 0.0006,  # bytes returned by GET
}

#: Bytes of each request the per-GB upload/retrieval charge skips. At launch (2023)
#: the charge applied only to the part of a request above 512 KB (third-party pages
#: still say so). The S3 FAQ's Example 1, at the prices after the April 2025
#: reduction, charges it on 10 KB requests ("10 KB / 1,048,576 x 1,000,000 x
#: $0.0032"), i.e. on every byte: 0 follows the FAQ. Not confirmed from an AWS
#: announcement (none was in the stored pages): the date of that rule change, and the
#: launch per-GB rates. ``OLD_RULE_FREE_BYTES`` gives the 512 KB rule; the runner
#: records both sums exactly per request (``s3_upload_bytes`` and
#: ``s3_upload_bytes_over_512k``, the same for retrieval), so either rule is exact.
EXPRESS_FREE_BYTES_PER_REQUEST = 0
OLD_RULE_FREE_BYTES = 512 * 1024

SOURCES = [
    "https://aws.amazon.com/s3/pricing/ (Storage: S3 Standard; Requests & data retrievals)",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/ (read/write request units, storage)",
    "https://aws.amazon.com/about-aws/whats-new/2024/11/amazon-dynamo-db-reduces-prices-"
    "on-demand-throughput-global-tables/ (on-demand prices since 2024-11-01)",
    "https://aws.amazon.com/kms/pricing/ (requests: $0.03 per 10,000)",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
    "CapacityUnitCalculations.html (item size and unit rules, transactions 2x)",
    # S3 Express One Zone, compiled 2026-11-25:
    "https://aws.amazon.com/s3/faqs/ (S3 Express One Zone billing, Example 1: $0.11 per "
    "GB-month, $0.00113 per 1,000 PUTs, $0.00003 per 1,000 GETs, DELETE free, $0.0032 "
    "per GB uploaded and $0.0006 per GB retrieved, charged on 10 KB requests; Example 2 "
    "repeats the storage and request prices)",
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-performance.html "
    "(consistent single-digit millisecond first-byte read and write latency, up to 10x "
    "faster than S3 Standard)",
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-create-session.html "
    "(session authentication; credentials expire after 5 minutes)",
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
#: Requests whose body is "data upload" and whose response is "data retrieval" for
#: S3 Express One Zone's per-GB charges (a HEAD's Content-Length is not a body).
S3_UPLOADS = {"PutObject", "UploadPart", "PostObject"}
S3_RETRIEVALS = {"GetObject"}

DDB_ITEM_OVERHEAD = 100


def table(storage_class: str = "standard") -> dict[str, float]:
    """The prices of one run: DynamoDB's, and S3's of ``storage_class``."""
    if storage_class not in STORAGE_CLASSES:
        raise ValueError(f"unknown storage class {storage_class!r}")
    return {**PRICES, **(EXPRESS_S3 if storage_class == "express" else {})}


def transfer_bytes(phase: dict[str, Any], free_bytes: int) -> tuple[float, float]:
    """Uploaded and retrieved bytes the per-GB charges apply to (exact per request)."""
    if free_bytes == 0:
        return phase.get("s3_upload_bytes", 0), phase.get("s3_retrieval_bytes", 0)
    if free_bytes == OLD_RULE_FREE_BYTES:
        return phase.get("s3_upload_bytes_over_512k", 0), phase.get(
            "s3_retrieval_bytes_over_512k", 0
        )
    raise ValueError("the runner records the sums for 0 and 512 KiB free bytes only")


def transfer_cost(
    phase: dict[str, Any],
    storage_class: str = "standard",
    free_bytes: int = EXPRESS_FREE_BYTES_PER_REQUEST,
) -> float:
    """Dollars of S3 Express One Zone's per-GB upload and retrieval charges (0 for Standard)."""
    p = table(storage_class)
    up, down = transfer_bytes(phase, free_bytes)
    return float(up / GB * p["s3_upload_per_gb"] + down / GB * p["s3_retrieval_per_gb"])


def request_cost(phase: dict[str, Any], storage_class: str = "standard") -> float:
    """Dollars for the requests of one phase (figures from ``runner.phase_figures``)."""
    p = table(storage_class)
    return float(
        phase["s3_tier1"] * p["s3_put_per_1k"] / 1000
        + phase["s3_tier2"] * p["s3_get_per_1k"] / 1000
        + phase["wru"] * p["ddb_wru_per_million"] / 1e6
        + phase["rru"] * p["ddb_rru_per_million"] / 1e6
        + transfer_cost(phase, storage_class)
        + phase.get("kms_requests", 0) * PRICES["kms_per_10k"] / 10_000
    )


def storage_cost_month(storage: dict[str, Any], storage_class: str = "standard") -> float:
    """Dollars per month to keep what a workload stored (AWS savers only)."""
    p = table(storage_class)
    s3 = storage.get("s3_bytes", 0)
    ddb = (
        storage.get("ddb_bytes", 0)
        + DDB_ITEM_OVERHEAD * storage.get("ddb_items", 0)
        + storage.get("gsi_bytes", 0)
        + DDB_ITEM_OVERHEAD * storage.get("gsi_entries", 0)
    )
    return float(s3 / GB * p["s3_storage_gb_month"] + ddb / GB * p["ddb_storage_gb_month"])


def per_million_supersteps(
    phase: dict[str, Any], storage: dict[str, Any], storage_class: str = "standard"
) -> dict[str, float]:
    """Request cost (per-GB transfer included), one month of storage, their sum, per M."""
    steps = max(1, phase["supersteps"])
    requests = request_cost(phase, storage_class) / steps * 1e6
    transfer = transfer_cost(phase, storage_class) / steps * 1e6
    store = storage_cost_month(storage, storage_class) / steps * 1e6
    return {
        "requests": requests,
        "transfer": transfer,
        "storage_month": store,
        "total": requests + store,
    }


def usd(x: float) -> str:
    """A price as written on AWS's pages: ``$0.00003``, not ``$3e-05``."""
    return "$" + (f"{x:.6f}".rstrip("0").rstrip(".") if x else "0")


def table_markdown(storage_class: str = "standard") -> str:
    p = {k: usd(v) for k, v in table(storage_class).items()}
    s3 = CLASS_LABELS[storage_class]
    rows = [
        (f"{s3} PUT/COPY/POST/LIST", f"{p['s3_put_per_1k']} per 1,000 requests"),
        (f"{s3} GET and other requests", f"{p['s3_get_per_1k']} per 1,000 requests"),
        (f"{s3} storage", f"{p['s3_storage_gb_month']} per GB-month"),
    ]
    if storage_class == "express":
        which = (
            "every byte of a request"
            if EXPRESS_FREE_BYTES_PER_REQUEST == 0
            else f"bytes above {EXPRESS_FREE_BYTES_PER_REQUEST // 1024} KB of a request"
        )
        rows += [
            (f"{s3} data upload (PUT bodies)", f"{p['s3_upload_per_gb']} per GB, {which}"),
            (f"{s3} data retrieval (GET)", f"{p['s3_retrieval_per_gb']} per GB, {which}"),
        ]
    rows += [
        ("DynamoDB on-demand write", f"{p['ddb_wru_per_million']} per million WRU"),
        ("DynamoDB on-demand read", f"{p['ddb_rru_per_million']} per million RRU"),
        ("DynamoDB transactional write/read", "2 WRU per KB / 2 RRU per 4 KB"),
        ("DynamoDB storage", f"{p['ddb_storage_gb_month']} per GB-month (+100 B/item)"),
    ]
    lines = ["| item | price (us-east-1) |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(lines)
