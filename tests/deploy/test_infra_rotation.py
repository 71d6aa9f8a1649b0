"""A rotation to another client-side KMS key, through the deployed stacks.

During a rotation (docs/security.md, "Rotation") some threads' data keys are still
wrapped under the OLD key and others already under NEW. The stacks are deployed on
moto with ``ClientSideKeyArn`` = NEW and ``PreviousClientSideKeyArn`` = OLD
(storage.yaml, gc.yaml, the Lambda example); a saver, the scheduled collector and the
example's function then run over such threads, and every call they make is checked
against the deployed policies (``infra_policy``). The same stacks without the previous
key refuse the OLD key's ``Decrypt``, and the code configured from them fails with a
typed error (the saver, the function) or protects the thread (the collector);
``GenerateDataKey`` under OLD is refused either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.deploy.infra_policy import IamRequest, allowed, with_context
from tests.deploy.test_gc_lambda import put_big
from tests.deploy.test_infra import (
    LAMBDA_TEMPLATE,
    REGION,
    ROOT,
    STORAGE,
    Recorder,
    RolePolicies,
    Stack,
    deploy,
    deploy_collector,
    function_environment,
    http,
    load_handler,
    load_template,
    policy_documents,
    role_policies,
)
from tests.deploy.test_infra_keys import (
    GC,
    OTHER_CONTEXTS,
    KeyTraffic,
    aws,
    collector_environment,
    run_collector,
)

__all__ = ["aws"]  # the module's moto fixture, shared with test_infra.py

PREFIX = "rot/"


def sealed(stack: Stack, ring: Any, recorder: Recorder | None = None) -> Any:
    """A saver of ``stack`` with client-side encryption (checkpoint bodies in S3)."""
    from langgraph_s3 import S3Saver

    clients = {name: boto3.client(name, region_name=REGION) for name in ("s3", "dynamodb", "kms")}
    for client in clients.values():
        if recorder is not None:
            recorder.attach(client)
    return S3Saver(
        bucket=stack.bucket,
        table=stack.table,
        prefix=stack.prefix,
        index_inline_limit=0,
        s3_client=clients["s3"],
        dynamodb_client=clients["dynamodb"],
        kms_client=clients["kms"],
        encryption=ring,
    )


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


@dataclass
class Rotation:
    """Storage stacks of one prefix during a rotation (``rotating``: NEW with OLD as the
    previous key; ``switched``: NEW only), thread ``t-old`` under OLD and ``t-new``
    under NEW, and a saver's recorded run over both in the window."""

    old: str
    new: str
    rotating: Stack
    switched: Stack
    traffic: KeyTraffic

    def decrypt_old(self) -> IamRequest:
        (request,) = [r for r in self.traffic.kms() if r.resource == self.old]
        return request


@pytest.fixture(scope="module")
def rotation(aws: None) -> Rotation:
    from langgraph_s3.sealing.kms import KmsKeyRing

    kms = boto3.client("kms", region_name=REGION)
    old, new = (kms.create_key()["KeyMetadata"]["Arn"] for _ in range(2))
    given = {"Prefix": PREFIX, "ClientSideKeyArn": new}
    rotating = deploy("rotating", {**given, "PreviousClientSideKeyArn": old})
    switched = deploy("switched", {**given, "PreviousClientSideKeyArn": ""})
    with sealed(rotating, KmsKeyRing(old)) as before:  # written before the rotation
        put_big(before, "t-old")
    with sealed(rotating, KmsKeyRing(new, previous=[old])) as after:
        put_big(after, "t-new")
    recorder = Recorder()
    with sealed(rotating, KmsKeyRing(new, previous=[old]), recorder) as saver:  # cold
        for thread in ("t-old", "t-new"):
            assert saver.get_tuple(config(thread)) is not None
        put_big(saver, "t-old")  # a new checkpoint, sealed under t-old's data key
        put_big(saver, "t-fresh")  # a new thread: a new data key, under NEW
        assert len(list(saver.list(config("t-old")))) == 2
    return Rotation(old, new, rotating, switched, KeyTraffic(rotating, new, recorder))


def test_in_the_window_the_runtime_policy_allows_every_call(rotation: Rotation) -> None:
    runtime = [rotation.rotating.policies["PolicyArn"]]
    requests = rotation.traffic.requests()
    assert len(requests) > 10
    for request in requests:
        assert allowed(runtime, request), request
    used = {(r.action, r.resource) for r in rotation.traffic.kms()}
    assert used == {
        ("kms:Decrypt", rotation.old),  # t-old's data key, not yet re-wrapped
        ("kms:Decrypt", rotation.new),  # t-new's
        ("kms:GenerateDataKey", rotation.new),  # t-fresh's
    }


