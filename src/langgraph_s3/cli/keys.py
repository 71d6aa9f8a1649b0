"""What the command line says about client-side encryption (issue 24): which data
keys a thread has, what deleting them shreds, and what to pass when a command meets
sealed data without ``--kms-key``.

A thread's data key items sit in its index partition (sort keys ``k#...``) and say
which KMS key wrapped them (``kek``); they are read without unwrapping anything, so
the command line can tell an encrypted thread from a damaged one, name the key to
pass, and report a shred without any key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langgraph_s3.core import schema
from langgraph_s3.errors import DataKeyError, InvalidConfigError, ObjectError


class KeyNeededError(InvalidConfigError):
    """A command met a thread's sealed data and was given no key ring: pass the KMS
    key that wrapped the thread's data key with ``--kms-key`` (the message names it)."""


class PlaintextArchiveError(InvalidConfigError):
    """``export`` of an encrypted thread without ``--plaintext``: the archive would hold
    its values in the clear, out of reach of shredding. Pass ``--plaintext`` to accept
    that."""


@dataclass(frozen=True)
class ThreadKeys:
    """A thread's data key items as the index holds them: versions and wrapping keys."""

    thread_id: str
    versions: tuple[int, ...]
    keks: tuple[str, ...]

    @classmethod
    def of(cls, thread_id: str, items: Sequence[Mapping[str, Any]]) -> ThreadKeys:
        """From a thread's index items (its partition, read without any key)."""
        found = sorted(
            (int(i.get(schema.KEY_VERSION, {}).get("N", 0)), str(i.get(schema.KEK, {}).get("S")))
            for i in items
            if schema.is_key_item(i)
        )
        return cls(thread_id, tuple(v for v, _ in found), tuple(dict.fromkeys(k for _, k in found)))

    def __bool__(self) -> bool:
        return bool(self.versions)

    def named(self) -> str:
        """``data key version 1 (wrapped under KMS key ARN)``, for messages."""
        versions = ", ".join(str(v) for v in self.versions)
        noun = "version" if len(self.versions) == 1 else "versions"
        return f"data key {noun} {versions} (wrapped under {', '.join(self.keks)})"


def thread_keys(s: Any, thread_id: str) -> ThreadKeys:
    """The data key items of a thread: one ``Query`` of its ``k#`` sort keys."""
    from langgraph_s3.core.index import Query
    from langgraph_s3.core.paging import read_all

    items = s.run(read_all(Query(s.table, s.layout.pk(thread_id), prefix=schema.KEY_SK_PREFIX)))
    return ThreadKeys.of(thread_id, items)


def key_needed(keys: ThreadKeys) -> KeyNeededError:
    """The error for an encrypted thread read without a key ring."""
    *older, newest = keys.keks or ("ARN",)
    also = f" and --previous-kms-key {' '.join(older)}" if older else ""
    return KeyNeededError(
        f"thread {keys.thread_id!r} is encrypted (client-side encryption): pass "
        f"--kms-key {newest}{also} (the KMS key its data key items name; or set "
        "LANGGRAPH_S3_KMS_KEY)"
    )


def refuse_sealed(s: Any, thread_id: str, items: Sequence[Mapping[str, Any]]) -> None:
    """Raise :class:`KeyNeededError` before a command that opens a thread's data starts,
    if the thread is encrypted and the saver has no key ring."""
    keys = ThreadKeys.of(thread_id, items)
    if s.encryption is None and keys:
        raise key_needed(keys)


@contextmanager
def opening(s: Any, *thread_ids: str) -> Iterator[None]:
    """Turn a failure to open a thread's data, met by a saver without encryption, into
    :class:`KeyNeededError` when the thread has data key items (it is sealed, not
    damaged); any other failure, or one with encryption, goes on as it is."""
    try:
        yield
    except (ObjectError, DataKeyError) as exc:
        if s.encryption is None:
            for thread_id in thread_ids:
                keys = thread_keys(s, thread_id)
                if keys:
                    raise key_needed(keys) from exc
        raise


def shred_lines(
    shredded: Sequence[ThreadKeys], *, dry_run: bool, key_ttl: float | None
) -> list[str]:
    """What deleting threads' data key items means: a line per thread that had some,
    then what it means, once (nothing for threads without encryption)."""
    shredded = [k for k in shredded if k]
    if not shredded:
        return []
    warm = f"{key_ttl:g} s" if key_ttl is not None else "their key_ttl (300 s by default)"
    verb, deleted, can, keep = (
        ("would shred", "would delete", "could then no longer", "would keep")
        if dry_run
        else ("shredded", "deleted", "can no longer", "keep")
    )
    return [
        *(
            f"{verb} thread {k.thread_id!r}: {deleted} its {k.named()} with its index items."
            for k in shredded
        ),
        f"Every copy of their sealed data (bucket replicas, old object versions, backups "
        f"of objects) {can} be opened by anyone without the key; savers that loaded a key "
        f"{keep} it in memory for up to {warm}. Backups of the table (point-in-time "
        "recovery, exports) hold the wrapped keys as long as the KMS key exists and may "
        "be used (docs/security.md, Shredding).",
    ]
