"""`surge` / `python -m surge`: the command-line tools, one subcommand per module.

A subcommand module has `register(subcommands)`, which adds its parser and sets `run` (args -> exit code).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from shared.cli import OneLineErrorParser, add_version_flag
from surge import convert, explain
from surge.report import command as report
from surge.simulate import command as simulate

SUBCOMMANDS = (simulate, report, explain, convert)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="surge", description="Surge's tools: see each subcommand's --help.")
    add_version_flag(parser)
    subcommands = parser.add_subparsers(title="subcommands", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.register(subcommands)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    sys.exit(args.run(args))


if __name__ == "__main__":
    main()
