"""infra/storage.yaml's grant for client-side encryption keys, against the saver's real
KMS calls.

A stack is deployed with ``ClientSideKeyArn`` (a moto KMS key). The saver creates,
reads, re-reads in a cold container and shreds data keys of a thread and a tenant
through that stack (``core.datakeys`` on a ``KmsKeyRing``); every AWS call it makes is
turned into the IAM requests AWS would authorise (``infra_policy.iam_requests``) and
evaluated against the deployed runtime policy. The policy must allow all of them and
refuse the same KMS requests for another prefix, with an encryption context that
names no thread or tenant or carries other pairs, or on another key; and a stack
without ``ClientSideKeyArn`` grants none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import boto3
import pytest

from tests.deploy.infra_policy import Arns, IamRequest, allowed, iam_requests, with_context
from tests.deploy.test_gc_lambda import put_big
from tests.deploy.test_infra import (
    ENCRYPTION_ONLY,
    REGION,
    ROOT,
    RUNTIME_ACTIONS,
    STORAGE,
    Recorder,
    RolePolicies,
    Stack,
    aws,
    deploy,
    deploy_collector,
    load_template,
    policy_documents,
    role_policies,
)

__all__ = ["aws"]  # the module's moto fixture, shared with test_infra.py

KMS_ACTIONS = {"kms:GenerateDataKey", "kms:Decrypt"}
GC = ROOT / "infra" / "gc.yaml"


@dataclass
class KeyTraffic:
    stack: Stack
    key: str
    recorder: Recorder

    def requests(self) -> list[IamRequest]:
        arns = Arns(REGION, self.stack.account)
        return [
            request
            for service, op, params, _ in self.recorder.calls
            for request in iam_requests(service, op, params, arns)
        ]

    def kms(self) -> list[IamRequest]:
        return [r for r in self.requests() if r.action.startswith("kms:")]


def use_keys(stack: Stack, key: str, recorder: Recorder) -> None:
    """Create, read, cold-read and shred a thread's and a tenant's data keys."""
    from langgraph_s3 import S3Saver
    from langgraph_s3.core import datakeys
    from langgraph_s3.core.datakeys import KeyScope
    from langgraph_s3.sealing.kms import KmsKeyRing

    clients = {name: boto3.client(name, region_name=REGION) for name in ("s3", "dynamodb", "kms")}
    for client in clients.values():
        recorder.attach(client)
    saver = S3Saver(
        bucket=stack.bucket, table=stack.table, prefix=stack.prefix,
        s3_client=clients["s3"], dynamodb_client=clients["dynamodb"], kms_client=clients["kms"],
    )  # fmt: skip
    for scope in (KeyScope.thread("customer-42"), KeyScope.tenant("acme")):
        made = saver.run(datakeys.key_for(saver, KmsKeyRing(key), scope))  # GenerateDataKey
        cold = saver.run(datakeys.key_for(saver, KmsKeyRing(key), scope))  # Decrypt
        assert cold == made
        assert saver.run(datakeys.version(saver, scope, 1)) is not None
        assert saver.run(datakeys.shred(saver, KmsKeyRing(key), scope)) == 1
    use_sealed_threads(saver, clients, key)


def use_sealed_threads(plain: Any, clients: dict[str, Any], key: str) -> None:
    """A saver with encryption= writes a thread of its own and one of a tenant, reads
    them cold, re-encrypts one and deletes both."""
    from langgraph_s3 import Encryption, S3Saver
    from langgraph_s3.sealing.kms import KmsKeyRing

    def sealed() -> S3Saver:
        tenants = Encryption(KmsKeyRing(key), tenant_of=lambda t: "acme" if t == "t-2" else None)
        return S3Saver(
            bucket=plain.bucket, table=plain.table, prefix=plain.layout.prefix,
            s3_client=clients["s3"], dynamodb_client=clients["dynamodb"],
            kms_client=clients["kms"], encryption=tenants,
        )  # fmt: skip

    writer = sealed()
    for thread in ("t-1", "t-2"):
        put_big(writer, thread)
        put_big(writer, thread)
    assert sealed().get_tuple({"configurable": {"thread_id": "t-2"}}) is not None
    done = sealed().reencrypt_thread("t-1")
    assert (done.version, done.shredded) == (2, (1,))
    reader = sealed()
    assert [t.config for t in reader.list({"configurable": {"thread_id": "t-1"}})]
    reader.delete_thread("t-1")
    reader.delete_thread("t-2")


@pytest.fixture(scope="module")
def key_traffic(aws: None) -> KeyTraffic:
    key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    stack = deploy("checkpoints-keys", {"Prefix": "keys/", "ClientSideKeyArn": key})
    recorder = Recorder()
    use_keys(stack, key, recorder)
    return KeyTraffic(stack, key, recorder)


def test_the_runtime_policy_allows_every_call_of_the_key_flows(key_traffic: KeyTraffic) -> None:
    runtime = [key_traffic.stack.policies["PolicyArn"]]
    requests = key_traffic.requests()
    assert {r.action for r in key_traffic.kms()} == KMS_ACTIONS
    # A thread's first key item: its put, with the check that the other kind is absent.
    assert {r.action for r in requests} >= ENCRYPTION_ONLY
    for request in requests:
        assert allowed(runtime, request), request
    context = key_traffic.kms()[0].context
    assert context["kms:EncryptionContext:prefix"] == ("keys/",)
    assert context["kms:EncryptionContext:thread"] == ("customer-42",)


def test_the_grant_adds_exactly_the_two_kms_actions(key_traffic: KeyTraffic) -> None:
    granted: set[str] = set()
    for statement in key_traffic.stack.policies["PolicyArn"]["Statement"]:
        action = statement["Action"]
        granted.update(action if isinstance(action, list) else [action])
    assert granted == RUNTIME_ACTIONS | KMS_ACTIONS
    (statement,) = [
        s
        for s in key_traffic.stack.policies["PolicyArn"]["Statement"]
        if s["Sid"] == "DataKeysOfThisPrefix"
    ]
    assert statement["Resource"] == key_traffic.key


# Encryption contexts no role of the "keys/" prefix may use.
OTHER_CONTEXTS = [
    ("another prefix", {"prefix": "other-app/", "thread": "customer-42", "key-version": "1"}),
    ("no prefix", {"thread": "customer-42", "key-version": "1"}),
    ("no thread or tenant", {"prefix": "keys/", "key-version": "1"}),
    ("another pair", {"prefix": "keys/", "thread": "t", "key-version": "1", "x": "y"}),
]


@pytest.mark.parametrize(("what", "context"), OTHER_CONTEXTS)
def test_the_grant_refuses_other_encryption_contexts(
    key_traffic: KeyTraffic, what: str, context: dict[str, str]
) -> None:
    runtime = [key_traffic.stack.policies["PolicyArn"]]
    for request in key_traffic.kms():
        assert not allowed(runtime, with_context(request, context)), (what, request)


def test_the_grant_is_for_the_configured_key_only(key_traffic: KeyTraffic) -> None:
    runtime = [key_traffic.stack.policies["PolicyArn"]]
    other = key_traffic.key.rsplit("/", 1)[0] + "/11111111-2222-3333-4444-555555555555"
    for request in key_traffic.kms():
        assert not allowed(runtime, replace(request, resource=other)), request


def runtime_policy(prefix: str, kms_key: str, client_side_key: str) -> list[dict[str, Any]]:
    """The template's runtime policy for these parameters, resolved like CloudFormation."""
    refs: dict[str, Any] = {
        "Prefix": prefix,
        "Bucket": "b",
        "Bucket.Arn": "arn:aws:s3:::b",
        "Table.Arn": f"arn:aws:dynamodb:{REGION}:123456789012:table/t",
        "AWS::Region": REGION,
        "KmsKeyArn": kms_key,
        "ClientSideKeyArn": client_side_key,
    }
    docs = policy_documents(load_template(STORAGE), refs, has_kms=bool(kms_key))
    return [docs["CheckpointPolicy"]]


