"""`gpufleet status | ps | alerts | ack | silence(s) | unsilence | reserve | release | kill |
health | drain | undrain` end to end.

Real daemons over real gRPC on loopback; the commands run as real processes
(`python -m node_daemon ...`), as a shell would run them. What an action did is
checked through the daemon's own RPCs, not through the command's output.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings, TlsSettings
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.server import NodeDaemon
from tests.certs import Authority, write
from tests.conftest import DaemonFactory, wait_for

LOST_EARLY = Scenario((ScenarioEvent(0.2, 1, "lost"),))
OTTO = new_token()


def gpufleet(home: Path, *argv: str) -> tuple[int, str, str]:
    """Run the command as a user would: its own process, its own (empty) config directory."""
    env = {k: v for k, v in os.environ.items() if k != "GPUFLEET_TOKEN"}
    env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "node_daemon", *argv], capture_output=True,
                          text=True, env=env, timeout=60, check=False)  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def calm(start_daemon: DaemonFactory) -> NodeDaemon:
    daemon = start_daemon(gpus=2, hostname="gpu-calm")
    wait_for(lambda: daemon.sampler.latest is not None, what="a first sample")
    return daemon


@pytest.fixture
def lost_backend() -> SimulatedBackend:
    """GPU 1 falls off the bus at once: a critical gpu_lost alert."""
    return SimulatedBackend(gpu_count=2, scenario=LOST_EARLY, step_s=0.1)


@pytest.fixture
def lost(start_daemon: DaemonFactory, lost_backend: SimulatedBackend) -> NodeDaemon:
    """A node whose GPU 1 falls off the bus: a critical gpu_lost alert."""
    daemon = start_daemon(backend=lost_backend, hostname="gpu-lost")
    wait_for(lambda: firing(str(daemon.address)), what="the gpu_lost alert")
    return daemon


@pytest.fixture
def unreachable() -> Iterator[str]:
    """An address nothing listens on: a port bound, never listened on, held for the test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def stub(address: str) -> Iterator[pb_grpc.NodeServiceStub]:
    with grpc.insecure_channel(address) as channel:
        yield pb_grpc.NodeServiceStub(channel)


def firing(address: str) -> list[pb.Alert]:
    with stub(address) as node:
        alerts = node.ListAlerts(pb.ListAlertsRequest(), timeout=5).alerts
    return [a for a in alerts if a.state == pb.ALERT_STATE_FIRING]


def test_status_table_json_and_exit_codes(home: Path, calm: NodeDaemon, lost: NodeDaemon,
                                          unreachable: str) -> None:  # fmt: skip
    a, b = str(calm.address), str(lost.address)
    code, out, err = gpufleet(home, "status", "--node", a)
    assert (code, err) == (0, "")
    header, row = out.splitlines()
    assert header.split()[:3] == ["NODE", "ADDRESS", "STATE"]
    assert row.split()[:4] == ["gpu-calm", a, "up", "2"]  # named by host name
    assert header.index("ADDRESS") == row.index(a)  # aligned columns

    code, out, _ = gpufleet(home, "status", "--node", a, "--node", b, "--json")
    assert code == 1  # a critical alert fires on b
    nodes = json.loads(out)["nodes"]
    assert [(n["node"], n["address"]) for n in nodes] == [("gpu-calm", a), ("gpu-lost", b)]
    assert nodes[0]["alerts"] == {"critical": 0, "warning": 0, "info": 0}
    assert nodes[1]["alerts"]["critical"] >= 1 and nodes[1]["host"] == "gpu-lost"
    assert nodes[0]["hottest_gpu"] in (0, 1) and nodes[0]["hottest_temp_c"] > 0

    code, out, err = gpufleet(home, "status", "--node", a, "--node", unreachable, "--json")
    assert code == 3
    assert f"gpufleet status: {unreachable}: unreachable" in err
    down = json.loads(out)["nodes"][1]
    assert down["node"] == unreachable and down["reachable"] is False


