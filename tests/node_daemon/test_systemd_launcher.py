"""The systemd launcher's parts that need no systemd: names, the environment file, the command.

What needs a real systemd as PID 1 (the unit as the owner, its cgroup, cancel,
re-adoption) runs in tests/installer/test_in_container.py. Here: the unit name
a restarted daemon finds again, the environment file (private, read back
exactly by /bin/sh, whose double-quote rules EnvironmentFile= follows), a
command line without any environment value in it, `systemctl show` parsing,
the launcher choice, and the refusals.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.states import WorkloadState
from node_daemon.backends.procinfo import process_start_time_unix_ms
from node_daemon.backends.readings import GpuReading, GpuStatic
from node_daemon.control.launcher import DirectLauncher, Launched, LaunchSpec, WorkloadFiles
from node_daemon.control.launcher_choice import choose_launcher
from node_daemon.control.records import WorkloadRequest
from node_daemon.control.reservations import ReservationLedger
from node_daemon.control.settings import parse_workload_settings
from node_daemon.control.systemd_launcher import (
    ENTER_WORK_DIR,
    ENVIRONMENT_FILE,
    SystemdLauncher,
    check_environment,
    main_process_alive,
    parse_show,
    run_command,
    unit_name,
    write_environment_file,
)
from node_daemon.control.workloads import BadWorkload, NodeView, WorkloadManager
from node_daemon.errors import ConfigError
from node_daemon.journal.event_journal import EventJournal

JOURNAL_ID = "0123abcd" + "e" * 24
TRICKY = {
    "MY_VAR": 'two words "quoted" $HOME ${USER} `id` $(id) \\back\\slash\nsecond line\ttab',
    "ENDS_WITH_BACKSLASH": "c:\\",
    "SINGLE": "'single' quotes; and # not a comment",
    "EMPTY": "",
    "UNICODE": "grüße ✓",
}


def test_unit_names_are_the_same_for_every_daemon_of_one_journal() -> None:
    name = unit_name(JOURNAL_ID, "w-12")
    assert name == "gpufleet-workload-0123abcd-w-12.service"
    assert unit_name(JOURNAL_ID, "w-12") == name  # a restarted daemon finds it by name
    assert unit_name("ffff0000" + "0" * 24, "w-12") != name  # another journal's w-12


@pytest.mark.parametrize("workload_id", ["", "w 1", "w-1/../x", "w-1;reboot"])
def test_unit_names_refuse_what_could_name_another_unit(workload_id: str) -> None:
    with pytest.raises(ValueError, match="cannot name a systemd unit"):
        unit_name(JOURNAL_ID, workload_id)


def sourced_by_sh(path: Path) -> dict[str, str]:
    """What /bin/sh makes of the file: its double quotes are EnvironmentFile='s."""
    script = 'set -a; . "$1"; exec env -0'
    done = subprocess.run(["env", "-i", "/bin/sh", "-c", script, "sh", str(path)],
                          capture_output=True, check=True, timeout=10)  # fmt: skip
    pairs = [item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item]
    return dict(pairs)


def test_the_environment_file_is_private_and_reads_back_exactly(tmp_path: Path) -> None:
    path = tmp_path / ENVIRONMENT_FILE
    write_environment_file(path, TRICKY)
    info = path.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()
    read_back = sourced_by_sh(path)
    assert {name: read_back.get(name) for name in TRICKY} == TRICKY


def test_the_environment_file_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("untouched\n")
    path = tmp_path / ENVIRONMENT_FILE
    path.symlink_to(target)
    write_environment_file(path, {"A": "1"})
    assert target.read_text() == "untouched\n"
    assert not path.is_symlink() and sourced_by_sh(path)["A"] == "1"


@pytest.fixture
def files(tmp_path: Path) -> WorkloadFiles:
    return WorkloadFiles(tmp_path / "workloads", "w-7")


def spec(argv: list[str], env: dict[str, str] | None = None) -> LaunchSpec:
    return LaunchSpec(argv, env or {"SECRET_TOKEN": "s3cret-value-42"}, "alice", "/home/a/w-7")


