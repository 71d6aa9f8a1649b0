"""Unit tests of ``core.index``: each typed request to the index, the exact call it
makes (method and parameters, as DynamoDB receives them) and how it decodes
DynamoDB's answers and the refusals it expects.

The expected parameters are spelled out literally: they are the wire format, and a
change to them is a change to what every deployed table is sent.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from langgraph_s3.core.index import (
    IDEMPOTENT_MISMATCH,
    TXN_CANCELLED,
    BatchWrite,
    Cancelled,
    ClaimOwner,
    CreateTable,
    DeleteHead,
    EnableTtl,
    KeyPrefixScan,
    ListFilter,
    Page,
    PutNew,
    Query,
    RunQuery,
    ScanCheckpoints,
    ScanSegment,
    TableStatus,
    TouchHead,
    Transact,
    UnlinkParent,
    WritesUpdate,
    delete_requests,
    head_part,
    key,
    owner_part,
    put_part,
    put_requests,
    writes_updates,
)

START = {"pk": {"S": "t1"}, "sk": {"S": "c#~#c1"}}
PK = {":pk": {"S": "t1"}}
CHECK_FAILED = "ConditionalCheckFailedException"

#: The filter clause every list filter starts with: writes items pass, checkpoint
#: items (they have a digest) must match the metadata.
ITEMS = "(attribute_exists(#tid) OR (attribute_exists(#h)))"
ITEM_NAMES = {"#tid": "tid", "#h": "h"}


def test_key_is_a_primary_key() -> None:
    assert key("t1", "c#~#c1") == START


# --------------------------------------------------------------------------- reads
@pytest.mark.parametrize(
    ("request_", "params"),
    [
        (
            Query("t", "t1"),
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": PK,
                "ConsistentRead": True,
            },
        ),
        (
            Query("t", "t1", prefix="c#~#", newest_first=True, limit=8),
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :pre)",
                "ExpressionAttributeValues": {**PK, ":pre": {"S": "c#~#"}},
                "ScanIndexForward": False,
                "ConsistentRead": True,
                "Limit": 8,
            },
        ),
        (
            Query("t", "t1", between=("c#~#c1", "c#~#c1#x"), start=START),
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
                "ExpressionAttributeValues": {
                    **PK,
                    ":lo": {"S": "c#~#c1"},
                    ":hi": {"S": "c#~#c1#x"},
                },
                "ConsistentRead": True,
                "ExclusiveStartKey": START,
            },
        ),
        (
            Query("t", "t1", keys_only=True, consistent=False, limit=1),
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": PK,
                "ProjectionExpression": "pk, sk",
                "Limit": 1,
            },
        ),
    ],
)
def test_a_query_reads_a_partition_its_prefix_or_a_range(
    request_: Query, params: dict[str, Any]
) -> None:
    assert request_.call() == ("query", params)
    assert (request_.method, request_.params) == ("query", params)
    assert request_.expect == frozenset()


def test_between_wins_over_a_prefix() -> None:
    both = Query("t", "t1", prefix="c#", between=("a", "b"))
    assert both.params["KeyConditionExpression"] == "pk = :pk AND sk BETWEEN :lo AND :hi"
    assert ":pre" not in both.params["ExpressionAttributeValues"]


def test_a_list_query_filters_on_metadata_the_before_bound_and_an_id() -> None:
    where = ListFilter(((0, "source", "s:loop"), (2, "step", "n:1")), before_id="c9", cid="c5")
    query = Query("t", "t1", prefix="c#", newest_first=True, consistent=False, where=where)
    assert query.call() == (
        "query",
        {
            "TableName": "t",
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :pre)",
            # Layout 9 items hold neither md (a body in the item) nor cid: they pass,
            # and the reader checks them.
            "FilterExpression": "(attribute_exists(#tid) OR (attribute_exists(#h) AND "
            "(attribute_not_exists(#md) OR (#md.#f0 = :f0 AND #md.#f2 = :f2)))) AND "
            "(attribute_not_exists(#cid) OR #cid = :cid) AND "
            "(attribute_not_exists(#cid) OR #cid < :before)",
            "ExpressionAttributeNames": {
                "#f0": "source",
                "#f2": "step",
                "#md": "md",
                **ITEM_NAMES,
                "#cid": "cid",
            },
            "ExpressionAttributeValues": {
                ":f0": {"S": "s:loop"},
                ":f2": {"S": "n:1"},
                ":before": {"S": "c9"},
                ":cid": {"S": "c5"},
                **PK,
                ":pre": {"S": "c#"},
            },
            "ScanIndexForward": False,
        },
    )


def test_an_empty_list_filter_keeps_checkpoint_and_writes_items() -> None:
    assert ListFilter().clauses() == ([ITEMS], ITEM_NAMES, {})
    clauses, names, values = ListFilter(before_id="c9").clauses()
    assert clauses == [ITEMS, "(attribute_not_exists(#cid) OR #cid < :before)"]
    assert names == {**ITEM_NAMES, "#cid": "cid"} and values == {":before": {"S": "c9"}}


def test_a_run_query_reads_the_by_run_index() -> None:
    params = {
        "TableName": "t",
        "IndexName": "by_run",
        "KeyConditionExpression": "#r = :r",
        "ExpressionAttributeNames": {"#r": "run"},
        "ExpressionAttributeValues": {":r": {"S": "r1"}},
    }
    assert RunQuery("t", "r1").call() == ("query", params)
    assert RunQuery("t", "r1", START).call() == ("query", {**params, "ExclusiveStartKey": START})


def test_a_scan_segment_filters_on_the_prefix_if_there_is_one() -> None:
    assert ScanSegment("t", "", 3, 4).call() == (
        "scan",
        {"TableName": "t", "TotalSegments": 4, "Segment": 3},
    )
    assert ScanSegment("t", "app/", 0, 4, start=START).call() == (
        "scan",
        {
            "TableName": "t",
            "TotalSegments": 4,
            "FilterExpression": "begins_with(pk, :p)",
            "ExpressionAttributeValues": {":p": {"S": "app/"}},
            "Segment": 0,
            "ExclusiveStartKey": START,
        },
    )


def test_a_checkpoint_scan_filters_items_then_prefix_then_metadata() -> None:
    assert ScanCheckpoints("t", "", ListFilter()).call() == (
        "scan",
        {"TableName": "t", "FilterExpression": ITEMS, "ExpressionAttributeNames": ITEM_NAMES},
    )
    where = ListFilter(((0, "step", "n:1"),), before_id="c9")
    assert ScanCheckpoints("t", "app/", where, start=START).call() == (
        "scan",
        {
            "TableName": "t",
            "FilterExpression": "(attribute_exists(#tid) OR (attribute_exists(#h) AND "
            "(attribute_not_exists(#md) OR (#md.#f0 = :f0)))) AND begins_with(pk, :prefix) "
            "AND (attribute_not_exists(#cid) OR #cid < :before)",
            "ExpressionAttributeNames": {
                "#f0": "step",
                "#md": "md",
                **ITEM_NAMES,
                "#cid": "cid",
            },
            "ExpressionAttributeValues": {
                ":f0": {"S": "n:1"},
                ":before": {"S": "c9"},
                ":prefix": {"S": "app/"},
            },
            "ExclusiveStartKey": START,
        },
    )


@pytest.mark.parametrize(
    "request_",
    [
        Query("t", "t1", limit=8),
        RunQuery("t", "r1"),
        ScanSegment("t", "", 0, 4),
        ScanCheckpoints("t", "", ListFilter()),
    ],
)
def test_a_paged_request_decodes_a_page_and_knows_the_next_request(request_: Any) -> None:
    last = request_.result({"Items": [START], "LastEvaluatedKey": START, "Count": 1})
    assert last == Page([START], START)
    following = request_.following(last)
    assert type(following) is type(request_) and following.start == START
    assert following.params == {**request_.params, "ExclusiveStartKey": START}
    end = request_.result({})
    assert end == Page([], None) and request_.following(end) is None


# --------------------------------------------------------------------------- writes
#: A checkpoint item as layout 9 writes it: its keys spell its ids, which its head holds.
ITEM = {"pk": {"S": "t1"}, "sk": {"S": "c#~#c2"}, "at": {"N": "5"}, "h": {"S": "digest"}}


def head(condition: str, **extra: Any) -> dict[str, Any]:
    """The head part of a commit of ``ITEM``."""
    return {
        "Update": {
            "TableName": "t",
            "Key": {"pk": {"S": "t1"}, "sk": {"S": "h#~"}},
            "UpdateExpression": "SET #c = :c, #th = :th, #ns = :ns, #at = :at",
            "ExpressionAttributeNames": {"#c": "cid", "#th": "th", "#ns": "ns", "#at": "at"},
            "ExpressionAttributeValues": {
                ":c": {"S": "c2"},
                ":th": {"S": "t1"},
                ":ns": {"S": ""},
                ":at": {"N": "5"},
                **extra,
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ConditionExpression": condition,
        }
    }


def test_the_head_part_moves_from_the_parent_from_nothing_or_forward() -> None:
    assert head_part("t", ITEM, ("t1", "", "c2"), "c1", guarded=True) == (
        "head",
        head("attribute_not_exists(#c) OR #c = :p", **{":p": {"S": "c1"}}),
    )
    assert head_part("t", ITEM, ("t1", "", "c2"), None, guarded=True) == (
        "head",
        head("attribute_not_exists(#c)"),
    )
    # A fork moves the head only forward, whatever its parent.
    for expected in ("c1", None):
        assert head_part("t", ITEM, ("t1", "", "c2"), expected, guarded=False) == (
            "head",
            head("attribute_not_exists(#c) OR #c <= :c"),
        )


def test_the_put_part_writes_the_checkpoint_item() -> None:
    assert put_part("t", ITEM) == ("put", {"Put": {"TableName": "t", "Item": ITEM}})


@pytest.mark.parametrize(
    ("home", "condition"), [(True, "attribute_not_exists(#r) OR #r = :me"), (False, "#r = :me")]
)
def test_the_owner_part_checks_this_region_owns_the_thread(home: bool, condition: str) -> None:
    assert owner_part("t", "t1", "eu-west-1", home=home) == (
        "owner",
        {
            "ConditionCheck": {
                "TableName": "t",
                "Key": {"pk": {"S": "t1"}, "sk": {"S": "o"}},
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#r": "region"},
                "ExpressionAttributeValues": {":me": {"S": "eu-west-1"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
    )


def commit(token: str | None = "tok") -> Transact:
    return Transact(
        (put_part("t", ITEM), head_part("t", ITEM, ("t1", "", "c2"), "c1", guarded=True)), token
    )


def test_a_transaction_sends_its_parts_in_order_with_its_token() -> None:
    put, (_, update) = (
        put_part("t", ITEM),
        head_part("t", ITEM, ("t1", "", "c2"), "c1", guarded=True),
    )
    assert commit().call() == (
        "transact_write_items",
        {"TransactItems": [put[1], update], "ClientRequestToken": "tok"},
    )
    assert commit(None).params == {"TransactItems": [put[1], update]}
    assert commit().expect == frozenset({TXN_CANCELLED})
    assert commit().result({}) is None


def test_a_transaction_without_a_role_drops_its_parts_and_takes_the_new_token() -> None:
    txn = Transact(commit().parts, "tok", expect=frozenset({TXN_CANCELLED, IDEMPOTENT_MISMATCH}))
    smaller = txn.without("head", "tok2")
    assert smaller.parts == (put_part("t", ITEM),)
    assert smaller.params == {
        "TransactItems": [put_part("t", ITEM)[1]],
        "ClientRequestToken": "tok2",
    }
    assert smaller.expect == txn.expect  # the retry expects the same refusals
    assert txn.without("owner", None).parts == txn.parts


def test_a_cancelled_transaction_names_each_reason_by_its_parts_role() -> None:
    reasons: list[dict[str, Any]] = [
        {"Code": "None"},
        {"Code": "ConditionalCheckFailed", "Item": {"cid": {"S": "c9"}}},
    ]
    cancelled = commit().refused(TXN_CANCELLED, {"CancellationReasons": reasons, "Error": {}})
    assert cancelled == Cancelled(TXN_CANCELLED, ("put", "head"), tuple(reasons))
    assert cancelled is not None
    assert cancelled.failed_checks() == {"head": reasons[1]}
    assert cancelled.codes() == ["None", "ConditionalCheckFailed"]


def test_a_refusal_without_reasons_has_no_failed_checks() -> None:
    """IdempotentParameterMismatch carries no cancellation reasons."""
    mismatch = commit().refused(IDEMPOTENT_MISMATCH, {"Error": {"Code": IDEMPOTENT_MISMATCH}})
    assert mismatch == Cancelled(IDEMPOTENT_MISMATCH, ("put", "head"), ())
    assert mismatch is not None and mismatch.failed_checks() == {} and mismatch.codes() == []
    none = commit().refused(TXN_CANCELLED, {"CancellationReasons": None})
    assert none is not None and none.codes() == []


WRITES = WritesUpdate("t", "t1", "c#~#c1#w#task", "task", "~1", "c1", 7, ())


def test_a_writes_update_keeps_regular_writes_and_replaces_special_ones() -> None:
    update = WritesUpdate(
        "t", "t1", "c#~#c1#w#task", "task", "~1", "c1", 7, ((0, b"a"), (-1, b"e"))
    )
    params = {
        "TableName": "t",
        "Key": {"pk": {"S": "t1"}, "sk": {"S": "c#~#c1#w#task"}},
        "UpdateExpression": "SET #tid = :tid, #tp = if_not_exists(#tp, :tp), #cid = :cid, "
        "#at = :at, w0 = if_not_exists(w0, :w0), m1 = :m1",
        "ExpressionAttributeNames": {"#tid": "tid", "#tp": "tp", "#cid": "cid", "#at": "at"},
        "ExpressionAttributeValues": {
            ":tid": {"S": "task"},
            ":tp": {"S": "~1"},
            ":cid": {"S": "c1"},
            ":at": {"N": "7"},
            ":w0": {"B": b"a"},
            ":m1": {"B": b"e"},
        },
    }
    assert update.update() == params
    assert update.call() == ("update_item", params)
    assert update.part() == ("writes", {"Update": params})
    assert update.result({}) is True


def test_a_writes_update_stores_a_group_only_where_its_span_is_free() -> None:
    update = replace(WRITES, records=((1, b"g"), (-1, b"e")), guards=((1, 3),))
    params = update.params
    assert "w1 = if_not_exists(w1, :w1)" in params["UpdateExpression"]
    assert params["ConditionExpression"] == (
        "attribute_not_exists(w1) AND attribute_not_exists(w2) AND attribute_not_exists(w3)"
    )
    assert update.part() == ("writes", {"Update": params})
    assert "ConditionExpression" not in update.update()  # the bare update, for other uses
    # Refused: the caller stores the writes one by one instead.
    assert update.result({}) is True
    assert update.refused("ConditionalCheckFailedException", {}) is False
    assert "ConditionalCheckFailedException" in update.expect
    spans = writes_updates(WRITES, {0: b"a", 1: b"g", 5: b"b"}, 4000, {1: 3})
    assert [u.guards for u in spans] == [((1, 3),)]
    # A group's condition counts towards the expression budget.
    split = writes_updates(WRITES, {0: b"a", 1: b"g"}, 60, {1: 3})
    assert [(u.records, u.guards) for u in split] == [(((0, b"a"),), ()), (((1, b"g"),), ((1, 3),))]


def test_writes_updates_are_one_request_unless_the_expression_budget_splits_them() -> None:
    packed = {i: bytes([i]) for i in range(10)}
    [one] = writes_updates(WRITES, packed, 4000)
    assert one == replace(WRITES, records=tuple(packed.items()))
    assert one.params["Key"] == WRITES.params["Key"]
    # Each clause "wN = if_not_exists(wN, :wN)" is 27 characters (+2 for ", ").
    split = writes_updates(WRITES, packed, 27 * 3 + 2 * 2)
    assert [[i for i, _ in u.records] for u in split] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert all(replace(u, records=()) == WRITES for u in split)
    # A clause longer than the budget still goes, alone.
    assert [len(u.records) for u in writes_updates(WRITES, packed, 1)] == [1] * 10


def test_a_batch_write_sends_its_requests_and_answers_what_was_deferred() -> None:
    deletes = delete_requests([START])
    assert deletes == [{"DeleteRequest": {"Key": START}}]
    assert put_requests([ITEM]) == [{"PutRequest": {"Item": ITEM}}]
    batch = BatchWrite("t", (*deletes, *put_requests([ITEM])))
    assert batch.call() == (
        "batch_write_item",
        {
            "RequestItems": {
                "t": [{"DeleteRequest": {"Key": START}}, {"PutRequest": {"Item": ITEM}}]
            }
        },
    )
    assert batch.result({"UnprocessedItems": {"t": deletes, "other": ["x"]}}) == deletes
    assert batch.result({"UnprocessedItems": {}}) == []
    assert batch.result({}) == []


@pytest.mark.parametrize(
    ("request_", "method", "params"),
    [
        (
            DeleteHead("t", "t1", "h#~", ("c1", "c2")),
            "delete_item",
            {
                "TableName": "t",
                "Key": {"pk": {"S": "t1"}, "sk": {"S": "h#~"}},
                "ConditionExpression": "#c IN (:c0, :c1)",
                "ExpressionAttributeNames": {"#c": "cid"},
                "ExpressionAttributeValues": {":c0": {"S": "c1"}, ":c1": {"S": "c2"}},
            },
        ),
        (
            UnlinkParent("t", "t1", "c#~#c1", "c0"),
            "update_item",
            {
                "TableName": "t",
                "Key": START,
                "UpdateExpression": "REMOVE #p",
                "ConditionExpression": "#p = :p",
                "ExpressionAttributeNames": {"#p": "p"},
                "ExpressionAttributeValues": {":p": {"S": "c0"}},
            },
        ),
        (
            PutNew("t", {"pk": {"S": "t1"}, "sk": {"S": "k#0000000001"}}),
            "put_item",
            {
                "TableName": "t",
                "Item": {"pk": {"S": "t1"}, "sk": {"S": "k#0000000001"}},
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": "pk"},
            },
        ),
        (
            TouchHead("t", "t1", "h#~", 9),
            "update_item",
            {
                "TableName": "t",
                "Key": {"pk": {"S": "t1"}, "sk": {"S": "h#~"}},
                "UpdateExpression": "SET #rd = :now",
                "ConditionExpression": "attribute_exists(#c)",
                "ExpressionAttributeNames": {"#rd": "rd", "#c": "cid"},
                "ExpressionAttributeValues": {":now": {"N": "9"}},
            },
        ),
    ],
)
def test_a_conditional_request_answers_whether_it_applied(
    request_: Any, method: str, params: dict[str, Any]
) -> None:
    assert request_.call() == (method, params)
    assert request_.expect == frozenset({CHECK_FAILED})
    assert request_.result({}) is True
    assert request_.refused(CHECK_FAILED, {"Error": {"Code": CHECK_FAILED}}) is False


def test_claiming_a_thread_answers_the_owner_before() -> None:
    claim = ClaimOwner("t", "t1", "t1", "eu-west-1", 9)
    assert claim.call() == (
        "update_item",
        {
            "TableName": "t",
            "Key": {"pk": {"S": "t1"}, "sk": {"S": "o"}},
            "UpdateExpression": "SET #r = :me, #th = :th, #at = :at",
            "ExpressionAttributeNames": {"#r": "region", "#th": "th", "#at": "at"},
            "ExpressionAttributeValues": {
                ":me": {"S": "eu-west-1"},
                ":th": {"S": "t1"},
                ":at": {"N": "9"},
            },
            "ReturnValues": "ALL_OLD",
        },
    )
    assert claim.result({"Attributes": {"region": {"S": "ap-south-1"}, "th": {"S": "t1"}}}) == (
        "ap-south-1"
    )
    assert claim.result({"Attributes": {"th": {"S": "t1"}}}) is None
    assert claim.result({}) is None
    assert claim.expect == frozenset()


# --------------------------------------------------------------------------- table
def test_create_table_declares_keys_and_the_by_run_index_and_tolerates_an_existing_one() -> None:
    create = CreateTable("t")
    assert create.call() == (
        "create_table",
        {
            "TableName": "t",
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
                {"AttributeName": "run", "AttributeType": "S"},
            ],
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": "by_run",
                    "KeySchema": [
                        {"AttributeName": "run", "KeyType": "HASH"},
                        {"AttributeName": "sk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    assert create.expect == frozenset({"ResourceInUseException"})
    assert create.result({"TableDescription": {}}) is True
    assert create.refused("ResourceInUseException", {}) is False


def test_table_status_and_ttl() -> None:
    status = TableStatus("t")
    assert status.call() == ("describe_table", {"TableName": "t"})
    assert status.result({"Table": {"TableStatus": "CREATING", "TableName": "t"}}) == "CREATING"
    ttl = EnableTtl("t")
    assert ttl.call() == (
        "update_time_to_live",
        {
            "TableName": "t",
            "TimeToLiveSpecification": {"Enabled": True, "AttributeName": "expires_at"},
        },
    )
    assert ttl.result({"TimeToLiveSpecification": {}}) is None  # type: ignore[func-returns-value]


def test_a_key_prefix_scan_projects_and_filters_the_key() -> None:
    scan = KeyPrefixScan("other", "PK", "CHECKPOINT_")
    assert scan.call() == (
        "scan",
        {
            "TableName": "other",
            "ProjectionExpression": "PK",
            "FilterExpression": "begins_with(PK, :c)",
            "ExpressionAttributeValues": {":c": {"S": "CHECKPOINT_"}},
        },
    )
    page = scan.result({"Items": [{"PK": {"S": "CHECKPOINT_t1"}}], "LastEvaluatedKey": {"PK": 1}})
    following = scan.following(page)
    assert following is not None and following.params["ExclusiveStartKey"] == {"PK": 1}