def test_without_the_previous_key_old_data_keys_cannot_be_opened(rotation: Rotation) -> None:
    from langgraph_s3 import UnknownKeyError
    from langgraph_s3.sealing.kms import KmsKeyRing

    switched = [rotation.switched.policies["PolicyArn"]]
    for request in rotation.traffic.kms():
        assert allowed(switched, request) == (request.resource != rotation.old), request
    # A saver configured with NEW alone refuses the thread before asking KMS.
    recorder = Recorder()
    with (
        sealed(rotation.rotating, KmsKeyRing(rotation.new), recorder) as saver,
        pytest.raises(UnknownKeyError, match="add it to previous="),
    ):
        saver.get_tuple(config("t-old"))
    assert not [call for call in recorder.calls if call[0] == "kms"]


def test_no_data_key_is_made_under_the_previous_key(rotation: Rotation) -> None:
    runtime = [rotation.rotating.policies["PolicyArn"]]
    decrypt = rotation.decrypt_old()
    assert not allowed(runtime, replace(decrypt, action="kms:GenerateDataKey"))
    (statement,) = [
        s
        for s in rotation.rotating.policies["PolicyArn"]["Statement"]
        if s["Resource"] == rotation.old
    ]
    assert (statement["Sid"], statement["Action"]) == (
        "OpenPreviousDataKeysOfThisPrefix",
        "kms:Decrypt",
    )


@pytest.mark.parametrize(("what", "context"), OTHER_CONTEXTS)
def test_the_previous_key_is_for_this_prefix_contexts_only(
    rotation: Rotation, what: str, context: dict[str, str]
) -> None:
    runtime = [rotation.rotating.policies["PolicyArn"]]
    assert allowed(runtime, rotation.decrypt_old())
    assert not allowed(runtime, with_context(rotation.decrypt_old(), context)), what


def _same_names(stack: Stack, like: Stack) -> dict[str, Any]:
    """``stack``'s runtime policy with ``like``'s bucket and table names."""
    text = json.dumps(stack.policies["PolicyArn"])
    text = text.replace(stack.bucket, like.bucket).replace(stack.table, like.table)
    document: dict[str, Any] = json.loads(text)
    return document


def test_the_previous_key_adds_one_statement_and_empty_adds_none(rotation: Rotation) -> None:
    rotating = rotation.rotating.policies["PolicyArn"]["Statement"]
    switched = _same_names(rotation.switched, rotation.rotating)["Statement"]
    assert [s for s in rotating if s["Sid"] != "OpenPreviousDataKeysOfThisPrefix"] == switched
    assert len(rotating) == len(switched) + 1


def resolved(prefix: str, previous: str | None, key: str) -> list[dict[str, Any]]:
    """storage.yaml's runtime policy statements, resolved like CloudFormation."""
    refs: dict[str, Any] = {
        "Prefix": prefix,
        "Bucket.Arn": "arn:aws:s3:::b",
        "Table.Arn": f"arn:aws:dynamodb:{REGION}:123456789012:table/t",
        "AWS::Region": REGION,
        "ClientSideKeyArn": key,
    }
    if previous is not None:
        refs["PreviousClientSideKeyArn"] = previous
    docs = policy_documents(load_template(STORAGE), refs, has_kms=False)
    statements: list[dict[str, Any]] = docs["CheckpointPolicy"]["Statement"]
    return statements


def test_an_empty_prefix_opens_previous_keys_of_the_whole_table(rotation: Rotation) -> None:
    statements = resolved("", rotation.old, rotation.new)
    assert resolved("", "", rotation.new) == resolved("", None, rotation.new) == statements[:-1]
    bare = with_context(rotation.decrypt_old(), {"thread": "t-old", "key-version": "1"})
    assert allowed([{"Statement": statements}], bare)
    assert not allowed([{"Statement": statements}], replace(bare, action="kms:GenerateDataKey"))
    # Without a current key the previous one grants nothing (and the stack's Rule refuses it).
    assert resolved("", rotation.old, "") == resolved("", None, "")


# ------------------------------------------------------------------ gc.yaml
@dataclass
class CollectorRotation:
    """gc.yaml during the rotation (``rotating``) and without the previous key
    (``switched``, beside the storage stack without it), and a recorded run of the
    rotating collector with its deployed environment."""

    rotating: RolePolicies
    switched: RolePolicies
    env: dict[str, str]
    switched_env: dict[str, str]
    traffic: KeyTraffic
    report: dict[str, Any]


