"""The DynamoDB index schema: attribute names and the items built from them.

``docs/layout.md`` ("The index") is the table this module mirrors: one partition per
thread (``pk``), and under it, by sort key, the checkpoint items, the pending writes
of each task, the head of each namespace and, in cross-region setups, the owner.
The requests that read and write these items are in :mod:`langgraph_s3.core.index`.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langgraph_s3 import codec
from langgraph_s3.core import groups
from langgraph_s3.core.entries import Record
from langgraph_s3.errors import CorruptObjectError
from langgraph_s3.keys import Layout, spelled

# Keys of every item.
PK, SK = "pk", "sk"
# Checkpoint items (and some of them on heads and writes items).
THREAD = "th"  #: raw thread id
NS = "ns"  #: raw checkpoint namespace
CID = "cid"  #: checkpoint id (on heads: the latest one)
PARENT = "p"  #: parent checkpoint id
DIGEST = "h"  #: SHA-256 of the checkpoint object; its presence marks a checkpoint item
SIZE = "sz"  #: size of the checkpoint object
BODY = "b"  #: the checkpoint object itself, when small
PREFETCH = "pf"  #: digests of the value blobs a reader GETs beside the object
PACK_PREFETCH = "pp"  #: pack ranges (digest, start, end) a reader GETs beside the object
ITEM_PREFETCH = "pi"  #: digests of the chunk items a reader gets beside the object
AT = "at"  #: commit / last write time, ms
RUN = "run"  #: run id (key of the by_run index)
METADATA = "md"  #: metadata index: key -> metadata_index_value
UNSTORED = "e"  #: channels with a version but no stored value (delta channels)
#: The thread's incarnation: 4 random bytes drawn when a run starts the thread (its
#: root checkpoint without parent), carried by every later checkpoint item; a copy
#: gets its own. A saver that finds another one than it knew forgets what it cached
#: of the thread (``core/incarnations.py``). Items written before 0.4.1 have none.
INCARNATION = "g"
# Pending-writes items.
TASK_ID = "tid"  #: its presence marks a pending-writes item
TASK_PATH = "tp"
# Heads and owners.
READ_AT = "rd"  #: last read of the latest checkpoint (touch_on_read), ms
REGION = "region"  #: the region that owns the thread
EXPIRES_AT = "expires_at"  #: DynamoDB TTL attribute

# Data key items (client-side encryption): one per version of a thread's or tenant's key.
WRAPPED = "wk"  #: the data key, wrapped (a KMS ciphertext blob, or a static ring's)
KEY_VERSION = "kv"  #: the data key's version (N): its id, and part of its encryption context
KEK = "kek"  #: what wrapped it: the KMS key ARN, or the static ring's key id
TENANT = "tn"  #: raw tenant id, on a tenant's data key item (a thread's has ``th``)

# Chunk items (layout 5): a small value chunk stored in the thread's partition.
VALUE = "v"  #: the chunk's blob frame, exactly as its loose S3 blob would hold it

#: Global secondary index of checkpoint items by run id (``delete_for_runs``).
GSI_RUN = "by_run"
#: Sort key of the item naming the region that owns a thread (cross-region setups).
OWNER_SK = "o"
#: Marker between a checkpoint's sort key and its pending writes' task.
WRITES_MARK = "#w#"
#: Begins the sort key of every data key item; :func:`key_sk` adds the version.
KEY_SK_PREFIX = "k#"


#: Begins the sort key of every chunk item; :func:`chunk_sk` adds the chunk's name.
CHUNK_SK_PREFIX = "b#"


def chunk_sk(name: bytes) -> str:
    """The sort key of the chunk item holding the chunk named ``name`` (the digest
    that names its loose blob ``{thread}/b/{hex}``; keyed with encryption)."""
    return CHUNK_SK_PREFIX + name.hex()


def chunk_item(pk: str, name: bytes, frame: bytes, at_ms: int) -> dict[str, Any]:
    """A chunk item: the blob ``frame`` of the chunk ``name`` in partition ``pk``,
    written at ``at_ms`` (a rewrite refreshes it, as a re-upload refreshes a blob)."""
    return {PK: s(pk), SK: s(chunk_sk(name)), VALUE: b(frame), AT: n(at_ms)}


def is_chunk_item(item: Mapping[str, Any]) -> bool:
    """A chunk item (layout 5), by its sort key."""
    return str(item[SK]["S"]).startswith(CHUNK_SK_PREFIX)


def chunk_name(item: Mapping[str, Any]) -> bytes:
    """The name (digest) of the chunk a chunk item holds."""
    return bytes.fromhex(str(item[SK]["S"])[len(CHUNK_SK_PREFIX) :])


#: Sort key of a thread's tenant reference: the thread's data key is the key of the
#: tenant its ``tn`` names. It sorts after every ``key_sk``, so the newest-first query
#: of a thread's key items returns it first.
TENANT_REF_SK = f"{KEY_SK_PREFIX}t"


def key_sk(version: int) -> str:
    """The sort key of version ``version`` of a data key (ten digits: versions sort)."""
    return f"{KEY_SK_PREFIX}{version:010d}"


def s(value: str) -> dict[str, str]:
    """A DynamoDB string value."""
    return {"S": value}


def n(value: int | float) -> dict[str, str]:
    """A DynamoDB number value."""
    return {"N": str(value)}


def b(value: bytes) -> dict[str, bytes]:
    """A DynamoDB binary value."""
    return {"B": value}


def text(item: Mapping[str, Any], name: str) -> str | None:
    """A string attribute of an item, or None."""
    attr = item.get(name)
    return None if attr is None else cast(str, attr["S"])


def metadata_index_value(value: Any) -> str | None:
    """The string the index stores for a metadata value, or None if it is not indexed.

    Equal Python values get equal strings (``1 == 1.0 == True``), so a server-side
    equality filter never drops a checkpoint that Python equality would keep.
    """
    if isinstance(value, bool | int):
        return f"n:{int(value)}"
    if isinstance(value, float):
        return f"n:{int(value)}" if value.is_integer() else f"n:{value!r}"
    if isinstance(value, str):
        return f"s:{value}" if len(value) <= 512 else None
    if value is None:
        return "z"
    return None


def metadata_attr(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``md``, the metadata index of a checkpoint item (nothing if no value indexes)."""
    pairs = ((k, metadata_index_value(v)) for k, v in metadata.items())
    indexed = {k: s(v) for k, v in pairs if isinstance(k, str) and k and v}
    return {METADATA: {"M": indexed}} if indexed else {}


