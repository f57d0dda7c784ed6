"""`gpufleet daemon --demo`: any owner's workload as the daemon's own account, on simulated
GPUs on loopback only; a day of history from the start; its workloads end with it."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from node_daemon.config import ConfigError, DaemonConfig, validate
from node_daemon.control.accounts import own_account
from node_daemon.control.records import WorkloadRequest
from node_daemon.control.settings import WorkloadSettings
from node_daemon.control.wire import workload_from_body
from node_daemon.history.demo_day import DAY_MS, demo_day_stamps, seed_demo_day
from node_daemon.history.settings import HistorySettings
from node_daemon.history.store import HistoryStore
from node_daemon.journal.event_journal import EventJournal
from node_daemon.server import JOURNAL_FILE
from tests.conftest import DaemonFactory, wait_for
from tests.own_processes import alive


def daemon_refuses(tmp_path: Path, *flags: str) -> str:
    """Start `gpufleet daemon` with `flags`; assert it refused at start (2); its message."""
    done = subprocess.run(
        [sys.executable, "-m", "node_daemon", "daemon", "--state-dir", str(tmp_path / "state"),
         "--ready-file", str(tmp_path / "ready"), *flags],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert not (tmp_path / "ready").exists()
    return done.stderr


@pytest.mark.parametrize("backend", ["nvml", "auto"])
def test_demo_with_real_gpus_is_refused_at_start(tmp_path: Path, backend: str) -> None:
    said = daemon_refuses(tmp_path, "--backend", backend, "--demo")
    assert "--demo is for a simulated node only" in said and "Traceback" not in said


def test_demo_beyond_loopback_is_refused_even_when_insecure(tmp_path: Path) -> None:
    said = daemon_refuses(tmp_path, "--backend", "simulated", "--demo", "--insecure",
                          "--listen", "0.0.0.0:0")  # fmt: skip
    assert "loopback only" in said


def test_the_default_backend_is_no_demo() -> None:
    with pytest.raises(ConfigError, match="simulated node only"):
        validate(DaemonConfig(demo=True))
    assert validate(DaemonConfig(demo=True, backend="simulated")).demo


def workload(owner: str) -> WorkloadRequest:
    return WorkloadRequest(argv=("sleep", "600"), owner=owner, gpu_count=1)


def test_any_owner_runs_as_the_daemons_account_and_ends_with_it(
    start_daemon: DaemonFactory, tmp_path: Path
) -> None:
    daemon = start_daemon(demo=True, gpus=4,
                          workloads=WorkloadSettings(work_dir=f"{tmp_path}/{{id}}"))  # fmt: skip
    wait_for(lambda: daemon.sampler.latest is not None, what="a first sample")
    started = []
    for gpu, owner in enumerate(("root", "nobody", "no-such-user-x9", "team:ml")):
        queued = daemon.workloads.submit(workload(owner), actor="admin", submitter="admin")
        assert queued.run_as == own_account().name and queued.owner == owner
        started.append(daemon.workloads.assign(queued.id, [gpu], actor="admin"))
    wait_for(lambda: all(Path(f"/proc/{w.pid}/task/{w.pid}/children").read_text().strip()
                         for w in started), what="the workloads' own processes")  # fmt: skip
    children = [int(Path(f"/proc/{w.pid}/task/{w.pid}/children").read_text()) for w in started]
    assert all(_uid(pid) == os.geteuid() for pid in children)
    daemon.stop(grace_s=0.5)
    gone = [pid for pid in [w.pid for w in started] + children if alive(pid)]
    assert not gone
    assert daemon.config.state_dir is not None
    journal = EventJournal(daemon.config.state_dir / JOURNAL_FILE)  # as the next start reads it
    try:
        ended = [workload_from_body(b) for b in journal.records("workload", active_only=False)]
    finally:
        journal.close()
    assert {w.state.value for w in ended} == {"cancelled"} and len(ended) == len(started)


def test_a_real_node_still_refuses_root(start_daemon: DaemonFactory) -> None:
    from node_daemon.control.accounts import NoAccount

    daemon = start_daemon(gpus=2)
    with pytest.raises(NoAccount, match="never run as root"):
        daemon.workloads.submit(workload("root"), actor="admin", submitter="admin")


def test_a_day_of_history_is_written_in_bulk_and_only_once(tmp_path: Path) -> None:
    now_ms = 1_800_000_000_000
    path, settings = tmp_path / "history.sqlite3", HistorySettings()
    simulated = {"gpu_count": 2, "seed": 3, "model": "h100"}
    seeded = seed_demo_day(path, settings, 1000, simulated, now_ms)
    assert seeded == len(demo_day_stamps(now_ms, 1000))
    assert seed_demo_day(path, settings, 1000, simulated, now_ms) == 0  # a restart keeps it
    store = HistoryStore(path, settings, 1000)
    try:
        oldest = store.oldest_ms()
        minute = store.tiers[2]
        day_ago = store.read(minute, now_ms - DAY_MS, now_ms - DAY_MS + 600_000)
    finally:
        store.close()
    assert oldest["1m"] is not None and oldest["1m"] <= now_ms - DAY_MS + 60_000
    assert oldest["raw"] is not None and oldest["raw"] >= now_ms - 3_600_000
    assert len(day_ago) >= 9 and day_ago[0].layout.gpus == (0, 1)


def test_the_last_hour_is_seeded_every_sample_so_short_plots_have_no_gaps(
    tmp_path: Path,
) -> None:
    """A 15 min plot reads the raw tier: seeded every 10 s there, every point stood alone
    between gaps (the console draws a gap where a sample is missing)."""
    now_ms = 1_800_000_000_000
    path, settings = tmp_path / "history.sqlite3", HistorySettings()
    seed_demo_day(path, settings, 1000, {"gpu_count": 1, "seed": 3, "model": "h100"}, now_ms)
    store = HistoryStore(path, settings, 1000)
    try:
        raw = store.tiers[0]
        points = store.read(raw, now_ms - 900_000, now_ms)
    finally:
        store.close()
    stamps = [p.timestamp_ms for p in points]
    assert len(stamps) >= 899
    assert max(b - a for a, b in itertools.pairwise(stamps)) == 1000


def _uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[2])
