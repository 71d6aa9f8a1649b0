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

from langgraph_s3.errors import (
    InvalidConfigError,
    SerializationError,
    ThreadExistsError,
    ThreadNotFoundError,
    UndecodableValueError,
)

FORMAT = "langgraph-s3-archive"
VERSION = 1

Progress = Callable[[int], None]


def _encode(serde: Any, value: Any, what: str) -> list[str]:
    type_, data = serde.dumps_typed(value)
    if type_ == "pickle":
        raise SerializationError(f"{what} would be archived as pickle, which is refused")
    return [type_, base64.b64encode(bytes(data)).decode()]


def _decode(serde: Any, encoded: list[str], what: str) -> Any:
    type_, data = encoded[0], base64.b64decode(encoded[1], validate=True)
    if type_ == "pickle":
        raise SerializationError(f"{what} in the archive is pickled; it is never loaded")
    try:
        return serde.loads_typed((type_, data))
    except Exception as exc:
        raise UndecodableValueError(
            f"{what} in the archive (type {type_!r}) could not be decoded by the serializer "
            f"in use ({type(exc).__name__}: {exc}); if it was exported with another "
            "serializer (an EncryptedSerializer, another key), pass that one as serde=",
            key=what,
        ) from exc


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
    """Write every checkpoint of ``thread_id`` (all namespaces, pending writes included).

    The header counts the checkpoints and writes, so an archive cut short is refused on
    import. Raises ``ThreadNotFoundError`` (writing nothing) when the thread has no
    checkpoints.
    """
    tuples = sorted(
        saver.list({"configurable": {"thread_id": thread_id}}),
        key=lambda t: (
            t.config["configurable"]["checkpoint_id"],
            t.config["configurable"].get("checkpoint_ns", ""),
        ),
    )
    if not tuples:
        raise ThreadNotFoundError(f"thread {thread_id!r} has no checkpoints")
    writes = sum(len(t.pending_writes or []) for t in tuples)
    header = {"format": FORMAT, "version": VERSION, "thread_id": thread_id,
              "checkpoints": len(tuples), "writes": writes}  # fmt: skip
    out.write(json.dumps(header) + "\n")
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
    if not isinstance(header.get("thread_id"), str):
        raise InvalidConfigError("the archive's header names no thread_id: export it again")
    return header


@dataclass
class Record:
    """One checkpoint of an archive, its values decoded."""

    ns: str
    id: str
    parent: str | None
    checkpoint: Any
    metadata: Any
    writes: list[tuple[str, str, Any]]


def _record(serde: Any, line: str, number: int) -> Record:
    """A checkpoint line, checked and decoded; InvalidConfigError names the line."""
    try:
        raw = json.loads(line)
        record = Record(
            ns=raw["ns"], id=raw["id"], parent=raw["parent"],
            checkpoint=_decode(serde, raw["checkpoint"], "checkpoint"),
            metadata=_decode(serde, raw["metadata"], "metadata"),
            writes=[(task, channel, _decode(serde, value, "write"))
                    for task, channel, value in raw["writes"]],
        )  # fmt: skip
        if not isinstance(record.checkpoint, dict) or "channel_versions" not in record.checkpoint:
            raise ValueError("the checkpoint has no channel_versions")
    except (SerializationError, UndecodableValueError):
        raise
    except Exception as exc:  # bad JSON, shape or base64: the line is damaged
        raise InvalidConfigError(
            f"archive line {number} is damaged or cut short ({type(exc).__name__}: {exc}); "
            "nothing was imported: export the thread again"
        ) from exc
    return record


def read_archive(serde: Any, inp: IO[str]) -> tuple[dict[str, Any], list[Record]]:
    """The header and every record of an archive, all checked and decoded: a damaged or
    truncated archive raises ``InvalidConfigError`` before anything is written."""
    header = _header(inp.readline())
    records = [_record(serde, line, n) for n, line in enumerate(inp, 2) if line.strip()]
    expected = header.get("checkpoints")
    if expected is not None and expected != len(records):
        raise InvalidConfigError(
            f"the archive is cut short: its header counts {expected} checkpoint(s), it holds "
            f"{len(records)}; nothing was imported: export the thread again"
        )
    return header, records


