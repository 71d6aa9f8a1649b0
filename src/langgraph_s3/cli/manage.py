"""Commands that change storage: setup, delete, copy, prune, claim, gc, export/import,
migrate."""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

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
    require_thread,
    saver,
    shell_message,
    shell_text,
    where,
)
from langgraph_s3.errors import InvalidConfigError

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

    An encrypted thread's data key items go with its index items, so whatever copies
    of its data remain can no longer be opened (shredding); the command says which key
    versions it deleted. It needs no --kms-key. Example: langgraph-s3 delete user-42 --yes
    """
    from langgraph_s3.cli.keys import ThreadKeys, shred_lines

    with saver(ctx) as s:
        keys = ThreadKeys.of(thread, require_thread(s, thread))
        shred = " and shred its data key" if keys else ""
        if _confirm(f"delete thread {thread!r}{shred}", yes, dry_run):
            s.delete_thread(thread)
            out.print(f"deleted thread {thread!r}", markup=False, highlight=False)
    ttl = s.encryption.key_ttl if s.encryption is not None else None
    for line in shred_lines([keys], dry_run=dry_run, key_ttl=ttl):
        out.print(line, markup=False, highlight=False)


def delete_tenant(
    ctx: typer.Context, tenant: str, yes: Yes = False, dry_run: DryRun = False
) -> None:
    """Erase a tenant: delete every thread sealed under its data key, then the key itself.

    Deleting one thread of a tenant shreds nothing (the tenant's other threads use its
    key); this does: whatever copies of the tenant's data remain (backups, old object
    versions) can no longer be opened. An administrator's command: it needs
    dynamodb:Scan and dynamodb:Query, dynamodb:BatchWriteItem (or DeleteItem), and
    s3:ListBucket and s3:DeleteObject. Stop the tenant's writers first.

    Example: langgraph-s3 --url s3://my-bucket/agents/?table=t delete-tenant acme --dry-run
    """
    from langgraph_s3.core.tenants import shred_tenant

    with saver(ctx) as s:
        found = s.run(shred_tenant(s, tenant, dry_run=True))
        what = (
            f"delete {len(found.threads)} thread(s) of tenant {tenant!r} and shred its "
            f"{len(found.key_versions)} data key version(s)"
        )
        for thread in found.threads:
            out.print(f"thread {thread!r}", markup=False)
        if not _confirm(what, yes, dry_run):
            return
        done = s.run(shred_tenant(s, tenant))
    out.print(
        f"deleted {len(done.threads)} thread(s) of tenant {tenant!r}; shredded "
        f"{len(done.key_versions)} data key version(s)",
        markup=False,
    )


def copy(
    ctx: typer.Context, source: str, target: str, yes: Yes = False, dry_run: DryRun = False
) -> None:
    """Copy a thread's whole history to a new thread id.

    Example: langgraph-s3 copy user-42 user-42-backup
    """
    from langgraph_s3.cli.keys import opening, refuse_sealed

    with saver(ctx) as s:
        # Checked first: copying without the key would fail after copying blobs.
        refuse_sealed(s, source, require_thread(s, source))
        if _confirm(f"copy thread {source!r} to {target!r}", yes, dry_run):
            with opening(s, source):
                s.copy_thread(source, target)
            out.print(f"copied {source!r} to {target!r}")


def prune(
    ctx: typer.Context,
    threads: list[str],
    strategy: Annotated[str, typer.Option(help="keep_latest or delete")] = "keep_latest",
    yes: Yes = False,
    dry_run: DryRun = False,
) -> None:
    """Prune threads: keep only the latest checkpoints, or delete the threads.

    keep_latest keeps each namespace's latest checkpoint (and what its delta channels
    need; an encrypted thread needs --kms-key); delete removes the threads (and shreds
    encrypted ones, as delete does).
    Example: langgraph-s3 prune user-42 user-43 --strategy keep_latest --yes
    """
    from langgraph_s3.cli.keys import ThreadKeys, refuse_sealed, shred_lines

    if strategy not in ("keep_latest", "delete"):
        fail(USAGE, f"--strategy must be keep_latest or delete, got {strategy!r}")
    keys = []
    with saver(ctx) as s:
        for thread in threads:
            items = require_thread(s, thread)
            if strategy == "keep_latest":
                refuse_sealed(s, thread, items)  # it reads bodies: checked before any change
            keys.append(ThreadKeys.of(thread, items))
        if _confirm(f"prune {len(threads)} thread(s) ({strategy})", yes, dry_run):
            s.prune(threads, strategy=strategy)
            out.print(f"pruned {len(threads)} thread(s)")
    ttl = s.encryption.key_ttl if s.encryption is not None else None
    for line in shred_lines(keys, dry_run=dry_run, key_ttl=ttl) if strategy == "delete" else []:
        out.print(line, markup=False, highlight=False)


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
        require_thread(s, thread)  # claiming an unknown id would create a phantom thread
        if _confirm(f"claim thread {thread!r} for {args['region_name']}", yes, dry_run):
            previous = s.claim_thread(thread)
            out.print(f"thread {thread!r}: owner {previous} -> {args['region_name']}")


def export(
    ctx: typer.Context,
    thread: str,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="file (default: stdout)")
    ] = None,
    plaintext: Annotated[
        bool,
        typer.Option(
            "--plaintext",
            help="export an encrypted thread anyway: the archive holds its values in the "
            "clear, out of reach of shredding",
        ),
    ] = False,
) -> None:
    """Write a thread as a portable archive (JSON Lines), values included.

    The file appears only when the archive is complete (written beside it, then
    renamed). An encrypted thread is exported only with --kms-key and --plaintext: the
    archive holds its values in the clear, which deleting the thread's data keys
    (shredding) cannot reach. Example: langgraph-s3 export user-42 -o user-42.lgs3
    """
    from langgraph_s3.archive import export_thread
    from langgraph_s3.cli.keys import PlaintextArchiveError, key_needed, thread_keys

    with saver(ctx) as s:
        keys = thread_keys(s, thread)
        if keys and s.encryption is None:
            raise key_needed(keys)
        if keys and not plaintext:
            raise PlaintextArchiveError(
                f"thread {thread!r} is encrypted, and an archive holds its values in the "
                "clear, where deleting the thread's data keys (shredding) cannot reach "
                "them: pass --plaintext to export it anyway, and protect and delete the "
                "archive as you would the data (docs/security.md, Erasure)"
            )
        if output is None:
            import io

            buffer = io.StringIO()  # nothing on stdout unless the whole archive is there
            done = export_thread(s, thread, buffer)
            sys.stdout.write(buffer.getvalue())
        else:
            with _replacing(output) as f:
                done = export_thread(s, thread, f)
    err.print(f"exported {done.checkpoints} checkpoint(s), {done.writes} pending write(s)")


class _replacing:
    """A text file written beside ``path`` and renamed onto it on success; removed on
    failure, so ``path`` is either the old file or the complete new one."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> Any:
        if not self.path.parent.is_dir():
            raise InvalidConfigError(f"no directory {str(self.path.parent)!r} for -o")
        fd, self.temp = tempfile.mkstemp(
            dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".part"
        )
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.temp, 0o666 & ~umask)  # as open() would make it, not mkstemp's 0600
        self.file = os.fdopen(fd, "w")
        return self.file

    def __exit__(self, kind: object, *_: object) -> None:
        self.file.close()
        if kind is None:
            os.replace(self.temp, self.path)
        else:
            os.unlink(self.temp)


