"""The demo as a newcomer meets it: real daemons, real gRPC, the terminal commands as processes.

One two-node demo serves the tests that only look (history, workloads, reservations,
the profile, a submit as root); the tests of its end start their own, and check by
the pids and process groups the demo started that nothing of it is left.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.demo_fleet import DemoFleet
from console.demo_profile import demo_profile_path
from gpufleet.client import calls
from gpufleet.client.blocking import NodeClient
from gpufleet.client.security import LinkSecurity
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.own_processes import alive

DAY_MS = 86_400_000


def gpufleet(config_home: Path, *argv: str) -> tuple[int, str, str]:
    """A terminal command as a user runs it: its own process, the demo's config directory."""
    env = {k: v for k, v in os.environ.items() if k != "GPUFLEET_TOKEN"}
    env |= {"XDG_CONFIG_HOME": str(config_home),
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "node_daemon", *argv], capture_output=True,
                          text=True, env=env, timeout=60, check=False)  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


class Demo:
    """A running DemoFleet, the config directory its profile is in, and a client per node."""

    def __init__(self, fleet: DemoFleet, config_home: Path) -> None:
        self.fleet, self.config_home = fleet, config_home
        self.security = LinkSecurity(token=fleet.token)

    def call(self, node: int, rpc, **fields):  # type: ignore[no-untyped-def]
        with NodeClient(self.fleet.targets[node], self.security) as client:
            return client.call(rpc, deadline_s=20, **fields)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    config_home = tmp_path_factory.mktemp("demo-config")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(config_home))
        fleet = DemoFleet(nodes=2, gpus=8)
        try:
            fleet.start()
            yield Demo(fleet, config_home)
        finally:
            fleet.stop()


def test_a_day_of_history_answers_for_a_day_ago(demo: Demo) -> None:
    now_ms = int(time.time() * 1000)
    answer = demo.call(0, calls.QUERY_HISTORY, start_unix_ms=now_ms - DAY_MS,
                       end_unix_ms=now_ms - DAY_MS + 3_600_000, metrics=["temp_gpu_c"])  # fmt: skip
    assert answer.timestamps_unix_ms, "no history a day ago"
    assert answer.timestamps_unix_ms[0] - (now_ms - DAY_MS) < 5 * 60_000
    temps = [v for s in answer.series for v in s.values if not math.isnan(v)]
    assert len(answer.series) == 8 and temps
    assert all(15 < t < 100 for t in temps)  # the model's temperatures, not zeros


def test_demo_users_workloads_run_and_wait(demo: Demo) -> None:
    code, out, err = gpufleet(demo.config_home, "queue", "--profile", "demo", "--json")
    assert code == 0, err
    rows = {(r["name"], r["owner"], r["state"]) for r in json.loads(out)["workloads"]}
    assert {("llama-pretrain", "alice", "running"), ("eval-sweep", "bob", "running"),
            ("finetune-70b", "carol", "queued"),
            ("render-batch", "alice", "running")} <= rows  # fmt: skip
    listed = demo.call(0, calls.LIST_WORKLOADS).workloads
    running = next(w for w in listed if w.name == "llama-pretrain")
    assert running.owner == "alice" and running.run_as != "alice"  # the demo's own account
    assert Path(f"/proc/{running.pid}").exists(), "its process is not running"


def test_reservations_are_listed(demo: Demo) -> None:
    held = {(r.holder, tuple(r.gpu_indices)) for node in (0, 1)
            for r in demo.call(node, calls.LIST_RESERVATIONS).reservations if r.active}  # fmt: skip
    assert held == {("team:ml", (6, 7)), ("bob", (6,))}


def test_the_profile_names_the_live_nodes_for_the_terminal(demo: Demo) -> None:
    profile = tomllib.loads((demo.config_home / "gpufleet" / "demo-profile.toml").read_text())
    assert profile["profiles"]["demo"]["nodes"] == demo.fleet.targets
    assert "--profile demo" in demo.fleet.first_message()
    code, out, err = gpufleet(demo.config_home, "alerts", "--profile", "demo", "--json")
    assert code == 0, err
    assert {row["node"] for row in json.loads(out)["errors"]} == set()
    code, out, err = gpufleet(demo.config_home, "status", "--profile", "demo")
    assert code in (0, 1), err  # 1: the incident node needs a person, as it should
    assert "gpu-node-01" in out and "gpu-node-02" in out


