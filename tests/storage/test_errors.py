"""Every failure a user can cause or meet at the AWS boundary is one of our errors.

One test per row of the README's error table: the type, what the message names, and
botocore's error kept as ``__cause__``. Faults AWS would answer (access denied,
rejected credentials) are injected as real HTTP responses at botocore's send hook.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from langgraph_s3 import (
    AccessDeniedError,
    AsyncS3Saver,
    CredentialsError,
    EndpointError,
    InvalidConfigError,
    S3Saver,
    S3SaverError,
    StorageNotFoundError,
)
from tests.conftest import REGION, Backend

CONFIG = {"configurable": {"thread_id": "t"}}
QUICK = Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=1)
CLOSED_PORT = "http://127.0.0.1:9"  # discard port: nothing listens


@pytest.fixture
def no_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    """No credentials and no region from anywhere (env, files, instance metadata)."""
    for var in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
        "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ENDPOINT_URL",
    ):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield


def _cause_is_botocore(exc: BaseException) -> None:
    assert isinstance(exc, S3SaverError)
    assert isinstance(exc.__cause__, BotoCoreError | ClientError), exc.__cause__


def test_no_credentials(no_aws_env: None) -> None:
    # A fresh session: boto3's default one may hold credentials found by earlier tests.
    saver = S3Saver(
        bucket="b", table="t", region_name=REGION, endpoint_url=CLOSED_PORT,
        session=boto3.Session(),
    )  # fmt: skip
    with pytest.raises(CredentialsError, match="no AWS credentials") as info:
        saver.get_tuple(CONFIG)
    _cause_is_botocore(info.value)


def test_no_region(no_aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """S3Saver makes its clients when it is constructed, so a missing region is
    reported there; AsyncS3Saver makes them on its loop, at the first call."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    with pytest.raises(InvalidConfigError, match="region_name") as info:
        S3Saver(bucket="b", table="t", session=boto3.Session())
    _cause_is_botocore(info.value)


async def test_no_region_async(no_aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    from aiobotocore.session import AioSession

    async with AsyncS3Saver(bucket="b", table="t", session=AioSession()) as saver:
        with pytest.raises(InvalidConfigError, match="region_name") as info:
            await saver.aget_tuple(CONFIG)
    _cause_is_botocore(info.value)


def test_endpoint_unreachable() -> None:
    saver = S3Saver(
        bucket="b", table="t", region_name=REGION, endpoint_url=CLOSED_PORT, boto_config=QUICK
    )
    with pytest.raises(EndpointError, match=r"127\.0\.0\.1:9.*endpoint_url") as info:
        saver.get_tuple(CONFIG)
    _cause_is_botocore(info.value)


async def test_endpoint_unreachable_async() -> None:
    async with AsyncS3Saver(
        bucket="b", table="t", region_name=REGION, endpoint_url=CLOSED_PORT, boto_config=QUICK
    ) as saver:
        with pytest.raises(EndpointError) as info:
            await saver.aget_tuple(CONFIG)
    _cause_is_botocore(info.value)


def _answer(client: Any, operation: str, status: int, body: dict[str, Any]) -> None:
    """Make AWS's answer to ``operation`` this HTTP response (JSON protocol)."""

    def respond(request: Any, **_: Any) -> AWSResponse:
        raw = json.dumps(body).encode()

        class Raw:
            def stream(self, **_: Any) -> Iterator[bytes]:
                yield raw

        return AWSResponse(request.url, status, {"x-amzn-requestid": "r"}, Raw())

    client.meta.events.register(f"before-send.dynamodb.{operation}", respond)


def test_access_denied_names_action_and_resource(inproc_backend: Backend) -> None:
    ddb = inproc_backend.dynamodb()
    _answer(ddb, "Query", 400, {
        "__type": "com.amazonaws.dynamodb.v20120810#AccessDeniedException",
        "message": "User: arn:aws:iam::1:user/u is not authorized to perform: dynamodb:Query",
    })  # fmt: skip
    saver = inproc_backend.saver(dynamodb_client=ddb)
    with pytest.raises(AccessDeniedError) as info:
        saver.get_tuple(CONFIG)
    assert info.value.action == "Query" and inproc_backend.table in info.value.resource
    assert "Query" in str(info.value) and inproc_backend.table in str(info.value)
    _cause_is_botocore(info.value)


def test_rejected_credentials(inproc_backend: Backend) -> None:
    ddb = inproc_backend.dynamodb()
    _answer(ddb, "Query", 400, {
        "__type": "com.amazonaws.dynamodb.v20120810#UnrecognizedClientException",
        "message": "The security token included in the request is invalid.",
    })  # fmt: skip
    with pytest.raises(CredentialsError, match="rejected the credentials") as info:
        inproc_backend.saver(dynamodb_client=ddb).get_tuple(CONFIG)
    _cause_is_botocore(info.value)


def test_setup_with_an_invalid_bucket_name(inproc_backend: Backend) -> None:
    saver = inproc_backend.saver()
    saver.bucket = "ab"
    with pytest.raises(InvalidConfigError, match="'ab' is not a valid S3 bucket name") as info:
        saver.setup()
    _cause_is_botocore(info.value)


def test_setup_refuses_a_bucket_of_another_account(
    inproc_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"{inproc_backend.bucket}-theirs"
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "111111111111")
    boto3.client("s3", region_name=REGION).create_bucket(Bucket=name)
    monkeypatch.delenv("MOTO_ACCOUNT_ID")
    saver = inproc_backend.saver()
    saver.bucket = name
    with pytest.raises(InvalidConfigError, match="another AWS account") as info:
        saver.setup()
    _cause_is_botocore(info.value)


def test_missing_table_names_table_and_region(inproc_backend: Backend) -> None:
    saver = inproc_backend.saver(region_name=REGION)
    saver.table = "no-such-table"
    with pytest.raises(StorageNotFoundError) as info:
        saver.get_tuple(CONFIG)
    message = str(info.value)
    assert "'no-such-table'" in message and repr(REGION) in message
    assert "region_name" in message  # the likelier mistake, named before setup()
