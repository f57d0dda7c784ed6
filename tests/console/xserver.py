"""An X server of a test's own: Xvfb on a free display, and openbox where a test needs
a window manager. The one start-up the real-X, desktop and dunst tests share."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Iterator
from typing import Any

XVFB_START_S = 10.0  # Xvfb names its display within this (-displayfd)
WM_START_S = 15.0  # openbox manages the display within this


def read_line(process: subprocess.Popen[str], timeout_s: float, what: str) -> str:
    """The child's first line of output, waiting for its start-up no longer than `timeout_s`."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], deadline - time.monotonic())
        if ready:
            return process.stdout.readline().strip()
    raise AssertionError(f"{what} said nothing within {timeout_s} s")


def stop(process: subprocess.Popen[Any]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()  # wait() leaves them open: a ResourceWarning once collected


# Each process takes its displays from a range of its own (by pid). With -displayfd
# alone every Xvfb takes the lowest free number, and one stopping in a pytest worker
# unlinks its socket just as another worker's, starting on the same number, has made
# it: openbox then found no display there (a quiet full run, test_first_start.py).
DISPLAYS_PER_PROCESS = 8


def _displays() -> range:
    first = 100 + (os.getpid() % 4000) * DISPLAYS_PER_PROCESS
    return range(first, first + DISPLAYS_PER_PROCESS)


@contextlib.contextmanager
def xvfb(screen: tuple[int, int] | None = None, quiet: bool = False) -> Iterator[str]:
    """Xvfb on a free display of this process's range, no TCP; yields ":N" once it
    accepts connections (-displayfd). A display in use (another server's lock): the next.

    Args:
        screen: width and height of screen 0 (24 bits), or Xvfb's default.
        quiet: Xvfb's messages to /dev/null rather than this process's stderr.
    """
    stderr = subprocess.DEVNULL if quiet else None
    for display in _displays():
        argv = ["Xvfb", f":{display}", "-displayfd", "1", "-nolisten", "tcp"]
        if screen is not None:
            argv += ["-screen", "0", f"{screen[0]}x{screen[1]}x24"]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True)
        said = read_line(process, XVFB_START_S, "Xvfb")
        if said:
            break
        stop(process)  # it exited: the display is in use
    else:
        raise AssertionError(f"no free X display among {_displays()}")
    try:
        yield ":" + said
    finally:
        stop(process)


@contextlib.contextmanager
def window_manager(display: str) -> Iterator[int]:
    """openbox managing `display`: back once it has set its EWMH properties there;
    yields its pid."""
    env = {**os.environ, "DISPLAY": display}
    wm = subprocess.Popen(["openbox", "--sm-disable"], env=env, stderr=subprocess.PIPE,
                          text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + WM_START_S
        while subprocess.run(["xdotool", "get_desktop"], env=env, capture_output=True).returncode:
            assert time.monotonic() < deadline, "openbox did not start managing the display"
            assert wm.poll() is None, (
                f"openbox on {display} exited: {wm.stderr.read() if wm.stderr else ''}"
            )
            time.sleep(0.1)  # polling the X server for the WM's EWMH properties
        yield wm.pid
    finally:
        stop(wm)
