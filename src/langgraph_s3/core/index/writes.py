"""Requests that write the index: the commit transaction and its parts, pending
writes, batches, conditional updates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from typing import Any

from langgraph_s3.core.index.items import Item, Key, key
from langgraph_s3.core.schema import (
    AT,
    CID,
    KEK,
    NS,
    OWNER_SK,
    PARENT,
    PK,
    READ_AT,
    REGION,
    SK,
    THREAD,
    WRAPPED,
    b,
    n,
    s,
)
from langgraph_s3.immutable import immutable
from langgraph_s3.keys import Layout
from langgraph_s3.operations import IndexRequest

CHECK_FAILED = "ConditionalCheckFailedException"
TXN_CANCELLED = "TransactionCanceledException"
IDEMPOTENT_MISMATCH = "IdempotentParameterMismatchException"


@immutable
class Cancelled:
    """A transaction DynamoDB refused (``code``), with a reason per part, by role."""

    code: str
    roles: tuple[str, ...]
    reasons: tuple[Mapping[str, Any], ...]

    def failed_checks(self) -> dict[str, Mapping[str, Any]]:
        """Role -> cancellation reason, for each part whose condition failed."""
        return {
            role: reason
            for role, reason in zip(self.roles, self.reasons, strict=False)
            if reason.get("Code") == "ConditionalCheckFailed"
        }

    def codes(self) -> list[str | None]:
        """The cancellation reason codes, in request order."""
        return [r.get("Code") for r in self.reasons]


#: One part of a transaction: its role (``put``, ``head``, ``owner``, ``writes``)
#: and its TransactItem.
Part = tuple[str, Mapping[str, Any]]


@immutable
class Transact(IndexRequest["Cancelled | None"]):
    """TransactWriteItems. Result: None when committed, else :class:`Cancelled`.

    DynamoDB gives its cancellation reasons as a list in request order; naming each
    part by its role when the request is built keeps the decoding beside the
    positions it depends on.
    """

    parts: tuple[Part, ...]
    token: str | None = None
    expect: frozenset[str] = frozenset({TXN_CANCELLED})

    def call(self) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"TransactItems": [part for _, part in self.parts]}
        if self.token is not None:
            params["ClientRequestToken"] = self.token
        return "transact_write_items", params

    def result(self, response: Mapping[str, Any]) -> Cancelled | None:
        return None

    def refused(self, code: str, response: Mapping[str, Any]) -> Cancelled | None:
        reasons = tuple(response.get("CancellationReasons") or ())
        return Cancelled(code, tuple(role for role, _ in self.parts), reasons)

    def without(self, role: str, token: str | None) -> Transact:
        """The same transaction without its ``role`` parts (and a new token)."""
        return replace(self, parts=tuple(p for p in self.parts if p[0] != role), token=token)


def put_part(table: str, item: Item) -> Part:
    """The ``put`` part of a commit: the checkpoint item."""
    return ("put", {"Put": {"TableName": table, "Item": item}})


#: The condition of an item's creation: no item has its key yet.
_ABSENT: Mapping[str, Any] = {
    "ConditionExpression": "attribute_not_exists(#pk)",
    "ExpressionAttributeNames": {"#pk": PK},
}


def put_new_part(table: str, item: Item) -> Part:
    """The ``put`` part of a transaction that creates ``item``: only if no item has its
    key yet (a :class:`PutNew` inside a transaction)."""
    return ("put", {"Put": {"TableName": table, "Item": item, **_ABSENT}})


def absent_part(table: str, pk: str, sk: str) -> Part:
    """The ``absent`` part of a transaction: it commits only while the item of key
    (``pk``, ``sk``) does not exist."""
    return ("absent", {"ConditionCheck": {"TableName": table, "Key": key(pk, sk), **_ABSENT}})


def head_part(
    table: str,
    item: Mapping[str, Any],
    ids: tuple[str, str, str],
    expected: str | None,
    guarded: bool,
) -> Part:
    """The ``head`` part of a commit: move a namespace's head to the checkpoint ``item``
    (of thread, namespace and checkpoint ``ids``). Heads hold all three, whatever the
    checkpoint items leave out.

    A guarded continuation moves it only from ``expected`` (its parent; ``None``:
    only if the namespace has no head yet); a fork moves it only forward.
    """
    thread_id, ns, cid = ids
    head: dict[str, Any] = {
        "TableName": table,
        "Key": {PK: item[PK], SK: s(Layout.head_sk(ns))},
        "UpdateExpression": "SET #c = :c, #th = :th, #ns = :ns, #at = :at",
        "ExpressionAttributeNames": {"#c": CID, "#th": THREAD, "#ns": NS, "#at": AT},
        "ExpressionAttributeValues": {
            ":c": s(cid),
            ":th": s(thread_id),
            ":ns": s(ns),
            ":at": item[AT],
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if guarded and expected is None:
        head["ConditionExpression"] = "attribute_not_exists(#c)"
    elif guarded:
        head["ConditionExpression"] = "attribute_not_exists(#c) OR #c = :p"
        head["ExpressionAttributeValues"][":p"] = s(str(expected))
    else:
        head["ConditionExpression"] = "attribute_not_exists(#c) OR #c <= :c"
    return ("head", {"Update": head})


def owner_part(table: str, pk: str, region: str, *, home: bool) -> Part:
    """The ``owner`` part of a write: this region owns the thread.

    The home region owns every thread no other region has claimed.
    """
    return (
        "owner",
        {
            "ConditionCheck": {
                "TableName": table,
                "Key": key(pk, OWNER_SK),
                "ConditionExpression": (
                    "attribute_not_exists(#r) OR #r = :me" if home else "#r = :me"
                ),
                "ExpressionAttributeNames": {"#r": REGION},
                "ExpressionAttributeValues": {":me": s(region)},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
    )


@immutable
class BatchWrite(IndexRequest[list[Mapping[str, Any]]]):
    """BatchWriteItem of up to 25 puts or deletes. Result: what DynamoDB deferred."""

    table: str
    requests: tuple[Mapping[str, Any], ...]

    def call(self) -> tuple[str, dict[str, Any]]:
        return "batch_write_item", {"RequestItems": {self.table: list(self.requests)}}

    def result(self, response: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return list(response.get("UnprocessedItems", {}).get(self.table, []))


def delete_requests(keys: Sequence[Key]) -> list[Mapping[str, Any]]:
    """BatchWrite requests deleting items by primary key."""
    return [{"DeleteRequest": {"Key": k}} for k in keys]


def put_requests(items: Sequence[Item]) -> list[Mapping[str, Any]]:
    """BatchWrite requests writing whole items (overwriting)."""
    return [{"PutRequest": {"Item": i}} for i in items]


class _Conditional(IndexRequest[bool]):
    """An update or delete that only applies under a condition. Result: whether it did."""

    expect = frozenset({CHECK_FAILED})

    def result(self, response: Mapping[str, Any]) -> bool:
        return True

    def refused(self, code: str, response: Mapping[str, Any]) -> bool:
        return False


@immutable
class _Put(_Conditional):
    """Put ``item`` under the condition :meth:`condition` states."""

    table: str
    item: Item

    def condition(self) -> dict[str, Any]:
        raise NotImplementedError

    def call(self) -> tuple[str, dict[str, Any]]:
        return "put_item", {"TableName": self.table, "Item": self.item, **self.condition()}


@immutable
class PutNew(_Put):
    """Put ``item`` only if no item has its key yet. Result: whether it was put.

    Two writers creating the same item agree on one: the loser learns it lost
    (``False``) and reads the winner's.
    """

    def condition(self) -> dict[str, Any]:
        return dict(_ABSENT)


@immutable
class Replace(_Put):
    """Put ``item`` over the stored item of its key, if that one still exists and
    was not updated since it was read (its ``at`` is still the one ``item`` keeps).
    Result: whether it was put.

    Re-encryption rewrites items in place this way: records a run added meanwhile
    (an update sets ``at``) are not overwritten, and a deleted item is not put back.
    """

    def condition(self) -> dict[str, Any]:
        return {
            "ConditionExpression": "attribute_exists(#pk) AND #at = :at",
            "ExpressionAttributeNames": {"#pk": PK, "#at": AT},
            "ExpressionAttributeValues": {":at": self.item[AT]},
        }


@immutable
class DeleteHead(_Conditional):
    """Delete a namespace's head if it names one of ``cids`` (at most 100)."""

    table: str
    pk: str
    head_sk: str
    cids: tuple[str, ...]

    def call(self) -> tuple[str, dict[str, Any]]:
        return "delete_item", {
            "TableName": self.table,
            "Key": key(self.pk, self.head_sk),
            "ConditionExpression": "#c IN ("
            + ", ".join(f":c{j}" for j in range(len(self.cids)))
            + ")",
            "ExpressionAttributeNames": {"#c": CID},
            "ExpressionAttributeValues": {f":c{j}": s(c) for j, c in enumerate(self.cids)},
        }


