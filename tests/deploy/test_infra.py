"""infra/storage.yaml and the Lambda template: lint, deploy, use, and check the IAM policy.

* Both templates pass cfn-lint.
* infra/storage.yaml is deployed into moto's CloudFormation; the saver and the
  Lambda example then run against the bucket and table that stack created (no
  storage is made by hand here), reading everything from the stack's outputs.
* The runtime IAM policy is checked against the saver's real traffic: every AWS
  call made by every public method (setup excepted) is turned into the IAM
  requests AWS would authorise (tests/deploy/infra_policy.py) and evaluated against the
  deployed policy documents. The policy must allow all of them, grant no action the
  saver does not use, and deny the same requests for another prefix, bucket or table.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import io
import json
import operator
import sys
import threading
import time
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import boto3
import pytest

from tests.deploy.infra_policy import Arns, IamRequest, allowed, iam_requests

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

ROOT = Path(__file__).resolve().parents[2]
STORAGE = ROOT / "infra" / "storage.yaml"
LAMBDA_TEMPLATE = ROOT / "examples" / "lambda" / "template.yaml"
EXAMPLE = ROOT / "examples" / "lambda"
REGION = "us-east-1"
PREFIX = "prod/agents/"
RUNTIME_ACTIONS = {
    "s3:ListBucket",
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:BatchGetItem",
}
# Public S3Saver methods that the IAM check does not exercise, and why.
NOT_EXERCISED = {
    "setup": "development only: creates the bucket and table the stack provides",
    "close": "makes no AWS request",
    "from_conn_string": "constructs a saver; makes no AWS request",
    "claim_thread": "cross-region hand-over; this stack is single-region",
    "aclaim_thread": "cross-region hand-over; this stack is single-region",
    "reencrypt_thread": "needs encryption=: run by test_infra_keys.py on a stack with a key",
    "areencrypt_thread": "needs encryption=: run by test_infra_keys.py on a stack with a key",
}


# ------------------------------------------------------------------ cfn-lint
@pytest.mark.parametrize("template", [STORAGE, LAMBDA_TEMPLATE], ids=["storage", "lambda"])
def test_template_passes_cfn_lint(template: Path) -> None:
    from cfnlint.api import lint_file

    matches = lint_file(template)
    assert matches == [], "\n".join(str(m) for m in matches)


def test_cfn_lint_catches_a_broken_template(tmp_path: Path) -> None:
    """The lint test is not vacuous: a misspelt property in storage.yaml is reported."""
    from cfnlint.api import lint_file

    broken = tmp_path / "storage.yaml"
    broken.write_text(
        STORAGE.read_text().replace("PointInTimeRecoveryEnabled:", "PointInTimeRecoveryEnable:")
    )
    assert any(m.rule.id == "E3002" for m in lint_file(broken))


# ------------------------------------------------------------ the template
def load_template(path: Path) -> dict[str, Any]:
    from cfnlint.decode import decode

    template, matches = decode(path)
    assert not matches and template is not None, matches
    plain: dict[str, Any] = json.loads(json.dumps(template))  # plain dicts and lists
    return plain


class _NoValue:
    pass


NO_VALUE = _NoValue()


def resolve(node: Any, refs: dict[str, Any], conditions: dict[str, bool]) -> Any:
    """Evaluate the intrinsic functions the storage template uses, like CloudFormation."""
    if isinstance(node, list):
        items = [resolve(v, refs, conditions) for v in node]
        return [v for v in items if v is not NO_VALUE]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        ((key, arg),) = node.items()
        if key == "Ref":
            return NO_VALUE if arg == "AWS::NoValue" else refs[arg]
        if key == "Fn::GetAtt":
            return refs[".".join(arg) if isinstance(arg, list) else arg]
        if key == "Fn::If":
            name, yes, no = arg
            return resolve(yes if conditions[name] else no, refs, conditions)
        if key == "Fn::Sub":
            text = arg if isinstance(arg, str) else arg[0]
            for name, value in refs.items():
                text = text.replace("${" + name + "}", str(value))
            assert "${" not in text, f"unresolved substitution in {text!r}"
            return text
        assert not key.startswith("Fn::"), f"{key} is not modelled by this resolver"
    out = {k: resolve(v, refs, conditions) for k, v in node.items()}
    return {k: v for k, v in out.items() if v is not NO_VALUE}


def policy_documents(
    template: dict[str, Any], refs: dict[str, Any], has_kms: bool
) -> dict[str, dict[str, Any]]:
    client_side, prefix = bool(refs.get("ClientSideKeyArn")), bool(refs.get("Prefix"))
    previous = client_side and bool(refs.get("PreviousClientSideKeyArn"))
    conditions = {
        "HasKmsKey": has_kms,
        "KeepVersions": False,
        "ClientSideKeyOfAPrefix": client_side and prefix,
        "ClientSideKeyOfTheWholeTable": client_side and not prefix,
        "PreviousClientSideKeyOfAPrefix": previous and prefix,
        "PreviousClientSideKeyOfTheWholeTable": previous and not prefix,
    }
    return {
        name: resolve(res["Properties"]["PolicyDocument"], refs, conditions)
        for name, res in template["Resources"].items()
        if res["Type"] == "AWS::IAM::ManagedPolicy"
    }


def test_bucket_keeps_objects_until_the_saver_deletes_them() -> None:
    """No lifecycle rule may expire or transition current objects (shared blobs)."""
    template = load_template(STORAGE)
    bucket = template["Resources"]["Bucket"]
    assert bucket["DeletionPolicy"] == bucket["UpdateReplacePolicy"] == "Retain"
    props = bucket["Properties"]
    for versions in (False, True):
        for kms in (False, True):
            rules = resolve(
                props["LifecycleConfiguration"]["Rules"],
                {"NoncurrentVersionRetentionDays": 30, "KmsKeyArn": "k"},
                {"KeepVersions": versions, "HasKmsKey": kms},
            )
            ids = [r["Id"] for r in rules]
            assert "AbortIncompleteMultipartUploads" in ids
            assert ("ExpireNoncurrentVersions" in ids) is versions
            for rule in rules:
                age_based = {"ExpirationInDays", "ExpirationDate", "Transitions", "Transition"}
                assert not age_based & set(rule), rule
    assert props["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ["BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"], True
    )
    tls = template["Resources"]["BucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert tls == [
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [{"Fn::GetAtt": ["Bucket", "Arn"]}, {"Fn::Sub": "${Bucket.Arn}/*"}],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ]
    table = template["Resources"]["Table"]["Properties"]
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}


def test_policy_in_the_template_names_only_the_stack_resources() -> None:
    """Resolved both with and without a KMS key: only this bucket/prefix, table, index, key."""
    template = load_template(STORAGE)
    refs = {
        "Prefix": "P/",
        "Bucket": "B",
        "Bucket.Arn": "arn:aws:s3:::B",
        "Table.Arn": "arn:aws:dynamodb:R:A:table/T",
        "KmsKeyArn": "arn:aws:kms:R:A:key/K",
        "AWS::Region": "R",
    }
    allowed_resources = {
        "arn:aws:s3:::B",
        "arn:aws:s3:::B/P/*",
        "arn:aws:dynamodb:R:A:table/T",
        "arn:aws:dynamodb:R:A:table/T/index/by_run",
    }
    for has_kms in (False, True):
        docs = policy_documents(template, refs, has_kms)
        runtime, admin = docs["CheckpointPolicy"], docs["AdminPolicy"]
        kms = [s for s in runtime["Statement"] if s["Sid"].startswith("Use")]
        assert [s["Sid"] for s in kms] == (
            ["UseBucketKeyThroughS3", "UseTableKeyThroughDynamoDB"] if has_kms else []
        )
        via = {"UseBucketKeyThroughS3": "s3.R.amazonaws.com",
               "UseTableKeyThroughDynamoDB": "dynamodb.R.amazonaws.com"}  # fmt: skip
        for statement in runtime["Statement"] + admin["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = (
                statement["Action"]
                if isinstance(statement["Action"], list)
                else [statement["Action"]]
            )
            assert all("*" not in a for a in actions), statement
            resources = statement["Resource"]
            resources = resources if isinstance(resources, list) else [resources]
            if statement in kms:
                assert resources == [refs["KmsKeyArn"]]
                assert statement["Condition"] == {
                    "StringEquals": {"kms:ViaService": via[statement["Sid"]]}
                }
            else:
                assert set(resources) <= allowed_resources, statement
            if "arn:aws:s3:::B" in resources:
                # Bucket-wide listing is needed (404 for missing keys);
                # it is the only bucket-level grant.
                assert actions == ["s3:ListBucket"] and resources == ["arn:aws:s3:::B"]
            if "arn:aws:dynamodb:R:A:table/T" in resources and statement not in admin["Statement"]:
                assert statement["Condition"] == {
                    "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["P/*"]}
                }
        assert [s["Action"] for s in admin["Statement"]] == ["dynamodb:Scan"]


# --------------------------------------------------------------- deployment
@pytest.fixture(scope="module")
def aws() -> Iterator[None]:
    """moto in-process for this module, with one known gap of its CloudFormation closed.

    CloudFormation drops ``!Ref AWS::NoValue`` from lists (``!If [cond, x,
    !Ref AWS::NoValue]`` as a list item is the documented way to make an item
    optional); moto 5 leaves a ``None`` there and then rejects the policy document.
    The shim removes those ``None`` items, nothing else.
    """
    from moto import mock_aws
    from moto.cloudformation import parsing

    original = parsing.clean_json

    def clean_json(resource_json: Any, resources_map: Any) -> Any:
        cleaned = original(resource_json, resources_map)
        if isinstance(resource_json, list) and isinstance(cleaned, list):
            return [v for v in cleaned if v is not None]
        return cleaned

    with pytest.MonkeyPatch.context() as mp, mock_aws():
        mp.setattr(parsing, "clean_json", clean_json)
        yield


@dataclass
class Stack:
    """A deployed storage stack: its outputs and the policies it created."""

    name: str
    outputs: dict[str, str]
    account: str
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def bucket(self) -> str:
        return self.outputs["BucketName"]

    @property
    def table(self) -> str:
        return self.outputs["TableName"]

    @property
    def prefix(self) -> str:
        return self.outputs["Prefix"]


def deploy(name: str, parameters: dict[str, str]) -> Stack:
    cfn = boto3.client("cloudformation", region_name=REGION)
    cfn.create_stack(
        StackName=name,
        TemplateBody=STORAGE.read_text(),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
        Capabilities=["CAPABILITY_IAM"],
    )
    desc = cfn.describe_stacks(StackName=name)["Stacks"][0]
    assert desc["StackStatus"] == "CREATE_COMPLETE", desc.get("StackStatusReason")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in desc["Outputs"]}
    exports = {e["Name"]: e["Value"] for e in cfn.list_exports()["Exports"]}
    for key, value in outputs.items():
        assert exports[f"{name}-{key}"] == value  # what the Lambda template imports
    iam = boto3.client("iam", region_name=REGION)
    policies = {}
    for key in ("PolicyArn", "AdminPolicyArn"):
        arn = outputs[key]
        version = iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
        doc = iam.get_policy_version(PolicyArn=arn, VersionId=version)["PolicyVersion"]
        document = doc["Document"]
        policies[key] = json.loads(document) if isinstance(document, str) else document
    account = boto3.client("sts", region_name=REGION).get_caller_identity()["Account"]
    return Stack(name, outputs, account, policies)


@pytest.fixture(scope="module")
def stack(aws: None) -> Stack:
    return deploy("checkpoints", {"Prefix": PREFIX})


def test_stack_outputs_point_the_saver_at_the_stack(stack: Stack) -> None:
    from langgraph_s3.connection import parse_conn_string

    assert stack.prefix == PREFIX
    assert stack.outputs["ConnectionString"] == (
        f"s3://{stack.bucket}/{PREFIX}?table={stack.table}&region={REGION}"
    )
    assert parse_conn_string(stack.outputs["ConnectionString"]) == {
        "bucket": stack.bucket,
        "prefix": PREFIX,
        "table": stack.table,
        "region_name": REGION,
        "endpoint_url": None,
    }
    encryption = boto3.client("s3", region_name=REGION).get_bucket_encryption(Bucket=stack.bucket)
    rule = encryption["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"


def _schema(ddb: Any, table: str) -> dict[str, Any]:
    t = ddb.describe_table(TableName=table)["Table"]
    return {
        "keys": t["KeySchema"],
        "attributes": sorted(t["AttributeDefinitions"], key=lambda a: a["AttributeName"]),
        "indexes": [
            {"name": i["IndexName"], "keys": i["KeySchema"], "projection": i["Projection"]}
            for i in t.get("GlobalSecondaryIndexes", [])
        ],
        "billing": t["BillingModeSummary"]["BillingMode"],
    }


def test_stack_table_is_the_table_setup_would_create(stack: Stack) -> None:
    from langgraph_s3 import S3Saver

    reference = f"setup-{uuid.uuid4().hex[:8]}"
    S3Saver(bucket=f"{reference}-bucket", table=reference, region_name=REGION).setup()
    ddb = boto3.client("dynamodb", region_name=REGION)
    assert _schema(ddb, stack.table) == _schema(ddb, reference)
    assert ddb.describe_table(TableName=stack.table)["Table"]["DeletionProtectionEnabled"]


def test_kms_key_parameter_encrypts_with_the_key_and_grants_only_it(aws: None) -> None:
    key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    kms_stack = deploy("checkpoints-kms", {"Prefix": "kms/", "KmsKeyArn": key})
    encryption = boto3.client("s3", region_name=REGION).get_bucket_encryption(
        Bucket=kms_stack.bucket
    )
    default = encryption["ServerSideEncryptionConfiguration"]["Rules"][0][
        "ApplyServerSideEncryptionByDefault"
    ]
    assert default == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}
    kms_statements = [
        s for s in kms_stack.policies["PolicyArn"]["Statement"] if s["Sid"].startswith("Use")
    ]
    assert kms_statements == [
        {
            "Sid": "UseBucketKeyThroughS3",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": key,
            "Condition": {"StringEquals": {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}},
        },
        {
            "Sid": "UseTableKeyThroughDynamoDB",
            "Effect": "Allow",
            "Action": [
                "kms:Decrypt",
                "kms:DescribeKey",
                "kms:Encrypt",
                "kms:GenerateDataKey",
                "kms:ReEncryptFrom",
                "kms:ReEncryptTo",
            ],
            "Resource": key,
            "Condition": {"StringEquals": {"kms:ViaService": f"dynamodb.{REGION}.amazonaws.com"}},
        },
    ]
    # The table is encrypted with the same key (it holds small bodies and pending
    # writes). moto's CloudFormation does not pass SSESpecification on to the table, so
    # this is checked on the template.
    table = load_template(STORAGE)["Resources"]["Table"]["Properties"]
    assert table["SSESpecification"] == {
        "Fn::If": [
            "HasKmsKey",
            {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": {"Ref": "KmsKeyArn"}},
            {"Ref": "AWS::NoValue"},
        ]
    }


def test_deployed_policy_is_the_template_policy(stack: Stack) -> None:
    refs = {
        "Prefix": PREFIX,
        "Bucket": stack.bucket,
        "Bucket.Arn": f"arn:aws:s3:::{stack.bucket}",
        "Table.Arn": f"arn:aws:dynamodb:{REGION}:{stack.account}:table/{stack.table}",
        "AWS::Region": REGION,
        "KmsKeyArn": "",
    }
    docs = policy_documents(load_template(STORAGE), refs, has_kms=False)
    assert stack.policies["PolicyArn"] == docs["CheckpointPolicy"]
    assert stack.policies["AdminPolicyArn"] == docs["AdminPolicy"]


# ------------------------------------------------------- a graph on the stack
class DocState(TypedDict, total=False):
    doc: str
    notes: Annotated[list[str], operator.add]
    approved: bool


def build_doc_graph(checkpointer: Any) -> Any:
    """write (large value, so blobs are used) -> ask (interrupt) -> finish."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def write(state: DocState) -> DocState:
        return {"doc": state["doc"] + " revised", "notes": ["written"]}

    def ask(state: DocState) -> DocState:
        return {"approved": bool(interrupt("publish?"))}

    def finish(state: DocState) -> DocState:
        return {"notes": ["published" if state["approved"] else "dropped"]}

    builder = StateGraph(DocState)
    builder.add_node("write", write)
    builder.add_node("ask", ask)
    builder.add_node("finish", finish)
    builder.add_edge(START, "write")
    builder.add_edge("write", "ask")
    builder.add_edge("ask", "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=checkpointer)


BIG_DOC = "".join(f"paragraph {i}: {uuid.uuid4().hex * 4}\n" for i in range(400))  # ~60 KB


def run_doc_thread(saver: Any, thread_id: str, run_id: str) -> Any:
    """Start a thread (run ``run_id``) and resume it (run ``run_id``-resume)."""
    from langgraph.types import Command

    graph = build_doc_graph(saver)
    config = {"configurable": {"thread_id": thread_id}, "metadata": {"run_id": run_id}}
    graph.invoke({"doc": BIG_DOC}, config)
    config["metadata"] = {"run_id": f"{run_id}-resume"}
    graph.invoke(Command(resume=True), config, durability="sync")
    return graph


def test_saver_runs_a_graph_on_the_stack(stack: Stack) -> None:
    from langgraph_s3 import S3Saver

    with S3Saver.from_conn_string(stack.outputs["ConnectionString"]) as saver:
        run_doc_thread(saver, "thread-1", "run-1")
    # A brand-new saver (another container) reads it back from the stack's storage.
    with S3Saver.from_conn_string(stack.outputs["ConnectionString"]) as reader:
        config: RunnableConfig = {"configurable": {"thread_id": "thread-1"}}
        latest = reader.get_tuple(config)
        assert latest is not None
        assert latest.checkpoint["channel_values"]["doc"] == BIG_DOC + " revised"
        assert latest.checkpoint["channel_values"]["notes"] == ["written", "published"]
        history = list(reader.list(config))
        assert [t.metadata["step"] for t in history] == [3, 2, 1, 0, -1]
        assert [s.next for s in build_doc_graph(reader).get_state_history(config)][:2] == [
            (),
            ("finish",),
        ]

        s3 = boto3.client("s3", region_name=REGION)
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=stack.bucket)["Contents"]]
        assert any("/b/" in k for k in keys), "the large value should be stored as blobs"
        assert all(k.startswith(PREFIX) for k in keys)
        ddb = boto3.client("dynamodb", region_name=REGION)
        pks = {i["pk"]["S"] for i in ddb.scan(TableName=stack.table)["Items"]}
        assert pks and all(pk.startswith(PREFIX) for pk in pks)

        reader.delete_thread("thread-1")
        assert reader.get_tuple(config) is None
        assert s3.list_objects_v2(Bucket=stack.bucket, Prefix=f"{PREFIX}thread-1/")["KeyCount"] == 0


