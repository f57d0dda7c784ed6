"""ToolPoller: a Slurm command-line tool (sinfo, sacct) asked on a thread of its own
every interval, for this node by its short host name.

What goes wrong is said once, and again only when it changes: a host with Slurm's
client but in no cluster (no slurm.conf) fails the same way every poll. Until the
tool has answered once a failure is said at info (the node has no Slurm, nothing is
wrong here); once it has, a failure is news, said as a warning. Each subclass says
it in its own words, in its own module's log.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import threading
from typing import ClassVar


class ToolFailed(Exception):
    """The tool did not run, or it exited non-zero: the message says which."""


class ToolPoller:
    tool: ClassVar[str]  # its name in what is said: "sinfo"
    # Said at info where the tool is not on PATH (the thread does not start).
    absent: ClassVar[str]
    # Said at info when the tool answers after a failure.
    answers_again: ClassVar[str]
    # A failure before the tool ever answered (info) and after (warning), with
    # {problem} and {interval_s}.
    failing_unanswered: ClassVar[str]
    failing_answered: ClassVar[str]

    def __init__(
        self,
        thread_name: str,
        interval_s: float,
        timeout_s: float,
        host_name: str | None,
        program: str,
    ) -> None:
        # Slurm knows nodes by their short host name.
        self.node_name = (host_name or socket.gethostname()).split(".")[0]
        self._interval_s, self._timeout_s, self._program = interval_s, timeout_s, program
        self._log = logging.getLogger(type(self).__module__)
        self._problem: str | None = None
        self._answered = False  # the tool has answered once: a failure now is news
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    def start(self) -> None:
        if shutil.which(self._program) is None:
            self._log.info(self.absent)
            return
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self._timeout_s + 1)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self._interval_s)

    def poll(self) -> object:
        raise NotImplementedError

    def _ask(self, command: list[str]) -> str:
        """Run the tool: what it wrote, or ToolFailed."""
        try:
            result = subprocess.run(command, capture_output=True, text=True,
                                    timeout=self._timeout_s, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolFailed(f"{self.tool} failed: {exc}") from exc
        if result.returncode != 0:
            raise ToolFailed(
                f"{self.tool} exited {result.returncode}: {result.stderr.strip()[:200]}"
            )
        return result.stdout

    def _answered_now(self) -> None:
        if self._problem is not None:
            self._log.info(self.answers_again)
            self._problem = None
        self._answered = True

    def _say(self, problem: str) -> None:
        if problem == self._problem:
            return
        self._problem = problem
        words = self.failing_answered if self._answered else self.failing_unanswered
        level = logging.WARNING if self._answered else logging.INFO
        self._log.log(level, words.format(problem=problem, interval_s=self._interval_s))