def import_(
    ctx: typer.Context,
    archive: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, readable=True, metavar="FILE")
    ],
    thread_id: Annotated[str | None, typer.Option(help="import as this thread id")] = None,
) -> None:
    """Restore an archive made by export (into this bucket, prefix and region).

    The whole archive is checked first: a damaged or cut archive imports nothing.
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
            metavar="URL",
            help="sqlite:///file.db, postgresql://..., dynamodb://TABLE?region=..., s3://...",
        ),
    ],
    thread: Annotated[
        list[str] | None, typer.Option(metavar="ID", help="only these threads (repeat)")
    ] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Copy every thread (history and pending writes) from another LangGraph saver.

    Resumable: a thread already migrated with the same history is skipped, one left
    half-copied by an interrupted run is copied again; each thread is reported as it
    goes, and a failure ends with what was migrated and what was not.
    Example: langgraph-s3 --url s3://my-bucket/agents/?table=t migrate --from sqlite:///checkpoints.db
    """
    from langgraph_s3.sources import open_source

    w = where(ctx)
    with open_source(source, w.serializer()) as src, saver(ctx) as s:
        threads = thread or src.thread_ids()
        results, failed, stopped = _migrate_each(src.saver, s, threads, quiet=json_)
    if json_:
        print_json([dataclasses.asdict(r) for r in results] + failed)
    done = sum(r.status != "skipped" for r in results)
    summary = (f"migrated {done} thread(s), skipped {len(results) - done} already there, "
               f"{len(failed)} failed")  # fmt: skip
    if stopped is not None:
        left = [t for t in threads if t not in {r.thread_id for r in results}]
        left = [t for t in left if t not in {f["thread_id"] for f in failed}]
        err.print(
            f"{summary}; stopped before {len(left)} thread(s): {', '.join(left[:5])}"
            f"{' ...' if len(left) > 5 else ''} (run the same command again to resume)",
            markup=False,
            highlight=False,
        )
        raise stopped
    (err if json_ else out).print(summary, highlight=False)
    raise typer.Exit(NOT_OK if failed else OK)


