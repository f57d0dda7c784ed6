"""Run a profile's token_command: its standard output is the token (an SSO helper's way).

The command line is split like a POSIX shell splits it (shlex) and run without
a shell, as kubectl runs its exec credential plugins: what runs is exactly the
program named, with no second round of quoting, globbing or `$VAR` expansion;
one that needs a shell says so (`token_command = "sh -c '…'"`). It runs in a
session of its own, so a timeout ends it and everything it started.

The token is never logged; the command's standard error is (an SSO helper
says there why it failed), with any copy of the token in it blanked. Blocking:
call it off the GUI thread (the network thread's executor) or before the
window opens. No Qt here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
PROFILE_ENV = "GPUFLEET_PROFILE"  # tells a helper which profile asks
STDERR_LOGGED = 2000  # characters of the command's standard error kept in the log


class TokenCommandError(Exception):
    """The command did not give a token: not found, failed, timed out, printed nothing."""


def run_token_command(
    argv: Sequence[str],
    profile: str,
    timeout_s: float = TIMEOUT_S,
    environ: Mapping[str, str] = os.environ,
) -> str:
    """The token the command prints (its whole standard output, stripped).

    Raises:
        TokenCommandError: naming the command and what went wrong, never the token.
    """
    name = argv[0]
    env = {**environ, PROFILE_ENV: profile}
    try:
        child = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise TokenCommandError(f"token_command {name}: cannot run it: {exc.strerror}") from None
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        raise TokenCommandError(
            f"token_command {name} gave no token within {timeout_s:g} s: stopped it"
        ) from None
    token = out.decode("utf-8", "replace").strip()
    _log_stderr(name, err.decode("utf-8", "replace"), token)
    if child.returncode != 0:
        said = _last_line(err.decode("utf-8", "replace"), token)
        raise TokenCommandError(
            f"token_command {name} failed (exit status {child.returncode})"
            + (f": {said}" if said else "")
        )
    if not token:
        raise TokenCommandError(f"token_command {name} printed no token")
    if any(c.isspace() for c in token):
        raise TokenCommandError(
            f"token_command {name} printed more than a token (spaces or several lines); "
            "it must print the token alone"
        )
    return token


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.communicate()  # reap it; the pipes close with the group gone


def _scrub(text: str, token: str) -> str:
    return text.replace(token, "[token]") if token else text


def _log_stderr(name: str, err: str, token: str) -> None:
    err = _scrub(err.strip(), token)
    if err:
        log.info("token_command %s said: %s", name, err[-STDERR_LOGGED:])


def _last_line(err: str, token: str) -> str:
    lines = [line.strip() for line in _scrub(err, token).splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
