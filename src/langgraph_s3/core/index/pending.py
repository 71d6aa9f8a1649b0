"""The request that stores a task's pending writes: an update of its writes item that
never overwrites a regular write, and guards the span of a group of records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from typing import Any

from langgraph_s3.core.index.items import key
from langgraph_s3.core.index.writes import CHECK_FAILED, Part
from langgraph_s3.core.schema import (
    AT,
    CID,
    TASK_ID,
    TASK_PATH,
    b,
    n,
    record_attr,
    s,
    writes_id_attrs,
)
from langgraph_s3.immutable import immutable
from langgraph_s3.operations import IndexRequest


@immutable
class WritesUpdate(IndexRequest[bool]):
    """Store records on a task's pending-writes item (UpdateItem). Result: whether it
    did (False: the item holds a record in the span of one of ``guards``).

    A regular write (index >= 0) is never overwritten (a retried task resends the
    same values); a special one (index < 0) is, like ``InMemorySaver`` replaces it.
    A group of records is stored only where no attribute of its span exists yet
    (``guards``: lowest and highest index of each group; ``core/groups.py``).
    """

    table: str
    pk: str
    sk: str
    task_id: str
    task_path: str
    cid: str
    at: int
    records: tuple[tuple[int, bytes], ...] = field(repr=False)
    guards: tuple[tuple[int, int], ...] = ()
    expect: frozenset[str] = frozenset({CHECK_FAILED})
    #: Both ids in ``tid`` and ``cid`` (what releases before 0.12.0 read), else only
    #: what the sort key cannot spell (``schema.writes_id_attrs``, layout 10).
    all_ids: bool = True

    def update(self) -> dict[str, Any]:
        """The UpdateItem request (also the ``writes`` part of a transaction)."""
        tid, cid = writes_id_attrs(self.task_id, self.cid, all_ids=self.all_ids)
        values: dict[str, Any] = {":tid": s(tid), ":tp": s(self.task_path)}
        names = {"#tid": TASK_ID, "#tp": TASK_PATH, "#at": AT}
        # An item an older writer made keeps its task id: emptied beside the ``cid`` it
        # keeps, it would read as task "" in a release before 0.12.0.
        set_tid = "#tid = :tid" if self.all_ids else "#tid = if_not_exists(#tid, :tid)"
        sets = [set_tid, "#tp = if_not_exists(#tp, :tp)"]
        if cid is not None:
            values[":cid"], names["#cid"] = s(cid), CID
            sets.append("#cid = :cid")
        values[":at"] = n(self.at)
        sets.append("#at = :at")
        for i, data in self.records:
            values[f":{record_attr(i)}"] = b(data)
        return {
            "TableName": self.table,
            "Key": key(self.pk, self.sk),
            "UpdateExpression": "SET "
            + ", ".join([*sets, *(_record_clause(i) for i, _ in self.records)]),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def guarded(self) -> dict[str, Any]:
        """:meth:`update` under the condition of ``guards``, if any."""
        update = self.update()
        if self.guards:
            update["ConditionExpression"] = guard_condition(self.guards)
        return update

    def call(self) -> tuple[str, dict[str, Any]]:
        return "update_item", self.guarded()

    def result(self, response: Mapping[str, Any]) -> bool:
        return True

    def refused(self, code: str, response: Mapping[str, Any]) -> bool:
        return False

    def part(self) -> Part:
        """This update as the ``writes`` part of a transaction."""
        return ("writes", {"Update": self.guarded()})


def _record_clause(i: int) -> str:
    name = record_attr(i)
    return f"{name} = if_not_exists({name}, :{name})" if i >= 0 else f"{name} = :{name}"


def guard_condition(guards: Sequence[tuple[int, int]]) -> str:
    """No attribute of the spans ``guards`` (lowest, highest write index) exists."""
    return " AND ".join(
        f"attribute_not_exists({record_attr(i)})" for lo, hi in guards for i in range(lo, hi + 1)
    )


def writes_updates(
    base: WritesUpdate,
    packed: Mapping[int, bytes],
    budget: int,
    spans: Mapping[int, int] | None = None,
) -> list[WritesUpdate]:
    """``base`` (with no records) storing the records ``packed`` (index -> record);
    ``spans``: the groups among them, lowest -> highest index they span.

    One request whatever the number of writes, unless DynamoDB's 4 KB expression
    limit (``budget``, counting a group's condition with its clause) forces a split
    (about 140 writes in one call).
    """
    spans = spans or {}
    groups: list[list[tuple[int, bytes]]] = [[]]
    length = 0
    for i, data in packed.items():
        clause = len(_record_clause(i))
        if i in spans:
            clause += len(guard_condition([(i, spans[i])])) + 5
        if groups[-1] and length + clause > budget:
            groups.append([])
            length = 0
        groups[-1].append((i, data))
        length += clause + 2
    return [
        replace(
            base,
            records=tuple(group),
            guards=tuple((i, spans[i]) for i, _ in group if i in spans),
        )
        for group in groups
    ]
