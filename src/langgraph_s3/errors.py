"""Every error the saver raises on purpose, under one base class.

The classes say whether retrying can help: a conflict or a replication lag may
pass, a corrupt object or bad input will not.
"""

from __future__ import annotations


class S3SaverError(Exception):
    """Base class of every error raised by langgraph-s3."""


class InvalidConfigError(S3SaverError, ValueError):
    """A config, id or option is missing or malformed. Fix the input; do not retry."""


class StorageNotFoundError(S3SaverError):
    """The bucket or the table does not exist.

    Run ``saver.setup()`` (development and tests) or deploy ``infra/storage.yaml``.
    """


class StorageAccessError(S3SaverError):
    """S3 or DynamoDB could not be reached or refused the request.

    ``__cause__`` holds botocore's error. The subclasses say what to fix.
    """


class CredentialsError(StorageAccessError):
    """No AWS credentials were found, or AWS rejected them (unknown key, expired token)."""


class AccessDeniedError(StorageAccessError):
    """The credentials are valid but may not perform ``action`` on ``resource``."""

    def __init__(self, message: str, *, action: str, resource: str) -> None:
        super().__init__(message)
        self.action = action
        self.resource = resource


class EndpointError(StorageAccessError):
    """The endpoint did not answer (wrong ``endpoint_url``, no network, a timeout).

    Retrying may help when the cause was the network.
    """


