"""Requests that read the index: pages of a partition, of a run, of a scan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Self

from langgraph_s3.core.index.items import Item, Key
from langgraph_s3.core.schema import (
    CID,
    DIGEST,
    GSI_RUN,
    KEY_SK_PREFIX,
    METADATA,
    PK,
    RUN,
    SK,
    TASK_ID,
    s,
)
from langgraph_s3.immutable import immutable
from langgraph_s3.operations import IndexRequest


@immutable
class Page:
    """One page of a query or scan: its items, and where the next page starts
    (``None`` after the last)."""

    items: list[Item]
    last: Key | None


class Paged(IndexRequest[Page]):
    start: Key | None

    def result(self, response: Mapping[str, Any]) -> Page:
        return Page(list(response.get("Items", [])), response.get("LastEvaluatedKey"))

    def following(self, page: Page) -> Self | None:
        """The request for the page after ``page`` (None after the last)."""
        return None if page.last is None else replace(self, start=page.last)  # type: ignore[type-var]


@immutable
class ListFilter:
    """What ``list`` asks of the index beside the key condition: checkpoint items
    whose indexed metadata equals ``metadata`` (writes items always pass), older
    than ``before_id``, or exactly ``cid``.

    ``metadata``: (slot, key, ``schema.metadata_index_value``) for each filter key
    whose value the index can hold (``slot``: its position in the caller's filter,
    which names its placeholders); the others are checked on the loaded metadata.
    """

    metadata: tuple[tuple[int, str, str], ...] = ()
    before_id: str | None = None
    cid: str | None = None

    def clauses(self) -> tuple[list[str], dict[str, str], dict[str, Any]]:
        """Filter clauses, and the names and values they use."""
        names = {f"#f{i}": k for i, k, _ in self.metadata}
        vals: dict[str, Any] = {f":f{i}": s(v) for i, _, v in self.metadata}
        match = " AND ".join(f"#md.#f{i} = :f{i}" for i, _, _ in self.metadata)
        if match:
            names["#md"] = METADATA
        names.update({"#tid": TASK_ID, "#h": DIGEST})
        # Layout 9 items hold no ``cid`` (their sort key does, which a filter may not
        # name) and no ``md`` beside a body in the item: they pass, and the reader
        # checks them (``admits``, and the metadata where it lies).
        clauses = ["(attribute_exists(#tid) OR (attribute_exists(#h)" + (
            f" AND (attribute_not_exists(#md) OR ({match}))))" if match else "))"
        )]  # fmt: skip
        if self.before_id is not None:
            clauses.append("(attribute_not_exists(#cid) OR #cid < :before)")
            names["#cid"] = CID
            vals[":before"] = s(self.before_id)
        if self.cid is not None:
            clauses.insert(1, "(attribute_not_exists(#cid) OR #cid = :cid)")
            vals[":cid"] = s(self.cid)
            names["#cid"] = CID
        return clauses, names, vals

    def admits(self, checkpoint_id: str) -> bool:
        """Whether a checkpoint of id ``checkpoint_id`` is older than ``before_id`` and
        is ``cid``, where they are set (what the index could not check on layout 9)."""
        if self.before_id is not None and not checkpoint_id < self.before_id:
            return False
        return self.cid is None or checkpoint_id == self.cid


@immutable
class Query(Paged):
    """One page of a thread's partition: every item, the items whose sort key
    begins with ``prefix``, or those ``between`` two sort keys (inclusive)."""

    table: str
    pk: str
    prefix: str | None = None
    between: tuple[str, str] | None = None
    newest_first: bool = False
    consistent: bool = True
    limit: int | None = None
    keys_only: bool = False
    where: ListFilter | None = None
    start: Key | None = None

    def call(self) -> tuple[str, dict[str, Any]]:
        vals: dict[str, Any] = {":pk": s(self.pk)}
        if self.between is not None:
            condition = "pk = :pk AND sk BETWEEN :lo AND :hi"
            vals[":lo"], vals[":hi"] = s(self.between[0]), s(self.between[1])
        elif self.prefix is not None:
            condition = "pk = :pk AND begins_with(sk, :pre)"
            vals[":pre"] = s(self.prefix)
        else:
            condition = "pk = :pk"
        params: dict[str, Any] = {"TableName": self.table, "KeyConditionExpression": condition}
        if self.where is not None:
            clauses, names, filter_vals = self.where.clauses()
            params["FilterExpression"] = " AND ".join(clauses)
            params["ExpressionAttributeNames"] = names
            vals = {**filter_vals, **vals}
        params["ExpressionAttributeValues"] = vals
        if self.newest_first:
            params["ScanIndexForward"] = False
        if self.consistent:
            params["ConsistentRead"] = True
        if self.keys_only:
            params["ProjectionExpression"] = f"{PK}, {SK}"
        return "query", _paged(params, self.limit, self.start)


@immutable
class RunQuery(Paged):
    """One page of the keys of the checkpoint items a run created (the ``by_run`` index)."""

    table: str
    run_id: str
    start: Key | None = None

    def call(self) -> tuple[str, dict[str, Any]]:
        params = {
            "TableName": self.table,
            "IndexName": GSI_RUN,
            "KeyConditionExpression": "#r = :r",
            "ExpressionAttributeNames": {"#r": RUN},
            "ExpressionAttributeValues": {":r": s(self.run_id)},
        }
        return "query", _paged(params, None, self.start)


@immutable
class ScanSegment(Paged):
    """One page of one segment of a parallel scan of the items under ``prefix``."""

    table: str
    prefix: str
    segment: int
    segments: int
    start: Key | None = None

    def call(self) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"TableName": self.table, "TotalSegments": self.segments}
        if self.prefix:
            params["FilterExpression"] = "begins_with(pk, :p)"
            params["ExpressionAttributeValues"] = {":p": s(self.prefix)}
        params["Segment"] = self.segment
        return "scan", _paged(params, None, self.start)


@immutable
class ScanKeyItems(Paged):
    """One page of a scan for the data key items of every thread and tenant under
    ``prefix`` (``langgraph-s3 rekey``)."""

    table: str
    prefix: str
    start: Key | None = None

    def call(self) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "begins_with(pk, :p) AND begins_with(sk, :k)",
            "ExpressionAttributeValues": {":p": s(self.prefix), ":k": s(KEY_SK_PREFIX)},
            "ConsistentRead": True,
        }
        return "scan", _paged(params, None, self.start)


@immutable
class ScanCheckpoints(Paged):
    """One page of a scan for the checkpoint and writes items of every thread under
    ``prefix`` (``list(None)``)."""

    table: str
    prefix: str
    where: ListFilter
    start: Key | None = None

    def call(self) -> tuple[str, dict[str, Any]]:
        clauses, names, vals = self.where.clauses()
        if self.prefix:
            clauses.insert(1, "begins_with(pk, :prefix)")
            vals[":prefix"] = s(self.prefix)
        params: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": " AND ".join(clauses),
            "ExpressionAttributeNames": names,
        }
        if vals:
            params["ExpressionAttributeValues"] = vals
        return "scan", _paged(params, None, self.start)


@immutable
class KeyPrefixScan(Paged):
    """One page of a scan of another saver's table for the partition keys (attribute
    ``key``) that begin with ``prefix``: how ``migrate`` finds DynamoDBSaver threads."""

    table: str
    key: str
    prefix: str
    start: Key | None = None

    def call(self) -> tuple[str, dict[str, Any]]:
        params = {
            "TableName": self.table,
            "ProjectionExpression": self.key,
            "FilterExpression": f"begins_with({self.key}, :c)",
            "ExpressionAttributeValues": {":c": s(self.prefix)},
        }
        return "scan", _paged(params, None, self.start)


def _paged(params: dict[str, Any], limit: int | None, start: Key | None) -> dict[str, Any]:
    if limit is not None:
        params["Limit"] = limit
    if start is not None:
        params["ExclusiveStartKey"] = start
    return params


@immutable
class Got:
    """What one BatchGetItem returned: the items found, and the keys DynamoDB left
    for another request (throughput, or 16 MB per response)."""

    items: list[Item]
    unprocessed: list[Key]


@immutable
class BatchGet(IndexRequest[Got]):
    """BatchGetItem of up to 100 items by key, strongly consistent (a chunk item is
    read after the commit that names it). Result: :class:`Got`; a key without an
    item is in neither list."""

    table: str
    keys: tuple[Key, ...]

    def call(self) -> tuple[str, dict[str, Any]]:
        wanted = {"Keys": list(self.keys), "ConsistentRead": True}
        return "batch_get_item", {"RequestItems": {self.table: wanted}}

    def result(self, response: Mapping[str, Any]) -> Got:
        items = list(response.get("Responses", {}).get(self.table, []))
        left = response.get("UnprocessedKeys", {}).get(self.table, {})
        return Got(items, list(left.get("Keys", [])))