def test_ps_lists_the_processes_the_daemon_sees(home: Path, calm: NodeDaemon) -> None:
    latest = calm.sampler.latest
    assert latest is not None
    code, out, err = gpufleet(home, "ps", "--node", str(calm.address), "--json")
    assert (code, err) == (0, "")
    listed = json.loads(out)
    assert listed["errors"] == []
    rows = listed["processes"]
    assert rows, "the simulated node runs processes"
    assert set(rows[0]) == {"node", "address", "gpu", "pid", "user", "gpu_memory_bytes",
                            "start_time_unix_ms", "slurm_job_id", "command"}  # fmt: skip
    seen = {(r["gpu"], r["pid"]) for r in rows}
    after = calm.sampler.latest
    assert after is not None
    # ps read a sweep between these two: a process it lists is in one of them (or both).
    daemon = {(gpu, p.pid) for sweep in (latest, after)
              for gpu, procs in sweep.processes.items() for p in procs}  # fmt: skip
    assert seen & daemon, (seen, daemon)
    code, out, _ = gpufleet(home, "ps", "--node", str(calm.address))
    assert code == 0 and out.splitlines()[0].split()[:4] == ["NODE", "GPU", "PID", "USER"]


def test_alerts_then_ack_takes_effect_on_the_daemon(home: Path, lost: NodeDaemon) -> None:
    address = str(lost.address)
    code, out, _ = gpufleet(home, "alerts", "--node", address, "--json")
    assert code == 0
    alert = next(a for a in json.loads(out)["alerts"] if a["rule"] == "gpu_lost")
    assert alert["severity"] == "critical" and alert["gpu"] == 1 and alert["state"] == "firing"

    code, out, err = gpufleet(home, "ack", address, alert["id"], "--comment", "reseating it")
    assert (code, err) == (0, "")
    assert f"{alert['id']} (gpu_lost) acknowledged" in out
    acked = next(a for a in firing(address) if a.id == alert["id"])
    assert acked.acknowledge_comment == "reseating it" and acked.acknowledged_by

    code, out, _ = gpufleet(home, "alerts", "--node", address)
    assert code == 0 and "acked by" in out

    code, _, err = gpufleet(home, "ack", address, "a-999999")
    assert code == 1 and "gpufleet ack: gpu-lost: NOT_FOUND" in err


def test_silence_goes_to_the_nodes_the_pattern_names(home: Path, calm: NodeDaemon,
                                                     lost: NodeDaemon) -> None:  # fmt: skip
    a, b = str(calm.address), str(lost.address)
    pattern = ("--node", "gpu-l*", "--rule", "gpu_lost")
    code, out, err = gpufleet(home, "silence", "--at", a, "--at", b, *pattern,
                              "--for", "2h", "--comment", "card swap")  # fmt: skip
    assert (code, err) == (0, ""), err
    assert out.startswith("gpu-lost: silence s-")
    with stub(b) as node:
        silences = node.ListSilences(pb.ListSilencesRequest(), timeout=5).silences
        assert [(s.comment, {m.label: m.pattern for m in s.matchers}) for s in silences] == [
            ("card swap", {"node": "gpu-l*", "alertname": "gpu_lost"})
        ]
        assert silences[0].ends_unix_ms - silences[0].starts_unix_ms == pytest.approx(
            2 * 3_600_000, abs=60_000
        )
    with stub(a) as node:
        assert not node.ListSilences(pb.ListSilencesRequest(), timeout=5).silences
    wait_for(lambda: all(x.silence_id for x in firing(b)), what="the alert silenced")


@pytest.mark.parametrize(
    "argv, reason",
    [
        (("--rule", "gpu_lost", "--for", "2h"), "--comment"),
        (("--rule", "gpu_lost", "--for", "2 hours", "--comment", "x"), "a duration such as"),
        (("--for", "2h", "--comment", "x"), "name at least one of node, rule"),
        (("--rule", "x", "--for", "9d", "--comment", "x"), "at most 7 days"),
    ],
)
def test_silence_usage_errors_exit_2(home: Path, calm: NodeDaemon, argv: tuple[str, ...],
                                     reason: str) -> None:  # fmt: skip
    code, _, err = gpufleet(home, "silence", "--at", str(calm.address), *argv)
    assert code == 2 and reason in err


def test_no_nodes_is_a_usage_error(home: Path) -> None:
    code, _, err = gpufleet(home, "alerts")
    assert code == 2 and "no nodes; pass --node HOST:PORT" in err