@immutable
class DeleteUnchanged(_Conditional):
    """Delete an item if it was not written since it was read: its ``at`` is still
    ``at`` (the number as read; None: it still has no ``at``). Result: whether it was
    deleted.

    The collector deletes what a shred left this way, so an item a writer wrote again
    after the collector's scan stays.
    """

    table: str
    pk: str
    sk: str
    at: str | None

    def call(self) -> tuple[str, dict[str, Any]]:
        if self.at is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(#at)"}
        else:
            condition = {
                "ConditionExpression": "#at = :at",
                "ExpressionAttributeValues": {":at": {"N": self.at}},
            }
        return "delete_item", {
            "TableName": self.table,
            "Key": key(self.pk, self.sk),
            "ExpressionAttributeNames": {"#at": AT},
            **condition,
        }


@immutable
class UnlinkParent(_Conditional):
    """Forget a checkpoint item's parent link, if it still names ``parent``."""

    table: str
    pk: str
    sk: str
    parent: str

    def call(self) -> tuple[str, dict[str, Any]]:
        return "update_item", {
            "TableName": self.table,
            "Key": key(self.pk, self.sk),
            "UpdateExpression": "REMOVE #p",
            "ConditionExpression": "#p = :p",
            "ExpressionAttributeNames": {"#p": PARENT},
            "ExpressionAttributeValues": {":p": s(self.parent)},
        }


@immutable
class RewrapKey(_Conditional):
    """Store a data key item's key wrapped anew (``rekey``), if it still holds ``old``.

    Result: whether it did; ``False`` when the item changed or was deleted (shredded)
    since it was read.
    """

    table: str
    pk: str
    sk: str
    old: bytes = field(repr=False)
    new: bytes = field(repr=False)
    kek: str
    at: int

    def call(self) -> tuple[str, dict[str, Any]]:
        return "update_item", {
            "TableName": self.table,
            "Key": key(self.pk, self.sk),
            "UpdateExpression": "SET #wk = :new, #kek = :kek, #at = :at",
            "ConditionExpression": "#wk = :old",
            "ExpressionAttributeNames": {"#wk": WRAPPED, "#kek": KEK, "#at": AT},
            "ExpressionAttributeValues": {
                ":new": b(self.new), ":old": b(self.old), ":kek": s(self.kek), ":at": n(self.at),
            },
        }  # fmt: skip


@immutable
class TouchHead(_Conditional):
    """Record a read of the latest checkpoint on its head item, if the head exists."""

    table: str
    pk: str
    head_sk: str
    at: int

    def call(self) -> tuple[str, dict[str, Any]]:
        return "update_item", {
            "TableName": self.table,
            "Key": key(self.pk, self.head_sk),
            "UpdateExpression": "SET #rd = :now",
            "ConditionExpression": "attribute_exists(#c)",
            "ExpressionAttributeNames": {"#rd": READ_AT, "#c": CID},
            "ExpressionAttributeValues": {":now": n(self.at)},
        }


@immutable
class ClaimOwner(IndexRequest["str | None"]):
    """Name ``region`` the owner of a thread. Result: the owner before (None: none named)."""

    table: str
    pk: str
    thread_id: str
    region: str
    at: int

    def call(self) -> tuple[str, dict[str, Any]]:
        return "update_item", {
            "TableName": self.table,
            "Key": key(self.pk, OWNER_SK),
            "UpdateExpression": "SET #r = :me, #th = :th, #at = :at",
            "ExpressionAttributeNames": {"#r": REGION, "#th": THREAD, "#at": AT},
            "ExpressionAttributeValues": {
                ":me": s(self.region),
                ":th": s(self.thread_id),
                ":at": n(self.at),
            },
            "ReturnValues": "ALL_OLD",
        }

    def result(self, response: Mapping[str, Any]) -> str | None:
        attr = response.get("Attributes", {}).get(REGION)
        return None if attr is None else str(attr["S"])
