"""The ``langgraph-s3`` command."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="langgraph-s3", description="LangGraph checkpoints in S3 with a DynamoDB index."
    )
    from langgraph_s3.version import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    from langgraph_s3 import demo

    demo_parser = commands.add_parser(
        "demo", help="run an approval agent that pauses and resumes in another process"
    )
    demo.add_arguments(demo_parser)

    gc_parser = commands.add_parser(
        "gc", help="expire idle threads and delete objects no checkpoint references"
    )
    gc_parser.add_argument(
        "--connection-string",
        "--url",
        default=None,
        help="s3://BUCKET/PREFIX?table=TABLE&region=R (the storage stack's ConnectionString "
        "output); instead of --bucket/--table/--prefix",
    )
    gc_parser.add_argument("--bucket", default=None)
    gc_parser.add_argument("--table", default=None)
    gc_parser.add_argument("--prefix", default="")
    gc_parser.add_argument("--region", default=None)
    gc_parser.add_argument("--endpoint-url", default=None)
    gc_parser.add_argument(
        "--grace", default="1h", help="keep unreferenced objects this long (default 1h)"
    )
    gc_parser.add_argument(
        "--idle-ttl", default=None, help="expire threads idle this long, e.g. 30d (default: never)"
    )
    gc_parser.add_argument(
        "--expire-interrupted",
        action="store_true",
        help="also expire idle threads waiting on an interrupt (default: keep them)",
    )
    gc_parser.add_argument("--dry-run", action="store_true", help="report, delete nothing")
    gc_parser.add_argument("--json", action="store_true", help="print the report as JSON")
    gc_parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar (there is none unless stderr is a terminal)",
    )
    gc_parser.add_argument("--debug", action="store_true", help="show tracebacks")

    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo.run_demo(args)
    if args.command == "gc":
        return _gc(args)
    parser.error(f"unknown command {args.command}")
    return 2


#: Exit codes of every command (documented in the README).
OK, NOT_OK, USAGE, STORAGE = 0, 1, 2, 3


def _gc(args: argparse.Namespace) -> int:
    from langgraph_s3 import S3Saver
    from langgraph_s3.errors import InvalidConfigError, S3SaverError
    from langgraph_s3.gc import collect, parse_duration, progress_bar
    from langgraph_s3.saver import parse_conn_string

    try:
        grace = parse_duration(args.grace)
        idle_ttl = parse_duration(args.idle_ttl) if args.idle_ttl else None
        if idle_ttl is not None and idle_ttl <= 0:
            raise InvalidConfigError(f"--idle-ttl must be longer than 0, got {args.idle_ttl!r}")
        if args.connection_string:
            where = parse_conn_string(args.connection_string)
        elif args.bucket and args.table:
            where = {"bucket": args.bucket, "table": args.table, "prefix": args.prefix}
        else:
            raise InvalidConfigError("give --connection-string, or --bucket and --table")
    except InvalidConfigError as exc:
        print(f"langgraph-s3 gc: {exc}", file=sys.stderr)
        return USAGE
    where.setdefault("region_name", args.region)
    where["region_name"] = where["region_name"] or args.region
    where["endpoint_url"] = where.get("endpoint_url") or args.endpoint_url
    show = not args.quiet and sys.stderr.isatty()
    try:
        with S3Saver(**where) as saver:
            report = collect(
                saver,
                grace=grace,
                idle_ttl=idle_ttl,
                keep_interrupted=not args.expire_interrupted,
                dry_run=args.dry_run,
                progress=progress_bar() if show else None,
            )
    except S3SaverError as exc:
        if args.debug:
            raise
        print(f"langgraph-s3 gc: {type(exc).__name__}: {exc}", file=sys.stderr)
        return USAGE if isinstance(exc, InvalidConfigError) else STORAGE
    print(report.to_json() if args.json else report.summary())
    return NOT_OK if report.errors else OK


if __name__ == "__main__":
    sys.exit(main())