def test_no_environment_value_is_on_the_command_line(files: WorkloadFiles) -> None:
    """argv is world-readable in /proc: the values go to the 0600 file, which PID 1 reads."""
    command = run_command("u.service", spec(["python", "train.py"]), files, "alice")
    assert not any("s3cret-value-42" in arg for arg in command)
    properties = [arg.removeprefix("--property=") for arg in command if arg.startswith("--p")]
    assert f"EnvironmentFile={files.dir / ENVIRONMENT_FILE}" in properties
    assert f"StandardOutput=append:{files.output}" in properties
    assert {"User=alice", "Group=alice", "RemainAfterExit=yes"} <= set(properties)
    assert "--service-type=exec" in command  # returns once exec'd: the file can go


def test_dollar_signs_reach_the_command_as_typed(files: WorkloadFiles) -> None:
    """PID 1 expands $NAME in a service's command line; what it gets back is the argv sent."""
    argv = ["sh", "-c", 'echo "$HOME" ${USER} $$', "cost: $5"]
    command = run_command("u.service", spec(argv), files, "alice")
    sent = command[command.index("--") + 1 :]
    wrapper = ["/bin/sh", "-c", ENTER_WORK_DIR, "gpufleet-workload", "/home/a/w-7"]
    assert [arg.replace("$$", "$") for arg in sent] == [*wrapper, *argv]
    assert all("$" not in arg.replace("$$", "") for arg in sent)


def test_the_wrapper_creates_its_work_dir_enters_it_and_runs_the_argv_exactly(
    tmp_path: Path,
) -> None:
    work = tmp_path / "home" / "w-7"
    argv = ["sh", "-c", 'pwd; printf "[%s]" "$@"', "x", "a b", "", "-n"]
    done = subprocess.run(["/bin/sh", "-c", ENTER_WORK_DIR, "gpufleet-workload", str(work), *argv],
                          capture_output=True, text=True, check=True, timeout=10)  # fmt: skip
    assert done.stdout == f"{work}\n[a b][][-n]"
    assert stat.S_IMODE(work.stat().st_mode) == 0o700