def test_a_stack_without_a_client_side_key_grants_no_data_keys(key_traffic: KeyTraffic) -> None:
    # Server-side encryption with the same key, and no ClientSideKeyArn.
    runtime = runtime_policy("keys/", kms_key=key_traffic.key, client_side_key="")
    for request in key_traffic.kms():
        # The server-side statements name the key too, but only through S3 or DynamoDB.
        assert not allowed(runtime, request), request


def test_an_empty_prefix_grants_contexts_without_a_prefix(key_traffic: KeyTraffic) -> None:
    runtime = runtime_policy("", kms_key="", client_side_key=key_traffic.key)
    request = key_traffic.kms()[0]
    bare = {"thread": "customer-42", "key-version": "1"}
    assert allowed(runtime, with_context(request, bare))
    assert not allowed(runtime, with_context(request, {**bare, "prefix": "keys/"}))
    assert not allowed(runtime, with_context(request, {"key-version": "1"}))


# ----------------------------------------------------- gc.yaml with the same key
@dataclass
class CollectorKeys:
    """gc.yaml deployed with and without ``ClientSideKeyArn`` beside a storage stack
    whose bucket and table use the same key server-side, and one run of the keyed
    collector (its deployed environment) over a sealed thread."""

    storage: Stack
    key: str
    role: RolePolicies
    plain: RolePolicies
    plain_env: dict[str, str]
    traffic: KeyTraffic


def collector_environment(stack: str) -> dict[str, str]:
    """The environment of gc.yaml's function in stack ``stack``, as deployed."""
    functions = boto3.client("lambda", region_name=REGION)
    config = functions.get_function(FunctionName=f"{stack}-collector")["Configuration"]
    return dict(config["Environment"]["Variables"])


