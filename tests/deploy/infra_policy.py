"""Just enough IAM to check infra/storage.yaml's policies against the saver's real calls.

Two parts:

* :func:`iam_requests` turns one AWS API call, as botocore is about to send it, into
  the IAM authorisation requests AWS evaluates for it (action, resource ARN,
  condition keys) - e.g. ``CopyObject`` is ``s3:GetObject`` on the source plus
  ``s3:PutObject`` on the target, and ``TransactWriteItems`` is authorised item by
  item as ``PutItem`` / ``UpdateItem``. An API call it does not know fails loudly,
  so a new kind of call in the saver cannot slip past the policy check.
* :func:`allowed` evaluates identity policies the way IAM does for the elements the
  templates use (Allow/Deny, Action and Resource wildcards, and the condition
  operators below). Any other condition operator raises instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class IamRequest:
    """One authorisation request: the action on a resource, with its condition keys."""

    action: str
    resource: str
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    api: str = ""


@dataclass(frozen=True)
class Arns:
    """How ARNs are formed in the account and region under test."""

    region: str
    account: str
    partition: str = "aws"

    def bucket(self, name: str) -> str:
        return f"arn:{self.partition}:s3:::{name}"

    def obj(self, bucket: str, key: str) -> str:
        return f"arn:{self.partition}:s3:::{bucket}/{key}"

    def table(self, name: str, index: str | None = None) -> str:
        arn = f"arn:{self.partition}:dynamodb:{self.region}:{self.account}:table/{name}"
        return f"{arn}/index/{index}" if index else arn


def _leading(values: Iterable[str]) -> dict[str, tuple[str, ...]]:
    return {"dynamodb:LeadingKeys": tuple(dict.fromkeys(values))}


def _hash_key_value(params: Mapping[str, Any]) -> str:
    """The partition key value a Query's key condition binds (``pk = :pk``)."""
    expr = params["KeyConditionExpression"]
    match = re.match(r"\s*(#?\w+)\s*=\s*(:\w+)", expr)
    if not match:
        raise AssertionError(f"cannot find the partition key in {expr!r}")
    return str(params["ExpressionAttributeValues"][match[2]]["S"])


def iam_requests(
    service: str,
    operation: str,
    params: Mapping[str, Any],
    arns: Arns,
    *,
    status: int | None = None,
    hash_key: str = "pk",
) -> list[IamRequest]:
    """The IAM requests AWS authorises for one API call.

    Args:
        service: botocore service name (``s3``, ``dynamodb``, ``kms``).
        operation: API operation name (``GetObject``, ``Query``, ...).
        params: The call's parameters as botocore received them.
        arns: ARN builder for the account and region.
        status: The HTTP status of the response, when known.
        hash_key: Partition key attribute of the tables involved.
    """
    if service == "s3":
        bucket = params["Bucket"]
        if operation in ("GetObject", "HeadObject"):
            requests = [IamRequest("s3:GetObject", arns.obj(bucket, params["Key"]), api=operation)]
            if status == 404:
                # S3 answers 404 for a missing key only if the caller may list the
                # bucket (else 403); it checks that without any s3:prefix.
                requests.append(IamRequest("s3:ListBucket", arns.bucket(bucket), api=operation))
            return requests
        if operation == "PutObject":
            return [IamRequest("s3:PutObject", arns.obj(bucket, params["Key"]), api=operation)]
        if operation == "ListObjectsV2":
            context = {"s3:prefix": (params["Prefix"],)} if "Prefix" in params else {}
            return [IamRequest("s3:ListBucket", arns.bucket(bucket), context, operation)]
        if operation == "DeleteObjects":
            return [
                IamRequest("s3:DeleteObject", arns.obj(bucket, o["Key"]), api=operation)
                for o in params["Delete"]["Objects"]
            ]
        if operation == "CopyObject":
            source = params["CopySource"]
            return [
                IamRequest(
                    "s3:GetObject", arns.obj(source["Bucket"], source["Key"]), api=operation
                ),
                IamRequest("s3:PutObject", arns.obj(bucket, params["Key"]), api=operation),
            ]
    if service == "dynamodb":
        if operation == "Query":
            index = params.get("IndexName")
            resource = arns.table(params["TableName"], index)
            return [
                IamRequest(
                    "dynamodb:Query", resource, _leading([_hash_key_value(params)]), operation
                )
            ]
        if operation == "Scan":
            return [IamRequest("dynamodb:Scan", arns.table(params["TableName"]), api=operation)]
        if operation in ("GetItem", "PutItem", "UpdateItem", "DeleteItem"):
            key = params["Item"] if operation == "PutItem" else params["Key"]
            return [
                IamRequest(
                    f"dynamodb:{operation}",
                    arns.table(params["TableName"]),
                    _leading([key[hash_key]["S"]]),
                    operation,
                )
            ]
        if operation == "BatchWriteItem":
            out = []
            for table, writes in params["RequestItems"].items():
                keys = [
                    (w.get("PutRequest", {}).get("Item") or w["DeleteRequest"]["Key"])[hash_key][
                        "S"
                    ]
                    for w in writes
                ]
                out.append(
                    IamRequest(
                        "dynamodb:BatchWriteItem", arns.table(table), _leading(keys), operation
                    )
                )
            return out
        if operation == "BatchGetItem":
            return [
                IamRequest(
                    "dynamodb:BatchGetItem",
                    arns.table(table),
                    _leading([k[hash_key]["S"] for k in wanted["Keys"]]),
                    operation,
                )
                for table, wanted in params["RequestItems"].items()
            ]
        if operation == "TransactWriteItems":
            kinds = {
                "Put": "PutItem",
                "Update": "UpdateItem",
                "Delete": "DeleteItem",
                "ConditionCheck": "ConditionCheckItem",
            }
            out = []
            for entry in params["TransactItems"]:
                ((kind, body),) = entry.items()
                key = body["Item"] if kind == "Put" else body["Key"]
                out.append(
                    IamRequest(
                        f"dynamodb:{kinds[kind]}",
                        arns.table(body["TableName"]),
                        _leading([key[hash_key]["S"]]),
                        operation,
                    )
                )
            return out
    if service == "kms" and operation in ("GenerateDataKey", "Decrypt"):
        # Client-side encryption's data keys: the key named as KeyId, and the request's
        # encryption context as IAM sees it (one key per pair, and the list of names).
        context = dict(params.get("EncryptionContext") or {})
        keys = {f"kms:EncryptionContext:{k}": (str(v),) for k, v in context.items()}
        keys["kms:EncryptionContextKeys"] = tuple(context)
        resource = params["KeyId"]
        if not resource.startswith("arn:"):
            resource = f"arn:{arns.partition}:kms:{arns.region}:{arns.account}:key/{resource}"
        return [IamRequest(f"kms:{operation}", resource, keys, operation)]
    if service == "kms" and operation == "ReEncrypt":
        # langgraph-s3 rekey: from the source key to the destination key, same context.
        context = dict(params.get("SourceEncryptionContext") or {})
        keys = {f"kms:EncryptionContext:{k}": (str(v),) for k, v in context.items()}
        keys["kms:EncryptionContextKeys"] = tuple(context)
        return [
            IamRequest("kms:ReEncryptFrom", params["SourceKeyId"], keys, operation),
            IamRequest("kms:ReEncryptTo", params["DestinationKeyId"], keys, operation),
        ]
    raise AssertionError(
        f"no IAM mapping for {service}:{operation}; add it to tests/deploy/infra_policy.py "
        "and decide whether infra/storage.yaml must grant it"
    )


