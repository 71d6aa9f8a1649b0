"""LangGraph checkpoint savers that keep agent state in Amazon S3 with a DynamoDB index."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph_s3.connection import parse_conn_string
from langgraph_s3.core.sealed import Encryption
from langgraph_s3.errors import (
    AccessDeniedError,
    CheckpointConflictError,
    ClockSkewError,
    CorruptObjectError,
    CredentialsError,
    DamageFoundError,
    DataKeyError,
    EndpointError,
    InvalidConfigError,
    KeyScopeError,
    KeyServiceError,
    KeyUnwrapError,
    KeyVersionError,
    MissingDependencyError,
    MissingObjectError,
    NotYetReplicatedError,
    ObjectError,
    PlaintextObjectError,
    ReencryptionError,
    S3SaverError,
    SealedObjectError,
    SerializationError,
    StorageAccessError,
    StorageNotFoundError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadOwnedElsewhereError,
    UndecodableValueError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from langgraph_s3.guard import continuation
from langgraph_s3.regions import CrossRegion
from langgraph_s3.saver import S3Saver
from langgraph_s3.version import __version__

if TYPE_CHECKING:
    from langgraph_s3.aio import AsyncS3Saver

__all__ = [
    "AccessDeniedError",
    "AsyncS3Saver",
    "CheckpointConflictError",
    "ClockSkewError",
    "CorruptObjectError",
    "CredentialsError",
    "CrossRegion",
    "DamageFoundError",
    "DataKeyError",
    "Encryption",
    "EndpointError",
    "InvalidConfigError",
    "KeyScopeError",
    "KeyServiceError",
    "KeyUnwrapError",
    "KeyVersionError",
    "MissingDependencyError",
    "MissingObjectError",
    "NotYetReplicatedError",
    "ObjectError",
    "PlaintextObjectError",
    "ReencryptionError",
    "S3Saver",
    "S3SaverError",
    "SealedObjectError",
    "SerializationError",
    "StorageAccessError",
    "StorageNotFoundError",
    "ThreadExistsError",
    "ThreadNotFoundError",
    "ThreadOwnedElsewhereError",
    "UndecodableValueError",
    "UnknownKeyError",
    "UnsupportedFormatError",
    "__version__",
    "continuation",
    "parse_conn_string",
]


def __getattr__(name: str) -> Any:
    # aiobotocore is an optional extra: import it only when the async saver is asked for.
    if name == "AsyncS3Saver":
        from langgraph_s3.aio import AsyncS3Saver

        return AsyncS3Saver
    raise AttributeError(f"module 'langgraph_s3' has no attribute {name!r}")
