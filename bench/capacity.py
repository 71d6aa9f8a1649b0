"""DynamoDB item sizes and request units, computed the way DynamoDB bills them.

Sizes follow the "Item sizes and formats" rules of the DynamoDB developer guide:
an item is the sum of its attribute names (UTF-8 bytes) and values; strings are
UTF-8 bytes, binaries raw bytes, numbers 1 byte per two significant digits plus
1, booleans and nulls 1 byte, lists and maps 3 bytes plus 1 byte per element
plus their elements (map elements include their names).

Request units (on-demand):

* a write costs 1 WRU per started 1 KB of the larger of the old and new item;
  inside ``TransactWriteItems`` every item costs twice that;
* a read costs 1 RRU per started 4 KB (strongly consistent) or half of that
  (eventually consistent); a ``Query``/``Scan`` is billed on the summed size of the
  items it read (before any filter or projection), rounded up once per request;
* a write to an item that is (or becomes) part of a global secondary index also
  writes the index entry: 1 WRU per started 1 KB of the projected entry.

The savers' requests are summarised when they are made (:func:`summarize_request`)
and priced after the workload against a final scan of the table, which gives the
full size of every item even when a response carried only a projection.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

KEY_SCHEMES = (("pk", "sk"), ("PK", "SK"))
#: Storage overhead DynamoDB adds to every item (and to every index entry).
ITEM_OVERHEAD = 100


def _number_size(text: str) -> int:
    digits = str(Decimal(text).normalize()).lstrip("-").replace(".", "")
    if "E" in digits:
        digits = digits.split("E", 1)[0]
    digits = digits.strip("0") or "0"
    return math.ceil(len(digits) / 2) + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Billed size of one attribute value in low-level form (``{"S": "..."}``)."""
    ((tag, v),) = value.items()
    if tag == "S":
        return len(v.encode("utf-8"))
    if tag == "B":
        return len(v)
    if tag == "N":
        return _number_size(v)
    if tag in ("BOOL", "NULL"):
        return 1
    if tag == "SS":
        return sum(len(s.encode("utf-8")) for s in v)
    if tag == "NS":
        return sum(_number_size(n) for n in v)
    if tag == "BS":
        return sum(len(b) for b in v)
    if tag == "L":
        return 3 + sum(1 + value_size(e) for e in v)
    if tag == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + value_size(e) for k, e in v.items())
    raise ValueError(f"unknown DynamoDB type {tag!r}")


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """Billed size of an item: attribute names plus values."""
    return sum(len(name.encode("utf-8")) + value_size(v) for name, v in item.items())


def item_key(item: Mapping[str, Mapping[str, Any]]) -> tuple[str, str] | None:
    """(partition, sort) key strings of an item, for either key naming scheme."""
    for pk, sk in KEY_SCHEMES:
        if pk in item and sk in item:
            return str(next(iter(item[pk].values()))), str(next(iter(item[sk].values())))
    return None


# ---------------------------------------------------------------- summaries
def _write(table: str, item: Mapping[str, Any], *, txn: bool, exact: bool) -> dict[str, Any]:
    key = item_key(item)
    return {
        "table": table,
        "key": list(key) if key else None,
        "size": item_size(item),
        "txn": txn,
        "exact": exact,
        "attrs": sorted(item),
    }


def _update(table: str, params: Mapping[str, Any], *, txn: bool) -> dict[str, Any]:
    # The item after an update is not in the request; approximate it by the key and
    # every value the expression mentions, and correct it from the final scan.
    values = params.get("ExpressionAttributeValues") or {}
    approx = dict(params.get("Key") or {})
    for name, value in values.items():
        approx[name.lstrip(":")] = value
    row = _write(table, approx, txn=txn, exact=False)
    row["key"] = list(item_key(params.get("Key") or {}) or ("", ""))
    names = set((params.get("ExpressionAttributeNames") or {}).values())
    row["attrs"] = sorted(names | {n.lstrip(":") for n in values})
    return row