def test_the_demo_node_says_it_is_one(demo: Demo) -> None:
    assert demo.call(0, calls.GET_INVENTORY).demo


def test_submit_as_root_runs_on_the_demo(demo: Demo) -> None:
    code, out, err = gpufleet(demo.config_home, "submit", "--profile", "demo", "--node",
                              "gpu-node-01", "--owner", "root", "--assign", "5", "--",
                              "sleep", "600")  # fmt: skip
    assert code == 0, err
    assert "running" in out
    workload = next(w for w in demo.call(0, calls.LIST_WORKLOADS).workloads if w.owner == "root")
    assert workload.gpu_indices == [5]


def test_submit_as_root_is_still_refused_by_a_real_node(
    start_daemon: DaemonFactory, tmp_path: Path
) -> None:
    daemon: NodeDaemon = start_daemon(gpus=2)
    code, _, err = gpufleet(tmp_path, "submit", "--node", str(daemon.address), "--owner", "root",
                            "--", "sleep", "600")  # fmt: skip
    assert code == 1
    assert "never run as root" in err
    assert not daemon.workloads.workloads(include_ended=True)


# -- the end of a demo -------------------------------------------------------------------


def _workload_processes(fleet_targets: list[str], token: str) -> tuple[set[int], set[int]]:
    """The pids of the demo's workload runners and their children, and the runners' groups."""
    pids, groups = set(), set()
    for target in fleet_targets:
        with NodeClient(target, LinkSecurity(token=token)) as client:
            for w in client.call(calls.LIST_WORKLOADS, deadline_s=20).workloads:
                if w.pid:
                    pids.add(w.pid)
                    groups.add(os.getpgid(w.pid))
                    pids |= set(map(int, _children(w.pid)))
    return pids, groups


def _children(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


def _in_groups(groups: set[int]) -> list[int]:
    """Every live process of /proc whose process group is one of `groups`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and alive(int(entry.name)):
            try:
                if os.getpgid(int(entry.name)) in groups:
                    found.append(int(entry.name))
            except ProcessLookupError:
                pass
    return found


def test_stop_ends_daemons_workloads_and_the_profile(isolated_config: Path) -> None:
    fleet = DemoFleet(nodes=1, gpus=8)
    try:
        fleet.start()
        daemons = set(fleet.pids)
        workloads, groups = _workload_processes(fleet.targets, fleet.token)
        assert len(groups) == 2 and workloads  # alice's and bob's on gpu-node-01
        assert demo_profile_path().exists()
    finally:
        fleet.stop()
    assert not [pid for pid in daemons | workloads if alive(pid)]
    assert not _in_groups(groups)
    assert not demo_profile_path().exists()
    code, _, err = gpufleet(isolated_config.parent, "queue", "--profile", "demo")
    assert code == 2 and "gpufleet demo" in err


def test_sigterm_to_gpufleet_demo_ends_all_it_started(tmp_path: Path) -> None:
    """The real command, window and all (offscreen): a SIGTERM leaves no process behind."""
    env = {k: v for k, v in os.environ.items() if k != "GPUFLEET_TOKEN"}
    env |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "QT_QPA_PLATFORM": "offscreen",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}  # fmt: skip
    profile = tmp_path / "config" / "gpufleet" / "demo-profile.toml"
    demo = subprocess.Popen(
        [sys.executable, "-m", "node_daemon", "demo", "--nodes", "1",
         "--screenshot", str(tmp_path / "never.png")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for(lambda: profile.exists() or demo.poll() is not None, 60, "the demo's profile")
        assert demo.poll() is None, demo.communicate()[0].decode()
        written = tomllib.loads(profile.read_text())
        token = Path(written["profiles"]["demo"]["token_file"]).read_text().strip()
        daemons = set(map(int, _children(demo.pid)))
        workloads, groups = _workload_processes(written["profiles"]["demo"]["nodes"], token)
        assert daemons and len(groups) == 2
        demo.send_signal(signal.SIGTERM)
        out, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert b"--profile demo" in out
    assert not (tmp_path / "never.png").exists(), "the window ran to its screenshot"
    assert not [pid for pid in daemons | workloads if alive(pid)]
    assert not _in_groups(groups)
    assert not profile.exists()
