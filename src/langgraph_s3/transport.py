"""How an operation becomes a boto3/aiobotocore call, and its answer a result or our error.

Both drivers (``S3Saver`` on boto3, ``AsyncS3Saver`` on aiobotocore) use these
functions, so they send the same requests and raise the same typed errors.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from botocore.exceptions import ClientError

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
from langgraph_s3.logs import log
from langgraph_s3.operations import (
    CreateBucket,
    GeneratedKey,
    IndexRequest,
    KmsDecrypt,
    KmsGenerateDataKey,
    KmsReEncrypt,
    KmsRequest,
    ListPage,
    Op,
    S3Copy,
    S3Delete,
    S3Get,
    S3List,
    S3Put,
)

# Which client performs an operation.
S3, HOME_S3, DYNAMODB, KMS = "s3", "home_s3", "dynamodb", "kms"


def call_spec(op: Op, bucket: str, home_bucket: str | None) -> tuple[str, str, dict[str, Any]]:
    """The client, method and arguments that perform ``op`` (everything but ``Sleep``).

    Both savers call the method this names, on boto3 or aiobotocore, so the
    requests they send are the same.
    """
    if isinstance(op, S3Get):
        get: dict[str, Any] = {"Bucket": bucket, "Key": op.key}
        if op.start is not None and op.end is not None:
            get["Range"] = f"bytes={op.start}-{op.end - 1}"
        if op.home:
            assert home_bucket, "the home read policy needs CrossRegion(home_bucket=...)"
            return HOME_S3, "get_object", {**get, "Bucket": home_bucket}
        return S3, "get_object", get
    if isinstance(op, IndexRequest):
        return (DYNAMODB, *op.call())
    if isinstance(op, KmsGenerateDataKey | KmsDecrypt | KmsReEncrypt):
        return (KMS, *kms_call(op))
    if isinstance(op, S3Put):
        return S3, "put_object", {"Bucket": bucket, "Key": op.key, "Body": op.body}
    if isinstance(op, S3List):
        params: dict[str, Any] = {"Bucket": bucket, "Prefix": op.prefix}
        if op.token:
            params["ContinuationToken"] = op.token
        return S3, "list_objects_v2", params
    if isinstance(op, S3Delete):
        objects = [{"Key": k} for k in op.keys]
        return (
            S3,
            "delete_objects",
            {"Bucket": bucket, "Delete": {"Objects": objects, "Quiet": True}},
        )
    if isinstance(op, S3Copy):
        source = {"Bucket": bucket, "Key": op.source}
        return S3, "copy_object", {"Bucket": bucket, "Key": op.target, "CopySource": source}
    if isinstance(op, CreateBucket):
        create: dict[str, Any] = {"Bucket": bucket}
        if op.region and op.region != "us-east-1":
            create["CreateBucketConfiguration"] = {"LocationConstraint": op.region}
        return S3, "create_bucket", create
    raise TypeError(f"no request for operation {op!r}")


def log_request(op: Op, method: str, seconds: float, response: Any, ok: bool) -> None:
    """DEBUG line for one request: its kind, bytes sent or received, time, outcome."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    if isinstance(op, S3Put):
        size = len(op.body)
    elif isinstance(op, S3Get) and isinstance(response, bytes | bytearray):
        size = len(response)
    else:
        size = 0
    key = getattr(op, "key", "") or getattr(op, "table", "")
    log.debug(
        "%s %s %s %d bytes %.1f ms", method, key, "ok" if ok else "failed", size, seconds * 1e3
    )


def finish(op: Op, response: Any) -> Any:
    """Turn a response into the operation's result (``S3Get`` bodies are read by the driver)."""
    if isinstance(op, S3Get):
        return response
    if isinstance(op, IndexRequest):
        return op.result(response)
    if isinstance(op, KmsGenerateDataKey):
        return GeneratedKey(
            bytes(response["Plaintext"]), bytes(response["CiphertextBlob"]), response["KeyId"]
        )
    if isinstance(op, KmsDecrypt):
        return bytes(response["Plaintext"])
    if isinstance(op, KmsReEncrypt):
        return bytes(response["CiphertextBlob"])
    if isinstance(op, S3List):
        return ListPage(
            [
                (o["Key"], o["LastModified"].timestamp(), o["Size"])
                for o in response.get("Contents", [])
            ],
            response.get("NextContinuationToken") if response.get("IsTruncated") else None,
        )
    if isinstance(op, S3Delete) and response.get("Errors"):
        first = response["Errors"][0]
        raise S3SaverError(
            f"S3 refused to delete {len(response['Errors'])} object(s), first "
            f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message')}"
        )
    return None


