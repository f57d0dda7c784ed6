"""What a workload is on a command line, for both `gpufleet submit`s.

The fleet's (console/terminal/queue.py) and the daemon-only one
(gpufleet/client/submit_command.py) take the same arguments from here.
"""

from __future__ import annotations

import argparse
import re

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str) -> int:
    """'40G', '512M', '1T' or plain bytes; binary units."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text.upper())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 40G or 512M")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """What a workload is, for both `gpufleet submit`s (the daemon-only one and the fleet's)."""
    arg = parser.add_argument
    arg("--gpus", type=int, default=1, help="number of GPUs (default 1)")
    arg("--min-memory", type=parse_size, default=0, metavar="SIZE",
        help="free GPU memory each GPU must have, e.g. 40G")  # fmt: skip
    arg("--owner", default=None, help="who the workload is for (default: you)")
    arg("--name", default="", help="a short name (default: the command)")
    arg("--env", action="append", default=[], metavar="KEY=VALUE", help="environment; repeat")
    arg("--auto", action="store_true", help="let the fair queue start it when GPUs fit")
    arg("--assign", metavar="GPU[,GPU...]", help="start it at once on these GPU indices")
    arg(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="the command to run and its arguments, after --",
    )


def workload_argv(args: argparse.Namespace) -> list[str]:
    """The command after `--` (the separator itself dropped)."""
    argv: list[str] = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return argv


def workload_env(args: argparse.Namespace) -> dict[str, str]:
    """--env KEY=VALUE pairs (an item without '=' is ignored)."""
    return dict(item.split("=", 1) for item in args.env if "=" in item)