def test_reserve_then_release(home: Path, calm: NodeDaemon) -> None:
    address = str(calm.address)
    code, out, err = gpufleet(home, "reserve", address, "--gpu", "1", "--holder", "alice",
                              "--for", "1h", "--reason", "benchmark", "--json")  # fmt: skip
    assert (code, err) == (0, "")
    made = json.loads(out)["results"][0]
    assert made["gpus"] == [1] and made["holder"] == "alice" and made["active"] is True
    with stub(address) as node:
        active = node.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations
        assert [r.id for r in active if r.active] == [made["id"]]
    code, out, _ = gpufleet(home, "release", address, made["id"])
    assert code == 0 and f"reservation {made['id']} of GPU 1 for alice released" in out
    with stub(address) as node:
        listed = node.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations
        assert not [r for r in listed if r.active]


@pytest.mark.usefixtures("workload_accounts")
def test_kill_names_the_start_time_and_refuses_a_reused_pid(
    home: Path, start_daemon: DaemonFactory
) -> None:
    daemon = start_daemon(gpus=2, hostname="gpu-kill")
    address = str(daemon.address)
    with stub(address) as node:
        request = pb.SubmitWorkloadRequest(argv=["sleep", "300"], owner="worker", gpu_count=1,
                                           actor="worker")  # fmt: skip
        queued = node.SubmitWorkload(request, timeout=5)
        node.AssignWorkload(pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[1]),
                            timeout=5)  # fmt: skip

    def sleeper() -> dict[str, object] | None:
        _, out, _ = gpufleet(home, "ps", "--node", address, "--json")
        rows = json.loads(out)["processes"]
        return next((r for r in rows if r["user"] == "worker" and r["gpu"] == 1), None)

    wait_for(sleeper, 20, "the sleeper in ps")
    row = sleeper()
    assert row is not None
    pid, started = str(row["pid"]), int(row["start_time_unix_ms"])  # type: ignore[call-overload]
    code, _, err = gpufleet(
        home, "kill", address, "1", pid, "--start-time-ms", str(started - 60_000)
    )
    # Another process that got this pid since: refused, the sleeper lives.
    assert code == 1 and "gpufleet kill: gpu-kill: FAILED_PRECONDITION" in err
    assert os.path.exists(f"/proc/{pid}")
    code, out, err = gpufleet(home, "kill", address, "1", pid, "--grace", "5", "--json")
    assert (code, err) == (0, "")
    killed = json.loads(out)["results"][0]
    assert killed["outcome"] == "terminated" and killed["start_time_unix_ms"] == started