class ObjectError(S3SaverError):
    """A stored object could not be used. ``key`` names it."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class MissingObjectError(ObjectError):
    """The index references an object that is not in the bucket.

    In a single region this means the object was deleted behind the saver's back;
    in a replica region it may simply not have been replicated yet.
    """


class CorruptObjectError(ObjectError):
    """A stored object is truncated, altered, or not in the expected shape."""


class UndecodableValueError(CorruptObjectError):
    """A stored value is intact but the serializer in use cannot decode it.

    Its bytes passed their checksum, so this is not damage: the thread was most likely
    written with another serializer (an ``EncryptedSerializer``, a different key, a
    custom ``serde``). Pass the serializer that wrote it (``serde=``; on the command
    line ``--serde MODULE:ATTR``). A ``CorruptObjectError`` for code written before
    this class existed.
    """


class SealedObjectError(CorruptObjectError):
    """A sealed (encrypted) object did not open; ``key`` names it.

    Its authentication failed: it was moved from another thread, namespace,
    checkpoint or write slot, altered after it was written, or sealed under a data
    key other than the one given (a key that is missing, shredded or mixed up).
    ``key_id`` is the id of the data key it was opened with, when there was one.
    Nothing of its content is returned. Restore the object from a copy or delete the
    checkpoint; retrying will not help.
    """

    def __init__(self, message: str, *, key: str, key_id: str | None = None) -> None:
        # ``key_id`` is optional so that ``type(exc)(str(exc), key=other)`` (how the
        # core renames an error to the object to repair) still works.
        super().__init__(message, key=key)
        self.key_id = key_id


class PlaintextObjectError(SealedObjectError):
    """An object or record written without encryption, read by a saver configured
    with ``encryption=``; ``key`` names it.

    A saver with encryption reads sealed data only, so that nobody with write access
    to the bucket or table can slip unauthenticated data into a thread. Copy old
    threads to another prefix with ``langgraph_s3.archive.copy_threads(plain_saver,
    sealed_saver)``, or read them with a saver without encryption.
    """


class UnsupportedFormatError(ObjectError):
    """An object was written by a newer format version than this library reads.

    Upgrade langgraph-s3.
    """


class SerializationError(S3SaverError):
    """The serializer refused a value or metadata; the message names the channel or key."""


class CheckpointConflictError(S3SaverError):
    """Another writer committed a checkpoint on this thread first.

    Raised when two runs continue the same thread from the same latest checkpoint
    at the same time (a duplicated webhook, a retried Lambda). This run committed
    nothing. Reload the thread (``graph.get_state(config)``) and decide whether to
    continue from the new latest checkpoint; retrying blindly would repeat the work.
    """

    def __init__(
        self,
        message: str,
        *,
        thread_id: str,
        checkpoint_ns: str,
        expected: str | None,
        actual: str | None,
    ) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.expected = expected
        self.actual = actual


class ClockSkewError(S3SaverError):
    """A run's next checkpoint id does not sort after the checkpoint it continues.

    LangGraph's checkpoint ids carry the writing machine's clock; this machine's
    clock is behind the one that wrote the thread's head (or that one's is ahead).
    Committing would leave the new checkpoint below its parent, so "the latest"
    would no longer be the head. Nothing was written. Retry after ``retry_after``
    seconds (the run then reads the head again and makes later ids), and keep the
    clocks synchronised (NTP / Amazon Time Sync).
    """

    def __init__(
        self,
        message: str,
        *,
        thread_id: str,
        checkpoint_ns: str,
        parent: str,
        checkpoint_id: str,
        retry_after: float | None,
    ) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.parent = parent
        self.checkpoint_id = checkpoint_id
        self.retry_after = retry_after


class ThreadExistsError(S3SaverError):
    """``copy_thread`` was asked to copy onto a thread that already has checkpoints."""


class ThreadNotFoundError(S3SaverError):
    """A thread named by an operation (export, copy, delete on the command line) has no
    checkpoints. Check the thread id and the storage (``langgraph-s3 threads`` lists
    what is there)."""


class ReencryptionError(S3SaverError):
    """Re-encrypting thread ``thread_id`` could not finish: checkpoints or pending
    writes kept being sealed under its old data key (a run is writing to it), so the
    old key was not shredded. Stop the runs of this thread and re-encrypt it again;
    the next run goes on where this one stopped.
    """

    def __init__(self, message: str, *, thread_id: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id


class MissingDependencyError(S3SaverError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class NotYetReplicatedError(MissingObjectError):
    """A replica region's index is ahead of its bucket and the read policy gave up.

    ``waited`` says how long the saver waited for replication (0 with the ``"fail"``
    policy). Retry later, or read with the ``"home"`` policy.
    """

    def __init__(self, message: str, *, key: str, keys: list[str], waited: float) -> None:
        super().__init__(message, key=key)
        self.keys = keys
        self.waited = waited


class ThreadOwnedElsewhereError(S3SaverError):
    """This region does not own the thread, so it may not write it.

    Only the owning region writes a thread (DynamoDB global tables would otherwise
    let two regions fork it). Hand the thread over with ``saver.claim_thread()``
    once the old region has stopped writing it (see docs/cross-region.md).
    """

    def __init__(self, message: str, *, thread_id: str, owner: str) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.owner = owner


class DamageFoundError(S3SaverError):
    """A check or collection found damaged checkpoints; ``errors`` says which."""

    def __init__(self, message: str, *, errors: list[str]) -> None:
        super().__init__(message)
        self.errors = errors


class DataKeyError(S3SaverError):
    """A data key or key-encryption key cannot be used; ``key_id`` names it.

    Never carries key bytes. The subclasses say why.
    """

    def __init__(self, message: str, *, key_id: str) -> None:
        super().__init__(message)
        self.key_id = key_id


class UnknownKeyError(DataKeyError):
    """No key with ``key_id`` is configured (a key ring without it, a retired key).

    Configure the key that wrote the data; retrying will not help.
    """


class KeyScopeError(DataKeyError):
    """A thread's stored key scope (its own data key, or a tenant's) is not the one the
    saver's ``tenant_of`` names for it. Nothing was sealed under either: fix
    ``tenant_of`` (every writer of a thread must agree), or copy the thread to a new
    id, which takes the scope ``tenant_of`` gives; retrying will not help.
    """


class KeyUnwrapError(DataKeyError):
    """A wrapped data key was refused: it was altered, or it is being unwrapped with an
    encryption context other than the one it was wrapped with (a key item moved to
    another thread or tenant). Nothing sealed under it can be opened here.

    Check the KMS key (the ring must name the one that wrapped it) and the encryption
    context (the item must be in its own thread's or tenant's partition); restore an
    altered or moved key item from a backup of the table. Retrying will not help.
    """


class KeyVersionError(DataKeyError):
    """A sealed object names version ``key_id`` of thread ``thread_id``'s data key,
    which the saver does not have.

    ``newer`` False: that version was shredded (the thread was re-encrypted and its
    old key deleted); the object cannot be opened and is garbage for ``gc``.
    ``newer`` True: the thread was re-encrypted since the saver loaded its keys;
    reading again loads them (the savers' reads retry once by themselves).
    """

    def __init__(self, message: str, *, key_id: str, thread_id: str, newer: bool) -> None:
        super().__init__(message, key_id=key_id)
        self.thread_id = thread_id
        self.newer = newer


class KeyServiceError(DataKeyError):
    """The key service (AWS KMS) did not answer in time: throttled, or unavailable for
    the moment, after botocore's own retries. ``key_id`` names the KMS key.

    Retrying after a pause may help; nothing was written or decrypted.
    """