def summarize_request(service: str, op: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """What the cost model needs from a request, without keeping payloads alive."""
    if service == "s3":
        return {"key": params.get("Key")}
    table = params.get("TableName", "")
    if op == "PutItem":
        return {"writes": [_write(table, params["Item"], txn=False, exact=True)]}
    if op == "UpdateItem":
        return {"writes": [_update(table, params, txn=False)]}
    if op == "DeleteItem":
        return {"writes": [_write(table, params["Key"], txn=False, exact=False)]}
    if op == "TransactWriteItems":
        writes = []
        for entry in params.get("TransactItems", []):
            ((action, body),) = entry.items()
            if action == "Put":
                writes.append(_write(body["TableName"], body["Item"], txn=True, exact=True))
            elif action == "Update":
                writes.append(_update(body["TableName"], body, txn=True))
            else:  # Delete, ConditionCheck: billed on the item's size; keys only here
                writes.append(_write(body["TableName"], body["Key"], txn=True, exact=False))
        return {"writes": writes}
    if op == "BatchWriteItem":
        writes = []
        for tname, entries in params.get("RequestItems", {}).items():
            for entry in entries:
                if "PutRequest" in entry:
                    item = entry["PutRequest"]["Item"]
                    writes.append(_write(tname, item, txn=False, exact=True))
                else:
                    key = entry["DeleteRequest"]["Key"]
                    writes.append(_write(tname, key, txn=False, exact=False))
        return {"writes": writes}
    if op in ("GetItem", "Query", "Scan"):
        pk = None
        values = params.get("ExpressionAttributeValues") or {}
        if ":pk" in values:
            pk = str(next(iter(values[":pk"].values())))
        key = item_key(params.get("Key") or {})
        return {
            "read": {
                "table": table,
                "consistent": bool(params.get("ConsistentRead")),
                "pk": pk if key is None else key[0],
                "key": list(key) if key else None,
                "index": params.get("IndexName"),
            }
        }
    if op == "BatchGetItem":
        keys = []
        for tname, spec in params.get("RequestItems", {}).items():
            for k in spec.get("Keys", []):
                kk = item_key(k)
                keys.append([tname, *(kk or ("", ""))])
        consistent = all(
            bool(spec.get("ConsistentRead")) for spec in params.get("RequestItems", {}).values()
        )
        return {"read": {"batch": keys, "consistent": consistent}}
    return {}


def summarize_response(op: str, parsed: Mapping[str, Any] | None) -> dict[str, Any]:
    """Returned items as keys (or small projections) with their sizes."""
    if not parsed:
        return {}
    items: list[Mapping[str, Any]] = []
    if "Item" in parsed:
        items.append(parsed["Item"])
    items.extend(parsed.get("Items", []))
    for rows in (parsed.get("Responses") or {}).values():
        if isinstance(rows, list):
            items.extend(rows)
    returned = []
    for item in items:
        key = item_key(item)
        size = item_size(item)
        if key is not None:
            returned.append({"key": list(key), "size": size})
        else:
            # A projection without the key: keep its (small) attributes to find the
            # full item in the final scan.
            returned.append({"proj": _plain(item) if size < 8192 else None, "size": size})
    return {
        "returned": returned,
        "count": parsed.get("Count", len(items)),
        "scanned": parsed.get("ScannedCount", parsed.get("Count", len(items))),
    }


def _plain(item: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for name, value in item.items():
        ((tag, v),) = value.items()
        if tag in ("S", "N"):
            out[name] = f"{tag}:{v}"
    return out


# ---------------------------------------------------------------- pricing
class TableSnapshot:
    """Full item sizes of one table at the end of a workload, and its indexes."""

    def __init__(self, items: Iterable[Mapping[str, Any]], gsis: Sequence[dict[str, Any]]):
        self.sizes: dict[tuple[str, str], int] = {}
        self.partitions: dict[str, list[tuple[dict[str, str], int]]] = {}
        self.gsis = gsis
        self.gsi_bytes = 0
        self.gsi_entries = 0
        self.item_bytes = 0
        self.items = 0
        for item in items:
            key = item_key(item)
            size = item_size(item)
            self.items += 1
            self.item_bytes += size
            if key is None:
                continue
            self.sizes[key] = size
            self.partitions.setdefault(key[0], []).append((_plain(item), size))
            for gsi in gsis:
                if all(k in item for k in gsi["keys"]):
                    self.gsi_entries += 1
                    self.gsi_bytes += self.gsi_entry_size(item, gsi)

    @staticmethod
    def gsi_entry_size(item: Mapping[str, Any], gsi: Mapping[str, Any]) -> int:
        names = set(gsi["projected"]) if gsi["projected"] is not None else set(item)
        return sum(len(n.encode("utf-8")) + value_size(item[n]) for n in names if n in item)

    def full_size(self, pk: str | None, returned: Mapping[str, Any]) -> int:
        """Full size of a returned item (its projection is a lower bound)."""
        if returned.get("key"):
            return max(int(returned["size"]), self.sizes.get(tuple(returned["key"]), 0))
        proj = returned.get("proj")
        if proj and pk is not None:
            for attrs, size in self.partitions.get(pk, []):
                if all(attrs.get(k) == v for k, v in proj.items()):
                    return max(size, int(returned["size"]))
        return int(returned["size"])


def request_units(summary: Mapping[str, Any], snapshot: TableSnapshot | None) -> dict[str, float]:
    """WRU and RRU of one summarised DynamoDB request."""
    wru = 0.0
    rru = 0.0
    for w in summary.get("writes", []):
        size = w["size"]
        if snapshot is not None and w.get("key") and not w.get("exact"):
            size = max(size, snapshot.sizes.get(tuple(w["key"]), 0))
        units = max(1, math.ceil(size / 1024))
        wru += units * (2 if w["txn"] else 1)
        if snapshot is not None and w.get("key"):
            # The index entry is written too when the item carries the index keys.
            for gsi in snapshot.gsis:
                if all(k in w.get("attrs", ()) for k in gsi["keys"]):
                    wru += 1
    read = summary.get("read")
    if read is not None:
        factor = 1.0 if read.get("consistent") else 0.5
        response = summary.get("response", {})
        if "batch" in read:
            for row in response.get("returned", []):
                size = snapshot.full_size(None, row) if snapshot else row["size"]
                rru += max(1, math.ceil(size / 4096)) * factor
        else:
            rows = response.get("returned", [])
            total = sum(
                (snapshot.full_size(read.get("pk"), r) if snapshot else r["size"]) for r in rows
            )
            filtered_out = max(0, int(response.get("scanned", 0)) - int(response.get("count", 0)))
            if filtered_out and rows:
                total += filtered_out * (total // len(rows))
            rru += max(1, math.ceil(total / 4096)) * factor
    return {"wru": wru, "rru": rru}
