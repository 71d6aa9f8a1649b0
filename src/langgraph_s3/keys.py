"""Key layout: where every object and index item lives.

The layout is documented in ``docs/layout.md``; keep the two in step.

Every id that reaches a key goes through :func:`encode_segment`, which maps any
string to a non-empty segment made only of ``[A-Za-z0-9_:%~-]``:

* ids of up to 128 encoded characters are percent-encoded (UTF-8), keeping
  ``A-Z a-z 0-9 - _ :`` as they are; ``.``, ``/``, ``#``, ``%``, ``~`` and
  everything else become ``%XX``, so no segment is ``.`` or ``..`` and none can
  contain a separator;
* the empty string becomes ``~``;
* longer ids become ``~`` followed by the SHA-256 of their UTF-8 bytes, which
  keeps S3 keys under 1024 bytes and DynamoDB sort keys under 1024 bytes.

Segments that start with ``~`` are never produced by percent-encoding (``~``
itself is escaped), so the three forms cannot collide. The raw ids are stored
inside the objects and items as well, except where a key spells them whole: a
checkpoint item of layout 9 leaves out the thread, namespace and checkpoint ids its
keys give back (:func:`spelled`, :meth:`Layout.ids_of_keys`), and a pending-writes item
of layout 10 its checkpoint and task ids (:meth:`Layout.ids_of_writes_sk`); a hashed
segment never stands in for an id.
"""

from __future__ import annotations

import hashlib
import re
import string
from urllib.parse import unquote

from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.immutable import immutable

_SAFE = frozenset(string.ascii_letters + string.digits + "-_:")
_MAX_PLAIN = 128
# Checkpoint ids are kept verbatim because their string order is the history order
# (LangGraph's uuid6 ids sort by time); only characters that need no escaping are
# accepted so the stored order is exactly Python's string order.
_CHECKPOINT_ID = re.compile(r"[A-Za-z0-9_:-]{1,128}")
#: An object key relative to its thread's folder: a checkpoint object or a blob.
#: Anything else under the folder (a nested prefix's threads) belongs to someone else.
THREAD_OBJECT = r"c/[^/]+/[A-Za-z0-9_:-]{1,128}\.[0-9a-f]{32}|b/[0-9a-f]{64}(?:\.pack)?"
_THREAD_OBJECT = re.compile(THREAD_OBJECT)
MAX_PREFIX_BYTES = 512


def encode_segment(value: str) -> str:
    """Encode one id so it is a single, collision-free key segment."""
    if value == "":
        return "~"
    out: list[str] = []
    for ch in value:
        if ch in _SAFE:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    encoded = "".join(out)
    if len(encoded) > _MAX_PLAIN:
        return "~" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return encoded


def decode_segment(segment: str) -> str:
    """The id an encoded segment stands for; a hashed one (a long id) cannot be
    decoded and is returned as it is."""
    if segment == "~":
        return ""
    if segment.startswith("~"):
        return segment
    return unquote(segment, errors="surrogatepass")


def spelled(value: str) -> bool:
    """Whether :func:`decode_segment` gives ``value`` back from its segment (it is not
    hashed: an id of up to 128 encoded characters)."""
    segment = encode_segment(value)
    return segment == "~" or not segment.startswith("~")


def _decoded(segment: str) -> str | None:
    """:func:`decode_segment`, or None for a segment that gives no id back (hashed)."""
    if not segment or (segment != "~" and segment.startswith("~")):
        return None
    return decode_segment(segment)


def check_checkpoint_id(checkpoint_id: object) -> str:
    """Return ``checkpoint_id`` if it can be stored verbatim, else raise."""
    if not isinstance(checkpoint_id, str) or not _CHECKPOINT_ID.fullmatch(checkpoint_id):
        raise InvalidConfigError(
            f"checkpoint_id {checkpoint_id!r} is not supported: use 1-128 characters from "
            "A-Z a-z 0-9 - _ : (LangGraph's own uuid6 ids always qualify)"
        )
    return checkpoint_id