@dataclass
class Row:
    """A checkpoint item of the index."""

    thread_id: str
    ns: str
    checkpoint_id: str
    parent_id: str | None
    digest: str
    #: Versioned channels the checkpoint stores no value for (delta channels).
    unstored: frozenset[str]
    item: dict[str, Any]
    body: bytes | None = None  # the checkpoint object, when stored in the index item
    # Digests of the value blobs of a checkpoint whose object is in S3, so a reader
    # can fetch them together with the object instead of after it.
    prefetch: tuple[bytes, ...] = ()
    # The same for chunks in packs: (pack digest, start, end) of the byte range
    # holding the value chunks each pack has for this checkpoint.
    pack_ranges: tuple[tuple[bytes, int, int], ...] = ()
    # The same for chunk items (layout 5): read by BatchGetItem beside the object.
    item_prefetch: tuple[bytes, ...] = ()
    #: The thread's incarnation (``INCARNATION``); None in items before 0.4.1.
    incarnation: bytes | None = None


@dataclass
class WritesRow:
    """A pending-writes item of the index: the writes of one task."""

    task_id: str
    task_path: str
    checkpoint_id: str
    #: (write index, record): one per index, groups and single records merged
    #: (``groups.merge``: the first one stored).
    records: list[tuple[int, Record]]
    sk: str
    #: With encryption, the sealed records not opened yet: (write index, stored bytes,
    #: where); ``sealed.open_writes`` opens them once the thread and namespace are known.
    sealed: list[tuple[int, bytes, str]] = field(default_factory=list)
    #: With encryption, where records stored without it were found (refused on opening).
    plain: list[str] = field(default_factory=list)
    #: The groups of records (``core/groups.py``) that give some of ``records``: the
    #: write index of the attribute holding each -> the write indices it gives.
    groups: dict[int, tuple[int, ...]] = field(default_factory=dict)


def place_digest(ids: tuple[str, str, str], body: bytes) -> str:
    """``h`` of a checkpoint item written with ``trim_items`` (layout 6) that holds its
    body: the first 16 bytes of the SHA-256 of the ids the item holds (thread,
    namespace, checkpoint) and the body, base64url (22 characters, where a SHA-256 in
    hex has 64). It binds the body, which may leave the ids out (a bare envelope), to
    the item: a body moved into another item does not match. Not the parent: prune
    removes ``p`` from kept items whose parent it deleted (readers take the parent
    from the item, as before).
    """
    digest = hashlib.sha256(codec.pack(list(ids)) + body).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def binds_place(digest: str) -> bool:
    """Whether a checkpoint item's ``h`` is a :func:`place_digest` (layout 6), not the
    SHA-256 of its body in hex (64 characters, every earlier layout)."""
    return len(digest) != 64