def _migrate_each(
    source: Any, target: Any, threads: list[str], *, quiet: bool
) -> tuple[list[Any], list[dict[str, str]], BaseException | None]:
    """Migrate threads one by one, printing each; a thread that exists with another
    history or not at all fails alone, any other error stops the run (and is returned,
    to be raised after the summary)."""
    from langgraph_s3.archive import migrate_thread
    from langgraph_s3.errors import ThreadExistsError, ThreadNotFoundError

    results: list[Any] = []
    failed: list[dict[str, str]] = []
    with progress() as tick:
        for n, thread in enumerate(threads, 1):
            try:
                r = migrate_thread(source, target, thread)
            except (ThreadExistsError, ThreadNotFoundError) as exc:
                failed.append({"thread_id": thread, "status": "failed", "error": str(exc)})
                err.print(f"{thread}: not migrated: {shell_message(exc)}", markup=False)
                continue
            except Exception as exc:
                return results, failed, exc
            results.append(r)
            if not quiet:
                line = f"{thread}: {r.status}, {r.checkpoints} checkpoint(s), {r.writes} pending"
                out.print(f"{line} write(s)", markup=False, highlight=False)
            if tick is not None:
                tick("migrate", n, len(threads))
    return results, failed, None


def demo(
    ctx: typer.Context,
    thread: Annotated[
        str | None, typer.Option(metavar="ID", help="thread id (default: a new one)")
    ] = None,
    setup_first: Annotated[
        bool, typer.Option("--setup", help="create the bucket and table first")
    ] = False,
) -> None:
    """Run an approval agent that pauses, then resumes in another process.

    Without --endpoint-url or a named bucket it runs on a moto server inside this
    process (the demo extra), with no AWS account; the global options point it
    elsewhere (prefix demo/ unless given). Example: langgraph-s3 demo
    """
    from langgraph_s3.demo import DEMO_BUCKET, DEMO_TABLE, DemoOptions, run_demo

    w = where(ctx)
    named = dataclasses.replace(w, bucket=w.bucket or DEMO_BUCKET, table=w.table or DEMO_TABLE)
    args = named.saver_args()
    endpoint = args["endpoint_url"] or os.environ.get("AWS_ENDPOINT_URL")
    opts = DemoOptions(
        bucket=args["bucket"], table=args["table"], prefix=args["prefix"] or "demo/",
        region=args["region_name"] or os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        endpoint_url=endpoint, embedded=not (endpoint or w.url or w.bucket),
        profile=w.profile, serde=w.serde, thread=thread, setup=setup_first,
    )  # fmt: skip
    raise typer.Exit(run_demo(opts))


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

    Expiring an encrypted thread deletes its data key items too (shredding: reported).
    Without --kms-key, encrypted threads are left as they are (exit 2: pass
    --kms-key to collect inside them); deleted and expired ones are still collected,
    and with --kms-key so is what a run wrote to a thread after it was deleted, once
    two runs --grace apart found it (reported: threads_orphaned).
    Example: langgraph-s3 --url s3://my-bucket/agents/?table=t gc --idle-ttl 30d --dry-run
    """
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
    _advise(report)
    print(report.to_json() if json_ else report.summary())
    if report.errors or (report.threads_protected and s.encryption is not None):
        raise typer.Exit(NOT_OK)
    raise typer.Exit(USAGE if report.threads_protected else OK)


def _advise(report: Any) -> None:
    """Protected threads' reasons in command-line terms."""
    for protected in report.threads_protected:
        protected["reason"] = shell_text(protected["reason"])