def normalize_prefix(prefix: str) -> str:
    """Return ``prefix`` ending in ``/`` (or empty), after checking it."""
    if not isinstance(prefix, str):
        raise InvalidConfigError(f"prefix must be a string, got {type(prefix).__name__}")
    prefix = prefix.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    try:
        size = len(prefix.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidConfigError(
            f"prefix {prefix!r} is not valid text (a lone surrogate): S3 keys are UTF-8"
        ) from exc
    if size > MAX_PREFIX_BYTES:
        raise InvalidConfigError(f"prefix is longer than {MAX_PREFIX_BYTES} bytes")
    if any(ch in prefix for ch in "#\x00") or "//" in prefix:
        raise InvalidConfigError(f"prefix {prefix!r} must not contain '#', NUL or '//'")
    return prefix


@immutable
class Layout:
    """Builds every S3 key and DynamoDB key the saver uses."""

    prefix: str = ""

    # --- S3 -----------------------------------------------------------------
    def thread_prefix(self, thread_id: str) -> str:
        """The folder holding every object of one thread."""
        return f"{self.prefix}{encode_segment(thread_id)}/"

    def checkpoint_key(self, thread_id: str, ns: str, checkpoint_id: str, digest: str) -> str:
        """Checkpoint objects are immutable: the digest makes a re-put a new object."""
        return (
            f"{self.thread_prefix(thread_id)}c/{encode_segment(ns)}/{checkpoint_id}.{digest[:32]}"
        )

    def blob_key(self, thread_id: str, digest: str) -> str:
        """Content-addressed value (or chunk of a value), shared by the whole thread."""
        return self.blob_key_in(self.thread_prefix(thread_id), digest)

    @staticmethod
    def blob_key_in(folder: str, digest: str) -> str:
        """``blob_key`` for the thread whose folder (``thread_prefix``) is ``folder``."""
        return f"{folder}b/{digest}"

    def pack_key(self, thread_id: str, digest: str) -> str:
        """A pack: the chunks one call uploaded, as one object (named by its SHA-256)."""
        return self.pack_key_in(self.thread_prefix(thread_id), digest)

    @staticmethod
    def pack_key_in(folder: str, digest: str) -> str:
        """``pack_key`` for the thread whose folder (``thread_prefix``) is ``folder``."""
        return f"{folder}b/{digest}.pack"

    def blob_prefix(self, thread_id: str) -> str:
        return f"{self.thread_prefix(thread_id)}b/"

    def is_blob_key(self, thread_id: str, key: str) -> bool:
        """True if ``key`` is one of the thread's value blobs (not a checkpoint object)."""
        return key.startswith(self.blob_prefix(thread_id))

    def owns_object(self, thread_id: str, key: str) -> bool:
        """True if ``key`` is an object of this thread (not of a longer, nested prefix
        that happens to share the thread's folder)."""
        folder = self.thread_prefix(thread_id)
        return key.startswith(folder) and bool(_THREAD_OBJECT.fullmatch(key[len(folder) :]))

    # --- DynamoDB ---------------------------------------------------------------
    def pk(self, thread_id: str) -> str:
        """Partition key: all items of one thread share it (prefix included)."""
        return f"{self.prefix}{encode_segment(thread_id)}"

    def tenant_pk(self, tenant: str) -> str:
        """Partition key of a tenant's data key items (client-side encryption per tenant).

        ``#`` never follows the prefix of a thread's partition (segments are escaped,
        prefixes may not contain it) and ``/`` makes :meth:`owns_pk` false, so no
        thread, of this prefix or a nested one, shares it, and listings of threads
        pass it by.
        """
        return f"{self.tenants_pk_prefix()}{encode_segment(tenant)}"

    def tenants_pk_prefix(self) -> str:
        """Begins the partition key of every tenant's data key items of this prefix."""
        return f"{self.prefix}#tenant/"

    @staticmethod
    def folder_of_pk(pk: str) -> str:
        """The thread folder (``thread_prefix``) of the thread whose partition key is ``pk``."""
        return f"{pk}/"

    def thread_of_pk(self, pk: str) -> str:
        """The thread id a partition key names (see :func:`decode_segment`)."""
        return decode_segment(pk[len(self.prefix) :])

    def owns_pk(self, pk: str) -> bool:
        """True if ``pk`` is a thread of this prefix (not of a longer, nested prefix)."""
        return pk.startswith(self.prefix) and "/" not in pk[len(self.prefix) :]

    @staticmethod
    def checkpoints_sk_prefix() -> str:
        """Begins the sort key of every checkpoint and writes item (of any namespace)."""
        return "c#"

    @staticmethod
    def ns_prefix_sk(ns: str) -> str:
        return f"c#{encode_segment(ns)}#"

    @staticmethod
    def checkpoint_sk(ns: str, checkpoint_id: str) -> str:
        return f"c#{encode_segment(ns)}#{checkpoint_id}"

    @staticmethod
    def ids_of_keys(pk: str, sk: str) -> tuple[str | None, str | None, str | None]:
        """The thread, namespace and checkpoint ids the keys of a checkpoint item spell;
        None for one a key holds hashed (or a key not of that shape).

        A thread's segment is what follows the last ``/`` of its partition key: a
        prefix ends with ``/`` and no segment holds one.
        """
        thread = _decoded(pk.rpartition("/")[2])
        parts = sk.split("#")
        if len(parts) != 3 or parts[0] != "c" or not _CHECKPOINT_ID.fullmatch(parts[2]):
            return thread, None, None
        return thread, _decoded(parts[1]), parts[2]

    @staticmethod
    def writes_sk(ns: str, checkpoint_id: str, task_id: str) -> str:
        return f"c#{encode_segment(ns)}#{checkpoint_id}#w#{encode_segment(task_id)}"

    @staticmethod
    def ids_of_writes_sk(sk: str) -> tuple[str | None, str | None]:
        """The checkpoint and task ids a writes item's sort key spells; None for a task
        id the key holds hashed (or a key not of that shape)."""
        parts = sk.split("#")
        if len(parts) != 5 or parts[0] != "c" or parts[3] != "w":
            return None, None
        cid = parts[2] if _CHECKPOINT_ID.fullmatch(parts[2]) else None
        return cid, _decoded(parts[4])

    @staticmethod
    def writes_upper_sk(ns: str, checkpoint_id: str) -> str:
        """Sorts after every writes item of the checkpoint and before any other checkpoint."""
        return Layout.writes_upper_of(Layout.checkpoint_sk(ns, checkpoint_id))

    @staticmethod
    def writes_upper_of(checkpoint_sk: str) -> str:
        """``writes_upper_sk`` of a checkpoint item's sort key."""
        return f"{checkpoint_sk}#x"

    @staticmethod
    def head_sk(ns: str) -> str:
        return f"h#{encode_segment(ns)}"

    @staticmethod
    def is_head_sk(sk: str) -> bool:
        """True for the sort key of a namespace's head item."""
        return sk.startswith("h#")