def test_the_wrapper_fails_like_the_runner_when_it_cannot_start(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    for work_dir, argv in ((str(blocker / "w-7"), ["true"]), (str(tmp_path), ["no-such-cmd-x"])):
        done = subprocess.run(["/bin/sh", "-c", ENTER_WORK_DIR, "gpufleet-workload", work_dir,
                               *argv], capture_output=True, text=True, timeout=10)  # fmt: skip
        assert done.returncode == 127, done.stderr


SHOW = (
    "LoadState=loaded\nActiveState={}\nSubState={}\nMainPID={}\nExecMainCode={}\n"
    "ExecMainStatus={}\n"
)


@pytest.mark.parametrize(
    ("shown", "running", "code"),
    [
        (SHOW.format("active", "running", 4242, 0, 0), True, None),
        (SHOW.format("active", "exited", 0, 1, 0), False, 0),
        (SHOW.format("failed", "failed", 0, 1, 3), False, 3),
        (SHOW.format("active", "exited", 0, 2, 15), False, -15),  # TERM: as the runner says
        (SHOW.format("failed", "failed", 0, 3, 6), False, -6),  # core dumped
        (SHOW.format("failed", "failed", 0, 1, 217), False, 217),  # systemd: no such user
    ],
)
def test_systemctl_show_tells_running_and_exit_code(shown: str, running: bool, code: int) -> None:
    status = parse_show(shown)
    assert status.exists and (status.running, status.exit_code) == (running, code)


def test_a_unit_systemd_does_not_know_has_no_exit_code() -> None:
    status = parse_show("LoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=0\n"
                        "ExecMainCode=0\nExecMainStatus=0\n")  # fmt: skip
    assert (status.exists, status.running, status.exit_code) == (False, False, None)


def test_a_running_workload_is_told_by_its_main_process_not_by_asking_systemd() -> None:
    """While the recorded pid runs with its recorded start time, no systemctl is needed."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        started = process_start_time_unix_ms(child.pid)
        assert main_process_alive(Launched(child.pid, started, unit="u.service"))
        # Another process under a reused pid: its start time gives it away.
        assert not main_process_alive(Launched(child.pid, started - 5000, unit="u.service"))
        assert not main_process_alive(Launched(child.pid, None, unit="u.service"))
    finally:
        child.kill()
        child.wait()
    assert not main_process_alive(Launched(child.pid, started, unit="u.service"))
    assert not main_process_alive(Launched(0, None, unit="u.service"))


def test_environment_names_systemd_would_drop_are_refused_by_name() -> None:
    check_environment({"GOOD_NAME": "1", "_x2": "2"})
    with pytest.raises(ValueError, match=r"'2BAD', 'my-var'"):
        check_environment({"my-var": "1", "2BAD": "2", "OK": "3"})


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[WorkloadManager]:
    journal = EventJournal(tmp_path / "journal.sqlite3")
    gpus = {0: GpuStatic(index=0, uuid="GPU-00000000", name="Test GPU")}
    manager = WorkloadManager(
        journal, tmp_path / "workloads", ReservationLedger(journal, lambda: 1),
        lambda: NodeView([GpuReading(index=0)], gpus), launcher=SystemdLauncher(JOURNAL_ID),
    )  # fmt: skip
    yield manager
    journal.close()


@pytest.mark.usefixtures("workload_accounts")
def test_a_name_systemd_would_drop_is_refused_at_submit(manager: WorkloadManager) -> None:
    request = WorkloadRequest(argv=("true",), owner="alice", gpu_count=1, env={"my-var": "1"})
    with pytest.raises(BadWorkload, match="my-var"):
        manager.submit(request, "alice")
    assert manager.workloads(include_ended=True) == []


@pytest.mark.usefixtures("workload_accounts")
def test_a_launch_systemd_refuses_leaves_nothing_running_and_no_environment_file(
    manager: WorkloadManager, tmp_path: Path
) -> None:
    """Here systemd is not PID 1: the real systemd-run refuses, and the caller hears why."""
    if shutil.which("systemd-run") is None:
        pytest.skip("systemd-run not installed")
    request = WorkloadRequest(argv=("sleep", "300"), owner="alice", gpu_count=1,
                              env={"TOKEN": "s3cret"})  # fmt: skip
    queued = manager.submit(request, "alice")
    with pytest.raises(Exception, match="systemd-run") as refused:
        manager.assign(queued.id, [0], "alice")
    assert type(refused.value).__name__ == "WorkloadConflict"
    assert manager.get(queued.id, include_ended=True).state is WorkloadState.FAILED
    assert not (tmp_path / "workloads" / queued.id / ENVIRONMENT_FILE).exists()


def test_the_launcher_setting_is_checked() -> None:
    assert parse_workload_settings({"launcher": "systemd"}, "t.toml").launcher == "systemd"
    assert parse_workload_settings({}, "t.toml").launcher == "auto"
    with pytest.raises(ConfigError, match="launcher must be one of 'auto', 'systemd', 'direct'"):
        parse_workload_settings({"launcher": "sometimes"}, "t.toml")


def test_without_systemd_as_pid_1_auto_starts_directly_and_systemd_is_refused(
    tmp_path: Path,
) -> None:
    absent = tmp_path / "run-systemd-system"
    assert isinstance(choose_launcher("auto", JOURNAL_ID, absent), DirectLauncher)
    assert isinstance(choose_launcher("direct", JOURNAL_ID), DirectLauncher)
    with pytest.raises(ConfigError, match="systemd is not PID 1 here"):
        choose_launcher("systemd", JOURNAL_ID, absent)


def test_auto_takes_systemd_where_it_runs_and_the_daemon_may_start_units(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0 or shutil.which("systemd-run") is None or not shutil.which("systemctl"):
        pytest.skip("needs root (who may always start units) and systemd's tools")
    present = tmp_path / "run-systemd-system"
    present.mkdir()
    chosen = choose_launcher("auto", JOURNAL_ID, present)
    assert isinstance(chosen, SystemdLauncher) and chosen.switches_users
