"""The ``langgraph-s3`` command: inspect, move and repair threads; collect garbage; demo.

Exit codes: 0 ok, 1 damage found / not ok, 2 usage error, 3 storage or access error.
Every error is one line on stderr (``--debug`` shows the traceback): ``main`` is the
one place failures become messages and exit codes.
"""

from __future__ import annotations

import inspect as inspect_module
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.markup import escape

from langgraph_s3.cli import inspect, manage, rotation
from langgraph_s3.cli.common import (
    KMS_KEY_ENV,
    NOT_OK,
    OK,
    SERDE_ENV,
    STORAGE,
    USAGE,
    Where,
    err,
    exit_code,
    shell_message,
)
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
            metavar="URL",
            help="s3://BUCKET/PREFIX?table=TABLE&region=R (the storage stack's ConnectionString)",
        ),
    ] = None,
    bucket: Annotated[
        str | None, typer.Option(metavar="NAME", help="instead of --url, with --table")
    ] = None,
    table: Annotated[str | None, typer.Option(metavar="NAME", help="the DynamoDB table")] = None,
    prefix: Annotated[str, typer.Option(metavar="PREFIX", help="key prefix")] = "",
    profile: Annotated[
        str | None, typer.Option(metavar="NAME", help="AWS profile for credentials")
    ] = None,
    region: Annotated[str | None, typer.Option(metavar="REGION", help="AWS region")] = None,
    endpoint_url: Annotated[
        str | None, typer.Option(metavar="URL", help="S3/DynamoDB endpoint (moto, LocalStack)")
    ] = None,
    serde: Annotated[
        str | None,
        typer.Option(
            envvar=SERDE_ENV,
            metavar="MODULE:ATTR",
            help="the serializer the threads were written with (an object, or a callable "
            "returning one), e.g. an EncryptedSerializer",
        ),
    ] = None,
    kms_key: Annotated[
        str | None,
        typer.Option(
            envvar=KMS_KEY_ENV,
            metavar="ARN",
            help="client-side encryption: the KMS key (ARN, no alias) that wraps the "
            "threads' data keys; needed to read, copy or export encrypted threads",
        ),
    ] = None,
    previous_kms_key: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ARN",
            help="a KMS key that wrapped older data keys (repeat); with --kms-key",
        ),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    """Where the checkpoints are: --url, or --bucket/--table/--prefix."""
    ctx.obj = Where(
        url, bucket, table, prefix, profile, region, endpoint_url, debug, serde,
        kms_key=kms_key or None, previous_kms_keys=tuple(previous_kms_key or ()),
    )  # fmt: skip


_COMMANDS: list[Callable[..., None]] = [
    inspect.threads, inspect.history, inspect.show, inspect.diff, inspect.stats, inspect.verify,
    manage.setup, manage.export, manage.migrate, manage.delete, manage.delete_tenant,
    manage.copy, manage.prune, manage.claim, manage.gc, rotation.rekey, manage.demo,
]  # fmt: skip


def _help(function: Callable[..., None]) -> str:
    """A command's docstring as help: each paragraph one line for Rich to wrap to the
    terminal (Typer keeps a docstring's line breaks), an example on a line of its own."""
    paragraphs = []
    for paragraph in inspect_module.cleandoc(function.__doc__ or "").split("\n\n"):
        text = " ".join(paragraph.split())
        before, example, after = text.partition("Example: ")
        paragraphs += [before.strip(), example + after] if example and before else [text]
    return "\n\n".join(paragraphs)


for _command in _COMMANDS:
    app.command(help=_help(_command))(_command)
app.command("import", help=_help(manage.import_))(manage.import_)


def _plain_metavars(command: Any) -> None:
    """Help shows flags bare and values by what they mean (``--region REGION``), not
    Typer's type names (``<bool>``, ``<str>``)."""
    # --help is made on first use; made here (and cached by the command), it is bare too.
    help_option = command.get_help_option(typer.Context(command))
    for param in [*command.params, *([help_option] if help_option else [])]:
        if getattr(param, "is_flag", False):
            param.metavar = ""
        elif param.metavar is None and param.name:
            param.metavar = param.name.upper()
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)


def _one_line(exc: BaseException, args: list[str]) -> int:
    """Print ``exc`` as one line (or re-raise it under --debug); its exit code."""
    if "--debug" in args:
        raise exc
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, S3SaverError):
        code, message = exit_code(exc), shell_message(exc)
    elif isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
        code = STORAGE
        what = str(error.get("Code") or "")
        what = f"HTTP {status}" if what in ("", str(status)) else f"{what} (HTTP {status})"
        message = (
            f"AWS answered {exc.operation_name} with {what}: check --region and "
            "--endpoint-url; --debug shows the response"
        )
    elif isinstance(exc, BotoCoreError):
        code, message = STORAGE, f"{type(exc).__name__}: {exc}"
    elif isinstance(exc, OSError):
        code, message = USAGE, f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
    else:
        code = NOT_OK
        message = (
            f"unexpected {type(exc).__name__}: {' '.join(str(exc).split())} "
            "(--debug shows the traceback; please report it)"
        )
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return code


def _usage_line(exc: Any, args: list[str]) -> int:
    """A usage error as one line naming the command's --help (click would print the
    usage and a framed message)."""
    if "--debug" in args:
        raise exc
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    err.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}{where}", highlight=False)
    return USAGE


def main(argv: list[str] | None = None) -> int:
    """The console script: run a command, map failures to the documented exit codes."""
    args = sys.argv[1:] if argv is None else argv
    command = typer.main.get_command(app)
    _plain_metavars(command)
    try:
        # Without standalone mode click returns a command's exit code instead of exiting.
        code: Any = command.main(args=args, prog_name="langgraph-s3", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except typer.Abort:
        err.print("aborted")
        return NOT_OK
    except typer.TyperException as exc:  # usage errors: bad option, missing argument
        return _usage_line(exc, args)
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except Exception as exc:
        return _one_line(exc, args)
    return code if isinstance(code, int) else OK
