"""What a saver holds between calls: its settings, its caches and its shared uploads.

``SaverCore`` is the base class of ``S3Saver`` and ``AsyncS3Saver``. It holds state
only; the flows in the other modules of :mod:`langgraph_s3.core` take it as their
first argument and decide what to read and write.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_s3.cache import LRU
from langgraph_s3.core.config import (
    DEFAULT_INLINE_THRESHOLD,
    INDEX_INLINE_LIMIT,
    check_settings,
)
from langgraph_s3.core.entries import Blobs, Entry, InIndex, Listed, ListIdentity, Span
from langgraph_s3.core.sealed import Encryption, KeyRing, as_encryption
from langgraph_s3.core.uploads import SharedUploads
from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.keys import Layout, normalize_prefix
from langgraph_s3.regions import CrossRegion


class Caches:
    """The saver's caches. Each is bounded; those that vouch for an object's existence
    are trusted for ``ttl`` seconds only (garbage collection's grace period must be
    longer; see docs/retention.md)."""

    def __init__(self, cache_bytes: int, ttl: float, prefix: str) -> None:
        # Every entry is grouped by its thread (the thread id, or the thread's folder
        # for object keys), so forget_thread costs what the thread has cached.
        def folder(key: str) -> str:
            return key[: key.find("/", len(prefix)) + 1] or key

        def first(key: tuple[Hashable, ...]) -> Hashable:
            return key[0]

        #: (thread, ns, channel, version) -> value entry; lets put() skip serializing
        #: channels whose version did not move.
        self.entries: LRU[tuple[str, str, str, str], Entry] = LRU(
            50_000, cache_bytes, ttl=ttl, group=first
        )
        #: object key -> content: blob payloads and checkpoint bodies. Both are
        #: immutable (named by their digest), so never stale.
        self.objects: LRU[str, bytes] = LRU(100_000, cache_bytes, group=folder)
        #: chunk keys known to exist, so put() does not upload them again: True for
        #: a loose blob, its Span for a chunk in a pack, IN_INDEX for a chunk item
        #: (where an entry finds it: a chunk is referenced only where it is stored).
        self.known_blobs: LRU[str, Span | InIndex | bool] = LRU(200_000, ttl=ttl, group=folder)
        #: chunk list identity (``lists.identity``: thread folder, digest) -> the list,
        #: stored with every chunk it names: a call that builds the same list again
        #: references it.
        self.known_lists: LRU[ListIdentity, Listed] = LRU(10_000, cache_bytes, ttl=ttl, group=first)
        #: (thread, ns, channel) -> the blob entry of the channel's latest version this
        #: saver wrote or read: the next version usually extends it (a message list),
        #: so its blobs are re-used after verification.
        self.latest: LRU[tuple[str, str, str], Blobs] = LRU(
            50_000, cache_bytes, ttl=ttl, group=first
        )
        #: (thread, ns) -> the channels the latest checkpoint this saver wrote or
        #: continues from holds as blobs: a list written to one of them is appended to
        #: a stored value (``values.appended_piece``); a delta channel's is not.
        self.appends: LRU[tuple[str, str], frozenset[str]] = LRU(50_000, ttl=ttl, group=first)
        #: thread -> its incarnation (``schema.INCARNATION``) when this saver last read
        #: or wrote it: what the other caches hold of the thread belongs to it. Not
        #: aged, and kept when they are dropped for another reason (a new key version):
        #: only a thread started again (``incarnations.restarted``) has another.
        self.incarnations: LRU[str, bytes] = LRU(200_000)
        #: (thread, serializer type, SHA-256 of the serialized value) -> the entry it
        #: was stored as: a task's write and the next checkpoint hold the same value.
        self.values: LRU[tuple[str, str, bytes], Entry] = LRU(
            10_000, cache_bytes, ttl=ttl, group=first
        )

    def hits(self) -> int:
        """Lookups answered from memory so far, over every cache (for tracing)."""
        caches = (
            self.entries,
            self.objects,
            self.known_blobs,
            self.latest,
            self.appends,
            self.values,
            self.known_lists,
        )
        return sum(c.hits for c in caches)

    def forget_thread(self, thread_id: str, folder: str) -> None:
        """Drop everything about a thread (whose objects live under ``folder``). Costs
        what the thread has cached, nothing for a thread this saver never touched."""
        for by_folder in (self.objects, self.known_blobs, self.known_lists):
            by_folder.discard_group(folder)
        for by_thread in (self.entries, self.latest, self.appends, self.values):
            by_thread.discard_group(thread_id)


def strict_serde(serde: SerializerProtocol) -> SerializerProtocol:
    """``serde``, unless it (or the serializer it wraps) falls back to pickle."""
    if getattr(serde, "pickle_fallback", False) or getattr(
        getattr(serde, "serde", None), "pickle_fallback", False
    ):
        raise InvalidConfigError(
            "serializers with pickle_fallback=True are refused: loading pickled data "
            "executes code. Pass a serde without pickle fallback"
        )
    return serde


class SaverCore(BaseCheckpointSaver[str]):
    """Everything ``S3Saver`` and ``AsyncS3Saver`` share: settings, caches, uploads."""

    def __init__(
        self,
        *,
        bucket: str,
        table: str,
        prefix: str = "",
        serde: SerializerProtocol | None = None,
        compression_level: int = 3,
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        index_inline_limit: int = INDEX_INLINE_LIMIT,
        max_concurrency: int = 64,
        cache_bytes: int = 64 * 1024 * 1024,
        cache_ttl: float = 1200.0,
        touch_on_read: bool = False,
        region_name: str | None = None,
        cross_region: CrossRegion | None = None,
        clock: Callable[[], float] = time.time,
        encryption: Encryption | KeyRing | None = None,
        chunk_items: bool = True,
        group_writes: bool = True,
        trim_items: bool = True,
    ) -> None:
        check_settings(
            bucket=bucket,
            table=table,
            compression_level=compression_level,
            inline_threshold=inline_threshold,
            index_inline_limit=index_inline_limit,
            max_concurrency=max_concurrency,
            region_name=region_name,
            cross_region=cross_region,
        )
        super().__init__(serde=strict_serde(serde or JsonPlusSerializer()))
        self.bucket = bucket
        self.table = table
        self.layout = Layout(normalize_prefix(prefix))
        self.compression_level = compression_level
        self.inline_threshold = inline_threshold
        self.index_inline_limit = index_inline_limit
        self.max_concurrency = max_concurrency
        self.clock = clock
        self.touch_on_read = touch_on_read
        self._choose_layouts(chunk_items, group_writes, trim_items)
        self.region_name = region_name
        self.cross_region = cross_region
        #: Client-side encryption (``core/sealed.py``); None: nothing is sealed.
        self.encryption = as_encryption(encryption)
        if self.encryption is not None:
            self.encryption.bind(bucket, table)
        self.caches = Caches(cache_bytes, cache_ttl, self.layout.prefix)
        #: LangGraph hands a new value to the saver twice at once (the task's pending
        #: write and the next checkpoint): the second upload waits for the first.
        self.uploads = SharedUploads()

    def _choose_layouts(self, chunk_items: bool, group_writes: bool, trim_items: bool) -> None:
        """Which of the layouts since 5 this saver writes (each one off: what an older
        release reads; everything is read either way)."""
        #: Store small new chunks as chunk items (``core/chunkitems.py``), not blobs.
        self.chunk_items = chunk_items
        # ``chunk_items=False`` promises data 0.4.x reads: groups and trimmed items,
        # which no release before 0.6.0 reads, are off with it.
        #: Store a call's small writes as one record (``core/groups.py``).
        self.group_writes = group_writes and chunk_items
        #: Write trimmed checkpoint items (layout 6, ``values.body_attrs``).
        self.trim_items = trim_items and chunk_items
        #: Write the checkpoint without values as a compact record (layout 7,
        #: ``core/records.py``), where the serializer would make plain msgpack of it.
        self.compact_records = self.trim_items and type(self.serde) is JsonPlusSerializer
        #: Store a new value of ``lists.SHORT_MIN`` chunks or more through a chunk list
        #: after its chunks, and name every packed list with its lead (layout 8).
        self.list_leads = self.trim_items
        #: Leave out of checkpoint items the ids their keys spell, and the metadata
        #: index beside a body the item holds (layout 9, ``schema.id_attrs``).
        self.ids_in_keys = self.trim_items

    @property
    def is_replica(self) -> bool:
        """True when this saver runs outside the home region of a cross-region setup."""
        return self.cross_region is not None and self.region_name != self.cross_region.home_region

    def now_ms(self) -> int:
        """The saver clock in milliseconds, as the index records times."""
        return int(self.clock() * 1000)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as ``InMemorySaver`` makes them: a counter plus a random tail.

        The random tail keeps two forks that bump the same channel from the same
        version apart, so a version always names one value (which lets the entry
        cache key on it). Unlike ``InMemorySaver``'s ``random.random()`` text, whose
        length varies, the tail is 16 hex digits (64 random bits): every version is
        49 characters, so what a step stores, and the write units it is billed, do
        not change from run to run. Versions are compared as strings, by the counter
        first; a tail only orders two forks of one counter, which is arbitrary in
        ``InMemorySaver`` too, so old and new tails mix in one thread.

        A thread migrated from a saver with integer versions (``DynamoDBSaver``, any
        saver on the base class's default) keeps counting in integers, as that saver
        would: LangGraph compares a channel's new version with its old one and cannot
        compare a string with an integer. Integer versions are never cache keys
        (``values.cache_entry``).
        """
        # Typed str (BaseCheckpointSaver[str]), but LangGraph passes what is stored.
        if isinstance(current, int):
            return current + 1
        current_v = 0 if current is None else int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.getrandbits(64):016x}"