def run_collector(env: dict[str, str], recorder: Recorder) -> dict[str, Any]:
    """``gc.lambda_handler`` with ``env`` as the function's environment, its AWS
    calls recorded."""
    from langgraph_s3 import gc

    make_client = boto3.client

    def recorded_client(*args: Any, **kwargs: Any) -> Any:
        client = make_client(*args, **kwargs)
        recorder.attach(client)
        return client

    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        mp.setattr(boto3, "client", recorded_client)  # the clients the handler makes
        return gc.lambda_handler({}, None)


@pytest.fixture(scope="module")
def collector_keys(aws: None) -> CollectorKeys:
    from langgraph_s3 import S3Saver
    from langgraph_s3.sealing.kms import KmsKeyRing

    key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    storage = deploy("checkpoints-gc", {"Prefix": "keys/", "KmsKeyArn": key,
                                        "ClientSideKeyArn": key})  # fmt: skip
    deploy_collector("collector-keys", storage, {"ClientSideKeyArn": key})
    deploy_collector("collector-plain", storage, {})
    with S3Saver(bucket=storage.bucket, table=storage.table, prefix=storage.prefix,
                 index_inline_limit=0, encryption=KmsKeyRing(key)) as saver:  # fmt: skip
        put_big(saver, "customer-42")
    recorder = Recorder()
    report = run_collector(collector_environment("collector-keys"), recorder)
    assert report["threads"] == 1 and report["threads_protected"] == report["errors"] == []
    return CollectorKeys(
        storage=storage,
        key=key,
        role=role_policies("collector-keys", GC, "CollectorRole", storage),
        plain=role_policies("collector-plain", GC, "CollectorRole", storage),
        plain_env=collector_environment("collector-plain"),
        traffic=KeyTraffic(storage, key, recorder),
    )


def test_the_collector_role_allows_every_call_of_a_run_and_it_only_decrypts(
    collector_keys: CollectorKeys,
) -> None:
    role = collector_keys.role
    requests = collector_keys.traffic.requests()
    assert len(requests) > 5
    for request in requests:
        assert allowed(role.documents, request), request
    (decrypt,) = collector_keys.traffic.kms()  # the thread's data key, once
    assert decrypt.action == "kms:Decrypt" and decrypt.resource == collector_keys.key
    assert decrypt.context["kms:EncryptionContext:prefix"] == ("keys/",)
    # gc.yaml's own statement grants it, whatever the storage stack was given.
    assert allowed([role.inline["data-keys"]], decrypt)


def test_the_collector_may_not_create_data_keys(collector_keys: CollectorKeys) -> None:
    role, storage = collector_keys.role, collector_keys.storage
    (decrypt,) = collector_keys.traffic.kms()
    create = replace(decrypt, action="kms:GenerateDataKey", api="GenerateDataKey")
    # The storage stack's runtime policy, attached to the role, would allow it.
    assert allowed([storage.policies["PolicyArn"]], create)
    assert not allowed(role.documents, create)
    # S3 and DynamoDB still use the same key server-side for the collector's writes.
    bucket = f"arn:aws:s3:::{storage.bucket}"
    through_s3 = IamRequest("kms:GenerateDataKey", collector_keys.key, {
        "kms:ViaService": (f"s3.{REGION}.amazonaws.com",),
        "kms:EncryptionContextKeys": ("aws:s3:arn",),
        "kms:EncryptionContext:aws:s3:arn": (bucket,),
    })  # fmt: skip
    assert allowed(role.documents, through_s3)


@pytest.mark.parametrize(("what", "context"), OTHER_CONTEXTS)
def test_the_collector_may_not_decrypt_other_contexts(
    collector_keys: CollectorKeys, what: str, context: dict[str, str]
) -> None:
    (decrypt,) = collector_keys.traffic.kms()
    assert not allowed(collector_keys.role.documents, with_context(decrypt, context)), what


def test_the_collector_may_decrypt_with_the_configured_key_only(
    collector_keys: CollectorKeys,
) -> None:
    (decrypt,) = collector_keys.traffic.kms()
    other = collector_keys.key.rsplit("/", 1)[0] + "/11111111-2222-3333-4444-555555555555"
    assert not allowed(collector_keys.role.documents, replace(decrypt, resource=other))


def test_a_collector_without_the_key_has_no_kms_statement(collector_keys: CollectorKeys) -> None:
    plain, storage = collector_keys.plain, collector_keys.storage
    assert collector_keys.plain_env.get("CHECKPOINT_KMS_KEY", "") == ""
    assert list(plain.inline) == ["logs-and-failures"]
    actions = {
        action
        for statement in plain.inline["logs-and-failures"]["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str)
                       else statement["Action"])
    }  # fmt: skip
    assert not [a for a in actions if a.startswith("kms:")]
    # What it may do with KMS is what the storage stack's policies allow, unchanged.
    assert plain.managed == [storage.policies["PolicyArn"], storage.policies["AdminPolicyArn"]]
    assert collector_keys.role.managed == plain.managed
