"""The ``langgraph-s3`` command: inspect, move and repair threads; collect garbage; demo.

Exit codes: 0 ok, 1 damage found / not ok, 2 usage error, 3 storage or access error.
Errors are one line on stderr (``--debug`` shows the traceback).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated

import typer

from langgraph_s3.cli import inspect, manage
from langgraph_s3.cli.common import NOT_OK, OK, USAGE, Where, err, exit_code
from langgraph_s3.errors import S3SaverError
from langgraph_s3.version import __version__

app = typer.Typer(
    name="langgraph-s3",
    help="LangGraph checkpoints in S3 with a DynamoDB index: inspect, move and repair threads.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        print(f"langgraph-s3 {__version__}")
        raise typer.Exit(OK)


@app.callback()
def storage(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            "--connection-string",
            envvar="LANGGRAPH_S3_URL",
            help="s3://BUCKET/PREFIX?table=TABLE&region=R (the storage stack's ConnectionString)",
        ),
    ] = None,
    bucket: Annotated[str | None, typer.Option(help="instead of --url, with --table")] = None,
    table: Annotated[str | None, typer.Option()] = None,
    prefix: Annotated[str, typer.Option()] = "",
    profile: Annotated[str | None, typer.Option(help="AWS profile for credentials")] = None,
    region: Annotated[str | None, typer.Option(help="AWS region")] = None,
    endpoint_url: Annotated[
        str | None, typer.Option(help="S3/DynamoDB endpoint (moto, LocalStack)")
    ] = None,
    debug: Annotated[bool, typer.Option(help="show tracebacks")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    """Where the checkpoints are: --url, or --bucket/--table/--prefix."""
    ctx.obj = Where(url, bucket, table, prefix, profile, region, endpoint_url, debug)


_COMMANDS: list[Callable[..., None]] = [
    inspect.threads, inspect.history, inspect.show, inspect.diff, inspect.stats, inspect.verify,
    manage.setup, manage.export, manage.migrate, manage.delete, manage.copy, manage.prune,
    manage.claim, manage.gc,
]  # fmt: skip
for _command in _COMMANDS:
    app.command()(_command)
app.command("import")(manage.import_)


@app.command(
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    }
)
def demo(ctx: typer.Context) -> None:
    """Run an approval agent that pauses and resumes in another process (see --help of
    `python -m langgraph_s3.demo`). Example: langgraph-s3 demo"""
    from langgraph_s3 import demo as demo_module

    raise typer.Exit(demo_module.main(list(ctx.args)))


def main(argv: list[str] | None = None) -> int:
    """The console script: run a command, map failures to the documented exit codes."""
    args = sys.argv[1:] if argv is None else argv
    command = typer.main.get_command(app)
    try:
        # Without standalone mode click returns a command's exit code instead of exiting.
        code = command.main(args=args, prog_name="langgraph-s3", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except typer.Abort:
        err.print("aborted")
        return NOT_OK
    except typer.TyperException as exc:  # usage errors: bad option, missing argument
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            err.print(f"error: {exc}")
        return USAGE
    except S3SaverError as exc:
        if "--debug" in args:
            raise
        err.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", highlight=False)
        return exit_code(exc)
    return code if isinstance(code, int) else OK
