"""What every command shares: where the storage is, exit codes, errors, output."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import typer
from rich.console import Console

from langgraph_s3.errors import InvalidConfigError, S3SaverError

#: Exit codes (README, "Command line"): 0 ok, 1 damage found / not ok,
#: 2 usage error, 3 storage or access error.
OK, NOT_OK, USAGE, STORAGE = 0, 1, 2, 3

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


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

    def saver_args(self) -> dict[str, Any]:
        """``S3Saver`` keyword arguments; a usage error when the storage is not named."""
        from langgraph_s3.connection import parse_conn_string

        if self.url:
            args = parse_conn_string(self.url)
        elif self.bucket and self.table:
            args = {"bucket": self.bucket, "table": self.table, "prefix": self.prefix}
        else:
            raise InvalidConfigError(
                "name the storage: --url s3://BUCKET/PREFIX?table=TABLE (or LANGGRAPH_S3_URL), "
                "or --bucket and --table"
            )
        args["region_name"] = args.get("region_name") or self.region
        args["endpoint_url"] = args.get("endpoint_url") or self.endpoint_url
        if self.profile:
            import boto3

            args["session"] = boto3.Session(profile_name=self.profile)
        return args


def where(ctx: typer.Context) -> Where:
    found = ctx.find_object(Where)
    assert found is not None, "the app callback stores Where"
    return found


@contextmanager
def saver(ctx: typer.Context, **options: Any) -> Iterator[Any]:
    """An ``S3Saver`` on the command's storage, closed afterwards."""
    from langgraph_s3 import S3Saver

    with S3Saver(**where(ctx).saver_args(), **options) as opened:
        yield opened


def fail(code: int, message: str) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def exit_code(exc: S3SaverError) -> int:
    """USAGE for what the command line got wrong, STORAGE for everything else."""
    return USAGE if isinstance(exc, InvalidConfigError) else STORAGE


def print_json(value: Any) -> None:
    """JSON on stdout (``--json``): one document, stable keys."""
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def progress_enabled() -> bool:
    """Progress bars only where a person watches: stderr is a terminal."""
    return err.is_terminal


def jsonable(value: Any, limit: int = 2000) -> Any:
    """A value as JSON-friendly data for display (long strings and bytes cut)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, limit) for v in value]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, str) and len(value) > limit:
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