def is_checkpoint_item(item: Mapping[str, Any]) -> bool:
    return DIGEST in item


def is_key_item(item: Mapping[str, Any]) -> bool:
    """A data key item (client-side encryption): bound to its thread, never copied."""
    return str(item[SK]["S"]).startswith(KEY_SK_PREFIX)


def is_tenant_ref(item: Mapping[str, Any]) -> bool:
    """A thread's tenant reference (a key item that holds no key, only a tenant id)."""
    return str(item[SK]["S"]) == TENANT_REF_SK


def delta_channels(metadata: Mapping[str, Any], unstored: set[str]) -> set[str]:
    """Of the versioned channels a checkpoint stores no value for, the delta channels.

    LangGraph rebuilds only a ``DeltaChannel`` from ancestors; any other channel with
    no stored value is empty (``__start__``, ``branch:to:...`` once consumed). A delta
    channel not snapshotted at a checkpoint always has counters in its metadata
    (the superstep count grows every step); threads of older writers only carry
    the ``delta_writes_versioned`` marker, and then every such channel counts.
    """
    if metadata.get("delta_writes_versioned"):
        return set(unstored)
    counters = metadata.get("counters_since_delta_snapshot")
    return unstored & set(counters) if isinstance(counters, Mapping) else set()


def is_writes_item(item: Mapping[str, Any]) -> bool:
    return TASK_ID in item


def id_attrs(thread_id: str, ns: str, cid: str, *, all_ids: bool) -> dict[str, Any]:
    """The id attributes of a checkpoint item: ``th``, ``ns`` and ``cid`` with
    ``all_ids`` (what releases before 0.9.0 read), else only those its keys do not
    spell (layout 9: a hashed thread id or namespace; a checkpoint id never is)."""
    out: dict[str, Any] = {}
    if all_ids or not spelled(thread_id):
        out[THREAD] = s(thread_id)
    if all_ids or not spelled(ns):
        out[NS] = s(ns)
    if all_ids:
        out[CID] = s(cid)
    return out


def writes_id_attrs(task_id: str, cid: str, *, all_ids: bool) -> tuple[str, str | None]:
    """What a writes item holds in ``tid`` and ``cid``: both ids with ``all_ids`` (what
    releases before 0.12.0 read), else (layout 10) no ``cid`` (its sort key always
    spells it) and an empty ``tid`` where the key spells the task id. ``tid`` stays
    on every writes item: it marks one (``is_writes_item``, ``ListFilter``)."""
    if all_ids:
        return task_id, cid
    return ("" if spelled(task_id) else task_id), None


def full_writes_ids(item: Mapping[str, Any]) -> dict[str, Any]:
    """``item``, a writes item, with both ids in ``tid`` and ``cid`` (layout 9's shape,
    for a saver writing what releases before 0.12.0 read)."""
    task_id, cid = writes_ids(item)
    return {**item, TASK_ID: s(task_id), CID: s(cid)}


def writes_ids(item: Mapping[str, Any]) -> tuple[str, str]:
    """The task and checkpoint ids of a writes item: its ``tid`` and ``cid``, or
    (layout 10) those its sort key spells."""
    sk = str(item[SK]["S"])
    cid, task_id = Layout.ids_of_writes_sk(sk)
    if item[TASK_ID]["S"]:
        task_id = item[TASK_ID]["S"]
    if CID in item:
        cid = item[CID]["S"]
    if task_id is None or cid is None:
        key = f"{item[PK]['S']}|{sk}"
        raise CorruptObjectError(
            f"pending-writes item {key!r} names no task or checkpoint id its sort key "
            "does not spell; restore the item from a backup or delete the thread's "
            "pending writes of that checkpoint",
            key=key,
        )
    return task_id, cid


def checkpoint_ids(item: Mapping[str, Any]) -> tuple[str, str, str]:
    """The thread, namespace and checkpoint ids of a checkpoint item: its ``th``,
    ``ns`` and ``cid``, or (layout 9) those its keys spell."""
    spelt = Layout.ids_of_keys(str(item[PK]["S"]), str(item[SK]["S"]))
    ids = tuple(
        text(item, name) if name in item else from_keys
        for name, from_keys in zip((THREAD, NS, CID), spelt, strict=True)
    )
    if any(not isinstance(i, str) for i in ids):
        key = f"{item[PK]['S']}|{item[SK]['S']}"
        raise CorruptObjectError(
            f"checkpoint item {key!r} names no thread, namespace or checkpoint id its "
            "keys do not spell; restore the item from a backup or delete the checkpoint",
            key=key,
        )
    return cast(tuple[str, str, str], ids)


