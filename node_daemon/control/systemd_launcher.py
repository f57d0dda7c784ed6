"""Workloads as transient systemd services: their owner's account, their own cgroup.

Each workload is one transient service, started by PID 1 through `systemd-run`
(a D-Bus client of systemd's StartTransientUnit), named after the journal and
the workload (`unit_name`): a restarted daemon, and the settlement of a crash
mid-start, find it by name alone. PID 1 starts it as the owner's account
(User=; systemd does initgroups), outside the daemon's sandbox, in a cgroup of
its own, so a cancel reaches every process it started, setsid or not.

What would be world-readable in argv (/proc/PID/cmdline) stays out of it: the
environment goes into a 0600 file in the daemon's state directory that PID 1
reads as root (EnvironmentFile=), removed as soon as the workload has started;
the output file is opened by PID 1 too (StandardOutput=append:). Both lie in
the workload's 0700 directory, which the workload's account cannot reach.

RemainAfterExit=yes keeps the unit, and with it the exit status
(ExecMainCode, ExecMainStatus), until the daemon has recorded the end; then
`release` stops it (ending any process it left behind) and resets it.
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from node_daemon.control.launcher import Launched, LaunchSpec, WorkloadFiles

log = logging.getLogger(__name__)

UNIT_PREFIX = "gpufleet-workload-"
SYSTEMD_RUN, SYSTEMCTL = "systemd-run", "systemctl"
ENVIRONMENT_FILE = "environment"
COMMAND_TIMEOUT_S = 30.0
# Processes a workload leaves behind get TERM when its unit is released, KILL after this.
STOP_TIMEOUT = "10s"
SHOWN = ("LoadState", "ActiveState", "SubState", "MainPID", "ExecMainCode", "ExecMainStatus")
CLD_EXITED, CLD_KILLED, CLD_DUMPED = 1, 2, 3  # ExecMainCode: how the main process ended
# The names systemd passes on (env_name_is_valid); it drops others, with only a log line.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORKLOAD_ID = re.compile(r"[A-Za-z0-9_.-]+")
_ESCAPED_IN_QUOTES = re.compile(r'([\\"`$])')
# Runs as the workload's account: creates its working directory as that
# account (systemd's WorkingDirectory= would need it to exist), enters it, and
# becomes the command. Exit status 127, as the direct runner's, when it cannot.
ENTER_WORK_DIR = (
    'mkdir -p -m 0700 -- "$1" && cd -- "$1" || { '
    'echo "gpufleet: cannot create or enter the working directory $1" >&2; exit 127; }; '
    'shift; exec "$@"'
)
SHELL = "/bin/sh"


class SystemdError(OSError):
    """systemd-run or systemctl failed; the message has what it said."""


@dataclass(frozen=True)
class UnitStatus:
    """What `systemctl show` says about a workload's unit."""

    load_state: str
    active_state: str
    sub_state: str
    main_pid: int
    exec_main_code: int
    exec_main_status: int

    @property
    def exists(self) -> bool:
        return self.load_state == "loaded"

    @property
    def running(self) -> bool:
        """Its main process is alive (after it ends, RemainAfterExit keeps the unit)."""
        return self.exists and self.main_pid > 0

    @property
    def exit_code(self) -> int | None:
        """Exit status, or minus the signal that ended it, as the direct runner records it."""
        if self.running:
            return None
        if self.exec_main_code == CLD_EXITED:
            return self.exec_main_status
        if self.exec_main_code in (CLD_KILLED, CLD_DUMPED):
            return -self.exec_main_status
        return None


def unit_name(journal_id: str, workload_id: str) -> str:
    """The workload's unit: the same for every daemon that keeps this journal."""
    if not _WORKLOAD_ID.fullmatch(workload_id):
        raise ValueError(f"workload id {workload_id!r} cannot name a systemd unit")
    return f"{UNIT_PREFIX}{journal_id[:8]}-{workload_id}.service"