@pytest.fixture(scope="module")
def collector(rotation: Rotation) -> CollectorRotation:
    deploy_collector(
        "gc-rotating",
        rotation.rotating,
        {
            "ClientSideKeyArn": rotation.new,
            "PreviousClientSideKeyArn": rotation.old,
        },
    )
    deploy_collector("gc-switched", rotation.switched, {"ClientSideKeyArn": rotation.new})
    recorder = Recorder()
    env = collector_environment("gc-rotating")
    report = run_collector(env, recorder)
    return CollectorRotation(
        rotating=role_policies("gc-rotating", GC, "CollectorRole", rotation.rotating),
        switched=role_policies("gc-switched", GC, "CollectorRole", rotation.switched),
        env=env,
        switched_env=collector_environment("gc-switched"),
        traffic=KeyTraffic(rotation.rotating, rotation.new, recorder),
        report=report,
    )


def test_the_collector_opens_both_keys_threads_under_its_role(
    rotation: Rotation, collector: CollectorRotation
) -> None:
    assert collector.env["CHECKPOINT_PREVIOUS_KMS_KEY"] == rotation.old
    report = collector.report
    assert report["threads"] >= 3 and report["threads_protected"] == report["errors"] == []
    for request in collector.traffic.requests():
        assert allowed(collector.rotating.documents, request), request
    opened = {(r.action, r.resource) for r in collector.traffic.kms()}
    assert ("kms:Decrypt", rotation.old) in opened and ("kms:Decrypt", rotation.new) in opened
    assert {action for action, _ in opened} == {"kms:Decrypt"}
    # gc.yaml's own statement grants the previous key, whatever the storage stack was given.
    (old,) = [r for r in collector.traffic.kms() if r.resource == rotation.old]
    assert allowed([collector.rotating.inline["data-keys"]], old)
    assert not allowed(collector.rotating.documents, replace(old, action="kms:GenerateDataKey"))


def test_a_collector_without_the_previous_key_protects_old_threads(
    rotation: Rotation, collector: CollectorRotation
) -> None:
    from langgraph_s3 import DamageFoundError

    assert collector.switched_env["CHECKPOINT_PREVIOUS_KMS_KEY"] == ""
    (old,) = [r for r in collector.traffic.kms() if r.resource == rotation.old]
    assert not allowed(collector.switched.documents, old)
    statements = collector.switched.inline["data-keys"]["Statement"]
    assert [s["Sid"] for s in statements] == ["OpenDataKeysOfThisPrefix", "NeverCreateDataKeys"]
    # Its function's key settings over the storage in rotation: t-old is spared.
    s3 = boto3.client("s3", region_name=REGION)
    before = s3.list_objects_v2(Bucket=rotation.rotating.bucket, Prefix=f"{PREFIX}t-old/")
    env = {**collector.env, "CHECKPOINT_PREVIOUS_KMS_KEY": ""}
    with pytest.raises(DamageFoundError) as info:
        run_collector(env, Recorder())
    assert "could not open 1 thread(s) (first: 't-old'" in str(info.value)
    assert "CHECKPOINT_PREVIOUS_KMS_KEY" in str(info.value)
    after = s3.list_objects_v2(Bucket=rotation.rotating.bucket, Prefix=f"{PREFIX}t-old/")
    assert [o["Key"] for o in after["Contents"]] == [o["Key"] for o in before["Contents"]]


