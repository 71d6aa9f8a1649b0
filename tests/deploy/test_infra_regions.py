"""The retention and cross-region templates: valid, and in step with the code."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from langgraph_s3 import gc
from tests.conftest import Backend

INFRA = Path(__file__).resolve().parents[2] / "infra"
TEMPLATES = ["gc.yaml", "multi-region.yaml", "replica-bucket.yaml"]


class _CfnLoader(yaml.SafeLoader):
    """YAML loader that keeps CloudFormation short-form tags (!Ref, !Sub, ...) as data."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node, deep=True)}
    return {suffix: loader.construct_mapping(node, deep=True)}  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _tag)


def load(name: str) -> dict[str, Any]:
    return yaml.load((INFRA / name).read_text(), Loader=_CfnLoader)


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_passes_cfn_lint(name: str) -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    done = subprocess.run([str(cfn_lint), str(INFRA / name)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_global_table_has_the_schema_the_saver_creates(inproc_backend: Backend) -> None:
    described = inproc_backend.dynamodb().describe_table(TableName=inproc_backend.table)["Table"]
    table = load("multi-region.yaml")["Resources"]["Table"]["Properties"]
    assert sorted(table["KeySchema"], key=str) == sorted(described["KeySchema"], key=str)
    assert {(a["AttributeName"], a["AttributeType"]) for a in table["AttributeDefinitions"]} == {
        (a["AttributeName"], a["AttributeType"]) for a in described["AttributeDefinitions"]
    }
    (gsi,) = table["GlobalSecondaryIndexes"]
    (live,) = described["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == live["IndexName"]
    assert gsi["KeySchema"] == live["KeySchema"]
    assert table["TimeToLiveSpecification"]["AttributeName"] == "expires_at"
    assert len(table["Replicas"]) == 2


def test_cross_region_policy_allows_the_ownership_check() -> None:
    policy = load("multi-region.yaml")["Resources"]["CheckpointPolicy"]["Properties"]
    # Optional statements are !If [condition, statement, !Ref AWS::NoValue].
    statements = [s["If"][1] if "If" in s else s for s in policy["PolicyDocument"]["Statement"]]
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    # every operation a cross-region saver sends, as IAM actions
    assert {
        "dynamodb:ConditionCheckItem",  # TransactWriteItems with the ownership check
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:Query",
        "s3:GetObject",
        "s3:PutObject",
    } <= actions


def test_collector_template_runs_the_code_that_exists() -> None:
    fn = load("gc.yaml")["Resources"]["Collector"]["Properties"]
    module, name = fn["Handler"].rsplit(".", 1)
    handler = getattr(importlib.import_module(module), name)
    source = inspect.getsource(handler)
    for variable in fn["Environment"]["Variables"]:
        assert f'"{variable}"' in source, f"{variable} is set by the template but not read"


def test_collector_lambda_handler_collects(
    inproc_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = inproc_backend.saver(prefix="app/")
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"doc": "x" * 50_000}
    checkpoint["channel_versions"] = {"doc": saver.get_next_version(None, None)}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(config, checkpoint, {"step": 0}, checkpoint["channel_versions"])
    saver.delete_thread("t")
    inproc_backend.s3().put_object(  # garbage: a blob no checkpoint references
        Bucket=inproc_backend.bucket, Key="app/t/b/" + "0" * 64, Body=b"LGS3"
    )
    monkeypatch.setenv("CHECKPOINT_BUCKET", inproc_backend.bucket)
    monkeypatch.setenv("CHECKPOINT_TABLE", inproc_backend.table)
    monkeypatch.setenv("CHECKPOINT_PREFIX", "app/")
    monkeypatch.setenv("GC_GRACE", "1h")
    first = gc.lambda_handler({}, None)  # condemned, but the grace period has not passed
    assert first["objects_condemned"] == 1 and first["objects_deleted"] == 0
    monkeypatch.setenv("GC_GRACE", "0s")
    second = gc.lambda_handler({}, None)
    assert second["objects_deleted"] == 1 and second["objects_condemned"] == 0
    assert not [k for k in inproc_backend.object_keys() if k.startswith("app/t/")]


def _imports(node: Any) -> set[str]:
    """The export names a template imports (``Fn::ImportValue: !Sub "${Stack}-Name"``)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("Fn::ImportValue", "ImportValue"):
                sub = value.get("Sub") or value.get("Fn::Sub")
                found.add(sub.split("}-", 1)[1])
            else:
                found |= _imports(value)
    elif isinstance(node, list):
        for value in node:
            found |= _imports(value)
    return found


def _exports(template: dict[str, Any]) -> dict[str, str]:
    """Output name -> the export name's suffix after ``${AWS::StackName}-``."""
    return {
        name: out["Export"]["Name"]["Sub"].split("}-", 1)[1]
        for name, out in template["Outputs"].items()
        if "Export" in out
    }


def test_collector_runs_alone_and_its_failures_are_kept_and_alarmed() -> None:
    """gc.yaml: one run at a time, a failed run's event kept 14 days, a log that
    expires, and alarms on failure (damage included), near-timeout runs, queued
    failures and table throttling."""
    resources = load("gc.yaml")["Resources"]
    fn = resources["Collector"]["Properties"]
    assert fn["ReservedConcurrentExecutions"] == 1
    assert fn["LoggingConfig"] == {"LogGroup": {"Ref": "CollectorLogs"}}
    logs = resources["CollectorLogs"]["Properties"]
    assert logs["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    invoke = resources["CollectorInvokeConfig"]["Properties"]
    assert invoke["FunctionName"] == {"Ref": "Collector"}
    assert invoke["DestinationConfig"]["OnFailure"]["Destination"] == {"GetAtt": "FailedRuns.Arn"}
    assert resources["FailedRuns"]["Properties"]["MessageRetentionPeriod"] == 14 * 86400
    alarms = {k: v["Properties"] for k, v in resources.items() if v["Type"].endswith("Alarm")}
    errors = alarms["CollectorFailedAlarm"]
    assert (errors["MetricName"], errors["Threshold"]) == ("Errors", 1)
    duration = alarms["CollectorNearTimeoutAlarm"]
    assert duration["Threshold"] == 0.8 * fn["Timeout"] * 1000
    throttles = {
        m["MetricStat"]["Metric"]["MetricName"]
        for m in alarms["TableThrottledAlarm"]["Metrics"]
        if "MetricStat" in m
    }
    assert throttles == {"ReadThrottleEvents", "WriteThrottleEvents"}
    assert "FailedRunsAlarm" in alarms
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == {
            "If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
        }
    assert "arn:aws:" not in (INFRA / "gc.yaml").read_text()  # ${AWS::Partition}


def test_collector_deploys_against_either_storage_template() -> None:
    """Everything gc.yaml imports is exported by storage.yaml and by multi-region.yaml,
    which exports all that storage.yaml does."""
    storage = _exports(load("storage.yaml"))
    multi = _exports(load("multi-region.yaml"))
    assert storage.items() <= multi.items()
    needed = _imports(load("gc.yaml"))
    assert needed and needed <= set(storage.values()) and needed <= set(multi.values())


def test_multi_region_connection_string_is_what_the_saver_parses() -> None:
    from langgraph_s3.connection import parse_conn_string

    template = load("multi-region.yaml")
    value = template["Outputs"]["ConnectionString"]["Value"]["Sub"]
    resolved = (
        value.replace("${HomeBucket}", "agents-us-east-1")
        .replace("${Prefix}", "agents/")
        .replace("${Table}", "agents")
        .replace("${AWS::Region}", "us-east-1")
    )
    assert parse_conn_string(resolved) == {
        "bucket": "agents-us-east-1",
        "prefix": "agents/",
        "table": "agents",
        "region_name": "us-east-1",
        "endpoint_url": None,
    }