def test_tls_and_token_from_the_profile(home: Path, tmp_path: Path,
                                        start_daemon: DaemonFactory) -> None:  # fmt: skip
    ca = Authority()
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    cert, key = write(tmp_path, "server", ca.issue("localhost", server=True))
    users = (User("otto", Role.OPERATOR, (), token_hash(OTTO)),)
    daemon = start_daemon(gpus=2, hostname="gpu-tls",
                          auth=AuthSettings(users, TlsSettings(cert, key, None)))  # fmt: skip
    target = f"localhost:{daemon.address.port}"
    token_file = tmp_path / "otto.token"
    token_file.write_text(OTTO + "\n")
    token_file.chmod(0o600)
    settings = tmp_path / "console.toml"
    settings.write_text(
        'profile = "lab"\n[profiles.lab]\n'
        f'nodes = ["{target}"]\nca = "{tmp_path / "ca.crt"}"\ntoken_file = "{token_file}"\n'
    )
    code, out, err = gpufleet(home, "status", "--config", str(settings), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["nodes"][0]["host"] == "gpu-tls"

    token_file.write_text(new_token() + "\n")
    code, _, err = gpufleet(home, "status", "--config", str(settings))
    assert code == 1 and f"{target}: UNAUTHENTICATED" in err

    code, _, err = gpufleet(home, "status", "--config", str(settings), "--profile", "nope")
    assert code == 2 and "no profile 'nope'" in err


def test_the_commands_import_no_qt(home: Path, calm: NodeDaemon) -> None:
    """They run on servers without a display: Qt is never loaded, nor numpy (which only
    `unsilence --everywhere` needs, and every gpufleet command would pay for at start)."""
    script = (
        "import sys; from node_daemon.commands.main import main; "
        f"code = main(['status', '--node', '{calm.address}']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph', "
        "'numpy'))); "
        "sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False, cwd=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_silence_until_too_late_and_a_pattern_naming_no_node(home: Path, calm: NodeDaemon) -> None:
    address = str(calm.address)
    end = "2099-01-01T00:00:00+00:00"  # beyond 7 days: refused before anything is sent
    code, _, err = gpufleet(home, "silence", "--at", address, "--rule", "x", "--until", end,
                            "--comment", "x")  # fmt: skip
    assert code == 2 and "at most 7 days" in err
    code, _, err = gpufleet(home, "silence", "--at", address, "--node", "gpu-z*", "--rule", "x",
                            "--for", "1h", "--comment", "x")  # fmt: skip
    assert code == 1 and "no node is named like 'gpu-z*' (nodes: gpu-calm)" in err
    with stub(address) as node:
        assert not node.ListSilences(pb.ListSilencesRequest(), timeout=5).silences


def test_reserve_until_a_time(home: Path, calm: NodeDaemon) -> None:
    until = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=3)
    code, out, err = gpufleet(home, "reserve", str(calm.address), "--gpu", "0",
                              "--holder", "team:ml", "--until", until.isoformat(),
                              "--reason", "x", "--json")  # fmt: skip
    assert (code, err) == (0, "")
    assert json.loads(out)["results"][0]["until_unix_ms"] == int(until.timestamp() * 1000)


def test_mutual_tls_from_the_profile_and_an_ack_as_the_certificate(
    home: Path, tmp_path: Path, lost_backend: SimulatedBackend, start_daemon: DaemonFactory
) -> None:
    ca = Authority()
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    cert, key = write(tmp_path, "server", ca.issue("localhost", server=True))
    client_cert, client_key = write(tmp_path, "ada", ca.issue("ada"))
    users = (User("ada", Role.ADMIN, (), token_hash(new_token())),)
    tls = TlsSettings(cert, key, tmp_path / "ca.crt", require_client_cert=True)
    daemon = start_daemon(backend=lost_backend, auth=AuthSettings(users, tls))
    target = f"localhost:{daemon.address.port}"
    settings = tmp_path / "console.toml"
    settings.write_text(
        f'[profiles.lab]\nnodes = ["{target}"]\nca = "{tmp_path / "ca.crt"}"\n'
        f'client_cert = "{client_cert}"\nclient_key = "{client_key}"\n'
    )
    base = ("--config", str(settings), "--profile", "lab")

    def gpu_lost() -> list[dict[str, object]]:
        _, out, _ = gpufleet(home, "alerts", *base, "--json")
        return [a for a in json.loads(out)["alerts"] if a["rule"] == "gpu_lost"]

    wait_for(gpu_lost, 20, "gpu_lost in `alerts` over mutual TLS")
    code, out, err = gpufleet(home, "ack", target, str(gpu_lost()[0]["id"]), *base)
    assert (code, err) == (0, "")
    assert out.rstrip().endswith("acknowledged by ada")  # the name the certificate carries

    settings.write_text(f'[profiles.lab]\nnodes = ["{target}"]\nca = "{tmp_path / "ca.crt"}"\n')
    code, _, err = gpufleet(home, "ack", target, "a-1", *base)
    assert code == 3 and f"gpufleet ack: {target}: unreachable" in err  # no client certificate


def test_the_daemon_only_stand_ins_name_exactly_the_registered_commands() -> None:
    """console/cli.py lists the commands again for installs without the console extra."""
    import argparse

    from console.cli import TERMINAL_COMMANDS
    from console.terminal.commands import add_terminal_commands

    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    add_terminal_commands(subparsers)
    # `submit` is no stand-in: without the extra, the daemon's one-node submit takes its place.
    assert "submit" in subparsers.choices
    assert tuple(c for c in subparsers.choices if c != "submit") == TERMINAL_COMMANDS


def profile(tmp_path: Path, *nodes: str) -> tuple[str, str]:
    """--config of a plaintext profile listing `nodes`: where NODE host names are looked up."""
    settings = tmp_path / "fleet.toml"
    settings.write_text("nodes = [" + ", ".join(f'"{n}"' for n in nodes) + "]\n")
    return "--config", str(settings)


def silences(address: str, include_expired: bool = False) -> list[pb.Silence]:
    with stub(address) as node:
        request = pb.ListSilencesRequest(include_expired=include_expired)
        return list(node.ListSilences(request, timeout=5).silences)


def test_a_maintenance_window_listed_then_ended_by_host_name(
    home: Path, tmp_path: Path, calm: NodeDaemon, lost: NodeDaemon
) -> None:
    a, b = str(calm.address), str(lost.address)
    fleet = profile(tmp_path, a, b)
    start = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=1)
    code, out, err = gpufleet(home, "silence", *fleet, "--node", "gpu-lost", "--rule", "gpu_*",
                              "--start", start.isoformat(), "--for", "2h",
                              "--comment", "PSU swap", "--json")  # fmt: skip
    assert (code, err) == (0, "")
    made = json.loads(out)["results"][0]
    assert (made["node"], made["address"], made["state"]) == ("gpu-lost", b, "pending")
    [window] = silences(b)
    assert window.id == made["id"] and window.starts_unix_ms == int(start.timestamp() * 1000)
    assert window.ends_unix_ms - window.starts_unix_ms == 2 * 3_600_000
    assert not silences(a)
    assert not any(x.silence_id for x in firing(b))  # a window that has not begun silences none

    code, out, err = gpufleet(home, "silences", *fleet, "--json")
    assert (code, err) == (0, "")
    [listed] = json.loads(out)["silences"]
    assert listed["id"] == window.id and listed["state"] == "pending"
    assert listed["matchers"] == [{"label": "node", "pattern": "gpu-lost"},
                                  {"label": "alertname", "pattern": "gpu_*"}]  # fmt: skip
    assert set(listed) >= {"starts_unix_ms", "ends_unix_ms", "created_by", "comment"}
    code, out, _ = gpufleet(home, "silences", *fleet)
    assert code == 0 and out.splitlines()[0].split()[:3] == ["NODE", "ID", "STATE"]
    assert out.splitlines()[1].split()[:3] == ["gpu-lost", window.id, "pending"]

    code, out, err = gpufleet(home, "unsilence", "gpu-lost", window.id, *fleet)
    assert (code, err) == (0, "")
    assert out.startswith(f"gpu-lost: silence {window.id} (node=gpu-lost alertname=gpu_*) expired")
    assert not silences(b)
    [ended] = silences(b, include_expired=True)
    assert ended.expired_by
    code, out, _ = gpufleet(home, "silences", *fleet, "--all", "--json")
    assert [s["state"] for s in json.loads(out)["silences"]] == ["expired"]
    code, _, err = gpufleet(home, "unsilence", "gpu-lost", window.id, *fleet)
    assert code == 1 and f"gpufleet unsilence: gpu-lost: FAILED_PRECONDITION: silence {window.id}" \
        " already expired" in err  # fmt: skip