# ------------------------------------------------------------- the Lambda example
@pytest.fixture
def example(rotation: Rotation, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Load a fresh container of the example with the template's environment for the
    given parameters (the ledger table is not deployed here)."""

    def container(parameters: dict[str, str], recorder: Recorder | None = None) -> Any:
        env = function_environment(
            LAMBDA_TEMPLATE, "ApprovalFunction", rotation.rotating, parameters
        )
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("ACTIONS_TABLE", raising=False)
        monkeypatch.setenv("APPROVAL_AGENT_NOW", "2030-03-01T12:00:00Z")
        if recorder is not None:
            make_client = boto3.client
            monkeypatch.setattr(
                boto3, "client", lambda *a, **kw: _attached(recorder, make_client(*a, **kw))
            )
        return load_handler(monkeypatch)

    return container


def _attached(recorder: Recorder, client: Any) -> Any:
    recorder.attach(client)
    return client


def test_the_example_decides_a_thread_sealed_under_the_previous_key(
    rotation: Rotation, example: Any
) -> None:
    from langgraph_s3 import UnknownKeyError

    # Started before the rotation, with OLD as the only key.
    code, started = http(
        example({"ClientSideKeyArn": rotation.old}),
        "POST",
        "/threads",
        {"request": "refund order R-1"},
    )
    assert code == 201, started
    thread = started["thread_id"]
    # A container of the stack deployed without the previous key cannot open it.
    plain = example({"ClientSideKeyArn": rotation.new})
    with pytest.raises(UnknownKeyError):
        http(plain, "GET", f"/threads/{thread}")
    # Deployed with PreviousClientSideKeyArn: decided, every call under PolicyArn.
    recorder = Recorder()
    during = example(
        {"ClientSideKeyArn": rotation.new, "PreviousClientSideKeyArn": rotation.old}, recorder
    )
    code, decided = http(during, "POST", f"/threads/{thread}/decision", {"approve": True})
    assert (code, decided["status"]) == (200, "completed"), decided
    traffic = KeyTraffic(rotation.rotating, rotation.new, recorder)
    runtime = [rotation.rotating.policies["PolicyArn"]]
    for request in traffic.requests():
        assert allowed(runtime, request), request
    assert {(r.action, r.resource) for r in traffic.kms()} == {("kms:Decrypt", rotation.old)}


# ----------------------------------------------------------------- the Rules
def _holds(node: Any, parameters: dict[str, str]) -> Any:
    """The Rules' functions (Fn::Not, Fn::Equals, Ref), as CloudFormation evaluates them."""
    if isinstance(node, dict):
        ((key, arg),) = node.items()
        if key == "Ref":
            return parameters.get(arg, "")
        if key == "Fn::Not":
            return not _holds(arg[0], parameters)
        if key == "Fn::Equals":
            return _holds(arg[0], parameters) == _holds(arg[1], parameters)
        raise AssertionError(f"{key} is not modelled")
    return node


def refused(template: Path, parameters: dict[str, str]) -> list[str]:
    """What the template's Rules say against these parameters (moto ignores Rules)."""
    out = []
    for rule in load_template(template).get("Rules", {}).values():
        if _holds(rule.get("RuleCondition", True), parameters):
            out += [
                a["AssertDescription"]
                for a in rule["Assertions"]
                if not _holds(a["Assert"], parameters)
            ]
    return out


KEY = "arn:aws:kms:us-east-1:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab"
OTHER = "arn:aws:kms:us-east-1:111122223333:key/mrk-99999999999999999999999999999999"
TEMPLATES = [STORAGE, GC, ROOT / "infra" / "multi-region.yaml", LAMBDA_TEMPLATE]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_a_previous_key_without_a_current_key_is_refused(template: Path) -> None:
    assert refused(template, {"PreviousClientSideKeyArn": OTHER}) == [
        "PreviousClientSideKeyArn needs ClientSideKeyArn (the key that replaces it)"
    ]
    assert refused(template, {"ClientSideKeyArn": KEY, "PreviousClientSideKeyArn": OTHER}) == []
    assert refused(template, {"ClientSideKeyArn": KEY}) == refused(template, {}) == []
    assert refused(template, {"ClientSideKeyArn": KEY, "PreviousClientSideKeyArn": KEY}) == [
        "PreviousClientSideKeyArn must differ from ClientSideKeyArn"
    ]


def test_the_example_reads_the_previous_key_from_itscollector_environment(
    rotation: Rotation, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph_s3 import InvalidConfigError

    settings = load_handler(monkeypatch).storage_settings
    where = {"CHECKPOINT_BUCKET": "b", "CHECKPOINT_TABLE": "t"}
    keys = {"CHECKPOINT_KMS_KEY": rotation.new, "CHECKPOINT_PREVIOUS_KMS_KEY": rotation.old}
    ring = settings({**where, **keys})["encryption"]
    assert (ring.key_id, ring.previous) == (rotation.new, (rotation.old,))
    unset = settings(
        {**where, "CHECKPOINT_KMS_KEY": rotation.new, "CHECKPOINT_PREVIOUS_KMS_KEY": ""}
    )
    assert unset["encryption"].previous == ()
    with pytest.raises(RuntimeError, match="needs CHECKPOINT_KMS_KEY"):
        settings({**where, "CHECKPOINT_PREVIOUS_KMS_KEY": rotation.old})
    with pytest.raises(InvalidConfigError, match="CHECKPOINT_PREVIOUS_KMS_KEY 'alias/old'"):
        settings({**where, **keys, "CHECKPOINT_PREVIOUS_KMS_KEY": "alias/old"})