def parse_show(text: str) -> UnitStatus:
    """`systemctl show -p …` output (KEY=VALUE lines) as a UnitStatus."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def number(key: str) -> int:
        try:
            return int(values.get(key, "0") or "0")
        except ValueError:
            return 0

    return UnitStatus(
        values.get("LoadState", ""), values.get("ActiveState", ""), values.get("SubState", ""),
        number("MainPID"), number("ExecMainCode"), number("ExecMainStatus"),
    )  # fmt: skip


def check_environment(env: Mapping[str, str]) -> None:
    """ValueError naming the variables systemd would silently drop."""
    bad = sorted(name for name in env if not _ENV_NAME.fullmatch(name))
    if bad:
        shown = ", ".join(repr(name) for name in bad[:5])
        raise ValueError(
            f"environment names may hold only letters, digits and '_' and may not start with "
            f"a digit (systemd, which starts workloads on this node, drops others): {shown}"
        )


def environment_file_text(env: Mapping[str, str]) -> str:
    """EnvironmentFile= syntax: every value in double quotes, as the shell reads them."""
    return "".join(f'{name}="{_quote(value)}"\n' for name, value in env.items())


def _quote(value: str) -> str:
    """Inside double quotes, a backslash makes \\ " ` $ literal; everything else is as is."""
    return _ESCAPED_IN_QUOTES.sub(r"\\\1", value)


def write_environment_file(path: Path, env: Mapping[str, str]) -> None:
    """Write `env` to a new file only the daemon (and root) may read."""
    path.unlink(missing_ok=True)  # a file left by a crash: written afresh, never followed
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(environment_file_text(env))


def run_command(unit: str, spec: LaunchSpec, files: WorkloadFiles, group: str) -> list[str]:
    """The systemd-run command line for `spec`: no value of the environment in it."""
    properties = {
        "Description": f"gpufleet workload {files.workload_id} of {spec.account}",
        "User": spec.account, "Group": group,
        "EnvironmentFile": str(files.dir / ENVIRONMENT_FILE),
        "StandardInput": "null",
        "StandardOutput": f"append:{files.output}", "StandardError": "inherit",
        "RemainAfterExit": "yes", "UMask": "0022", "KillMode": "control-group",
        "TimeoutStopSec": STOP_TIMEOUT,
    }  # fmt: skip
    work_dir = spec.work_dir or "."
    command = [SHELL, "-c", ENTER_WORK_DIR, "gpufleet-workload", work_dir, *spec.argv]
    return [
        SYSTEMD_RUN, "--no-ask-password", "--quiet", f"--unit={unit}", "--service-type=exec",
        *(f"--property={key}={value}" for key, value in properties.items()),
        "--", *(_literal(arg) for arg in command),
    ]  # fmt: skip


def _literal(arg: str) -> str:
    """PID 1 expands $NAME and ${NAME} in a service's command line; $$ is a plain $."""
    return arg.replace("$", "$$")


def _systemd_environment() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LC_ALL": "C.UTF-8"}


