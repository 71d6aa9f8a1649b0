"""Garbage collection and idle-thread retention: run with a saver, or in Lambda.

The collection itself is a core flow, :func:`langgraph_s3.core.collect.collect_flow`
(what it keeps, what it deletes and when: its docstring and ``docs/retention.md``).
This module runs it with a sync or async saver (:func:`collect`, :func:`acollect`) and
holds the scheduled Lambda entry point (:func:`lambda_handler`) and the duration
syntax the command line and Lambda share (:func:`parse_duration`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from langgraph_s3.core.collect import DEFAULT_GRACE, STATE_KEY, Progress, collect_flow
from langgraph_s3.core.gcreport import GcReport
from langgraph_s3.errors import DamageFoundError, InvalidConfigError
from langgraph_s3.tracing import Call

if TYPE_CHECKING:
    from langgraph_s3.aio import AsyncS3Saver
    from langgraph_s3.saver import S3Saver
    from langgraph_s3.sealing.kms import KmsKeyRing


def collect(saver: S3Saver, **kwargs: Any) -> GcReport:
    """Run a collection with a sync saver. Keyword arguments as ``collect_flow``."""
    return saver.run(collect_flow(saver, **kwargs), Call("collect"))


async def acollect(saver: AsyncS3Saver, **kwargs: Any) -> GcReport:
    """Run a collection with an async saver. Keyword arguments as ``collect_flow``."""
    return await saver.run(collect_flow(saver, **kwargs), Call("collect"))


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``6h``, ``7d`` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise InvalidConfigError(f"not a duration: {text!r} (use e.g. 90s, 15m, 6h, 7d)")
    factor = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return float(match.group(1)) * factor


def lambda_handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Scheduled collection in Lambda; configured by environment variables.

    ``CHECKPOINT_CONNECTION_STRING`` (``s3://bucket/prefix?table=t``, the storage
    stack's output) or ``CHECKPOINT_BUCKET``, ``CHECKPOINT_TABLE`` and
    ``CHECKPOINT_PREFIX``; ``CHECKPOINT_KMS_KEY`` (the ARN of the KMS key of
    client-side encryption: the run opens sealed threads with
    ``encryption=KmsKeyRing(ARN)``; unset or empty: no encryption), or ``kms_key=`` in
    the connection string; ``CHECKPOINT_PREVIOUS_KMS_KEY`` (during a rotation, the key
    it replaces: ``KmsKeyRing(ARN, previous=[PREVIOUS])``; unset or empty: none);
    ``GC_GRACE`` (default ``1h``), ``GC_IDLE_TTL`` (unset: no
    expiry), ``GC_EXPIRE_INTERRUPTED`` (``true`` to expire threads waiting on an
    interrupt), ``GC_DRY_RUN`` (``true``).

    Raises:
        InvalidConfigError: ``CHECKPOINT_KMS_KEY`` or ``CHECKPOINT_PREVIOUS_KMS_KEY`` is
            an alias or not a key ARN, names a key beside a connection string that
            names one, or the previous key is set without ``CHECKPOINT_KMS_KEY``.
        DamageFoundError: the run found damaged checkpoints, or threads it could not
            open (after printing its summary), so the function's Errors metric and
            its alarm fire.
    """
    import os

    from langgraph_s3.connection import parse_conn_string
    from langgraph_s3.saver import S3Saver

    url = os.environ.get("CHECKPOINT_CONNECTION_STRING")
    where: dict[str, Any] = (
        parse_conn_string(url)
        if url
        else {
            "bucket": os.environ["CHECKPOINT_BUCKET"],
            "table": os.environ["CHECKPOINT_TABLE"],
            "prefix": os.environ.get("CHECKPOINT_PREFIX", ""),
        }
    )
    kms_key = os.environ.get("CHECKPOINT_KMS_KEY", "").strip()
    previous = os.environ.get("CHECKPOINT_PREVIOUS_KMS_KEY", "").strip()
    if kms_key or previous:
        where["encryption"] = _key_ring(kms_key, previous, where)
    ttl = os.environ.get("GC_IDLE_TTL")
    with S3Saver(**where) as saver:
        report = collect(
            saver,
            grace=parse_duration(os.environ.get("GC_GRACE", "1h")),
            idle_ttl=parse_duration(ttl) if ttl else None,
            keep_interrupted=os.environ.get("GC_EXPIRE_INTERRUPTED", "").lower() != "true",
            dry_run=os.environ.get("GC_DRY_RUN", "").lower() == "true",
        )
    print(report.summary())
    _fail_on_damage(report)
    return asdict(report)


def _key_ring(kms_key: str, previous: str, where: Mapping[str, Any]) -> KmsKeyRing:
    """``CHECKPOINT_KMS_KEY`` (and ``CHECKPOINT_PREVIOUS_KMS_KEY``) as the run's key
    ring, checked before any request."""
    from langgraph_s3.sealing.kms import KmsKeyRing, check_kms_key

    if "encryption" in where:
        # Two places naming a key would let them disagree; which one wins is a guess.
        raise InvalidConfigError(
            "CHECKPOINT_KMS_KEY (or CHECKPOINT_PREVIOUS_KMS_KEY) and kms_key= in "
            "CHECKPOINT_CONNECTION_STRING both name KMS keys: name the key once, in one place "
            "(infra/gc.yaml sets the variables from its ClientSideKeyArn and "
            "PreviousClientSideKeyArn parameters)"
        )
    if not kms_key:
        raise InvalidConfigError(
            "CHECKPOINT_PREVIOUS_KMS_KEY is set without CHECKPOINT_KMS_KEY: set "
            "CHECKPOINT_KMS_KEY to the key that wraps data keys now (infra/gc.yaml: "
            "ClientSideKeyArn beside PreviousClientSideKeyArn)"
        )
    return KmsKeyRing(
        check_kms_key(kms_key, what="CHECKPOINT_KMS_KEY"),
        previous=[check_kms_key(previous, what="CHECKPOINT_PREVIOUS_KMS_KEY")] if previous else [],
    )


def _fail_on_damage(report: GcReport) -> None:
    """Raise after a run that spared threads it could not read, so the alarm fires."""
    if report.errors:
        raise DamageFoundError(
            f"garbage collection found {len(report.errors)} damaged checkpoint(s) (first: "
            f"{report.errors[0]}); their threads' objects were spared. Restore the named "
            "objects from a backup or delete those threads (saver.delete_thread); the "
            "next run collects what they leave",
            errors=report.errors,
        )
    if report.threads_protected:
        first = report.threads_protected[0]
        raise DamageFoundError(
            f"garbage collection could not open {len(report.threads_protected)} thread(s) "
            f"(first: {first['thread_id']!r}: {first['reason']}); their objects were "
            "spared. For encrypted storage set CHECKPOINT_KMS_KEY to the key's ARN "
            "(infra/gc.yaml: ClientSideKeyArn, the storage stack's) and grant the "
            "function kms:Decrypt on that key; during a rotation to another key, also "
            "CHECKPOINT_PREVIOUS_KMS_KEY to the key it replaces (PreviousClientSideKeyArn)",
            errors=[f"{p['thread_id']}: {p['reason']}" for p in report.threads_protected],
        )


__all__ = [
    "DEFAULT_GRACE",
    "STATE_KEY",
    "GcReport",
    "Progress",
    "acollect",
    "collect",
    "collect_flow",
    "lambda_handler",
    "parse_duration",
]
