"""A static key ring: data keys wrapped by key-encryption keys held in memory.

For tests and for deployments without AWS KMS. It behaves as KMS's
``GenerateDataKey``/``Decrypt`` do for the saver: a wrapped data key names the ring
key that wrapped it, and is bound to an encryption context (a ``str -> str`` mapping
naming the prefix and the thread or tenant), so a wrapped key copied to another
thread does not unwrap there. Wrapping is sealing (:mod:`.cipher`) with the ring key as
the data key and the canonical context (:func:`.places.encode_context`) as the place.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from langgraph_s3.errors import (
    DataKeyError,
    InvalidConfigError,
    KeyUnwrapError,
    SealedObjectError,
    UnknownKeyError,
)
from langgraph_s3.sealing.cipher import KEY_BYTES, DataKey, open_from, parse_header, seal_to
from langgraph_s3.sealing.places import KIND_KEY, encode_context


def _ring_key(key_id: str, secret: bytes) -> DataKey:
    """A ring key, checked: a wrong one is a configuration error, not a data key's."""
    if not isinstance(secret, bytes) or len(secret) != KEY_BYTES:
        raise InvalidConfigError(
            f"ring key {key_id!r} is not {KEY_BYTES} bytes; pass {KEY_BYTES} random bytes "
            f"(os.urandom({KEY_BYTES}), kept in a secret store)"
        )
    try:
        return DataKey(key_id, secret)
    except DataKeyError as exc:  # the id: empty or too long
        raise InvalidConfigError(f"ring key id {key_id!r}: {exc}") from exc


class StaticKeyRing:
    """Key-encryption keys by id; new data keys are wrapped with the ``current`` one.

    Older ring keys stay to unwrap what they wrapped (rotation: add a key, make it
    current, keep the old one until every data key is re-wrapped).

    Args:
        keys: Ring key id -> 32 key bytes.
        current: The id of the key that wraps new data keys.

    Raises:
        InvalidConfigError: ``current`` is not among ``keys``, a key is not 32 bytes,
            or its id is empty or too long.
    """

    def __init__(self, keys: Mapping[str, bytes], *, current: str) -> None:
        if current not in keys:
            raise InvalidConfigError(
                f"the current key {current!r} is not in the key ring (ids: {sorted(keys)})"
            )
        self._keys = {key_id: _ring_key(key_id, secret) for key_id, secret in keys.items()}
        self.current = current

    def __repr__(self) -> str:
        return f"StaticKeyRing(keys={sorted(self._keys)!r}, current={self.current!r})"

    @property
    def wrapping_key(self) -> str:
        """The id of the ring key new data keys are wrapped with (stored beside them)."""
        return self.current

    def forget(self, context: Mapping[str, str]) -> None:
        """Nothing to forget: this ring unwraps in memory and caches nothing (the same
        call as :meth:`KmsKeyRing.forget <langgraph_s3.sealing.kms.KmsKeyRing.forget>`)."""

    def generate(self, context: Mapping[str, str], *, key_id: str) -> tuple[DataKey, bytes]:
        """A new random data key and its wrapped form, bound to ``context``.

        Args:
            context: What the key belongs to (prefix, thread or tenant; its version if
                swapping two key items must be caught when they are unwrapped). Not
                secret.
            key_id: The id the data key gets (written into every object it seals).

        Returns:
            The data key, and the bytes to store (they name the current ring key).
        """
        key = DataKey(key_id, secrets.token_bytes(KEY_BYTES))
        return key, self.wrap(key, context)

    def rewrap(self, wrapped: bytes, context: Mapping[str, str], *, key_id: str, kek: str) -> bytes:
        """``wrapped`` (stored as wrapped by ring key ``kek``) re-wrapped with the current
        ring key, for the same ``context`` (raises as :meth:`unwrap`)."""
        return self.wrap(self.unwrap(wrapped, context, key_id=key_id, kek=kek), context)

    def wrap(self, key: DataKey, context: Mapping[str, str]) -> bytes:
        """``key`` wrapped with the current ring key, bound to ``context``."""
        return seal_to(self._keys[self.current], key.secret, KIND_KEY, encode_context(context))

    def unwrap(
        self, wrapped: bytes, context: Mapping[str, str], *, key_id: str, kek: str | None = None
    ) -> DataKey:
        """The data key in ``wrapped``, if it was wrapped for exactly ``context``.

        Args:
            wrapped: What :meth:`generate` or :meth:`wrap` returned.
            context: The context it was wrapped with, rebuilt from where it was found
                (never read from the stored item).
            key_id: The data key's id.
            kek: The ring key the stored item says wrapped it; ``None``: whichever
                ``wrapped`` names.

        Raises:
            UnknownKeyError: The ring has no key with the id ``wrapped`` names
                (``key_id`` on the error is that ring key id).
            KeyUnwrapError: ``wrapped`` was altered or truncated, ``context`` is not
                the one it was wrapped with, or it names another ring key than ``kek``.
        """
        where = f"wrapped data key {key_id!r}"
        try:
            ring_id = parse_header(wrapped, where=where).key_id
        except SealedObjectError as exc:
            raise KeyUnwrapError(
                f"{where} is damaged or truncated ({len(wrapped)} bytes); it was altered "
                "after it was stored",
                key_id=key_id,
            ) from exc
        if kek is not None and kek != ring_id:
            raise KeyUnwrapError(
                f"{where} names ring key {ring_id!r}, but its item says {kek!r}: one of them "
                "was altered after it was stored",
                key_id=key_id,
            )
        ring_key = self._keys.get(ring_id)
        if ring_key is None:
            raise UnknownKeyError(
                f"{where} was wrapped with ring key {ring_id!r}, which this key ring does "
                f"not hold (ids: {sorted(self._keys)}); configure that key",
                key_id=ring_id,
            )
        try:
            secret = open_from(
                ring_key, wrapped, KIND_KEY, encode_context(context), where=where, what=where
            )
        except SealedObjectError as exc:
            raise KeyUnwrapError(
                f"{where} does not unwrap with ring key {ring_id!r} for encryption context "
                f"{dict(context)!r}: it was altered, or it belongs to another context (a key "
                "item moved to another thread or tenant)",
                key_id=key_id,
            ) from exc
        return DataKey(key_id, secret)
