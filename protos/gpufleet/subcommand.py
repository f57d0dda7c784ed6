"""One `gpufleet` subcommand: its name, its line in the command list, its page, its runner.

`gpufleet`'s main runs `args.run(args)` and exits with what it returns, whichever
package added the subcommand (the daemon's, the shared client's `submit`, or an
entry point of the `gpufleet.commands` group), so each is made the same way here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

Run = Callable[[argparse.Namespace], int]


def add_subcommand(
    subparsers: argparse._SubParsersAction, name: str, run: Run, summary: str, page: str
) -> argparse.ArgumentParser:
    """`gpufleet … NAME`, run by `run`: `summary` in the command list, `page` on its --help.

    Returns its parser, to which the caller adds the arguments.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=summary, description=page)
    parser.set_defaults(run=run)
    return parser