def with_context(request: IamRequest, context: Mapping[str, str]) -> IamRequest:
    """The same KMS request with another encryption context, as IAM would see it."""
    keys = {f"kms:EncryptionContext:{k}": (v,) for k, v in context.items()}
    keys["kms:EncryptionContextKeys"] = tuple(context)
    return IamRequest(request.action, request.resource, keys, request.api)


# ------------------------------------------------------------- evaluation
def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _glob(pattern: str, value: str, *, case: bool = True) -> bool:
    """IAM wildcard match: ``*`` any run of characters (``/`` included), ``?`` one."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _condition_holds(operator: str, key: str, expected: Any, request: IamRequest) -> bool:
    patterns = [str(v) for v in _as_list(expected)]
    present = key in request.context
    values = request.context.get(key, ())
    if operator == "Null":
        # "Null": "true" means the key must be absent, "false" that it is present.
        return (not present) == (patterns[0].lower() == "true")
    if operator.endswith("IfExists"):
        if not present:
            return True
        operator = operator.removesuffix("IfExists")
    if operator.startswith("ForAllValues:"):
        inner = operator.split(":", 1)[1]
        return all(_single(inner, [v], patterns) for v in values)
    if operator.startswith("ForAnyValue:"):
        inner = operator.split(":", 1)[1]
        return any(_single(inner, [v], patterns) for v in values)
    if not present:
        return False
    return _single(operator, list(values), patterns)


def _single(operator: str, values: Sequence[str], patterns: Sequence[str]) -> bool:
    if operator == "StringEquals":
        return all(v in patterns for v in values)
    if operator == "StringLike":
        return all(any(_glob(p, v) for p in patterns) for v in values)
    if operator == "Bool":
        return all(v.lower() in (p.lower() for p in patterns) for v in values)
    raise AssertionError(f"condition operator {operator!r} is not modelled; extend infra_policy")


def statement_matches(statement: Mapping[str, Any], request: IamRequest) -> bool:
    """True if the statement's Action, Resource and Condition all cover the request."""
    if "NotAction" in statement or "NotResource" in statement:
        raise AssertionError("NotAction/NotResource are not modelled")
    if not any(_glob(a, request.action, case=False) for a in _as_list(statement["Action"])):
        return False
    if not any(_glob(r, request.resource) for r in _as_list(statement["Resource"])):
        return False
    for operator, clauses in statement.get("Condition", {}).items():
        for key, expected in clauses.items():
            if not _condition_holds(operator, key, expected, request):
                return False
    return True


def allowed(documents: Iterable[Mapping[str, Any]], request: IamRequest) -> bool:
    """IAM's decision for identity policies: an explicit Deny wins, else any Allow."""
    decision = False
    for document in documents:
        for statement in _as_list(document["Statement"]):
            if statement_matches(statement, request):
                if statement["Effect"] == "Deny":
                    return False
                decision = True
    return decision
