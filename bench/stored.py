"""What a saver has stored: S3 objects and DynamoDB items, measured after the fact.

The clients used here are created outside the instrumentation, so measuring
never counts as a saver request and never pays the injected latency.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from capacity import TableSnapshot, item_key, item_size
from wire import uninstrumented

REGION = "us-east-1"


class Storage:
    """Measures one bucket and one table on the benchmark's moto server."""

    def __init__(self, endpoint: str, bucket: str, table: str) -> None:
        import boto3

        with uninstrumented():
            self.s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
            self.ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=endpoint)
        self.bucket = bucket
        self.table = table
        # Incremental view of the table: key -> (item bytes, index entry bytes or None).
        self._items: dict[tuple[str, str], tuple[int, int | None]] = {}
        self._gsis: list[dict[str, Any]] | None = None
        self._key_names: list[str] | None = None

    def gsis(self) -> list[dict[str, Any]]:
        """Global secondary indexes: their key attributes and projected attributes."""
        if self._gsis is not None:
            return self._gsis
        desc = self.ddb.describe_table(TableName=self.table)["Table"]
        table_keys = [k["AttributeName"] for k in desc["KeySchema"]]
        self._key_names = table_keys
        out = []
        for gsi in desc.get("GlobalSecondaryIndexes", []) or []:
            keys = [k["AttributeName"] for k in gsi["KeySchema"]]
            projection = gsi["Projection"]
            if projection["ProjectionType"] == "ALL":
                projected = None
            else:
                projected = sorted(
                    set(keys) | set(table_keys) | set(projection.get("NonKeyAttributes", []))
                )
            out.append({"name": gsi["IndexName"], "keys": keys, "projected": projected})
        self._gsis = out
        return out

    def s3_objects(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for obj in page.get("Contents", []):
                out[obj["Key"]] = int(obj["Size"])
        return out

    def table_snapshot(self) -> TableSnapshot:
        items: list[dict[str, Any]] = []
        for page in self.ddb.get_paginator("scan").paginate(
            TableName=self.table, ConsistentRead=True
        ):
            items.extend(page.get("Items", []))
        return TableSnapshot(items, self.gsis())

    def measure(self) -> tuple[dict[str, Any], TableSnapshot]:
        """Totals (bytes and counts) and the table snapshot the cost model prices against."""
        objects = self.s3_objects()
        snap = self.table_snapshot()
        breakdown: dict[str, list[int]] = {}
        for key, size in objects.items():
            row = breakdown.setdefault("s3 " + _object_class(key), [0, 0])
            row[0] += 1
            row[1] += size
        for (pk, sk), size in snap.sizes.items():
            row = breakdown.setdefault("ddb " + _item_class(pk, sk), [0, 0])
            row[0] += 1
            row[1] += size
        totals: dict[str, Any] = {
            "s3_objects": len(objects),
            "s3_bytes": sum(objects.values()),
            "ddb_items": snap.items,
            "ddb_bytes": snap.item_bytes,
            "gsi_entries": snap.gsi_entries,
            "gsi_bytes": snap.gsi_bytes,
        }
        totals["bytes"] = totals["s3_bytes"] + totals["ddb_bytes"] + totals["gsi_bytes"]
        totals["breakdown"] = {k: {"count": v[0], "bytes": v[1]} for k, v in breakdown.items()}
        return totals, snap

    def measure_written(self, written: Iterable[tuple[str, str]]) -> dict[str, int]:
        """Totals like :meth:`measure`, re-reading only the items written since last time.

        Scanning a whole table after every few turns would dominate the run time
        for savers that store megabytes of items; the items a saver wrote are known
        from its requests, so only those are fetched (BatchGetItem, consistent).
        """
        gsis = self.gsis()
        names = self._key_names or ["pk", "sk"]
        keys = list(dict.fromkeys(written))
        for start in range(0, len(keys), 100):
            batch = keys[start : start + 100]
            request: dict[str, Any] = {
                self.table: {
                    "Keys": [{names[0]: {"S": k[0]}, names[1]: {"S": k[1]}} for k in batch],
                    "ConsistentRead": True,
                }
            }
            found: set[tuple[str, str]] = set()
            while request:
                resp = self.ddb.batch_get_item(RequestItems=request)
                for item in resp.get("Responses", {}).get(self.table, []):
                    key = item_key(item)
                    if key is None:
                        continue
                    found.add(key)
                    index = None
                    for gsi in gsis:
                        if all(k in item for k in gsi["keys"]):
                            index = (index or 0) + TableSnapshot.gsi_entry_size(item, gsi)
                    self._items[key] = (item_size(item), index)
                request = resp.get("UnprocessedKeys") or {}
            for key in set(batch) - found:
                self._items.pop(key, None)
        objects = self.s3_objects()
        totals = {
            "s3_objects": len(objects),
            "s3_bytes": sum(objects.values()),
            "ddb_items": len(self._items),
            "ddb_bytes": sum(size for size, _ in self._items.values()),
            "gsi_entries": sum(1 for _, g in self._items.values() if g is not None),
            "gsi_bytes": sum(g or 0 for _, g in self._items.values()),
        }
        totals["bytes"] = totals["s3_bytes"] + totals["ddb_bytes"] + totals["gsi_bytes"]
        return totals


def _object_class(key: str) -> str:
    """What an object holds, from either saver's key layout (for the breakdown only)."""
    if "/b/" in key:
        return "value blobs"
    if "/c/" in key:
        return "checkpoint objects"
    if "/writes/" in key:
        return "offloaded writes"
    if "/checkpoints/" in key:
        return "offloaded checkpoints"
    return "other objects"


def _item_class(pk: str, sk: str) -> str:
    if pk.startswith("CHUNK_"):
        return "payload items"
    if pk.startswith("WRITES_") or "#w#" in sk:
        return "writes items"
    if sk.startswith("h#"):
        return "head items"
    if sk.startswith("b#"):
        return "chunk items"
    return "checkpoint items"


def create_bucket(s3: Any, bucket: str) -> None:
    from botocore.exceptions import ClientError

    try:
        s3.create_bucket(Bucket=bucket)
    except ClientError as exc:
        if exc.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
