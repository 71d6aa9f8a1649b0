"""A key ring on AWS KMS: data keys from ``GenerateDataKey``, unwrapped by ``Decrypt``.

Sans-I/O like the core: :meth:`KmsKeyRing.generate` and :meth:`KmsKeyRing.unwrap`
are flows that yield :class:`~langgraph_s3.operations.KmsGenerateDataKey` and
:class:`~langgraph_s3.operations.KmsDecrypt`, which both savers perform on their
KMS client (``saver.run(flow)``). The ring decides what to ask KMS and remembers
what it was told:

* **Which KMS key.** New data keys are wrapped under ``key_id`` (a key ARN, or a key
  id in the saver's account and region). A wrapped key is unwrapped only with a KMS
  key this ring is configured with (``key_id`` or one of ``previous``), named as
  ``KeyId`` in the ``Decrypt`` request: a key item whose KMS key was swapped for
  another one is refused before any request, and KMS itself refuses a blob that
  was wrapped under another key than the one named. A multi-region key matches its
  replicas in other regions (same ``mrk-`` id), and is unwrapped with the replica
  configured here, so a reader in a replica region decrypts locally.
* **Encryption context.** Every request carries the context the caller gives
  (prefix, thread or tenant, key version): KMS binds the wrapped key to it, logs it
  in CloudTrail and lets key policies condition on it.
* **A cache with a lifetime.** Unwrapped keys are kept (at most ``cache_entries``,
  each for ``cache_ttl`` seconds) under their context and the digest of their
  wrapped form, so a warm container unwraps a thread's key once per ``cache_ttl``.
  A key generated here is cached too. :meth:`KmsKeyRing.forget` drops a scope's keys
  (after it was shredded).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Mapping

from langgraph_s3.cache import LRU
from langgraph_s3.errors import InvalidConfigError, UnknownKeyError
from langgraph_s3.operations import (
    Context,
    Flow,
    KmsDecrypt,
    KmsGenerateDataKey,
    KmsReEncrypt,
    context_of,
    perform,
)
from langgraph_s3.sealing.cipher import DataKey

#: How long an unwrapped data key is trusted without asking KMS again (seconds).
DEFAULT_CACHE_TTL = 300.0
#: How many unwrapped data keys a ring keeps (one per thread or tenant and version).
DEFAULT_CACHE_ENTRIES = 10_000

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# A multi-region key's id is "mrk-" and 32 hex digits on AWS; moto writes a UUID there.
_KEY_ID = rf"(?:{_UUID}|mrk-(?:[0-9a-f]{{32}}|{_UUID}))"
_BARE = re.compile(_KEY_ID)
_ARN = re.compile(
    rf"arn:(aws|aws-cn|aws-us-gov|aws-iso|aws-iso-b):kms:([a-z0-9-]+):(\d{{12}}):key/({_KEY_ID})"
)


def check_kms_key(value: object, *, what: str = "key_id") -> str:
    """A KMS key as the ring is configured with it: a key ARN or a bare key id.

    Aliases are refused: whoever may update an alias could point it at a key of
    theirs, and an alias does not say which key wrapped a stored data key.

    Raises:
        InvalidConfigError: ``value`` is not a KMS key ARN or key id.
    """
    example = "'arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab'"
    if not isinstance(value, str) or not value:
        raise InvalidConfigError(
            f"{what} must be the ARN of a symmetric KMS key, e.g. {example}; got {value!r}"
        )
    if value.startswith("alias/") or ":alias/" in value:
        raise InvalidConfigError(
            f"{what} {value!r} is a KMS alias: pass the key ARN it points to "
            "(aws kms describe-key --key-id ALIAS shows it). An alias can be re-pointed, and "
            "a stored data key must name the key that wrapped it"
        )
    if not (_ARN.fullmatch(value) or _BARE.fullmatch(value)):
        raise InvalidConfigError(
            f"{what} {value!r} is not a KMS key ARN or key id: pass the key ARN, e.g. "
            f"{example} (a multi-region key's id starts with 'mrk-')"
        )
    return value


def key_part(kms_key: str) -> str:
    """The key id of a KMS key ARN (a bare id as it is)."""
    return kms_key.rsplit("/", 1)[-1]


def same_key(configured: str, stored: str) -> bool:
    """Whether the KMS key a data key names (``stored``, the ARN KMS answered) is the
    configured one: the same ARN, the same key id when either is bare, or a replica
    of the same multi-region key in another region."""
    if configured == stored:
        return True
    configured_id, stored_id = key_part(configured), key_part(stored)
    if configured_id != stored_id:
        return False
    # Two ARNs of one key id: a multi-region key and its replica, or (a single-region
    # key) two different regions or accounts, which cannot be the same key.
    bare = ":" not in configured or ":" not in stored
    return bare or configured_id.startswith("mrk-")


class KmsKeyRing:
    """Data keys wrapped by AWS KMS; unwrapped keys cached for a bounded time.

    Args:
        key_id: The KMS key that wraps new data keys: a key ARN (recommended), or a
            key id in the saver's account and region.
        previous: KMS keys that wrapped data keys earlier and may still unwrap them
            (rotation to another KMS key; KMS's own yearly rotation needs nothing here).
        cache_entries: How many unwrapped data keys to keep.
        cache_ttl: Seconds an unwrapped data key is used without asking KMS again.
        clock: Monotonic seconds (tests move it).

    Raises:
        InvalidConfigError: A key is not a KMS key ARN or id (aliases are refused), or
            a cache bound is not positive.
    """

    def __init__(
        self,
        key_id: str,
        *,
        previous: Iterable[str] = (),
        cache_entries: int = DEFAULT_CACHE_ENTRIES,
        cache_ttl: float = DEFAULT_CACHE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.key_id = check_kms_key(key_id)
        self.previous = tuple(check_kms_key(k, what="a previous key") for k in previous)
        if not isinstance(cache_entries, int) or cache_entries < 1:
            raise InvalidConfigError(f"cache_entries must be a positive int, got {cache_entries!r}")
        if not isinstance(cache_ttl, int | float) or not cache_ttl > 0:
            raise InvalidConfigError(
                f"cache_ttl must be a positive number of seconds, got {cache_ttl!r}"
            )
        self._cache: LRU[tuple[Context, bytes], DataKey] = LRU(
            cache_entries, ttl=float(cache_ttl), clock=clock
        )

    def __repr__(self) -> str:
        return f"KmsKeyRing(key_id={self.key_id!r}, previous={list(self.previous)!r})"

    @property
    def wrapping_key(self) -> str:
        """The KMS key new data keys are wrapped under (stored beside each wrapped key)."""
        return self.key_id

    def generate(self, context: Mapping[str, str], *, key_id: str) -> Flow[tuple[DataKey, bytes]]:
        """A new data key from KMS and its wrapped form, bound to ``context``.

        Args:
            context: The encryption context (prefix, thread or tenant, key version).
            key_id: The id the data key gets (written into every object it seals).

        Returns:
            The data key (cached), and the wrapped bytes to store.
        """
        ctx = context_of(context)
        new = yield from perform(KmsGenerateDataKey(self.key_id, ctx, key_id))
        key = DataKey(key_id, new.secret)
        self._cache.put(_entry(ctx, new.wrapped), key)
        return key, new.wrapped

    def unwrap(
        self,
        wrapped: bytes,
        context: Mapping[str, str],
        *,
        key_id: str,
        kek: str | None = None,
    ) -> Flow[DataKey]:
        """The data key in ``wrapped``, from the cache or from KMS.

        Args:
            wrapped: What :meth:`generate` returned.
            context: The context it was wrapped with, rebuilt from where it was found
                (never read from the stored item).
            key_id: The data key's id.
            kek: The KMS key the stored item says wrapped it (its ARN); ``None``: the
                current ``key_id``.

        Raises:
            UnknownKeyError: ``kek`` is not a KMS key this ring is configured with.
            KeyUnwrapError: KMS refused the wrapped key (altered, another context, another
                KMS key).
            AccessDeniedError, DataKeyError, KeyServiceError: see
                :func:`langgraph_s3.transport.kms_error`.
        """
        ctx = context_of(context)
        kms_key = self.decrypting_key(kek, key_id=key_id, context=ctx)
        entry = _entry(ctx, wrapped)
        key = self._cache.get(entry)
        if key is not None and key.key_id == key_id:
            return key
        secret = yield from perform(KmsDecrypt(wrapped, kms_key, ctx, key_id))
        key = DataKey(key_id, secret)
        self._cache.put(entry, key)
        return key

    def rewrap(
        self, wrapped: bytes, context: Mapping[str, str], *, key_id: str, kek: str
    ) -> Flow[bytes]:
        """``wrapped`` (stored as wrapped by ``kek``) re-wrapped under the current KMS
        key by KMS itself (``ReEncrypt``: the data key never leaves KMS in the clear).

        Raises:
            UnknownKeyError: ``kek`` is not a KMS key this ring is configured with.
            KeyUnwrapError, AccessDeniedError, DataKeyError, KeyServiceError: as for
                :meth:`unwrap`.
        """
        ctx = context_of(context)
        source = self.decrypting_key(kek, key_id=key_id, context=ctx)
        return (yield from perform(KmsReEncrypt(wrapped, source, self.key_id, ctx, key_id)))

    def decrypting_key(self, kek: str | None, *, key_id: str, context: Context) -> str:
        """The configured KMS key to unwrap with, for a data key stored as wrapped by ``kek``."""
        if kek is None:
            return self.key_id
        for configured in (self.key_id, *self.previous):
            if same_key(configured, kek):
                return configured
        where = ", ".join(f"{k}={v!r}" for k, v in context)
        raise UnknownKeyError(
            f"data key {key_id!r} ({where}) was wrapped under KMS key {kek!r}, which this "
            f"key ring is not configured with (key_id={self.key_id!r}, previous="
            f"{list(self.previous)!r}): add it to previous= if it is yours; if it is not, "
            "the key item was replaced",
            key_id=kek,
        )

    def forget(self, context: Mapping[str, str]) -> None:
        """Drop every cached key whose context includes all of ``context``'s pairs
        (e.g. ``{"thread": ...}`` after the thread's keys were shredded)."""
        pairs = set(context_of(context))
        self._cache.discard(lambda entry: pairs <= set(entry[0]))


def _entry(ctx: Context, wrapped: bytes) -> tuple[Context, bytes]:
    # The digest, not the blob: a cache entry keys on what was stored, so a key item
    # recreated after a shred (same context, a new wrapped key) is never answered
    # with the shredded key.
    return ctx, hashlib.sha256(wrapped).digest()
