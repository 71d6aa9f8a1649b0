"""A bucket and table saved to one file and put back: how layout fixtures are kept.

Objects are stored with their keys and bytes, index items in DynamoDB's own JSON
(type-tagged attribute values), so a fixture holds exactly what a release wrote.
The bucket and table names are not part of the layout and are not kept; the key
prefix is (it is in every object key and partition key).
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

from tests.conftest import Backend


def dump(backend: Backend) -> dict[str, Any]:
    """Every object and every index item of ``backend``, in a JSON-able form."""
    s3 = backend.s3()
    objects = {
        key: base64.b64encode(s3.get_object(Bucket=backend.bucket, Key=key)["Body"].read()).decode()
        for key in sorted(backend.object_keys())
    }
    items = sorted(
        (_jsonable(item) for item in backend.items()),
        key=lambda i: (i["pk"]["S"], i["sk"]["S"]),
    )
    return {"objects": objects, "items": items}


def load(backend: Backend, data: dict[str, Any]) -> None:
    """Put a dump's objects and items into ``backend``'s (set-up, empty) bucket and table."""
    s3, ddb = backend.s3(), backend.dynamodb()
    for key, body in data["objects"].items():
        s3.put_object(Bucket=backend.bucket, Key=key, Body=base64.b64decode(body))
    items = [{"PutRequest": {"Item": _binary(item)}} for item in data["items"]]
    for start in range(0, len(items), 25):  # BatchWriteItem's limit
        batch = {backend.table: items[start : start + 25]}
        while batch:
            batch = ddb.batch_write_item(RequestItems=batch).get("UnprocessedItems") or {}


def save(path: Path, data: dict[str, Any]) -> None:
    path.write_bytes(gzip.compress(json.dumps(data, indent=1, sort_keys=True).encode(), mtime=0))


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return data


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _binary(item: dict[str, Any]) -> dict[str, Any]:
    """An item in DynamoDB JSON with its binary values (``B``, ``BS``) bytes again."""
    return {name: _typed(value) for name, value in item.items()}


def _typed(value: dict[str, Any]) -> dict[str, Any]:
    ((tag, inner),) = value.items()
    if tag == "B":
        return {tag: base64.b64decode(inner)}
    if tag == "BS":
        return {tag: [base64.b64decode(v) for v in inner]}
    if tag == "M":
        return {tag: _binary(inner)}
    if tag == "L":
        return {tag: [_typed(v) for v in inner]}
    return value