# ------------------------------------------------- the example on the stack
def load_handler(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh copy of examples/lambda/handler.py, as a new container imports it."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    # Registered with monkeypatch first so the module the handler imports is removed
    # again after the test, then dropped so this load imports it afresh.
    monkeypatch.setitem(sys.modules, "approval_agent", None)
    del sys.modules["approval_agent"]
    spec = importlib.util.spec_from_file_location("example_lambda_handler", EXAMPLE / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def http(handler: Any, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "requestContext": {"http": {"method": method, "path": path}},
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
    }
    response = handler.handler(event, None)
    return response["statusCode"], json.loads(response["body"])


def function_environment(
    template_path: Path, logical_id: str, stack: Stack, given: dict[str, str] | None = None
) -> dict[str, str]:
    """A function's environment as CloudFormation would set it from the storage stack.

    Values imported from the storage stack come from its real outputs; parameters are
    ``given`` or take their defaults. Resources of the consuming stack itself (the
    example's action ledger) are not deployed here and are left out.
    """
    template = load_template(template_path)
    parameters = template["Parameters"]
    props = template["Resources"][logical_id]["Properties"]
    env = {}
    for name, value in props["Environment"]["Variables"].items():
        if isinstance(value, dict) and "Fn::ImportValue" in value:
            env[name] = stack.outputs[_imported_output(value)]
        elif isinstance(value, dict) and value.get("Ref") in parameters:
            ref = value["Ref"]
            env[name] = (given or {}).get(ref, str(parameters[ref]["Default"]))
    return env


def _imported_output(value: dict[str, Any]) -> str:
    sub = value["Fn::ImportValue"]["Fn::Sub"]
    assert sub.startswith("${StorageStackName}-"), sub
    return str(sub.removeprefix("${StorageStackName}-"))


def _imports(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "Fn::ImportValue" in node:
            yield node
        for value in node.values():
            yield from _imports(value)
    elif isinstance(node, list):
        for value in node:
            yield from _imports(value)


@pytest.mark.parametrize(
    "template",
    [LAMBDA_TEMPLATE, *sorted((ROOT / "infra").glob("*.yaml"))],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_storage_imports_name_real_outputs(template: Path, stack: Stack) -> None:
    """Every template importing the storage stack's exports uses ones it has."""
    for value in _imports(load_template(template)):
        sub = value["Fn::ImportValue"]["Fn::Sub"]
        if sub.startswith("${StorageStackName}-"):
            assert _imported_output(value) in stack.outputs, (template.name, sub)


def test_lambda_template_is_wired_to_the_storage_outputs(stack: Stack) -> None:
    resources = load_template(LAMBDA_TEMPLATE)["Resources"]
    assert resources["ApprovalFunction"]["Properties"]["Role"] == {
        "Fn::GetAtt": ["FunctionRole", "Arn"]
    }
    arns = resources["FunctionRole"]["Properties"]["ManagedPolicyArns"]
    imported = [stack.outputs[_imported_output(a)] for a in arns if "Fn::ImportValue" in a]
    # The runtime policy only: the handler never scans the table.
    assert imported == [stack.outputs["PolicyArn"]]
    env = function_environment(LAMBDA_TEMPLATE, "ApprovalFunction", stack)
    assert env["CHECKPOINT_URL"] == stack.outputs["ConnectionString"]


def test_scheduled_collector_runs_on_the_stack(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """infra/gc.yaml's collector, with the environment it gets from this stack."""
    from langgraph_s3 import gc

    collector = ROOT / "infra" / "gc.yaml"
    for name, value in function_environment(collector, "Collector", stack).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GC_DRY_RUN", "true")
    report = gc.lambda_handler({}, None)
    assert report["dry_run"] is True and report["errors"] == []


def test_lambda_example_runs_on_the_stack(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = function_environment(LAMBDA_TEMPLATE, "ApprovalFunction", stack)
    assert set(env) == {"CHECKPOINT_URL", "CHECKPOINT_KMS_KEY", "CHECKPOINT_PREVIOUS_KMS_KEY",
                        "APPROVAL_TIMEOUT_SECONDS"}  # fmt: skip
    assert env["CHECKPOINT_KMS_KEY"] == ""  # no ClientSideKeyArn: no client-side encryption
    assert env["CHECKPOINT_PREVIOUS_KMS_KEY"] == ""  # and no rotation under way
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ACTIONS_TABLE", raising=False)  # the ledger is not deployed here
    monkeypatch.setenv("APPROVAL_AGENT_NOW", "2030-03-01T12:00:00Z")
    handler = load_handler(monkeypatch)

    code, started = http(handler, "POST", "/threads", {"request": "refund order B-7"})
    assert code == 201, started
    thread = started["thread_id"]
    assert started["status"] == "pending_approval"
    assert started["deadline"] == "2030-03-08T12:00:00Z"  # the template's default timeout

    monkeypatch.setenv("APPROVAL_AGENT_NOW", "2030-03-02T08:30:00Z")
    # A second container decides: nothing is shared with the first but the stack.
    decider = load_handler(monkeypatch)
    code, decided = http(decider, "POST", f"/threads/{thread}/decision", {"approve": True})
    assert code == 200, decided
    assert decided["status"] == "completed"
    assert decided["waited_seconds"] == 20.5 * 3600
    assert len(decided["actions_executed"]) == 1
    code, again = http(decider, "POST", f"/threads/{thread}/decision", {"approve": True})
    assert (code, again["error"]) == (409, "already_decided")
    code, shown = http(load_handler(monkeypatch), "GET", f"/threads/{thread}")
    assert (code, shown["status"]) == (200, "completed")

    executed = [
        line for line in capsys.readouterr().out.splitlines() if '"action_executed"' in line
    ]
    assert len(executed) == 1
    ddb = boto3.client("dynamodb", region_name=REGION)
    items = ddb.query(
        TableName=stack.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"{PREFIX}{thread}"}},
    )["Items"]
    assert items, "the example's checkpoints are in the stack's table, under the prefix"


# --------------------------------------------------------- IAM vs real calls
@dataclass
class Recorder:
    """Every AWS call the saver's clients make, with its parameters and the caller."""

    calls: list[tuple[str, str, dict[str, Any], str]] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)  # call index -> HTTP status
    sent: list[tuple[str, str]] = field(default_factory=list)
    methods: set[str] = field(default_factory=set)
    # Per thread: S3Saver's a* methods run the sync ones on worker threads.
    local: threading.local = field(default_factory=threading.local)

    def _caller(self) -> str:
        # The outermost method: list() and the collector reach AWS through run/iterate.
        stack = getattr(self.local, "stack", None)
        return stack[0] if stack else "(a saver's worker thread)"

    def attach(self, client: Any) -> None:
        service = client.meta.service_model.service_name

        def record(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            plain = json.loads(json.dumps(params, default=str))
            context["recorder_index"] = len(self.calls)
            self.calls.append((service, model.name, plain, self._caller()))

        def sent(model: Any, **_: Any) -> None:
            self.sent.append((service, model.name))

        def answered(http_response: Any, context: dict[str, Any], **_: Any) -> None:
            # A GET of a missing key needs s3:ListBucket to come back as 404.
            if "recorder_index" in context and http_response is not None:
                self.statuses[context["recorder_index"]] = http_response.status_code

        client.meta.events.register(f"before-parameter-build.{service}.*", record)
        client.meta.events.register(f"before-call.{service}.*", sent)
        client.meta.events.register(f"after-call.{service}.*", answered)

    def wrap(self, saver: Any, names: set[str]) -> None:
        """Record which public methods ran (directly, through LangGraph, or via a*)."""
        for name in names:
            setattr(saver, name, self._wrapped(name, getattr(saver, name)))

    def _wrapped(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(method):

            async def agen(*args: Any, **kwargs: Any) -> Any:
                self.methods.add(name)
                async for item in method(*args, **kwargs):
                    yield item

            return agen
        if inspect.iscoroutinefunction(method):

            async def coro(*args: Any, **kwargs: Any) -> Any:
                self.methods.add(name)
                return await method(*args, **kwargs)

            return coro

        def sync(*args: Any, **kwargs: Any) -> Any:
            self.methods.add(name)
            stack = self.local.__dict__.setdefault("stack", [])
            stack.append(name)
            try:
                result = method(*args, **kwargs)
                # list() returns a lazy iterator: drain it while the caller is known.
                return iter(list(result)) if inspect.isgenerator(result) else result
            finally:
                stack.pop()

        return sync


def public_methods() -> set[str]:
    """Public methods S3Saver itself defines (not LangGraph's helpers, not flows)."""
    from langgraph_s3 import S3Saver

    names = set()
    for name in dir(S3Saver):
        attr = inspect.getattr_static(S3Saver, name)
        func = getattr(attr, "__func__", attr)
        if name.startswith("_") or not inspect.isfunction(func):
            continue
        if func.__module__ == S3Saver.__module__:
            names.add(name)
    return names


@contextmanager
def calling(recorder: Recorder, name: str) -> Iterator[None]:
    """Label the calls made by code that is not a saver method (the collector)."""
    stack = recorder.local.__dict__.setdefault("stack", [])
    stack.append(name)
    try:
        yield
    finally:
        stack.pop()


def exercise_saver(stack: Stack, recorder: Recorder) -> None:
    """Call every public method, and the garbage collector, on real data in the stack."""
    from langgraph_s3 import S3Saver, gc

    def saver(**options: Any) -> S3Saver:
        s3 = boto3.client("s3", region_name=REGION)
        ddb = boto3.client("dynamodb", region_name=REGION)
        recorder.attach(s3)
        recorder.attach(ddb)
        instance = S3Saver(
            bucket=stack.bucket,
            table=stack.table,
            prefix=stack.prefix,
            s3_client=s3,
            dynamodb_client=ddb,
            **options,
        )
        recorder.wrap(instance, public_methods() - set(NOT_EXERCISED))
        return instance

    main = saver()
    run_doc_thread(main, "alpha", "run-a")
    alpha: RunnableConfig = {"configurable": {"thread_id": "alpha"}}
    latest = main.get_tuple(alpha)
    assert latest is not None and latest.parent_config is not None
    main.get_tuple(latest.parent_config)
    # A write whose value is a small chunk (compressible, over the inline threshold)
    # is a chunk item; a cold read brings it by BatchGetItem.
    main.put_writes(latest.config, [("notes", "n" * 40_000)], "task-cold")
    saver().get_tuple(alpha)
    main.list(alpha)
    main.list(alpha, filter={"source": "loop", "step": 1}, limit=2)
    alpha_root: RunnableConfig = {"configurable": {"thread_id": "alpha", "checkpoint_ns": ""}}
    main.list(alpha_root, before=latest.config)
    main.list(latest.config)
    main.list(None)  # a scan: admin use
    main.get_delta_channel_history(config=latest.config, channels=["notes", "doc"])
    main.copy_thread("alpha", "beta")
    main.prune(["beta"], strategy="keep_latest")
    main.delete_for_runs(["run-a"])
    main.prune(["beta"], strategy="delete")
    main.delete_thread("never-existed")
    main.delete_tenant("no-such-tenant")  # a scan: admin use
    gamma: RunnableConfig = {"configurable": {"thread_id": "gamma"}}

    async def async_api(s: S3Saver) -> None:
        from langgraph.types import Command

        graph = build_doc_graph(s)
        config = {"configurable": {"thread_id": "gamma"}, "metadata": {"run_id": "run-g"}}
        await graph.ainvoke({"doc": BIG_DOC}, config)
        config["metadata"] = {"run_id": "run-g-resume"}
        await graph.ainvoke(Command(resume=False), config)
        tup = await s.aget_tuple(gamma)
        assert tup is not None
        _ = [t async for t in s.alist(gamma)]
        await s.aget_delta_channel_history(config=tup.config, channels=["notes"])
        await s.acopy_thread("gamma", "delta")
        await s.aprune(["delta"], strategy="keep_latest")
        await s.adelete_for_runs(["run-g"])
        await s.adelete_thread("delta")
        await s.adelete_tenant("no-such-tenant")

    asyncio.run(async_api(saver()))

    # Reads stamp the head item when retention counts reads as activity.
    touching = saver(touch_on_read=True)
    touching.get_tuple(gamma)

    # The collector (infra/gc.yaml schedules it with both policies): it expires idle
    # threads, then condemns and later deletes objects nothing references.
    with calling(recorder, "gc.collect"):
        first = gc.collect(main, grace=60, idle_ttl=3600)
        main.clock = lambda: time.time() + 7200  # two hours later: both threads are idle
        second = gc.collect(main, grace=60, idle_ttl=3600)
    assert first.threads == 2 and first.objects_condemned > 0
    assert sorted(second.threads_expired) == ["alpha", "gamma"]
    assert second.objects_deleted == first.objects_condemned


@dataclass
class Traffic:
    """The saver's calls against a stack deployed for this check alone."""

    stack: Stack
    recorder: Recorder

    def requests(self) -> list[tuple[IamRequest, str]]:
        arns = Arns(REGION, self.stack.account)
        statuses = self.recorder.statuses
        return [
            (request, caller)
            for i, (service, op, params, caller) in enumerate(self.recorder.calls)
            for request in iam_requests(service, op, params, arns, status=statuses.get(i))
        ]


@pytest.fixture(scope="module")
def traffic(aws: None) -> Traffic:
    # Its own stack: the collector expires every idle thread under the prefix.
    stack = deploy("iam-check", {"Prefix": PREFIX})
    recorder = Recorder()
    exercise_saver(stack, recorder)
    return Traffic(stack, recorder)


def test_every_public_method_was_exercised(traffic: Traffic) -> None:
    wanted = public_methods() - set(NOT_EXERCISED)
    missing = wanted - traffic.recorder.methods
    assert not missing, f"not exercised: {sorted(missing)}"
    calls = traffic.recorder.calls
    # Same calls as on the wire; their order varies, since LangGraph saves pending
    # writes concurrently with checkpoints.
    assert Counter((s, op) for s, op, _, _ in calls) == Counter(traffic.recorder.sent)


def test_runtime_policy_allows_every_call_the_saver_makes(traffic: Traffic) -> None:
    runtime = [traffic.stack.policies["PolicyArn"]]
    both = [*runtime, traffic.stack.policies["AdminPolicyArn"]]
    requests = traffic.requests()
    assert len(requests) > 50
    scanners = set()
    for request, caller in requests:
        assert allowed(both, request), (caller, request)
        if request.action == "dynamodb:Scan":
            scanners.add(caller)
            assert not allowed(runtime, request), (caller, request)
        else:
            assert allowed(runtime, request), (caller, request)
    # gc.collect scans its segments concurrently, so from the saver's worker threads;
    # delete_tenant scans for the tenant's threads (admin use, as list(None); its async
    # twin runs it on a worker thread too).
    assert scanners == {"list", "delete_tenant", "(a saver's worker thread)"}


def test_runtime_policy_grants_no_action_the_saver_does_not_use(traffic: Traffic) -> None:
    used = {r.action for r, _ in traffic.requests()}
    granted: set[str] = set()
    for statement in traffic.stack.policies["PolicyArn"]["Statement"]:
        action = statement["Action"]
        granted.update(action if isinstance(action, list) else [action])
    assert used - {"dynamodb:Scan"} == granted == RUNTIME_ACTIONS
    admin = traffic.stack.policies["AdminPolicyArn"]["Statement"]
    assert [s["Action"] for s in admin] == ["dynamodb:Scan"]


def _elsewhere(request: IamRequest, stack: Stack, what: str) -> IamRequest:
    """The same request aimed at another prefix, bucket or table."""
    resource, context = request.resource, dict(request.context)
    if what == "prefix":
        resource = resource.replace(f":::{stack.bucket}/{PREFIX}", f":::{stack.bucket}/other-app/")
        context = {
            key: tuple("other-app/" + v[len(PREFIX) :] if v.startswith(PREFIX) else v for v in vs)
            for key, vs in context.items()
        }
    elif what == "bucket":
        resource = resource.replace(f":::{stack.bucket}", ":::someone-elses-bucket")
    else:
        resource = resource.replace(f":table/{stack.table}", ":table/someone-elses-table")
    return IamRequest(request.action, resource, context, request.api)


@pytest.mark.parametrize("what", ["prefix", "bucket", "table"])
def test_policies_deny_the_same_calls_elsewhere(traffic: Traffic, what: str) -> None:
    both = [traffic.stack.policies["PolicyArn"], traffic.stack.policies["AdminPolicyArn"]]
    moved = 0
    for request, caller in traffic.requests():
        other = _elsewhere(request, traffic.stack, what)
        if other == request:
            continue  # e.g. the scan and the run-index query carry no prefix
        moved += 1
        if what == "prefix" and other.action == "s3:ListBucket":
            # Listing is bucket-wide by design (see storage.yaml); key names only.
            assert allowed(both, other)
            continue
        assert not allowed(both, other), (caller, other)
    assert moved > 20


# ------------------------------------------------------------- gc.yaml beside it


def deploy_collector(name: str, storage: Stack, parameters: dict[str, str]) -> dict[str, Any]:
    """infra/gc.yaml deployed as ``name`` beside ``storage`` (a placeholder package)."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=f"{name}-code")
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("placeholder.py", "")
    s3.put_object(Bucket=f"{name}-code", Key="gc.zip", Body=code.getvalue())
    cfn = boto3.client("cloudformation", region_name=REGION)
    given = {"StorageStackName": storage.name, "CodeBucket": f"{name}-code", "CodeKey": "gc.zip"}
    cfn.create_stack(
        StackName=name,
        TemplateBody=(ROOT / "infra" / "gc.yaml").read_text(),
        Parameters=[
            {"ParameterKey": k, "ParameterValue": v} for k, v in {**given, **parameters}.items()
        ],
        Capabilities=["CAPABILITY_IAM"],
    )
    desc: dict[str, Any] = cfn.describe_stacks(StackName=name)["Stacks"][0]
    assert desc["StackStatus"] == "CREATE_COMPLETE", desc.get("StackStatusReason")
    return desc


@dataclass
class RolePolicies:
    """A deployed role's identity policies: attached (managed) and inline, by name."""

    managed: list[dict[str, Any]]
    inline: dict[str, dict[str, Any]]

    @property
    def documents(self) -> list[dict[str, Any]]:
        return [*self.managed, *self.inline.values()]


def role_policies(stack_name: str, template: Path, logical_id: str, storage: Stack) -> RolePolicies:
    """The policies of role ``logical_id`` of a stack deployed from ``template``.

    Inline policies as IAM holds them. moto does not attach a CloudFormation role's
    ``ManagedPolicyArns``, so those are taken from the template, each an import of one
    of ``storage``'s policy outputs, as that stack deployed them.
    """
    arns = load_template(template)["Resources"][logical_id]["Properties"]["ManagedPolicyArns"]
    managed = [storage.policies[_imported_output(arn)] for arn in arns]
    cfn = boto3.client("cloudformation", region_name=REGION)
    role = cfn.describe_stack_resource(StackName=stack_name, LogicalResourceId=logical_id)
    name = role["StackResourceDetail"]["PhysicalResourceId"]
    iam = boto3.client("iam", region_name=REGION)

    def plain(document: Any) -> dict[str, Any]:
        if not isinstance(document, str):
            return dict(document)
        try:
            parsed: dict[str, Any] = json.loads(document)
        except ValueError:
            # moto keeps an inline policy made by CloudFormation as the Python repr of
            # the resolved document; AWS returns JSON.
            parsed = ast.literal_eval(document)
        return parsed

    inline = {
        policy: plain(iam.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"])
        for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]
    }
    return RolePolicies(managed, inline)


def test_collector_stack_deploys_against_the_storage_stack(stack: Stack) -> None:
    """infra/gc.yaml deployed beside this storage stack: moto creates the function, its
    role, log group, failure queue and schedule; it accepts but does not model
    ``AWS::Lambda::EventInvokeConfig`` and the alarms, which test_infra_regions.py
    checks on the template."""
    desc = deploy_collector("collector", stack, {"LogRetentionDays": "14"})
    cfn = boto3.client("cloudformation", region_name=REGION)
    fn = boto3.client("lambda", region_name=REGION).get_function(FunctionName="collector-collector")
    config = fn["Configuration"]
    assert config["Handler"] == "langgraph_s3.gc.lambda_handler"
    env = config["Environment"]["Variables"]
    assert (env["CHECKPOINT_BUCKET"], env["CHECKPOINT_TABLE"], env["CHECKPOINT_PREFIX"]) == (
        stack.bucket,
        stack.table,
        stack.prefix,
    )
    assert fn["Concurrency"] == {"ReservedConcurrentExecutions": 1}
    (group,) = boto3.client("logs", region_name=REGION).describe_log_groups(
        logGroupNamePrefix="/aws/lambda/collector-collector"
    )["logGroups"]
    assert group["retentionInDays"] == 14
    queues = boto3.client("sqs", region_name=REGION).list_queues()["QueueUrls"]
    assert [q for q in queues if "collector-FailedRuns" in q]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in desc["Outputs"]}
    assert outputs["CollectorFunction"] == "collector-collector"
    rule = boto3.client("events", region_name=REGION).list_targets_by_rule(
        Rule=next(
            r["PhysicalResourceId"]
            for r in cfn.list_stack_resources(StackName="collector")["StackResourceSummaries"]
            if r["LogicalResourceId"] == "CollectorSchedule"
        )
    )
    assert [t["Arn"] for t in rule["Targets"]] == [config["FunctionArn"]]
