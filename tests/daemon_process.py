"""A `gpufleet daemon` as a real process, for tests that kill, restart or signal it."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import wait_for

PR_SET_PDEATHSIG = 1


def _die_with_the_test() -> None:
    """In the child: SIGKILL when the test process dies (a timeout, ^C, a crash), so
    no daemon outlives its test and loads the machine for the tests after it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class DaemonProcess:
    """Starts `python -m node_daemon daemon ...`; `address` once it serves."""

    def __init__(
        self,
        workdir: Path,
        *args: str,
        listen: str | None = "127.0.0.1:0",
        program: tuple[str, ...] = (sys.executable, "-m", "node_daemon"),
    ) -> None:
        """`listen` None: no --listen flag, the config file's `listen` (or the default).

        `program`: what runs `daemon ...`; an installed `gpufleet` (say, a wheel's in a
        venv of its own) instead of this checkout's package.
        """
        self.program = program
        self.workdir = workdir
        self.args = args
        self.listen = listen
        self.ready = workdir / "ready"
        self.log = workdir / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""

    def start(self) -> DaemonProcess:
        self.ready.unlink(missing_ok=True)
        listen = ("--listen", self.listen) if self.listen is not None else ()
        argv = [*self.program, "daemon", *listen,
                "--ready-file", str(self.ready), "--state-dir", str(self.workdir / "state"),
                *self.args]  # fmt: skip
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_the_test
            )
        wait_for(self._ready_or_dead, 30, "the daemon to serve")
        assert self.proc.poll() is None, self.log.read_text()
        self.address = self.ready.read_text().strip()
        self.listen = self.address  # a restart comes back on the same port
        return self

    def _ready_or_dead(self) -> bool:
        return self.ready.exists() or (self.proc is not None and self.proc.poll() is not None)

    def kill(self, sig: int = signal.SIGKILL) -> int:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
        return self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill(signal.SIGTERM)