def test_a_window_starting_in_the_past_is_a_usage_error(home: Path, calm: NodeDaemon) -> None:
    code, _, err = gpufleet(home, "silence", "--at", str(calm.address), "--rule", "x", "--start",
                            "2020-01-01T00:00", "--for", "1h", "--comment", "x")  # fmt: skip
    assert code == 2 and "the start is in the past" in err
    assert not silences(str(calm.address))


def test_node_by_host_name_and_messages_that_name_it(
    home: Path, tmp_path: Path, calm: NodeDaemon, lost: NodeDaemon
) -> None:
    a, b = str(calm.address), str(lost.address)
    fleet = profile(tmp_path, a, b)
    alert = next(x for x in firing(b) if x.rule == "gpu_lost")
    code, out, err = gpufleet(home, "ack", "GPU-LOST", alert.id, *fleet)  # case-insensitive
    assert (code, err) == (0, "")
    assert out.startswith(f"gpu-lost: {alert.id} (gpu_lost) acknowledged")
    assert next(x for x in firing(b) if x.id == alert.id).acknowledged_by

    code, out, _ = gpufleet(home, "reserve", "gpu-calm", "--gpu", "1", "--holder", "alice",
                            "--for", "1h", "--reason", "x", *fleet)  # fmt: skip
    assert code == 0 and out.startswith("gpu-calm: reservation ")
    with stub(a) as node:
        listed = node.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations
        assert [(r.holder, list(r.gpu_indices)) for r in listed if r.active] == [("alice", [1])]

    code, out, err = gpufleet(home, "alerts", *fleet)
    assert code == 0 and a not in out and b not in out and "gpu-lost" in out
    code, out, _ = gpufleet(home, "health", *fleet, "--node", "gpu-calm", "--json")
    assert code == 0 and {g["address"] for g in json.loads(out)["gpus"]} == {a}
    code, out, _ = gpufleet(home, "status", *fleet, "--node", "gpu-lost", "--node", a, "--json")
    assert [n["node"] for n in json.loads(out)["nodes"]] == ["gpu-lost", "gpu-calm"]
    code, _, err = gpufleet(home, "ps", *fleet, "--node", "gpu-nope")
    assert code == 2 and "no node is named 'gpu-nope'" in err

    code, _, err = gpufleet(home, "release", "gpu-nope", "r-1", *fleet)
    assert code == 2
    assert f"no node is named 'gpu-nope' (nodes: gpu-calm ({a}), gpu-lost ({b}))" in err


