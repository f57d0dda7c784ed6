"""Every `gpufleet` subcommand's --help (issue #33): it says what the command does,
describes every argument, and lists the exit codes of that command, not one generic
paragraph repeated under every command."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Iterator

import pytest

from node_daemon.commands.main import build_parser

# What every terminal command's --help said before, whatever the command.
GENERIC = "Exit codes: 0 done, 1 a node refused or failed (status: a critical alert fires"


def subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield " ".join((*path, name)), sub
                yield from subcommands(sub, (*path, name))


COMMANDS = dict(subcommands(build_parser()))


def help_of(command: str) -> str:
    """`gpufleet COMMAND --help` as printed, its lines joined (argparse wraps them)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*command.split(), "--help"])
    assert exited.value.code == 0
    return " ".join(out.getvalue().split())


def test_every_command_is_found() -> None:
    for name in ("daemon", "token new", "audit verify", "usage import", "console login", "demo",
                 "status", "ps", "kill", "health", "drain", "queue", "submit", "move"):  # fmt: skip
        assert name in COMMANDS


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_says_what_it_does_and_describes_every_argument(command: str) -> None:
    parser = COMMANDS[command]
    assert parser.description, f"gpufleet {command}: no description"
    undescribed = [
        action.option_strings[0] if action.option_strings else action.dest
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not action.help
    ]
    assert undescribed == []
    shown = help_of(command)
    assert GENERIC not in shown
    assert shown.count("Exit codes:") <= 1


@pytest.mark.parametrize(
    ("command", "own", "not_its"),
    [
        ("status", "1 a node refused or failed the request, or a critical alert fires",
         "a GPU needs"),
        ("health", "or a GPU needs a reset, reboot or inspection", "critical alert"),
        ("ps", "0 every node answered; 1 a node refused or failed the request;",
         "critical alert"),
        ("kill", "0 the process ended; 1 the node refused or failed it", "critical alert"),
        ("undrain", "0 returned to placement;", "critical alert"),
        ("move", "0 moved (one copy, on the target)", "critical alert"),
        ("submit", "0 queued; 1 no node took it", "critical alert"),
        ("audit verify", "1 a record was edited, deleted or reordered", "node"),
        ("daemon", "2 refused at start: the configuration", "critical alert"),
        ("console", "2 no display, no Qt, settings", "critical alert"),
        ("console login", "0 stored (where, on stdout); 2 the settings", "critical alert"),
        ("demo", "1 a simulated server did not start", "critical alert"),
    ],
)  # fmt: skip
def test_each_command_lists_its_own_exit_codes(command: str, own: str, not_its: str) -> None:
    shown = help_of(command)
    assert own in shown
    assert not_its not in shown.split("Exit codes:")[1]
