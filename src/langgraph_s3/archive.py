"""Threads as portable archives, and copies between LangGraph savers.

An archive is JSON Lines: a header ``{"format": "langgraph-s3-archive", "version": 1,
"thread_id": ...}``, then one record per checkpoint, parents before children:
``{"ns", "id", "parent", "checkpoint", "metadata", "writes"}``. Values are the
saver's serializer output (``serde.dumps_typed``) as ``[type, base64]``, so they
come back exactly; pickle is refused both ways. Only the public
``BaseCheckpointSaver`` API is used, so any LangGraph saver can be the source
(``export_thread``, ``copy_threads``) or the target (``import_thread``).
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_s3.errors import InvalidConfigError, SerializationError, ThreadExistsError

FORMAT = "langgraph-s3-archive"
VERSION = 1

Progress = Callable[[int], None]


def _encode(serde: Any, value: Any, what: str) -> list[str]:
    type_, data = serde.dumps_typed(value)
    if type_ == "pickle":
        raise SerializationError(f"{what} would be archived as pickle, which is refused")
    return [type_, base64.b64encode(bytes(data)).decode()]


def _decode(serde: Any, encoded: list[str], what: str) -> Any:
    if encoded[0] == "pickle":
        raise SerializationError(f"{what} in the archive is pickled; it is never loaded")
    return serde.loads_typed((encoded[0], base64.b64decode(encoded[1])))


@dataclass
class ThreadArchive:
    """What an export wrote or an import restored."""

    thread_id: str
    checkpoints: int
    writes: int


def export_thread(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    out: IO[str],
    *,
    progress: Progress | None = None,
) -> ThreadArchive:
    """Write every checkpoint of ``thread_id`` (all namespaces, pending writes included)."""
    tuples = sorted(
        saver.list({"configurable": {"thread_id": thread_id}}),
        key=lambda t: (
            t.config["configurable"]["checkpoint_id"],
            t.config["configurable"].get("checkpoint_ns", ""),
        ),
    )
    out.write(json.dumps({"format": FORMAT, "version": VERSION, "thread_id": thread_id}) + "\n")
    writes = 0
    for done, tup in enumerate(tuples, 1):
        conf = tup.config["configurable"]
        record = {
            "ns": conf.get("checkpoint_ns", ""),
            "id": conf["checkpoint_id"],
            "parent": tup.parent_config["configurable"]["checkpoint_id"]
            if tup.parent_config
            else None,
            "checkpoint": _encode(saver.serde, tup.checkpoint, "checkpoint"),
            "metadata": _encode(saver.serde, dict(tup.metadata), "metadata"),
            "writes": [
                [task, channel, _encode(saver.serde, value, f"write to {channel!r}")]
                for task, channel, value in tup.pending_writes or []
            ],
        }
        writes += len(record["writes"])
        out.write(json.dumps(record) + "\n")
        if progress:
            progress(done)
    return ThreadArchive(thread_id, len(tuples), writes)


def _header(line: str) -> dict[str, Any]:
    try:
        header = json.loads(line)
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InvalidConfigError(f"not a {FORMAT} file: export one with `langgraph-s3 export`")
    if header.get("version") != VERSION:
        raise InvalidConfigError(
            f"archive version {header.get('version')!r} is not supported (this release reads "
            f"version {VERSION}); import it with the release that exported it"
        )
    return header


def import_thread(
    saver: BaseCheckpointSaver[Any],
    inp: IO[str],
    *,
    thread_id: str | None = None,
    progress: Progress | None = None,
) -> ThreadArchive:
    """Restore an archive into ``saver`` (as ``thread_id``, default: the archived id).

    Checkpoint ids, parents, metadata, values and pending writes (in their order) are
    kept. Refuses a thread that already has checkpoints.
    """
    header = _header(inp.readline())
    target = thread_id or header["thread_id"]
    if saver.get_tuple(
        {"configurable": {"thread_id": target, "checkpoint_ns": ""}}
    ) is not None or any(
        True for _ in saver.list({"configurable": {"thread_id": target}}, limit=1)
    ):
        raise ThreadExistsError(
            f"thread {target!r} already has checkpoints; import under another --thread-id "
            "or delete it first"
        )
    count = writes = 0
    for line in inp:
        if line.strip():
            writes += _restore(saver, target, json.loads(line))
            count += 1
            if progress:
                progress(count)
    return ThreadArchive(target, count, writes)


def _restore(saver: BaseCheckpointSaver[Any], thread_id: str, record: dict[str, Any]) -> int:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": record["ns"]}
    if record["parent"]:
        conf["checkpoint_id"] = record["parent"]
    checkpoint = _decode(saver.serde, record["checkpoint"], "checkpoint")
    metadata = _decode(saver.serde, record["metadata"], "metadata")
    saver.put({"configurable": conf}, checkpoint, metadata, dict(checkpoint["channel_versions"]))
    # Tasks in their archived order: a task path made of that order makes every saver
    # sort the pending writes back into it (writes_sort_key sorts by path first).
    tasks: dict[str, list[tuple[str, Any]]] = {}
    for task, channel, value in record["writes"]:
        tasks.setdefault(task, []).append((channel, _decode(saver.serde, value, "write")))
    written = {**conf, "checkpoint_id": record["id"]}
    for rank, (task, writes) in enumerate(tasks.items()):
        saver.put_writes({"configurable": written}, writes, task, f"{rank:08d}")
    return sum(len(w) for w in tasks.values())


def thread_ids(saver: BaseCheckpointSaver[Any]) -> list[str]:
    """Every thread id of a saver, through ``list(None)`` (reads every checkpoint)."""
    seen: dict[str, None] = {}
    for tup in saver.list(None):
        seen.setdefault(str(tup.config["configurable"]["thread_id"]), None)
    return list(seen)


def copy_threads(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    threads: list[str] | None = None,
    *,
    progress: Progress | None = None,
) -> list[ThreadArchive]:
    """Copy threads (default: all) from any LangGraph saver into ``target``."""
    copied = []
    for done, thread in enumerate(threads or thread_ids(source), 1):
        buffer = io.StringIO()
        export_thread(source, thread, buffer)
        buffer.seek(0)
        copied.append(import_thread(target, buffer))
        if progress:
            progress(done)
    return copied