def failed(op: Op, exc: ClientError, *, bucket: str, table: str, region: str | None) -> Any:
    """The result of an operation whose request failed, or raise the error to report."""
    code = error_code(exc)
    if isinstance(op, S3Get) and is_missing_key(exc):
        return None
    if isinstance(op, S3Get) and op.start is not None and code == "InvalidRange":
        # The pack is shorter than the index says: no bytes, which the chunk check
        # reports as damage naming the pack (and a prefetch hint just skips).
        return b""
    if isinstance(op, IndexRequest) and code in op.expect:
        return op.refused(code, exc.response)
    if isinstance(op, CreateBucket) and code == "BucketAlreadyOwnedByYou":
        return None
    if isinstance(op, KmsGenerateDataKey | KmsDecrypt | KmsReEncrypt):
        raise kms_error(op, exc, region=region) from exc
    raise translate(exc, bucket=bucket, table=table, region=region) from exc


def settle(op: Op, ok: bool) -> None:
    """Resolve an upload's ``done`` future (drivers call it when the request finishes)."""
    if isinstance(op, S3Put) and op.done is not None and not op.done.done():
        op.done.set_result(ok)


_MISSING_BUCKET = {"NoSuchBucket"}
_MISSING_TABLE = {"ResourceNotFoundException"}
_MISSING_KEY = {"NoSuchKey", "404", "NotFound"}


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def is_missing_key(exc: ClientError) -> bool:
    return error_code(exc) in _MISSING_KEY


# Codes by which AWS says the credentials themselves are wrong, not their permissions.
_BAD_CREDENTIALS = {
    "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException",
    "UnrecognizedClientException", "InvalidClientTokenId", "MissingAuthenticationToken",
    "InvalidSignatureException", "TokenRefreshRequired",
}  # fmt: skip
_S3_ACTIONS = {
    "GetObject", "PutObject", "HeadObject", "HeadBucket", "ListObjectsV2", "DeleteObjects",
    "DeleteObject", "CopyObject", "CreateBucket", "PutBucketLifecycleConfiguration",
}  # fmt: skip
_WRONG_REGION = {
    "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"
}  # fmt: skip
_KMS_ACTIONS = {"GenerateDataKey", "Decrypt"}
_DENIED = {"AccessDenied", "AccessDeniedException", "Forbidden", "403", "AllAccessDisabled"}


def translate(
    exc: ClientError, *, bucket: str, table: str, region: str | None = None
) -> BaseException:
    """Our typed error for a failed request, saying what to do (botocore's as the cause)."""
    code = error_code(exc)
    action = str(getattr(exc, "operation_name", "") or "request")
    where = f"in region {region!r}" if region else "in the configured region"
    resource = f"S3 bucket {bucket!r}" if action in _S3_ACTIONS else f"DynamoDB table {table!r}"
    if action in _KMS_ACTIONS:
        resource = "the KMS key"
    if code in _MISSING_BUCKET:
        return StorageNotFoundError(
            f"S3 bucket {bucket!r} does not exist {where}: check the bucket name and region; "
            "to create it in development run saver.setup(), in production deploy "
            "infra/storage.yaml and pass its BucketName output"
        )
    if code in _MISSING_TABLE:
        return StorageNotFoundError(
            f"DynamoDB table {table!r} does not exist {where}: check region_name (the table "
            "may live in another region; setup() would create a second, empty one here); "
            "to create it in development run saver.setup(), in production deploy "
            "infra/storage.yaml and pass its TableName output"
        )
    if code == "BucketAlreadyExists":
        return InvalidConfigError(
            f"S3 bucket {bucket!r} already exists and belongs to another AWS account "
            "(bucket names are global): choose another bucket name"
        )
    if code == "InvalidBucketName":
        return InvalidConfigError(
            f"{bucket!r} is not a valid S3 bucket name: use 3-63 lowercase letters, digits, "
            "dots and hyphens, starting and ending with a letter or digit"
        )
    if code in _WRONG_REGION:
        return InvalidConfigError(
            f"S3 bucket {bucket!r} is not {where}: pass the bucket's region as region_name"
        )
    if code in _BAD_CREDENTIALS:
        return CredentialsError(
            f"AWS rejected the credentials ({code}) for {action} on {resource}: check "
            "AWS_PROFILE / AWS_ACCESS_KEY_ID, or refresh an expired session token"
        )
    if code in _DENIED:
        return AccessDeniedError(
            f"access denied: the credentials may not perform {action} on {resource} "
            f"{where} ({code}); grant it (infra/storage.yaml shows the policy the saver "
            "needs) or check that the bucket/table belong to this account",
            action=action,
            resource=resource,
        )
    return cast(BaseException, exc)


def translate_transport(exc: BaseException, *, endpoint: str | None) -> BaseException:
    """Our typed error for a botocore failure that is not an AWS answer."""
    from botocore import exceptions as b

    target = endpoint or "the AWS endpoint"
    if isinstance(exc, b.NoCredentialsError | b.PartialCredentialsError):
        return CredentialsError(
            "no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY, pass session=boto3.Session(profile_name=...), or give "
            "the function an IAM role"
        )
    if isinstance(exc, b.CredentialRetrievalError | b.TokenRetrievalError):
        return CredentialsError(f"AWS credentials could not be loaded ({exc}): refresh them")
    if isinstance(exc, b.NoRegionError):
        return InvalidConfigError(
            "no AWS region: pass region_name='us-east-1' (or the region of your bucket and "
            "table), or set AWS_REGION"
        )
    if isinstance(exc, b.ParamValidationError):
        return InvalidConfigError(f"a request had an invalid parameter: {exc}")
    if isinstance(exc, b.EndpointConnectionError | b.ConnectionError | b.HTTPClientError):
        return EndpointError(
            f"could not reach {target} ({exc}): check endpoint_url and the network; "
            "retrying may help"
        )
    return exc


