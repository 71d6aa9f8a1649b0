"""What a saver is configured with, and how the configs LangGraph passes are read."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import get_checkpoint_id

from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.keys import check_checkpoint_id
from langgraph_s3.regions import CrossRegion

if TYPE_CHECKING:
    from langgraph_s3.core.sealed import Encryption, KeyRing

#: Values whose serialized form is at most this many bytes are stored inside the
#: checkpoint object; larger ones get content-addressed objects of their own.
#: See docs/layout.md ("Inline or blob") for the measurement behind the number.
DEFAULT_INLINE_THRESHOLD = 16 * 1024
#: Checkpoint objects (framed and compressed) up to this size are stored inside their
#: index item instead of S3: the commit writes them anyway, so a step costs no S3
#: PUT and a resume no GET. See docs/layout.md ("Where the checkpoint body lives").
INDEX_INLINE_LIMIT = 4 * 1024
#: Pending-write values above this size go to a blob instead of the index item.
WRITE_INLINE_THRESHOLD = 32 * 1024


class SaverOptions(TypedDict, total=False):
    """Keyword options shared by ``S3Saver`` and ``AsyncS3Saver``.

    Attributes:
        inline_threshold: Values whose serialized size is at most this many bytes are
            kept inside the checkpoint object (default 16 KiB; see docs/layout.md).
        index_inline_limit: Checkpoint objects up to this many bytes (compressed) are
            stored in their DynamoDB index item instead of S3 (default 4 KiB; 0 keeps
            every checkpoint object in S3).
        max_concurrency: Most requests in flight at once for one call (default 64, so
            the blobs of one checkpoint are fetched in one round trip).
        cache_bytes: Memory bound of each cache of content-addressed data (64 MiB).
        cache_ttl: Seconds for which the saver trusts that a blob it saw still exists
            (1200). Garbage collection's grace period must be longer.
        touch_on_read: Record reads of the latest checkpoint on the head item so
            idle-thread retention counts them as activity (one extra write per read).
        cross_region: Multi-region behaviour (see ``CrossRegion``).
        clock: Wall clock in seconds (tests simulate long pauses with it).
        encryption: Client-side encryption: a key ring (``StaticKeyRing``,
            ``KmsKeyRing``) or an ``Encryption``; checkpoint bodies, pending writes and
            value blobs are then sealed per thread (see ``langgraph_s3.core.sealed``).
            None (the default) stores them as before.
        chunk_items: Store a call's one or two small new value chunks as items of the
            thread's index partition (layout 5) instead of S3 blobs, when that costs
            fewer write units than the PUTs it replaces (default True; see
            docs/layout.md, "Chunk items"). False writes what 0.4.x reads (layout 3,
            or 4 with encryption), so it turns ``group_writes`` and ``trim_items``
            off too; chunk items are read either way. Releases before layout 5 cannot read a
            checkpoint that names one.
        group_writes: Store a ``put_writes`` call's small regular writes as one
            record compressed together when that makes the item smaller (default
            True; see docs/layout.md, "Grouped records"). False writes one record per
            write, what 0.5.x reads; groups are read either way. Releases before
            0.6.0 cannot read a task's writes that hold one. ``chunk_items=False``
            (what 0.4.x reads) turns it off too.
        trim_items: Write checkpoint items as small as the newest layout makes them
            (default True): a body that fits in its index item leaves out the ids the
            item holds, bound to them by a 16-byte ``h`` instead of a 64-hex SHA-256,
            without ``sz`` (layout 6, docs/layout.md "Trimmed checkpoint items");
            with the default serializer, the checkpoint without its values is a
            compact record (layout 7, "Compact checkpoint records"); and a new value
            of a few chunks is named by a chunk list stored right after them in their
            pack, with its lead (layout 8, "Chunk lists with a lead"); and a
            checkpoint item leaves out the ids its keys spell and, beside a body it
            holds, the metadata index (layout 9, "Ids in the keys"). False writes
            what 0.5.x reads, e.g. while a rolling upgrade still runs 0.5.x to 0.8.x
            somewhere; both are read either way. ``chunk_items=False`` (what 0.4.x
            reads) turns it off too.
    """

    inline_threshold: int
    index_inline_limit: int
    max_concurrency: int
    cache_bytes: int
    cache_ttl: float
    touch_on_read: bool
    cross_region: CrossRegion | None
    clock: Callable[[], float]
    encryption: Encryption | KeyRing | None
    chunk_items: bool
    group_writes: bool
    trim_items: bool


#: Other savers' names for our options (DynamoDBSaver's ``table_name``, boto3's
#: ``bucket_name``), which difflib alone would not map to ours.
OTHER_SPELLINGS = {"table_name": "table", "bucket_name": "bucket", "key_prefix": "prefix"}


def check_options(saver: type, options: Mapping[str, Any]) -> None:
    """Refuse keyword arguments ``saver`` does not take, naming the closest valid one."""
    unknown = [name for name in options if name not in SaverOptions.__annotations__]
    if not unknown:
        return
    valid = [
        name
        for name, param in inspect.signature(saver).parameters.items()
        if param.kind is not inspect.Parameter.VAR_KEYWORD
    ] + list(SaverOptions.__annotations__)
    name = unknown[0]
    import difflib  # only for this message: every process would pay for its import

    close = [OTHER_SPELLINGS[name]] if name in OTHER_SPELLINGS else []
    close = close or difflib.get_close_matches(name, valid, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise InvalidConfigError(
        f"{saver.__name__} got an unknown option {name!r}: {hint}"
        f"valid options are {', '.join(sorted(valid))}"
    )


def check_settings(
    *,
    bucket: object,
    table: object,
    compression_level: object,
    inline_threshold: object,
    index_inline_limit: object,
    max_concurrency: object,
    region_name: str | None,
    cross_region: CrossRegion | None,
) -> None:
    """Refuse a setting the saver cannot work with, saying what a valid one is."""
    if not isinstance(bucket, str) or not bucket:
        raise InvalidConfigError("bucket is required: pass S3Saver(bucket='my-bucket', ...)")
    if not isinstance(table, str) or not table:
        raise InvalidConfigError("table is required: pass S3Saver(table='my-table', ...)")
    if not isinstance(compression_level, int) or not -7 <= compression_level <= 22:
        raise InvalidConfigError(
            f"compression_level must be an int from -7 to 22, got {compression_level!r}"
        )
    if not isinstance(inline_threshold, int) or inline_threshold < 0:
        raise InvalidConfigError("inline_threshold must be a non-negative int (bytes)")
    if not isinstance(index_inline_limit, int) or not 0 <= index_inline_limit <= 64 * 1024:
        raise InvalidConfigError("index_inline_limit must be an int from 0 to 65536 (bytes)")
    if not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise InvalidConfigError("max_concurrency must be a positive int")
    if cross_region is not None and not region_name:
        raise InvalidConfigError(
            "cross_region needs the saver's own region: pass region_name='eu-west-1'"
        )


def thread_ns(config: RunnableConfig | None) -> tuple[str, str]:
    """The thread id and checkpoint namespace a config names."""
    if not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
        raise InvalidConfigError(
            "config must be a dict with a 'configurable' dict holding 'thread_id', "
            "e.g. {'configurable': {'thread_id': 'my-thread'}}"
        )
    conf = config["configurable"]
    if conf.get("thread_id") is None:
        raise InvalidConfigError(
            "config['configurable']['thread_id'] is required: pass "
            "{'configurable': {'thread_id': ...}}"
        )
    return thread_value(conf["thread_id"]), ns_value(conf.get("checkpoint_ns", ""))


def checkpoint_id_of(config: RunnableConfig) -> str | None:
    """The checkpoint id a config names, checked, or None."""
    cid = get_checkpoint_id(config)
    return None if cid is None else check_checkpoint_id(cid)


def thread_value(thread_id: object) -> str:
    """A thread id as the plain string the layout keys on."""
    if isinstance(thread_id, str):
        return str(thread_id)  # a plain str, also for guard.HeadRead
    if isinstance(thread_id, int | uuid.UUID) and not isinstance(thread_id, bool):
        return str(thread_id)
    raise InvalidConfigError(
        f"thread_id must be a string (or int/UUID), got {type(thread_id).__name__}"
    )


def ns_value(ns: object) -> str:
    """A checkpoint namespace, checked."""
    if not isinstance(ns, str):
        raise InvalidConfigError(f"checkpoint_ns must be a string, got {type(ns).__name__}")
    return ns