def test_an_ambiguous_name_and_one_a_silent_node_may_have(
    home: Path, tmp_path: Path, calm: NodeDaemon, start_daemon: DaemonFactory, unreachable: str
) -> None:
    twin = str(start_daemon(gpus=1, hostname="gpu-calm").address)
    a = str(calm.address)
    code, _, err = gpufleet(home, "drain", "gpu-calm", "0", "--reason", "x",
                            *profile(tmp_path, a, twin))  # fmt: skip
    assert code == 2 and "NODE 'gpu-calm' names 2 nodes; name one by HOST:PORT" in err
    code, out, _ = gpufleet(home, "status", *profile(tmp_path, a, twin), "--json")
    names = [n["node"] for n in json.loads(out)["nodes"]]
    assert names == [f"gpu-calm ({a})", f"gpu-calm ({twin})"]  # told apart by address

    code, _, err = gpufleet(home, "drain", "gpu-far", "0", "--reason", "x",
                            *profile(tmp_path, a, unreachable))  # fmt: skip
    assert code == 3  # it may be the node that did not answer: not a usage error
    assert err.startswith("gpufleet drain: gpu-far: no node that answered is named 'gpu-far'")
    assert f"(nodes: gpu-calm ({a}), {unreachable} (unreachable))" in err


def test_health_lists_states_and_reasons_and_drain_takes_a_gpu_out(
    home: Path, tmp_path: Path, calm: NodeDaemon, lost: NodeDaemon
) -> None:
    a, b = str(calm.address), str(lost.address)
    fleet = profile(tmp_path, a, b)

    def lost_gpu() -> dict[str, object] | None:
        _, out, _ = gpufleet(home, "health", *fleet, "--json")
        gpus = json.loads(out)["gpus"]
        return next((g for g in gpus if g["node"] == "gpu-lost" and g["gpu"] == 1
                     and g["state"] != "healthy"), None)  # fmt: skip

    wait_for(lost_gpu, 20, "the lost GPU's health in `gpufleet health`")
    code, out, err = gpufleet(home, "health", *fleet, "--json")
    assert code == 1 and err == ""  # a GPU needs a person: like status with a critical alert
    report = json.loads(out)
    gone = next(g for g in report["gpus"] if g["node"] == "gpu-lost" and g["gpu"] == 1)
    assert gone["state"] == "needs_reboot" and gone["reasons"] and gone["address"] == b
    assert {"code", "state", "summary", "action", "since_unix_ms"} <= set(gone["reasons"][0])
    assert [g["state"] for g in report["gpus"] if g["node"] == "gpu-calm"] == ["healthy"] * 2
    assert [n["healing"]["mode"] for n in report["nodes"]] == ["off", "off"]
    # The fault record: the lost GPU's spell is an incident and costs it 25 points
    # (needs reboot); a calm GPU has nothing on record.
    assert [i["kind"] for i in gone["incidents"]] == ["gpu_lost"]
    assert gone["reliability_score"] == 75.0 and gone["incidents"][0]["state"] == "needs_reboot"
    calm_gpus = [g for g in report["gpus"] if g["node"] == "gpu-calm"]
    assert [(g["reliability_score"], g["incidents"]) for g in calm_gpus] == [(100.0, [])] * 2

    code, out, err = gpufleet(home, "drain", "gpu-calm", "1", "--reason", "fan rattles", *fleet)
    assert (code, err) == (0, "")
    assert out.startswith("gpu-calm: GPU 1 drained by ") and "fan rattles" in out
    with stub(a) as node:
        condition = node.GetHealth(pb.GetHealthRequest(), timeout=5).gpus[1]
    assert condition.drained and condition.drain_reason == "fan rattles"
    code, out, _ = gpufleet(home, "health", "--node", a, "--problems")
    assert code == 0  # drained, but healthy
    header, row = out.splitlines()
    assert header.split() == ["NODE", "GPU", "STATE", "SINCE", "DRAINED", "RELIABILITY", "REASONS"]
    assert "100 (0 incidents)" in row
    assert row.startswith("gpu-calm") and row.split()[1:3] == ["1", "healthy"]
    assert "fan rattles" in row

    code, out, err = gpufleet(home, "undrain", "gpu-calm", "1", *fleet)
    assert (code, err) == (0, "") and out.startswith("gpu-calm: GPU 1 returned to placement")
    with stub(a) as node:
        assert not node.GetHealth(pb.GetHealthRequest(), timeout=5).gpus[1].drained
    code, _, err = gpufleet(home, "undrain", "gpu-calm", "1", *fleet)
    assert code == 1 and "gpu-calm: FAILED_PRECONDITION: GPU 1 is not drained" in err
    code, _, err = gpufleet(home, "drain", a, "7", "--reason", "x")
    assert code == 1 and "gpu-calm: INVALID_ARGUMENT: no GPU 7 on this node" in err