# ------------------------------------------------------------------------ KMS
def kms_call(op: KmsRequest) -> tuple[str, dict[str, Any]]:
    """The KMS client method and arguments that perform ``op``."""
    context = dict(op.context)
    if isinstance(op, KmsGenerateDataKey):
        return "generate_data_key", {
            "KeyId": op.kms_key,
            "KeySpec": "AES_256",
            "EncryptionContext": context,
        }
    if isinstance(op, KmsReEncrypt):
        return "re_encrypt", {
            "CiphertextBlob": op.wrapped,
            "SourceKeyId": op.kms_key,
            "DestinationKeyId": op.destination,
            "SourceEncryptionContext": context,
            "DestinationEncryptionContext": context,
        }
    return "decrypt", {
        "CiphertextBlob": op.wrapped,
        "KeyId": op.kms_key,
        "EncryptionContext": context,
    }


def describe_context(op: KmsRequest) -> str:
    """The encryption context of a KMS request in words (it names the thread or tenant)."""
    return ", ".join(f"{k}={v!r}" for k, v in op.context) or "no encryption context"


#: KMS answers that pass: botocore has already retried them (standard mode).
_KMS_BUSY = {
    "ThrottlingException", "LimitExceededException", "KMSInternalException",
    "DependencyTimeoutException", "KeyUnavailableException",
}  # fmt: skip
_KMS_UNUSABLE = {"KMSInvalidStateException", "DisabledException"}


_VERBS: dict[type, str] = {
    KmsGenerateDataKey: "wrap a new",
    KmsDecrypt: "unwrap",
    KmsReEncrypt: "re-wrap",
}
# What IAM checks (a re-wrap: ReEncryptFrom on the source key, ReEncryptTo on the
# destination; the message names the first).
_ACTIONS: dict[type, str] = {
    KmsGenerateDataKey: "kms:GenerateDataKey",
    KmsDecrypt: "kms:Decrypt",
    KmsReEncrypt: "kms:ReEncryptFrom and kms:ReEncryptTo",
}


def kms_error(op: KmsRequest, exc: ClientError, *, region: str | None) -> BaseException:
    """Our typed error for a KMS request that failed, naming the context and the key."""
    code = error_code(exc)
    what = f"data key {op.data_key_id!r} ({describe_context(op)})"
    verb = _VERBS[type(op)]
    key = f"KMS key {op.kms_key!r}"
    if isinstance(op, KmsReEncrypt):
        key += f" (to KMS key {op.destination!r})"
    if code in ("InvalidCiphertextException", "IncorrectKeyException"):
        return KeyUnwrapError(
            f"KMS refused to unwrap {what} with {key} ({code}): the wrapped key was altered, "
            "was wrapped under another KMS key, or belongs to another encryption context (a "
            "key item moved to another thread or tenant). Nothing sealed under it opens here: "
            "check that the key ring names the KMS key that wrapped it and that the key item "
            "is in its own thread's (or tenant's) partition; if the item was altered, restore "
            "it from a backup of the table",
            key_id=op.data_key_id,
        )
    if code in _DENIED:
        action = _ACTIONS[type(op)]
        return AccessDeniedError(
            f"access denied: the credentials may not {verb} {what} with {key} ({code}); "
            f"allow {action} in the key policy or the role's IAM policy, for this encryption "
            "context (a kms:EncryptionContext condition may be refusing this thread)",
            action=action,
            resource=key,
        )
    if code == "NotFoundException":
        where = f"region {region!r}" if region else "the configured region"
        return UnknownKeyError(
            f"{key} does not exist in {where}, so the saver cannot {verb} {what}: check the "
            "key ARN and region (a multi-region key needs a replica in this region)",
            key_id=op.kms_key,
        )
    if code in _KMS_UNUSABLE:
        return DataKeyError(
            f"{key} is disabled or pending deletion ({code}), so the saver cannot {verb} "
            f"{what}: enable the key, or cancel its deletion while the waiting period lasts",
            key_id=op.kms_key,
        )
    if code == "InvalidKeyUsageException":
        return DataKeyError(
            f"{key} cannot {verb} {what} ({code}): use a symmetric encryption key "
            "(KeySpec SYMMETRIC_DEFAULT, KeyUsage ENCRYPT_DECRYPT)",
            key_id=op.kms_key,
        )
    if code in _KMS_BUSY:
        return KeyServiceError(
            f"KMS could not {verb} {what} with {key} ({code}) after botocore's retries: "
            "retry after a pause; if it is throttling, ask for a higher KMS request quota "
            "or keep unwrapped keys cached longer (cache_ttl)",
            key_id=op.kms_key,
        )
    return translate(exc, bucket="", table="", region=region)
