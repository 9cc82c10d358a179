"""Every flag of every command line says what it does in `--help`."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from adapter.explain.cli import build_parser as explain_parser
from adapter.flags import FLAG_GROUPS
from adapter.flags import build_parser as adapter_parser
from autoscaler.flags import build_parser as autoscaler_parser
from shared.auth import add_auth_flags
from sim.__main__ import build_parser as sim_parser
from surge.__main__ import build_parser as surge_parser

PARSERS = {
    "surge-adapter": lambda: adapter_parser((*FLAG_GROUPS, add_auth_flags)),
    "surge-adapter explain": explain_parser,
    "surge-autoscaler": autoscaler_parser,
    "surge-sim": sim_parser,
    "surge": surge_parser,
}


def arguments(parser: argparse.ArgumentParser, prog: str) -> Iterator[tuple[str, argparse.Action]]:
    """Every argument of `parser` and of its subcommands, with the command it belongs to."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield from arguments(subparser, f"{prog} {name}")
        else:
            yield prog, action


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_every_flag_has_help(prog: str) -> None:
    found = list(arguments(PARSERS[prog](), prog))
    assert len(found) > 3  # the walk reaches the flags
    missing = [f"{where} {'/'.join(a.option_strings) or a.dest}" for where, a in found if not a.help]
    assert missing == []