def test_drain_is_for_operators_and_names_who_drained(
    home: Path, tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    ca = Authority()
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    cert, key = write(tmp_path, "server", ca.issue("localhost", server=True))
    vera = new_token()
    users = (User("otto", Role.OPERATOR, (), token_hash(OTTO)),
             User("vera", Role.VIEWER, (), token_hash(vera)))  # fmt: skip
    daemon = start_daemon(gpus=2, hostname="gpu-auth",
                          auth=AuthSettings(users, TlsSettings(cert, key, None)))  # fmt: skip
    target = f"localhost:{daemon.address.port}"

    def as_user(token: str) -> tuple[str, ...]:
        token_file = tmp_path / "token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        settings = tmp_path / "auth.toml"
        settings.write_text(f'[profiles.lab]\nnodes = ["{target}"]\nca = "{tmp_path / "ca.crt"}"\n'
                            f'token_file = "{token_file}"\n')  # fmt: skip
        return "--config", str(settings), "--profile", "lab"

    code, out, err = gpufleet(home, "health", *as_user(vera), "--json")
    assert (code, err) == (0, "") and len(json.loads(out)["gpus"]) == 2  # a viewer reads
    code, _, err = gpufleet(home, "drain", "gpu-auth", "0", "--reason", "x", *as_user(vera))
    assert code == 1 and "gpufleet drain: gpu-auth: PERMISSION_DENIED" in err
    assert not daemon.health.conditions()[0].drain
    code, out, err = gpufleet(home, "drain", "gpu-auth", "0", "--reason", "x", *as_user(OTTO))
    assert (code, err) == (0, "") and out.startswith("gpu-auth: GPU 0 drained by otto: x")


def test_unsilence_everywhere_ends_the_copies_one_silence_command_made(
    home: Path, tmp_path: Path, calm: NodeDaemon, lost: NodeDaemon
) -> None:
    a, b = str(calm.address), str(lost.address)
    fleet = profile(tmp_path, a, b)
    code, out, _ = gpufleet(home, "silence", *fleet, "--node", "gpu-*", "--rule", "ecc_*",
                            "--for", "1h", "--comment", "firmware update", "--json")  # fmt: skip
    made = {r["node"]: r["id"] for r in json.loads(out)["results"]}
    assert code == 0 and set(made) == {"gpu-calm", "gpu-lost"}
    code, _, _ = gpufleet(home, "silence", *fleet, "--node", "gpu-calm", "--rule", "ecc_*",
                          "--for", "1h", "--comment", "another reason")  # fmt: skip
    assert code == 0
    code, out, err = gpufleet(home, "unsilence", "gpu-lost", made["gpu-lost"], "--everywhere",
                              *fleet)  # fmt: skip
    assert (code, err) == (0, "")
    assert sorted(line.split(":")[0] for line in out.splitlines()) == ["gpu-calm", "gpu-lost"]
    assert not silences(b)
    assert [x.comment for x in silences(a)] == ["another reason"]  # not a copy: it stays