def import_thread(
    saver: BaseCheckpointSaver[Any],
    inp: IO[str],
    *,
    thread_id: str | None = None,
    progress: Progress | None = None,
) -> ThreadArchive:
    """Restore an archive into ``saver`` (as ``thread_id``, default: the archived id).

    The whole archive is read and decoded first, so a damaged one writes nothing.
    Checkpoint ids, parents, metadata, values and pending writes (in their order) are
    kept. Refuses a thread that already has checkpoints (``ThreadExistsError``).
    """
    header, records = read_archive(saver.serde, inp)
    target = thread_id or header["thread_id"]
    if has_checkpoints(saver, target):
        raise ThreadExistsError(
            f"thread {target!r} already has checkpoints; import under another --thread-id "
            "or delete it first"
        )
    writes = 0
    for count, record in enumerate(records, 1):
        writes += _restore(saver, target, record)
        if progress:
            progress(count)
    return ThreadArchive(target, len(records), writes)


def has_checkpoints(saver: BaseCheckpointSaver[Any], thread_id: str) -> bool:
    """Whether any namespace of ``thread_id`` has a checkpoint."""
    return any(True for _ in saver.list({"configurable": {"thread_id": thread_id}}, limit=1))


def _restore(saver: BaseCheckpointSaver[Any], thread_id: str, record: Record) -> int:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": record.ns}
    if record.parent:
        conf["checkpoint_id"] = record.parent
    checkpoint = record.checkpoint
    saver.put(
        {"configurable": conf}, checkpoint, record.metadata, dict(checkpoint["channel_versions"])
    )
    # Tasks in their archived order: a task path made of that order makes every saver
    # sort the pending writes back into it (writes_sort_key sorts by path first).
    tasks: dict[str, list[tuple[str, Any]]] = {}
    for task, channel, value in record.writes:
        tasks.setdefault(task, []).append((channel, value))
    written = {**conf, "checkpoint_id": record.id}
    for rank, (task, writes) in enumerate(tasks.items()):
        saver.put_writes({"configurable": written}, writes, task, f"{rank:08d}")
    return sum(len(w) for w in tasks.values())


def thread_ids(saver: BaseCheckpointSaver[Any]) -> list[str]:
    """Every thread id of a saver, through ``list(None)`` (reads every checkpoint)."""
    seen: dict[str, None] = {}
    for tup in saver.list(None):
        seen.setdefault(str(tup.config["configurable"]["thread_id"]), None)
    return list(seen)


@dataclass
class Migrated:
    """What ``migrate_thread`` did with one thread."""

    thread_id: str
    #: ``"migrated"``, ``"skipped"`` (already there with the same history) or
    #: ``"completed"`` (a partial copy of an interrupted run, redone).
    status: str
    checkpoints: int
    writes: int


def _shape(saver: BaseCheckpointSaver[Any], thread_id: str) -> dict[tuple[str, str], int]:
    """A thread's history as ``{(ns, checkpoint id): pending writes}``."""
    return {
        (t.config["configurable"].get("checkpoint_ns", ""), t.config["configurable"][
            "checkpoint_id"]): len(t.pending_writes or [])
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    }  # fmt: skip


def migrate_thread(
    source: BaseCheckpointSaver[Any], target: BaseCheckpointSaver[Any], thread_id: str
) -> Migrated:
    """Copy one thread into ``target``, so that running a migration again resumes it.

    A thread the target already holds with the same history is skipped; one holding
    a subset of it (a migration stopped mid-thread) is deleted there and copied again;
    one with any other history raises ``ThreadExistsError``. A thread the source does
    not have raises ``ThreadNotFoundError``.
    """
    buffer = io.StringIO()
    done = export_thread(source, thread_id, buffer)
    status = "migrated"
    existing = _shape(target, thread_id)
    if existing:
        wanted = _shape(source, thread_id)
        if existing == wanted:
            return Migrated(thread_id, "skipped", done.checkpoints, done.writes)
        if not existing.keys() <= wanted.keys() or any(
            n > wanted[key] for key, n in existing.items()
        ):
            raise ThreadExistsError(
                f"thread {thread_id!r} already exists in the target with another history "
                f"({len(existing)} checkpoint(s), {len(existing.keys() - wanted.keys())} not "
                "in the source): delete it there, or leave it out of --thread"
            )
        target.delete_thread(thread_id)
        status = "completed"
    buffer.seek(0)
    restored = import_thread(target, buffer)
    return Migrated(thread_id, status, restored.checkpoints, restored.writes)


def copy_threads(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    threads: list[str] | None = None,
    *,
    progress: Progress | None = None,
) -> list[Migrated]:
    """Copy threads (default: all) from any LangGraph saver into ``target``
    (``migrate_thread`` for each: a repeated copy resumes)."""
    copied = []
    for done, thread in enumerate(threads or thread_ids(source), 1):
        copied.append(migrate_thread(source, target, thread))
        if progress:
            progress(done)
    return copied
