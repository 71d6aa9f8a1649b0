"""Chunk items (layout 5): small value chunks stored in the thread's index partition.

Theory of operation. A growing message list uploads one or two small chunks a step
(its new "pieces", typically under 1 KB). As loose S3 blobs each costs a PUT, billed
like ``PUT_WRITE_UNITS`` (8) DynamoDB write units ($5 per million PUTs, $0.625 per
million WRU), and a cold read a GET each. As items of the thread's partition
(``schema.chunk_item``) they cost one write unit per started KB, and a cold read
brings them all with one BatchGetItem beside the S3 GETs.

Everything that decides and moves chunk items lives here:

- :func:`pays`: the placement rule. A call's chunks that would be loose blobs (fewer
  than ``packs.PACK_MIN`` new chunks and no chunk list; packs and chunk lists stay in
  S3) become chunk items when their write units total at most ``PUT_WRITE_UNITS``
  times the PUTs they replace.
- :func:`write_requests` / :func:`finish_writes`: one BatchWriteItem for a call's items,
  sent in the round trip of its S3 PUTs (``objects.upload``), then what DynamoDB
  deferred, retried before anything names them.
- :func:`read`: chunk items by chunk key, 100 keys per BatchGetItem, strongly
  consistent, unprocessed keys retried, and in a replica region the same wait for
  replication a blob read has.

A chunk item is keyed by its chunk's name, the digest (keyed with encryption) that
names the loose blob ``{thread}/b/{hex}``, and holds that blob's frame byte for byte,
so a chunk is verified, cached and deduplicated by its chunk key wherever it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph_s3.core import replication, schema
from langgraph_s3.core.index import BatchGet, BatchWrite, Key, key, put_requests
from langgraph_s3.core.paging import batch_write, unprocessed_backoff
from langgraph_s3.errors import NotYetReplicatedError
from langgraph_s3.operations import Flow, Sleep, perform, perform_all

if TYPE_CHECKING:
    from langgraph_s3.core.state import SaverCore

#: What one S3 PUT costs in DynamoDB write units: $5 per million PUTs over $0.625 per
#: million write units (on-demand, us-east-1).
PUT_WRITE_UNITS = 8
#: One write unit writes an item of up to this many bytes.
WRITE_UNIT_BYTES = 1024
#: An ``at`` in ms has 13 digits until the year 2286: (13 + 1) // 2 + 1 bytes.
_AT_BYTES = 8
#: BatchGetItem reads at most this many keys; BatchWriteItem writes 25.
BATCH_GET = 100
_BATCH_WRITE = 25


def item_key(chunk_key: str) -> Key:
    """The primary key of the chunk item of the chunk whose blob key is ``chunk_key``
    (``{thread folder}b/{hex}``; the thread's partition key is its folder without the
    final ``/``)."""
    folder, name = chunk_key.rsplit("/b/", 1)
    return key(folder, schema.CHUNK_SK_PREFIX + name)


def item_size(chunk_key: str, frame: bytes) -> int:
    """The size DynamoDB bills for the chunk item holding ``frame``: attribute names
    and values (strings in UTF-8, binary as is, the ``at`` number as stored)."""
    k = item_key(chunk_key)
    pk, sk = k[schema.PK]["S"], k[schema.SK]["S"]
    return (
        len(schema.PK) + len(pk.encode())
        + len(schema.SK) + len(sk.encode())
        + len(schema.VALUE) + len(frame)
        + len(schema.AT) + _AT_BYTES
    )  # fmt: skip


def write_units(size: int) -> int:
    """Write units of writing an item of ``size`` bytes: one per started KB."""
    return max(1, -(-size // WRITE_UNIT_BYTES))


def pays(frames: Mapping[str, bytes]) -> bool:
    """Whether the chunks ``frames`` (chunk key -> blob frame), which would otherwise
    be loose blobs, are stored as chunk items: their write units total at most
    ``PUT_WRITE_UNITS`` per PUT they replace (so one item of up to ~8 KB, two of up
    to ~16 KB together)."""
    units = sum(write_units(item_size(k, f)) for k, f in frames.items())
    return bool(frames) and units <= PUT_WRITE_UNITS * len(frames)


def write_requests(core: SaverCore, frames: Mapping[str, bytes]) -> list[BatchWrite]:
    """The BatchWriteItem requests storing ``frames`` (chunk key -> blob frame) as
    chunk items: unconditional puts (content-addressed, a rewrite holds the same
    bytes and refreshes ``at``, as a re-upload refreshes a blob's age)."""
    at = core.now_ms()
    items = []
    for chunk_key, frame in frames.items():
        k = item_key(chunk_key)
        items.append({**k, schema.VALUE: schema.b(frame), schema.AT: schema.n(at)})
    requests = put_requests(items)
    return [
        BatchWrite(core.table, tuple(requests[i : i + _BATCH_WRITE]))
        for i in range(0, len(requests), _BATCH_WRITE)
    ]


def finish_writes(core: SaverCore, deferred: Sequence[Mapping[str, Any]]) -> Flow[None]:
    """Write again what the BatchWriteItem requests deferred, with backoff, until
    stored: nothing may name a chunk item before it is."""
    if deferred:
        yield from perform(Sleep(0.05))  # DynamoDB deferred them: back off first
        yield from batch_write(core, deferred)


def read(core: SaverCore, chunk_keys: Sequence[str]) -> Flow[dict[str, bytes | None]]:
    """The frames of the chunk items of ``chunk_keys``, by chunk key (None: no item).

    One round trip for up to ``BATCH_GET`` keys per request; keys DynamoDB leaves
    unprocessed are asked again with backoff. In a replica region a missing item may
    not have replicated yet: it is read again as a missing blob is (``"wait"``/``"home"``
    policies wait up to ``max_wait``), then refused with ``NotYetReplicatedError``.
    """
    wanted = {chunk_key: item_key(chunk_key) for chunk_key in dict.fromkeys(chunk_keys)}
    if not wanted:
        return {}
    found = yield from _get(core, list(wanted.values()))
    out = {ck: found.get(_id(k)) for ck, k in wanted.items()}
    missing = [ck for ck, frame in out.items() if frame is None]
    if missing and core.is_replica:
        waited = 0.0
        assert core.cross_region is not None
        if core.cross_region.read_policy != "fail":  # "wait", and "home" (no home client)
            waited, arrived = yield from replication.wait_for(core, missing, _again(core, wanted))
            out.update(arrived)
        absent = [ck for ck in missing if out[ck] is None]
        if absent:
            assert core.cross_region is not None
            raise NotYetReplicatedError(
                f"{len(absent)} chunk item(s) named by the index are not in region "
                f"{core.region_name!r} yet (first {absent[0]!r}); read policy "
                f"{core.cross_region.read_policy!r} waited {waited:.1f}s. Retry later",
                key=absent[0],
                keys=absent,
                waited=waited,
            )
    return out


def _again(
    core: SaverCore, wanted: Mapping[str, Key]
) -> Callable[[list[str]], Flow[list[bytes | None]]]:
    """A read of chunk items by chunk key, one answer per key (None: still missing)."""

    def read(chunk_keys: list[str]) -> Flow[list[bytes | None]]:
        found = yield from _get(core, [wanted[ck] for ck in chunk_keys])
        return [found.get(_id(wanted[ck])) for ck in chunk_keys]

    return read


def _id(k: Mapping[str, Any]) -> tuple[str, str]:
    return str(k[schema.PK]["S"]), str(k[schema.SK]["S"])


def _get(core: SaverCore, keys: Sequence[Key]) -> Flow[dict[tuple[str, str], bytes]]:
    """Chunk item frames by primary key, every key asked until DynamoDB processed it."""
    found: dict[tuple[str, str], bytes] = {}
    pending = list(keys)
    attempt = 0
    while pending:
        batches = [pending[i : i + BATCH_GET] for i in range(0, len(pending), BATCH_GET)]
        got = yield from perform_all([BatchGet(core.table, tuple(b)) for b in batches])
        for answer in got:
            found.update({_id(item): item[schema.VALUE]["B"] for item in answer.items})
        pending = [k for answer in got for k in answer.unprocessed]
        if pending:
            attempt += 1
            yield from unprocessed_backoff(core, attempt, len(pending), "BatchGetItem")
    return found
