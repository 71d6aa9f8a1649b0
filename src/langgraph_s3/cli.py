"""The ``langgraph-s3`` command."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="langgraph-s3", description="LangGraph checkpoints in S3 with a DynamoDB index."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    from langgraph_s3 import demo

    demo_parser = commands.add_parser(
        "demo", help="run an approval agent that pauses and resumes in another process"
    )
    demo.add_arguments(demo_parser)

    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo.run_demo(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
