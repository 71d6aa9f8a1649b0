"""Commands that change storage: setup, delete, copy, prune, claim, gc, export/import,
migrate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from langgraph_s3.cli.common import (
    NOT_OK,
    OK,
    USAGE,
    err,
    fail,
    out,
    print_json,
    progress,
    saver,
    where,
)

Yes = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="say what would happen; change nothing")]


def _confirm(what: str, yes: bool, dry_run: bool) -> bool:
    """False for a dry run (after saying what it would do); asks unless --yes."""
    if dry_run:
        out.print(f"would {what} (dry run: nothing changed)")
        return False
    if not yes and not typer.confirm(f"{what}?"):
        raise typer.Exit(NOT_OK)
    return True


def setup(ctx: typer.Context) -> None:
    """Create the bucket and table (development; production deploys infra/storage.yaml).

    Example: langgraph-s3 --url "s3://dev-bucket?table=dev&endpoint_url=http://localhost:5000" setup
    """
    with saver(ctx) as s:
        s.setup()
    out.print(f"bucket {s.bucket!r} and table {s.table!r} are ready")


def delete(ctx: typer.Context, thread: str, yes: Yes = False, dry_run: DryRun = False) -> None:
    """Delete a thread: every checkpoint, pending write and object.

    Example: langgraph-s3 delete user-42 --yes
    """
    with saver(ctx) as s:
        if _confirm(f"delete thread {thread!r}", yes, dry_run):
            s.delete_thread(thread)
            out.print(f"deleted thread {thread!r}")


def copy(
    ctx: typer.Context, source: str, target: str, yes: Yes = False, dry_run: DryRun = False
) -> None:
    """Copy a thread's whole history to a new thread id.

    Example: langgraph-s3 copy user-42 user-42-backup
    """
    with saver(ctx) as s:
        if _confirm(f"copy thread {source!r} to {target!r}", yes, dry_run):
            s.copy_thread(source, target)
            out.print(f"copied {source!r} to {target!r}")


def prune(
    ctx: typer.Context,
    threads: list[str],
    strategy: Annotated[str, typer.Option(help="keep_latest or delete")] = "keep_latest",
    yes: Yes = False,
    dry_run: DryRun = False,
) -> None:
    """Prune threads: keep each namespace's latest checkpoint (and what its delta
    channels need), or delete them.

    Example: langgraph-s3 prune user-42 user-43 --strategy keep_latest --yes
    """
    with saver(ctx) as s:
        if _confirm(f"prune {len(threads)} thread(s) ({strategy})", yes, dry_run):
            s.prune(threads, strategy=strategy)
            out.print(f"pruned {len(threads)} thread(s)")


def claim(
    ctx: typer.Context,
    thread: str,
    home_region: Annotated[str, typer.Option(help="the home region of the cross-region setup")],
    yes: Yes = False,
    dry_run: DryRun = False,
) -> None:
    """Make this region (--region) the owner of a thread, for cross-region hand-over.

    Only once the previous owner stopped writing it (docs/cross-region.md).
    Example: langgraph-s3 --url ... --region eu-west-1 claim user-42 --home-region us-east-1
    """
    from langgraph_s3 import S3Saver
    from langgraph_s3.regions import CrossRegion

    args = where(ctx).saver_args()
    if not args.get("region_name"):
        fail(USAGE, "claim needs the region taking the thread over: --region")
    with S3Saver(**args, cross_region=CrossRegion(home_region=home_region)) as s:
        if _confirm(f"claim thread {thread!r} for {args['region_name']}", yes, dry_run):
            previous = s.claim_thread(thread)
            out.print(f"thread {thread!r}: owner {previous} -> {args['region_name']}")


def export(
    ctx: typer.Context,
    thread: str,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="file (default: stdout)")
    ] = None,
) -> None:
    """Write a thread as a portable archive (JSON Lines), values included.

    Example: langgraph-s3 export user-42 -o user-42.lgs3
    """
    from langgraph_s3.archive import export_thread

    with saver(ctx) as s:
        if output is None:
            done = export_thread(s, thread, sys.stdout)
        else:
            with output.open("w") as f:
                done = export_thread(s, thread, f)
    if done.checkpoints == 0:
        fail(NOT_OK, f"thread {thread!r} has no checkpoints")
    err.print(f"exported {done.checkpoints} checkpoint(s), {done.writes} pending write(s)")


def import_(
    ctx: typer.Context,
    archive: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    thread_id: Annotated[str | None, typer.Option(help="import as this thread id")] = None,
) -> None:
    """Restore an archive made by export (into this bucket, prefix and region).

    Example: langgraph-s3 --url s3://other-bucket/restored/?table=t import user-42.lgs3
    """
    from langgraph_s3.archive import import_thread

    with saver(ctx) as s, archive.open() as f:
        done = import_thread(s, f, thread_id=thread_id)
    out.print(f"imported thread {done.thread_id!r}: {done.checkpoints} checkpoint(s)")


def migrate(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="sqlite:///file.db, postgresql://..., dynamodb://TABLE?region=..., s3://...",
        ),
    ],
    thread: Annotated[list[str] | None, typer.Option(help="only these threads (repeat)")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Copy every thread (history and pending writes) from another LangGraph saver.

    Example: langgraph-s3 --url s3://my-bucket/agents/?table=t migrate --from sqlite:///checkpoints.db
    """
    from langgraph_s3.archive import copy_threads
    from langgraph_s3.sources import open_source

    with open_source(source) as src, saver(ctx) as s, progress() as tick:
        threads = thread or src.thread_ids()
        step = None if tick is None else (lambda n: tick("migrate", n, len(threads)))
        copied = copy_threads(src.saver, s, threads, progress=step)
    if json_:
        print_json([c.__dict__ for c in copied])
        return
    for c in copied:
        out.print(f"{c.thread_id}: {c.checkpoints} checkpoint(s), {c.writes} pending write(s)")
    out.print(f"migrated {len(copied)} thread(s)")


def gc(
    ctx: typer.Context,
    grace: Annotated[str, typer.Option(help="keep unreferenced objects this long")] = "1h",
    idle_ttl: Annotated[
        str | None, typer.Option(help="expire threads idle this long, e.g. 30d")
    ] = None,
    expire_interrupted: Annotated[
        bool, typer.Option(help="also expire threads waiting on an interrupt")
    ] = False,
    dry_run: DryRun = False,
    json_: Annotated[bool, typer.Option("--json")] = False,
    quiet: Annotated[bool, typer.Option(help="no progress bar")] = False,
    workdir: Annotated[
        str | None,
        typer.Option(help="directory for the run's scratch file (default: the temp directory)"),
    ] = None,
) -> None:
    """Expire idle threads and delete objects no checkpoint references (exit 1: damage).

    Example: langgraph-s3 --url s3://my-bucket/agents/?table=t gc --idle-ttl 30d --dry-run
    """
    from langgraph_s3.errors import InvalidConfigError
    from langgraph_s3.gc import collect, parse_duration

    seconds = parse_duration(grace)
    ttl = parse_duration(idle_ttl) if idle_ttl else None
    if ttl is not None and ttl <= 0:
        raise InvalidConfigError(f"--idle-ttl must be longer than 0, got {idle_ttl!r}")
    with saver(ctx) as s, progress() as tick:
        report = collect(
            s, grace=seconds, idle_ttl=ttl, keep_interrupted=not expire_interrupted,
            dry_run=dry_run, progress=None if quiet else tick, workdir=workdir,
        )  # fmt: skip
    print(report.to_json() if json_ else report.summary())
    raise typer.Exit(NOT_OK if report.errors else OK)
