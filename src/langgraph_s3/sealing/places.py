"""Where a sealed value belongs, as the bytes its seal is bound to.

A sealed object is authenticated together with its *place*: the associated data of
its AES-GCM seal is the sealed header followed by :meth:`encode` of one of the
classes below. An object copied anywhere else (another prefix, thread, namespace,
checkpoint or write slot) therefore fails to open instead of decrypting into the
wrong place.

The encoding is canonical and injective: a one-byte kind, then the kind's fields in
a fixed order, each a 4-byte big-endian length and its bytes (text as UTF-8, write
indexes as a signed 8-byte integer). Nothing is joined with a separator, so no two
places share an encoding whatever characters their ids hold (``("a\\0b", "c")`` and
``("a", "b\\0c")`` stay apart, as they would not if joined with NUL).

This module needs no cryptography; it only builds bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import ClassVar

from langgraph_s3.immutable import immutable

#: Kinds of sealed content, the first byte of a place's encoding.
KIND_BODY = b"C"
KIND_BLOB = b"B"
KIND_WRITE = b"W"
KIND_KEY = b"K"

_LENGTH = struct.Struct(">I")
_INDEX = struct.Struct(">q")


def _text(value: str) -> bytes:
    # surrogatepass: ids are arbitrary Python strings (keys.encode_segment accepts lone
    # surrogates too), and it is still injective.
    raw = value.encode("utf-8", "surrogatepass")
    return _LENGTH.pack(len(raw)) + raw


def _texts(*values: str) -> bytes:
    return b"".join(_text(v) for v in values)


def _bytes(value: bytes) -> bytes:
    return _LENGTH.pack(len(value)) + value


@immutable
class BodyPlace:
    """A checkpoint body, in S3 or kept in its index item.

    Attributes:
        prefix: The saver's key prefix (``""`` or ending with ``/``).
        thread: The thread id (raw, not the encoded segment).
        ns: The checkpoint namespace (``""`` for the root graph).
        checkpoint_id: The checkpoint's id.
    """

    kind: ClassVar[bytes] = KIND_BODY
    prefix: str
    thread: str
    ns: str
    checkpoint_id: str

    def encode(self) -> bytes:
        """The canonical bytes of this place."""
        return self.kind + _texts(self.prefix, self.thread, self.ns, self.checkpoint_id)

    def describe(self) -> str:
        """The place in words, for error messages (ids only, never content)."""
        return (
            f"checkpoint body of thread {self.thread!r}, namespace {self.ns!r}, "
            f"checkpoint {self.checkpoint_id!r}, prefix {self.prefix!r}"
        )


@immutable
class WritePlace:
    """One pending-write record: a task's write slot under a checkpoint.

    Attributes:
        prefix: The saver's key prefix.
        thread: The thread id.
        ns: The checkpoint namespace.
        checkpoint_id: The checkpoint the write belongs to.
        task_id: The task that wrote it.
        index: LangGraph's write index: ``0, 1, ...`` for regular writes, negative
            for special ones (``WRITES_IDX_MAP``); ``schema.record_attr`` maps it to
            the item attribute (``w3``, ``m1``).
    """

    kind: ClassVar[bytes] = KIND_WRITE
    prefix: str
    thread: str
    ns: str
    checkpoint_id: str
    task_id: str
    index: int

    def encode(self) -> bytes:
        """The canonical bytes of this place."""
        ids = _texts(self.prefix, self.thread, self.ns, self.checkpoint_id, self.task_id)
        return self.kind + ids + _INDEX.pack(self.index)

    def describe(self) -> str:
        """The place in words, for error messages (ids only, never content)."""
        return (
            f"pending write {self.index} of task {self.task_id!r} under checkpoint "
            f"{self.checkpoint_id!r} of thread {self.thread!r}, namespace {self.ns!r}, "
            f"prefix {self.prefix!r}"
        )


@immutable
class BlobPlace:
    """A value blob: a chunk, a whole value, or a chunk list (loose or in a pack).

    A blob is bound to its key's scope and its keyed content name, not to a
    checkpoint: the same chunk serves every checkpoint and namespace of the scope,
    and whatever names it (a body or a record) is itself bound to its place.

    Attributes:
        prefix: The saver's key prefix.
        scope: Who owns the data key: the thread id, or the tenant id when keys are
            per tenant.
        name: The blob's keyed content name (:func:`~langgraph_s3.sealing.name`,
            32 bytes).
    """

    kind: ClassVar[bytes] = KIND_BLOB
    prefix: str
    scope: str
    name: bytes

    def encode(self) -> bytes:
        """The canonical bytes of this place."""
        return self.kind + _text(self.prefix) + _text(self.scope) + _bytes(self.name)

    def describe(self) -> str:
        """The place in words, for error messages (ids only, never content)."""
        return f"blob {self.name.hex()} of scope {self.scope!r}, prefix {self.prefix!r}"


#: Every place a value can be sealed to.
Place = BodyPlace | WritePlace | BlobPlace


def encode_context(context: Mapping[str, str]) -> bytes:
    """The canonical bytes of an encryption context (what a wrapped data key is bound to).

    The number of pairs, then each key and value length-prefixed, in the order of the
    encoded keys: two contexts share an encoding only if they are equal, whatever
    order the mapping was built in.

    Args:
        context: Names what the key belongs to, e.g. the prefix and the thread or
            tenant. Not secret (KMS shows it in CloudTrail).
    """
    pairs = sorted((_text(k), _text(v)) for k, v in context.items())
    return KIND_KEY + _LENGTH.pack(len(pairs)) + b"".join(k + v for k, v in pairs)
