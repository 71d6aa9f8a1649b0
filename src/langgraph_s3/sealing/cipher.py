"""Data keys, their purpose subkeys, sealing and keyed names.

Everything here that encrypts imports ``cryptography`` on first use
(:func:`crypto`), so a saver without encryption never pays for it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from langgraph_s3.errors import (
    DataKeyError,
    MissingDependencyError,
    SealedObjectError,
    UnsupportedFormatError,
)
from langgraph_s3.sealing.places import Place

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

#: The first bytes of every sealed object.
MAGIC = b"LGSE"
#: The newest seal format this library reads and the one it writes.
SEAL_VERSION = 1
KEY_BYTES = 32
SALT_BYTES = 16
NONCE_BYTES = 12
TAG_BYTES = 16
MAX_KEY_ID_BYTES = 255
_FIXED = len(MAGIC) + 2  # magic, version, key id length

# HKDF labels. One thread's data key never encrypts anything itself: it is the root
# of a sealing subkey and a naming subkey, so a name (published as an S3 key) and a
# ciphertext never come from the same key, and the per-object keys below come from a
# key that is used for nothing else.
_INFO_SEAL = b"langgraph-s3/v1/seal"
_INFO_NAME = b"langgraph-s3/v1/name"
_INFO_OBJECT = b"langgraph-s3/v1/object/"


class Crypto(NamedTuple):
    """The parts of ``cryptography`` sealing uses, imported on first use."""

    aesgcm: type[AESGCM]
    hkdf: Any
    sha256: Any
    invalid_tag: type[Exception]


@functools.cache
def crypto() -> Crypto:
    """Import ``cryptography`` (once) or say which extra installs it.

    Raises:
        MissingDependencyError: ``cryptography`` is not installed.
    """
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.hashes import SHA256
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError as exc:
        raise MissingDependencyError(
            "encryption needs the 'cryptography' package, which is not installed: "
            "pip install 'langgraph-s3[encryption]'"
        ) from exc
    return Crypto(AESGCM, HKDF, SHA256, InvalidTag)


def hkdf(ikm: bytes, *, salt: bytes | None, info: bytes) -> bytes:
    """HKDF-SHA256 (RFC 5869) of ``ikm``: 32 bytes."""
    c = crypto()
    return bytes(c.hkdf(algorithm=c.sha256(), length=KEY_BYTES, salt=salt, info=info).derive(ikm))


@dataclass(frozen=True)
class DataKey:
    """A 32-byte data key and the id that sealed objects name it by.

    The secret is never shown (``repr`` shows the id only). Its subkeys are derived
    on first use and kept with it.

    Attributes:
        key_id: 1 to 255 bytes of UTF-8, written into every object it seals (e.g. the
            version of the thread's key item), so a reader knows which key opens it.
        secret: The 32 key bytes.

    Raises:
        DataKeyError: The id or the secret has the wrong size.
    """

    key_id: str
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.secret, bytes) or len(self.secret) != KEY_BYTES:
            raise DataKeyError(
                f"data key {self.key_id!r} is not {KEY_BYTES} bytes; AES-256 needs exactly "
                f"{KEY_BYTES}",
                key_id=self.key_id,
            )
        size = len(self.key_id.encode("utf-8", "surrogatepass"))
        if not 1 <= size <= MAX_KEY_ID_BYTES:
            raise DataKeyError(
                f"data key id {self.key_id!r} is {size} bytes of UTF-8; it must be 1 to "
                f"{MAX_KEY_ID_BYTES}",
                key_id=self.key_id,
            )

    @cached_property
    def header(self) -> bytes:
        """What every object this key seals starts with: magic, version, key id."""
        raw = self.key_id.encode("utf-8", "surrogatepass")
        return MAGIC + bytes([SEAL_VERSION, len(raw)]) + raw

    @cached_property
    def seal_root(self) -> bytes:
        """The subkey per-object sealing keys are derived from."""
        return hkdf(self.secret, salt=None, info=_INFO_SEAL)

    @cached_property
    def name_key(self) -> bytes:
        """The subkey keyed content names are made with."""
        return hkdf(self.secret, salt=None, info=_INFO_NAME)


class Header(NamedTuple):
    """The cleartext start of a sealed object."""

    key_id: str
    salt: bytes
    nonce: bytes
    end: int


def overhead(key: DataKey) -> int:
    """How many bytes sealing with ``key`` adds to a plaintext (header and tag)."""
    return len(key.header) + SALT_BYTES + NONCE_BYTES + TAG_BYTES


def seal(key: DataKey, plaintext: bytes, place: Place, *, clear: bytes = b"") -> bytes:
    """Encrypt ``plaintext`` with AES-256-GCM, bound to ``place``.

    The result is ``magic, version, key id, salt, nonce, ciphertext and tag``; see
    :mod:`langgraph_s3.sealing`.

    Args:
        key: The data key of the scope the value belongs to.
        plaintext: The bytes to seal (compress before sealing, never after).
        place: Where the value is stored; opening needs the same place.
        clear: Cleartext the caller stores beside the result (not in it), e.g. the
            references a collector without keys must read. It is authenticated:
            opening needs the same bytes.

    Raises:
        MissingDependencyError: ``cryptography`` is not installed.
    """
    # The header and a place's encoding are self-delimiting, so appending ``clear``
    # unprefixed keeps the associated data unambiguous (and equal to the place's
    # encoding alone when there is none).
    return seal_to(key, plaintext, place.kind, place.encode() + clear)


def seal_to(key: DataKey, plaintext: bytes, kind: bytes, bound: bytes) -> bytes:
    """:func:`seal` to any canonical encoding ``bound`` of content of kind ``kind``."""
    fresh = os.urandom(SALT_BYTES + NONCE_BYTES)
    header = key.header + fresh
    aead = crypto().aesgcm(object_key(key, fresh[:SALT_BYTES], kind))
    return header + aead.encrypt(fresh[SALT_BYTES:], plaintext, header + bound)


def object_key(key: DataKey, salt: bytes, kind: bytes) -> bytes:
    """The key that seals one object: HKDF of the sealing subkey with its random salt.

    Each object gets a fresh key, so no key ever meets GCM's limit of 2^32 messages
    with random nonces, however long a thread's data key lives.
    """
    return hkdf(key.seal_root, salt=salt, info=_INFO_OBJECT + kind)


def open_sealed(
    key: DataKey, sealed: bytes, place: Place, *, where: str, clear: bytes = b""
) -> bytes:
    """Check and decrypt what :func:`seal` made for ``place``.

    Args:
        key: The data key named in the object's header (:func:`sealed_key_id`).
        sealed: The stored bytes.
        place: Where the reader found it; it must be where it was sealed to.
        where: The object's name for messages: its S3 key, or the index item's sort
            key and attribute for a body or record kept in the index.
        clear: The cleartext it was sealed with (see :func:`seal`).

    Returns:
        The plaintext.

    Raises:
        SealedObjectError: Not a sealed object, truncated, altered (``clear``
            included), sealed to another place, or under another data key. Nothing is
            decrypted.
        UnsupportedFormatError: Sealed by a newer version of langgraph-s3.
        MissingDependencyError: ``cryptography`` is not installed.
    """
    bound = place.encode() + clear
    return open_from(key, sealed, place.kind, bound, where=where, what=place.describe())


def open_from(
    key: DataKey, sealed: bytes, kind: bytes, bound: bytes, *, where: str, what: str
) -> bytes:
    """:func:`open_sealed` for any canonical encoding ``bound``; ``what`` describes it."""
    head = parse_header(sealed, where=where)
    if head.key_id != key.key_id:
        raise SealedObjectError(
            f"sealed object {where!r} was sealed under data key {head.key_id!r}, not "
            f"{key.key_id!r}: open it with the key its header names (that key may be "
            "missing), or its header was altered",
            key=where,
            key_id=key.key_id,
        )
    c = crypto()
    aead = c.aesgcm(object_key(key, head.salt, kind))
    try:
        # A view, not a slice: a slice copies the whole ciphertext first.
        body = memoryview(sealed)[head.end :]
        return aead.decrypt(head.nonce, body, sealed[: head.end] + bound)
    except c.invalid_tag as exc:  # its message is empty: ours names the object
        raise SealedObjectError(
            f"sealed object {where!r} does not open as the {what} with data key "
            f"{key.key_id!r}: it was moved from another thread, namespace, checkpoint or "
            "write slot, altered or truncated after it was written, or sealed under "
            "another key of the same id. Restore it from a copy or delete the checkpoint",
            key=where,
            key_id=key.key_id,
        ) from exc


def sealed_key_id(sealed: bytes, *, where: str) -> str:
    """The id of the data key that sealed ``sealed`` (to look that key up).

    Raises:
        SealedObjectError: ``sealed`` is not a sealed object or is truncated.
        UnsupportedFormatError: Sealed by a newer version of langgraph-s3.
    """
    return parse_header(sealed, where=where).key_id


def parse_header(sealed: bytes, *, where: str) -> Header:
    """Read and check the cleartext header of a sealed object."""
    if len(sealed) < _FIXED or not sealed.startswith(MAGIC):
        raise SealedObjectError(
            f"object {where!r} is not sealed ({len(sealed)} bytes without the sealed "
            "header): it was written without encryption, or truncated or altered",
            key=where,
        )
    version, size = sealed[len(MAGIC)], sealed[len(MAGIC) + 1]
    if version > SEAL_VERSION:
        raise UnsupportedFormatError(
            f"object {where!r} is sealed with format version {version}, this library "
            f"reads up to {SEAL_VERSION}: upgrade langgraph-s3",
            key=where,
        )
    end = _FIXED + size + SALT_BYTES + NONCE_BYTES
    if version < 1 or size == 0 or len(sealed) < end + TAG_BYTES:
        raise SealedObjectError(
            f"sealed object {where!r} has a damaged header or is truncated "
            f"({len(sealed)} bytes); it was altered after it was written",
            key=where,
        )
    try:
        key_id = sealed[_FIXED : _FIXED + size].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise SealedObjectError(
            f"sealed object {where!r} names no readable data key id; it was altered "
            "after it was written",
            key=where,
        ) from exc
    salt = sealed[_FIXED + size : _FIXED + size + SALT_BYTES]
    return Header(key_id, salt, sealed[end - NONCE_BYTES : end], end)


def name(key: DataKey, data: bytes) -> bytes:
    """The keyed content name of ``data``: HMAC-SHA256 under the naming subkey.

    Equal data has equal names under one data key (so chunks dedupe within its
    scope), and names under different keys are unrelated (so they reveal nothing
    across threads or tenants). 32 bytes; ``.hex()`` for an S3 key.
    """
    return hmac.new(key.name_key, data, hashlib.sha256).digest()


def check_name(key: DataKey, data: bytes, expected: bytes, *, where: str) -> None:
    """Check that ``data`` is what ``expected`` names (constant time).

    Run after opening a blob: it ties the content to the name its readers asked for,
    which GCM alone does not (it does not commit to its key).

    Raises:
        SealedObjectError: The name does not match.
    """
    if not hmac.compare_digest(name(key, data), expected):
        raise SealedObjectError(
            f"blob {where!r} does not match its keyed content name under data key "
            f"{key.key_id!r}; it was altered or written with another key",
            key=where,
            key_id=key.key_id,
        )
