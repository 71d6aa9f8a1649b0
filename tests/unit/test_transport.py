"""``transport``: each operation becomes the boto call both drivers make, and each AWS
answer becomes the operation's result or our typed error (botocore's as the cause)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoRegionError

from langgraph_s3.core.index import Cancelled, DeleteHead, Query, TableStatus, Transact, key
from langgraph_s3.errors import (
    AccessDeniedError,
    CredentialsError,
    DataKeyError,
    EndpointError,
    InvalidConfigError,
    KeyServiceError,
    KeyUnwrapError,
    S3SaverError,
    StorageNotFoundError,
    UnknownKeyError,
)
from langgraph_s3.operations import (
    CreateBucket,
    GeneratedKey,
    KmsDecrypt,
    KmsGenerateDataKey,
    ListPage,
    S3Copy,
    S3Delete,
    S3Get,
    S3List,
    S3Put,
)
from langgraph_s3.transport import (
    DYNAMODB,
    HOME_S3,
    KMS,
    S3,
    call_spec,
    failed,
    finish,
    translate,
)


def client_error(code: str, operation: str = "GetItem") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}}, operation)


@pytest.mark.parametrize(
    ("op", "spec"),
    [
        (S3Get("k"), (S3, "get_object", {"Bucket": "b", "Key": "k"})),
        (S3Get("k", home=True), (HOME_S3, "get_object", {"Bucket": "home", "Key": "k"})),
        (S3Put("k", b"x"), (S3, "put_object", {"Bucket": "b", "Key": "k", "Body": b"x"})),
        (
            S3List("p/", "tok"),
            (S3, "list_objects_v2", {"Bucket": "b", "Prefix": "p/", "ContinuationToken": "tok"}),
        ),
        (
            S3Delete(("a", "b")),
            (
                S3,
                "delete_objects",
                {"Bucket": "b", "Delete": {"Objects": [{"Key": "a"}, {"Key": "b"}], "Quiet": True}},
            ),
        ),
        (
            S3Copy("s", "t"),
            (
                S3,
                "copy_object",
                {"Bucket": "b", "Key": "t", "CopySource": {"Bucket": "b", "Key": "s"}},
            ),
        ),
        (CreateBucket("us-east-1"), (S3, "create_bucket", {"Bucket": "b"})),
        (
            CreateBucket("eu-west-1"),
            (
                S3,
                "create_bucket",
                {"Bucket": "b", "CreateBucketConfiguration": {"LocationConstraint": "eu-west-1"}},
            ),
        ),
        (TableStatus("t"), (DYNAMODB, "describe_table", {"TableName": "t"})),
        (
            Query("t", "p", limit=1, consistent=False),
            (
                DYNAMODB,
                "query",
                {
                    "TableName": "t",
                    "KeyConditionExpression": "pk = :pk",
                    "ExpressionAttributeValues": {":pk": {"S": "p"}},
                    "Limit": 1,
                },
            ),
        ),
    ],
)
def test_each_operation_is_one_boto_call(op: Any, spec: tuple[str, str, dict[str, Any]]) -> None:
    assert call_spec(op, "b", "home") == spec


def test_a_listing_page_and_a_partial_delete() -> None:
    modified = datetime(2026, 1, 1, tzinfo=UTC)
    page = finish(
        S3List("p/"),
        {
            "Contents": [{"Key": "p/a", "LastModified": modified, "Size": 3}],
            "IsTruncated": True,
            "NextContinuationToken": "next",
        },
    )
    assert page == ListPage([("p/a", modified.timestamp(), 3)], "next")
    assert finish(S3List("p/"), {"IsTruncated": False}) == ListPage([], None)
    with pytest.raises(S3SaverError, match=r"refused to delete 1 object.*'p/a'.*AccessDenied"):
        finish(
            S3Delete(("p/a",)),
            {"Errors": [{"Key": "p/a", "Code": "AccessDenied", "Message": "no"}]},
        )


def test_answers_a_flow_handles_itself_are_results() -> None:
    where = {"bucket": "b", "table": "t", "region": "eu-west-1"}
    assert failed(S3Get("k"), client_error("NoSuchKey", "GetObject"), **where) is None
    head = DeleteHead("t", "p", "h#~", ("c1",))
    assert failed(head, client_error("ConditionalCheckFailedException"), **where) is False
    assert failed(CreateBucket(None), client_error("BucketAlreadyOwnedByYou"), **where) is None
    # A missing bucket is no missing key: the first S3 request reports it.
    with pytest.raises(
        StorageNotFoundError, match="bucket 'b' does not exist in region 'eu-west-1'"
    ):
        failed(S3Get("k"), client_error("NoSuchBucket", "GetObject"), **where)


@pytest.mark.parametrize(
    ("code", "operation", "error", "words"),
    [
        ("NoSuchBucket", "GetObject", StorageNotFoundError, ["bucket 'b'", "setup()"]),
        ("ResourceNotFoundException", "Query", StorageNotFoundError, ["table 't'", "region_name"]),
        ("BucketAlreadyExists", "CreateBucket", InvalidConfigError, ["another AWS account"]),
        ("InvalidBucketName", "CreateBucket", InvalidConfigError, ["not a valid S3 bucket name"]),
        ("PermanentRedirect", "GetObject", InvalidConfigError, ["region_name"]),
        ("ExpiredToken", "Query", CredentialsError, ["ExpiredToken", "refresh"]),
        ("AccessDeniedException", "Query", AccessDeniedError, ["Query", "DynamoDB table 't'"]),
        ("AccessDenied", "PutObject", AccessDeniedError, ["PutObject", "S3 bucket 'b'"]),
    ],
)
def test_aws_errors_become_typed_errors_saying_what_to_do(
    code: str, operation: str, error: type[Exception], words: list[str]
) -> None:
    translated = translate(client_error(code, operation), bucket="b", table="t", region="r")
    assert isinstance(translated, error)
    for word in words:
        assert word in str(translated)


def test_an_unknown_aws_error_is_left_as_it_is() -> None:
    original = client_error("InternalError")
    assert translate(original, bucket="b", table="t") is original


def test_an_index_request_decodes_its_answer_and_its_expected_refusals() -> None:
    """The transport maps an index request through its own ``call``, ``result`` and
    ``refused``; a code the request does not expect is our translated error."""
    where = {"bucket": "b", "table": "t", "region": "eu-west-1"}
    txn = Transact((("head", {"Update": {"TableName": "t"}}),), token="tok")
    assert call_spec(txn, "b", None) == (
        DYNAMODB,
        "transact_write_items",
        {"TransactItems": [{"Update": {"TableName": "t"}}], "ClientRequestToken": "tok"},
    )
    assert finish(txn, {}) is None
    reasons = [{"Code": "ConditionalCheckFailed", "Item": {"c": {"S": "c9"}}}]
    error = ClientError(
        {"Error": {"Code": "TransactionCanceledException"}, "CancellationReasons": reasons},
        "TransactWriteItems",
    )
    assert failed(txn, error, **where) == Cancelled(
        "TransactionCanceledException", ("head",), tuple(reasons)
    )
    page = finish(Query("t", "p"), {"Items": [key("p", "s")], "LastEvaluatedKey": key("p", "s")})
    assert (page.items, page.last) == ([key("p", "s")], key("p", "s"))
    with pytest.raises(AccessDeniedError) as denied:
        failed(txn, client_error("AccessDeniedException", "TransactWriteItems"), **where)
    assert isinstance(denied.value.__cause__, ClientError)
    with pytest.raises(StorageNotFoundError, match="table 't'"):
        failed(Query("t", "p"), client_error("ResourceNotFoundException", "Query"), **where)
    untranslated = client_error("ValidationException", "Query")
    with pytest.raises(ClientError) as raised:
        failed(Query("t", "p"), untranslated, **where)
    assert raised.value is untranslated


def test_transport_failures_become_typed_errors() -> None:
    from langgraph_s3.transport import translate_transport

    assert isinstance(translate_transport(NoRegionError(), endpoint=None), InvalidConfigError)
    unreachable = translate_transport(
        EndpointConnectionError(endpoint_url="http://x:1"), endpoint="http://x:1"
    )
    assert isinstance(unreachable, EndpointError) and "http://x:1" in str(unreachable)
    other = ValueError("x")
    assert translate_transport(other, endpoint=None) is other


def test_a_range_past_the_end_of_a_pack_reads_as_no_bytes() -> None:
    """S3 answers 416 when a range starts past the object's end (a truncated pack):
    no bytes, which the chunk check reports as damage naming the pack."""
    ranged = S3Get("t/b/p.pack", start=5000, end=5100)
    exc = client_error("InvalidRange", "GetObject")
    assert failed(ranged, exc, bucket="b", table="t", region=None) == b""
    assert call_spec(ranged, "b", None)[2]["Range"] == "bytes=5000-5099"


ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
CONTEXT = (("key-version", "1"), ("thread", "t-42"))
GENERATE = KmsGenerateDataKey(ARN, CONTEXT, "1")
DECRYPT = KmsDecrypt(b"wrapped", ARN, CONTEXT, "1")


def test_kms_requests_are_one_call_on_the_kms_client_with_their_context() -> None:
    assert call_spec(GENERATE, "b", None) == (
        KMS,
        "generate_data_key",
        {
            "KeyId": ARN,
            "KeySpec": "AES_256",
            "EncryptionContext": {"key-version": "1", "thread": "t-42"},
        },
    )
    assert call_spec(DECRYPT, "b", None) == (
        KMS,
        "decrypt",
        {
            "CiphertextBlob": b"wrapped",
            "KeyId": ARN,
            "EncryptionContext": {"key-version": "1", "thread": "t-42"},
        },
    )
    answer = {"Plaintext": b"k" * 32, "CiphertextBlob": b"w", "KeyId": ARN}
    assert finish(GENERATE, answer) == GeneratedKey(b"k" * 32, b"w", ARN)
    assert finish(DECRYPT, {"Plaintext": b"k" * 32, "KeyId": ARN}) == b"k" * 32
    assert "k" * 32 not in repr(GeneratedKey(b"k" * 32, b"w", ARN))  # the secret never shows


@pytest.mark.parametrize(
    ("code", "op", "error", "words"),
    [
        ("InvalidCiphertextException", DECRYPT, KeyUnwrapError, ["altered", "another thread"]),
        ("IncorrectKeyException", DECRYPT, KeyUnwrapError, ["another KMS key"]),
        ("AccessDeniedException", DECRYPT, AccessDeniedError, ["kms:Decrypt", "key policy"]),
        ("AccessDeniedException", GENERATE, AccessDeniedError, ["kms:GenerateDataKey"]),
        ("NotFoundException", GENERATE, UnknownKeyError, ["does not exist in region 'r'"]),
        ("KMSInvalidStateException", DECRYPT, DataKeyError, ["pending deletion", "enable"]),
        ("DisabledException", GENERATE, DataKeyError, ["disabled"]),
        ("InvalidKeyUsageException", GENERATE, DataKeyError, ["symmetric"]),
        ("ThrottlingException", DECRYPT, KeyServiceError, ["retry after a pause", "quota"]),
        ("KMSInternalException", GENERATE, KeyServiceError, ["retry"]),
        ("ExpiredTokenException", DECRYPT, CredentialsError, ["the KMS key", "refresh"]),
    ],
)
def test_kms_errors_name_the_context_and_say_what_to_do(
    code: str, op: Any, error: type[Exception], words: list[str]
) -> None:
    operation = "Decrypt" if isinstance(op, KmsDecrypt) else "GenerateDataKey"
    with pytest.raises(error) as raised:
        failed(op, client_error(code, operation), bucket="b", table="t", region="r")
    message = str(raised.value)
    assert isinstance(raised.value.__cause__, ClientError)
    for word in words:
        assert word in message
    if not isinstance(raised.value, CredentialsError):
        assert "thread='t-42'" in message and ARN in message


def test_an_unknown_kms_error_is_left_as_it_is() -> None:
    untranslated = client_error("ValidationException", "Decrypt")
    with pytest.raises(ClientError) as raised:
        failed(DECRYPT, untranslated, bucket="b", table="t", region=None)
    assert raised.value is untranslated
