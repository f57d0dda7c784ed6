"""The launcher's stand-in parent of a workload: runs it, records its exit code.

`python -m node_daemon.control.runner EXIT_FILE -- ARGV...` runs ARGV, passes
TERM/INT on to it, and writes its exit code to EXIT_FILE. The daemon may be
restarted meanwhile (systemd KillMode=process leaves this process alone); the
new daemon re-adopts the workload and learns how it ended from EXIT_FILE.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m node_daemon.control.runner EXIT_FILE -- ARGV...", file=sys.stderr)
        return 2
    exit_file, command = Path(argv[0]), argv[2:]
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"gpufleet: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        _write_exit(exit_file, 127)
        return 127

    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    _write_exit(exit_file, code)
    return code if code >= 0 else 128 - code


def _write_exit(path: Path, code: int) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{code}\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
