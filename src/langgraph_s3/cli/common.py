"""What every command shares: where the storage is, exit codes, errors, output."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from langgraph_s3.errors import (
    DataKeyError,
    InvalidConfigError,
    KeyScopeError,
    KeyServiceError,
    MissingDependencyError,
    ObjectError,
    PlaintextObjectError,
    SerializationError,
    ThreadExistsError,
    ThreadNotFoundError,
    UndecodableValueError,
    UnknownKeyError,
)

#: Exit codes (README, "Command line"): 0 ok, 1 damage found / not ok,
#: 2 usage error, 3 storage or access error.
OK, NOT_OK, USAGE, STORAGE = 0, 1, 2, 3

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


#: Environment variable naming the serializer, like ``--serde``.
SERDE_ENV = "LANGGRAPH_S3_SERDE"
#: Environment variable naming the KMS key of client-side encryption, like ``--kms-key``.
KMS_KEY_ENV = "LANGGRAPH_S3_KMS_KEY"
#: S3's bucket naming rules (the common subset: no dots next to each other or dashes).
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass
class Where:
    """The storage a command works on, as the global options give it."""

    url: str | None = None
    bucket: str | None = None
    table: str | None = None
    prefix: str = ""
    profile: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    debug: bool = False
    serde: str | None = None
    #: ``--kms-key`` and ``--previous-kms-key``: client-side encryption (issue 24).
    kms_key: str | None = None
    previous_kms_keys: tuple[str, ...] = ()

    def saver_args(self) -> dict[str, Any]:
        """``S3Saver`` keyword arguments; a usage error when the storage is not named
        or an option is malformed."""
        from langgraph_s3.connection import check_endpoint_url, parse_conn_string

        if self.url:
            args = parse_conn_string(self.url)
        elif self.bucket and self.table:
            args = {"bucket": self.bucket, "table": self.table, "prefix": self.prefix}
        else:
            raise InvalidConfigError(
                "name the storage: --url s3://BUCKET/PREFIX?table=TABLE (or LANGGRAPH_S3_URL), "
                "or --bucket and --table"
            )
        check_bucket_name(args["bucket"])
        args["region_name"] = args.get("region_name") or self.region
        args["endpoint_url"] = args.get("endpoint_url") or self.endpoint_url
        if args["endpoint_url"]:
            check_endpoint_url(args["endpoint_url"])
        session = self.session()
        if session is not None:
            args["session"] = session
        serde = self.serializer()
        if serde is not None:
            args["serde"] = serde
        encryption = self.encryption(args.get("encryption"))
        if encryption is not None:
            args["encryption"] = encryption
        return args

    def encryption(self, from_url: Any = None) -> Any:
        """The ``KmsKeyRing`` ``--kms-key`` and ``--previous-kms-key`` make, else the
        one the URL's ``kms_key=`` made (None: no encryption). Both naming a key, they
        must name the same one."""
        from langgraph_s3.sealing.kms import KmsKeyRing, check_kms_key

        for option, value in (("--kms-key", self.kms_key), *(
            ("--previous-kms-key", key) for key in self.previous_kms_keys
        )):  # fmt: skip
            if value:  # named in command-line terms
                check_kms_key(value, what=option)
        if not self.kms_key:
            if self.previous_kms_keys:
                raise InvalidConfigError(
                    "--previous-kms-key needs --kms-key (or LANGGRAPH_S3_KMS_KEY): the key "
                    "that wraps new data keys"
                )
            return from_url
        ring = KmsKeyRing(self.kms_key, previous=self.previous_kms_keys)
        if from_url is not None and from_url.key_id != ring.key_id:
            raise InvalidConfigError(
                f"--kms-key {ring.key_id!r} and the URL's kms_key={from_url.key_id!r} differ: "
                "name the key once"
            )
        if from_url is not None:
            previous = dict.fromkeys([*ring.previous, *from_url.previous])
            ring = KmsKeyRing(ring.key_id, previous=previous)
        return ring

    def session(self) -> Any:
        """A boto3 session for ``--profile`` (None without one)."""
        if not self.profile:
            return None
        import boto3
        from botocore.exceptions import ProfileNotFound

        try:
            return boto3.Session(profile_name=self.profile)
        except ProfileNotFound as exc:
            raise InvalidConfigError(
                f"AWS profile {self.profile!r} is not configured: check --profile "
                "(`aws configure list-profiles` lists them)"
            ) from exc

    def serializer(self) -> Any:
        """The serializer ``--serde`` (or LANGGRAPH_S3_SERDE) names, or None."""
        return load_serde(self.serde) if self.serde else None


def check_bucket_name(bucket: str) -> None:
    """Refuse a name S3 would refuse, instead of reporting the bucket missing."""
    if not _BUCKET_NAME.match(bucket) or ".." in bucket:
        raise InvalidConfigError(
            f"{bucket!r} is not a valid S3 bucket name: use 3-63 lowercase letters, digits, "
            "dots and hyphens, starting and ending with a letter or digit"
        )


def load_serde(spec: str) -> Any:
    """The serializer ``MODULE:ATTR`` names: an object with ``dumps_typed`` and
    ``loads_typed``, or a callable (a class, a factory) returning one."""
    import importlib

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InvalidConfigError(
            f"--serde {spec!r} must look like MODULE:ATTR, e.g. myapp.serde:make_serde"
        )
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidConfigError(
            f"--serde {spec!r}: cannot import {module_name!r} ({exc})"
        ) from exc
    for part in attr.split("."):
        if not hasattr(found, part):
            raise InvalidConfigError(f"--serde {spec!r}: {module_name!r} has no {attr!r}")
        found = getattr(found, part)
    if not hasattr(found, "loads_typed") and callable(found):
        try:
            found = found()
        except Exception as exc:
            raise InvalidConfigError(
                f"--serde {spec!r}: calling it failed ({type(exc).__name__}: {exc})"
            ) from exc
    if not (hasattr(found, "dumps_typed") and hasattr(found, "loads_typed")):
        raise InvalidConfigError(
            f"--serde {spec!r} is not a serializer (it needs dumps_typed and loads_typed)"
        )
    return found


def where(ctx: typer.Context) -> Where:
    found = ctx.find_object(Where)
    assert found is not None, "the app callback stores Where"
    return found


@contextmanager
def saver(ctx: typer.Context, **options: Any) -> Iterator[Any]:
    """An ``S3Saver`` on the command's storage, closed afterwards; ``options`` win
    over the storage options (``rekey --reencrypt`` passes its own ``encryption=``)."""
    from langgraph_s3 import S3Saver

    with S3Saver(**{**where(ctx).saver_args(), **options}) as opened:
        yield opened


def require_thread(s: Any, thread: str) -> list[dict[str, Any]]:
    """The thread's index items; ``ThreadNotFoundError`` unless it has a committed
    checkpoint."""
    from langgraph_s3.core import schema
    from langgraph_s3.core.paging import thread_items

    items: list[dict[str, Any]] = s.run(thread_items(s, thread))
    if not any(schema.is_checkpoint_item(i) for i in items):
        raise ThreadNotFoundError(
            f"no thread {thread!r} in bucket {s.bucket!r}, table {s.table!r}"
            + (f", prefix {s.layout.prefix!r}" if s.layout.prefix else "")
            + ": check the id (`langgraph-s3 threads` lists them) and the storage options"
        )
    return items


def fail(code: int, message: str) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def exit_code(exc: BaseException) -> int:
    """The README's exit code for an error: NOT_OK for an unknown or existing thread and
    for damage (a data key that is missing or refused included), USAGE for what the
    command line got wrong, STORAGE for the rest (KMS not answering included)."""
    if isinstance(exc, ThreadNotFoundError | ThreadExistsError):
        return NOT_OK
    if isinstance(
        exc,
        InvalidConfigError | UndecodableValueError | MissingDependencyError | SerializationError,
    ):
        return USAGE
    if isinstance(exc, PlaintextObjectError | UnknownKeyError | KeyScopeError):
        return USAGE  # the key options do not fit the data: not damage
    if isinstance(exc, KeyServiceError):
        return STORAGE  # KMS throttled or unavailable: worth a retry
    if isinstance(exc, ObjectError | DataKeyError):
        return NOT_OK  # a missing or refused data key: the data cannot be opened
    return STORAGE


#: The library's advice is for Python callers; in a shell it reads as these options.
_SHELL_ADVICE = (
    ("to create it in development run saver.setup()", "to create it in development run "
     "`langgraph-s3 setup`"),
    ("setup() would create", "`langgraph-s3 setup` would create"),
    ("pass its BucketName output", "name its BucketName output with --bucket"),
    ("pass its TableName output", "name its TableName output with --table"),
    ("check region_name", "check --region"),
    ("pass region_name='us-east-1'", "pass --region us-east-1"),
    ("or set AWS_REGION", "or set AWS_REGION / AWS_DEFAULT_REGION"),
    ("pass the bucket's region as region_name", "pass the bucket's region with --region"),
    ("check endpoint_url", "check --endpoint-url"),
    ("pass session=boto3.Session(profile_name=...)", "pass --profile NAME"),
    ("pass that one as serde=", "pass that one with --serde MODULE:ATTR (or "
     f"{SERDE_ENV})"),
    ("claim_thread()", "`langgraph-s3 claim`"),
    ("this run has encryption=, so it reads sealed data only; collect inside it with a "
     "run without encryption=", "this run was given --kms-key, so it reads sealed data "
     f"only; run gc without --kms-key (and {KMS_KEY_ENV}) to collect inside it"),
    ("and this run has no encryption=: configure the key ring that wrote it to collect "
     "inside it", "and no --kms-key was given: pass that KMS key with --kms-key (or "
     f"{KMS_KEY_ENV}) to collect inside it"),
    ("read it with a saver configured with encryption= and the key ring that wrote it",
     f"pass the KMS key that wrote it with --kms-key ARN (or {KMS_KEY_ENV})"),
    ("add it to previous= if it is yours", "pass it with --previous-kms-key if it is yours"),
    ("this saver is configured with encryption=, so it reads", "with --kms-key (or "
     f"{KMS_KEY_ENV}) a command reads"),
    ("Copy old threads to another prefix with langgraph_s3.archive.copy_threads("
     "saver_without_encryption, saver_with_encryption), or read them with a saver without "
     "encryption", f"read it without --kms-key and {KMS_KEY_ENV}; to encrypt a thread, "
     "export it without them and import it into another prefix with them"),
)  # fmt: skip


def shell_message(exc: BaseException) -> str:
    """One line for an error, its advice in command-line terms."""
    return f"{type(exc).__name__}: {shell_text(str(exc))}"


def shell_text(text: str) -> str:
    """A library message on one line, its advice in command-line terms."""
    text = " ".join(text.split())
    for python, shell in _SHELL_ADVICE:
        text = text.replace(python, shell)
    return text


def print_json(value: Any) -> None:
    """JSON on stdout (``--json``): one document, stable keys."""
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def progress_enabled() -> bool:
    """Progress bars only where a person watches: stderr is a terminal."""
    return err.is_terminal


def jsonable(value: Any, limit: int | None = 2000) -> Any:
    """A value as JSON-friendly data for display (strings longer than ``limit`` cut,
    none with ``None``; bytes shown by size)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, limit) for v in value]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, str) and limit is not None and len(value) > limit:
        return value[:limit] + f"... <{len(value)} chars>"
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(), limit)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value), limit)
    return repr(value)


@contextmanager
def progress() -> Iterator[Any]:
    """A ``(stage, done, total)`` callback drawing Rich progress bars on stderr, or
    ``None`` when stderr is not a terminal (logs stay free of bars)."""
    if not progress_enabled():
        yield None
        return
    from rich.progress import Progress

    with Progress(console=err, transient=True) as bars:
        tasks: dict[str, Any] = {}

        def tick(stage: str, done: int, total: int) -> None:
            size = total or None  # 0: not known yet (a scan or a listing)
            if stage not in tasks:
                tasks[stage] = bars.add_task(stage, total=size)
            bars.update(tasks[stage], completed=done, total=size)

        yield tick
