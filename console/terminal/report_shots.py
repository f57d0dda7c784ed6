"""The grid at the incident's key moments, as `gpufleet console --at TIME --screenshot FILE`
draws it (offscreen, no display needed), run as a subprocess per moment: the console's
Qt stays out of this process, and a machine without the console's extra gets a note
saying why in the report's screenshots section instead.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from console.fleet.incident import Screenshot, Screenshots

SHOT_TIMEOUT_S = 60.0


def gpufleet_argv() -> list[str]:
    """This installation's `gpufleet`, run with this interpreter."""
    return [sys.executable, "-m", "node_daemon"]


def grid_screenshots(
    args: argparse.Namespace, addresses: Sequence[str], moments: Sequence[tuple[int, str]]
) -> Screenshots:
    """The grid of the nodes at each moment (Unix ms, why it matters), or why there is none.

    The nodes are the ones that answered, named by address; the settings and profile
    (for the CA, certificate and token) are those of this command line.
    """
    if args.no_screenshots:
        return Screenshots(note="Left out (--no-screenshots).")
    shots, failed = [], []
    with tempfile.TemporaryDirectory(prefix="gpufleet-report-") as scratch:
        for number, (at_ms, why) in enumerate(moments):
            png = Path(scratch) / f"moment-{number}.png"
            problem = _one_shot(args, addresses, at_ms, png)
            if problem:
                failed.append(f"{why}: {problem}")
            else:
                shots.append(Screenshot(at_ms, why, png.read_bytes()))
    return Screenshots(tuple(shots), "; ".join(failed))


def _one_shot(args: argparse.Namespace, addresses: Sequence[str], at_ms: int, png: Path) -> str:
    """Empty once `png` holds the grid at the moment; else what went wrong."""
    at = dt.datetime.fromtimestamp(at_ms / 1000).astimezone().isoformat(timespec="milliseconds")
    argv = [*gpufleet_argv(), "console", *[f"--node={a}" for a in addresses],
            f"--at={at}", f"--screenshot={png}"]  # fmt: skip
    if args.config is not None:
        argv.append(f"--config={args.config}")
    if args.profile is not None:
        argv.append(f"--profile={args.profile}")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SHOT_TIMEOUT_S,
                              check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`gpufleet console` did not finish ({exc})"
    if done.returncode != 0 or not png.is_file():
        lines = done.stderr.strip().splitlines()
        return f"`gpufleet console` exited {done.returncode}" + (f": {lines[-1]}" if lines else "")
    return ""
