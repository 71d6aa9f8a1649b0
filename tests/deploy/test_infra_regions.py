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
    actions = {
        a
        for s in policy["PolicyDocument"]["Statement"]
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