def retarget(item: Mapping[str, Any], pk: str, thread_id: str) -> dict[str, Any]:
    """``item`` moved to thread ``thread_id`` (partition ``pk``): the thread it names
    becomes that one, in ``th`` if the item held one or the new key cannot spell it."""
    out = {**item, PK: s(pk)}
    if THREAD in item or not spelled(thread_id):
        out[THREAD] = s(thread_id)
    return out


def parse_row(item: dict[str, Any]) -> Row:
    """A checkpoint item as a :class:`Row`."""
    thread_id, ns, cid = checkpoint_ids(item)
    return Row(
        thread_id=thread_id,
        ns=ns,
        checkpoint_id=cid,
        parent_id=text(item, PARENT),
        digest=item[DIGEST]["S"],
        unstored=frozenset(item.get(UNSTORED, {}).get("SS", ())),
        item=item,
        body=item[BODY]["B"] if BODY in item else None,
        prefetch=_split_digests(item.get(PREFETCH, {}).get("B")),
        pack_ranges=_split_ranges(item.get(PACK_PREFETCH, {}).get("B")),
        item_prefetch=_split_digests(item.get(ITEM_PREFETCH, {}).get("B")),
        incarnation=item.get(INCARNATION, {}).get("B"),
    )


def pack_ranges_attr(ranges: Sequence[tuple[bytes, int, int]]) -> bytes:
    """``pp``: 40 bytes per pack, its digest then start and end (big-endian u32)."""
    return b"".join(
        d + start.to_bytes(4, "big") + end.to_bytes(4, "big") for d, start, end in ranges
    )


def _split_ranges(data: object) -> tuple[tuple[bytes, int, int], ...]:
    # A hint, like pf: a malformed one is ignored.
    if not isinstance(data, bytes) or len(data) % 40:
        return ()
    out = []
    for i in range(0, len(data), 40):
        start, end = (
            int.from_bytes(data[i + 32 : i + 36], "big"),
            int.from_bytes(data[i + 36 : i + 40], "big"),
        )
        if start < end:
            out.append((data[i : i + 32], start, end))
    return tuple(out)


def _split_digests(data: object) -> tuple[bytes, ...]:
    # A hint only: the object's own entries say what is read, so a malformed
    # attribute is ignored rather than failing the read.
    if not isinstance(data, bytes) or len(data) % 32:
        return ()
    return tuple(data[i : i + 32] for i in range(0, len(data), 32))


def parse_writes(item: dict[str, Any], *, encrypted: bool = False) -> WritesRow:
    """A pending-writes item as a :class:`WritesRow` (records checked and unpacked).

    ``encrypted``: the saver has encryption; records are kept aside, sealed ones to
    be opened (``sealed.open_writes``), others to be refused.
    """
    stored, sealed, plain = [], [], []
    for name, attr in item.items():
        idx = record_index(name)
        if idx is not None:
            key = f"{item[PK]['S']}|{item[SK]['S']}|{name}"
            data = attr["B"]
            if not encrypted:
                stored.append(groups.unpack(data, idx, key))
            elif data[:1] == codec.SEALED_RECORD:
                sealed.append((idx, data, key))
            else:
                plain.append(key)
    records, grouped = groups.merge(stored)
    task_id, cid = writes_ids(item)
    return WritesRow(
        task_id=task_id,
        task_path=item.get(TASK_PATH, {}).get("S", ""),
        checkpoint_id=cid,
        records=records,
        sk=item[SK]["S"],
        sealed=sealed,
        plain=plain,
        groups=grouped,
    )


def record_attr(idx: int) -> str:
    """The attribute of the write with index ``idx``: ``w0``, ``w1``, … or ``m1``…``m4``."""
    return f"w{idx}" if idx >= 0 else f"m{-idx}"


def record_index(name: str) -> int | None:
    """The write index an attribute holds, or None if it holds no write."""
    if len(name) > 1 and name[1:].isdigit():
        if name[0] == "w":
            return int(name[1:])
        if name[0] == "m":
            return -int(name[1:])
    return None


def written_ms(item: Mapping[str, Any]) -> int:
    """When an item was last written (``at``), ms; 0 if it does not say."""
    return int(item.get(AT, {}).get("N", 0))


def pk_of(item: Mapping[str, Any]) -> str:
    """The partition key of an item (the thread's, prefix included)."""
    return str(item[PK]["S"])


def checkpoint_ref(item: Mapping[str, Any]) -> tuple[str, str]:
    """(partition key, checkpoint sort key) of the checkpoint a checkpoint or writes
    item belongs to."""
    return item[PK]["S"], item[SK]["S"].split(WRITES_MARK, 1)[0]


def keys_of(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The primary keys of items."""
    return [{PK: i[PK], SK: i[SK]} for i in items]