def run_systemd(command: Sequence[str]) -> str:
    """Run systemd-run or systemctl; its output, or SystemdError with what it said."""
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
            env=_systemd_environment(), stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise SystemdError(f"{command[0]} did not answer within {COMMAND_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        raise SystemdError(f"{command[0]} {command[1]} failed: {said}")
    return done.stdout


class SystemdLauncher:
    """One transient service per workload, started and watched through systemd."""

    name = "systemd"

    def __init__(self, journal_id: str) -> None:
        self._journal_id = journal_id
        self._last: dict[str, UnitStatus] = {}  # unit -> what systemctl last said

    @property
    def switches_users(self) -> bool:
        return True  # PID 1 does, whatever the daemon's own privileges

    def unit_of(self, files: WorkloadFiles) -> str:
        return unit_name(self._journal_id, files.workload_id)

    def check_environment(self, env: Mapping[str, str]) -> None:
        check_environment(env)

    def launch(self, files: WorkloadFiles, spec: LaunchSpec) -> Launched:
        group = _group_of(spec.account)
        check_environment(spec.env)
        files.prepare()
        unit = self.unit_of(files)
        write_environment_file(files.dir / ENVIRONMENT_FILE, spec.env)
        try:
            run_systemd(run_command(unit, spec, files, group))
            status = self.status(unit)
        except OSError:
            self._remove(unit)  # whatever got started: the caller hears "not started"
            raise
        finally:
            # Type=exec: systemd-run returned once the command was exec'd, so PID 1
            # has read the file; the values need not stay on disk.
            (files.dir / ENVIRONMENT_FILE).unlink(missing_ok=True)
        pid = status.main_pid
        log.info("workload %s started as unit %s (pid %d)", files.workload_id, unit, pid)
        return Launched.of(pid, unit=unit)

    def find(self, files: WorkloadFiles) -> Launched | None:
        unit = self.unit_of(files)
        status = self.status(unit)  # a daemon that cannot tell must not start it again
        if not status.exists:
            return None
        pid = status.main_pid
        return Launched.of(pid, unit=unit)

    def adopt(self, files: WorkloadFiles, pid: int, start_time_unix_ms: int) -> Launched | None:
        unit = self.unit_of(files)
        return Launched(pid, start_time_unix_ms or None, unit=unit, identity=files.kept_identity())

    def still_running(self, launched: Launched) -> bool:
        """Its main process, by pid and start time; systemd only once that is gone.

        Asking systemd costs a systemctl process (~7 ms of CPU) per workload per
        sweep; /proc answers for free while the workload runs.
        """
        if main_process_alive(launched):
            return True
        try:
            return self.status(launched.unit).running
        except OSError as exc:
            # Unknown is not ended: watch it again on the next tick.
            log.warning("cannot ask systemd about %s: %s", launched.unit, exc)
            return True

    def signal(self, launched: Launched, signum: int) -> bool:
        """Every process in the unit's cgroup, however it detached itself."""
        kill = [SYSTEMCTL, "--no-ask-password", "kill", f"--signal={signum}", launched.unit]
        try:
            run_systemd(kill)
        except OSError:
            if not self.status(launched.unit).running:
                return False  # nothing left to signal
            raise
        return True

    def exit_code(self, files: WorkloadFiles, launched: Launched | None) -> int | None:
        unit = launched.unit if launched is not None else self.unit_of(files)
        try:
            return self.status(unit).exit_code
        except OSError as exc:
            log.warning("cannot ask systemd how %s ended: %s", unit, exc)
            last = self._last.get(unit)
            return last.exit_code if last is not None else None

    def workload_pid(self, launched: Launched) -> int | None:
        return launched.pid or None  # the unit's main process is the command itself

    def release(self, launched: Launched) -> None:
        self._remove(launched.unit)
        self._last.pop(launched.unit, None)

    def status(self, unit: str) -> UnitStatus:
        """What systemd says about `unit` now; SystemdError when it cannot be asked."""
        show = [SYSTEMCTL, "--no-ask-password", "show", f"--property={','.join(SHOWN)}", unit]
        status = parse_show(run_systemd(show))
        self._last[unit] = status
        return status

    def _remove(self, unit: str) -> None:
        """Stop the unit (ending what is left in its cgroup) and let systemd forget it."""
        for verb in ("stop", "reset-failed"):
            extra = ["--no-block"] if verb == "stop" else []
            try:
                run_systemd([SYSTEMCTL, "--no-ask-password", verb, *extra, unit])
            except OSError as exc:
                log.debug("%s %s: %s", verb, unit, exc)  # not loaded (any more): nothing to do


def main_process_alive(launched: Launched) -> bool:
    """The unit's main process still runs: that pid, the process it was recorded as."""
    return launched.is_running()


def _group_of(account: str | None) -> str:
    """The account's primary group; ValueError for no account, root or the daemon's own."""
    if not account:
        raise ValueError("workloads started through systemd run as their owner's account")
    try:
        entry = pwd.getpwnam(account)
    except KeyError:
        raise ValueError(f"no local account {account!r} to run the workload as") from None
    if entry.pw_uid == 0 or entry.pw_uid == os.geteuid():
        raise ValueError(f"workloads never run as root or the daemon's account ({account!r})")
    try:
        return grp.getgrgid(entry.pw_gid).gr_name
    except KeyError:
        return str(entry.pw_gid)
