"""Live reload (#13) of a real daemon process by a real SIGHUP: users, rules, Alertmanager,
kill policy change at once; open streams keep delivering; a bad config is refused whole; the
process stays the same."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.alerts.alertmanager import WATCHDOG_ALERTNAME
from node_daemon.auth.tokens import new_token, token_hash
from tests.certs import Authority, write
from tests.conftest import wait_for
from tests.node_daemon.alertmanager_harness import Recorder
from tests.node_daemon.reload_harness import (
    Collected,
    ReloadableDaemon,
    bearer,
    events_of,
    firing,
    more_than,
    open_streams,
)

TOKENS = {name: new_token() for name in ("alice", "bob", "carol")}
RAISED, CLEARED = pb.EVENT_KIND_ALERT_RAISED, pb.EVENT_KIND_ALERT_CLEARED


def users_toml(users: dict[str, str]) -> str:
    """[[auth.users]] for name -> role, each with its token from TOKENS."""
    return "".join(
        f'[[auth.users]]\nname = "{name}"\nrole = "{role}"\n'
        f'token_sha256 = "{token_hash(TOKENS[name])}"\n'
        for name, role in users.items()
    )


def config(
    users: dict[str, str],
    gpu_temp: str = "",
    alertmanager: Sequence[str] = (),
    allow_kill_job_processes: bool = False,
) -> str:
    daemon = f"[daemon]\nallow_kill_job_processes = {str(allow_kill_job_processes).lower()}\n"
    rules = f"[alerts.gpu_temp]\n{gpu_temp}\n" if gpu_temp else ""
    urls = ", ".join(f'"{u}"' for u in alertmanager)
    am = f"[alertmanager]\nurls = [{urls}]\nresend_interval_s = 1\n" if alertmanager else ""
    return daemon + rules + am + users_toml(users)


START_USERS = {"alice": "admin", "bob": "viewer"}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[ReloadableDaemon]:
    daemon = ReloadableDaemon(tmp_path, config(START_USERS)).start()
    yield daemon
    daemon.stop()


@pytest.fixture
def streams(node: ReloadableDaemon) -> Iterator[tuple[Collected, Collected]]:
    samples, events = open_streams(node.stub, TOKENS["alice"])
    wait_for(more_than(samples, 0), 10, "a first sample batch")
    yield samples, events
    samples.close()
    events.close()


def who(node: ReloadableDaemon, user: str) -> pb.Caller:
    return node.stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=bearer(TOKENS[user]))


def refused(node: ReloadableDaemon, user: str) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as caught:
        who(node, user)
    return caught.value.code()


def test_users_rules_and_kill_policy_change_at_once_and_open_streams_keep_delivering(
    node: ReloadableDaemon, streams: tuple[Collected, Collected]
) -> None:
    samples, events = streams
    alice = TOKENS["alice"]
    wait_for(lambda: firing(node.stub, alice, "gpu_lost") is not None, 10, "GPU 1 lost")
    lost = firing(node.stub, alice, "gpu_lost")
    assert lost is not None and firing(node.stub, alice, "gpu_temp") is None
    assert who(node, "bob").user == "bob" and not who(node, "alice").allow_kill_job_processes

    changed = config({"alice": "admin", "carol": "operator"}, "warning = 1\nwarning_for_s = 0",
                     allow_kill_job_processes=True)  # fmt: skip
    result = node.reload(changed)

    assert result == (
        "reload: 1 user added (carol); 1 user removed (bob); alert rules changed: gpu_temp; "
        "allow_kill_job_processes false -> true"
    )
    assert who(node, "carol").user == "carol"  # at once, on the connection already open
    assert refused(node, "bob") == grpc.StatusCode.UNAUTHENTICATED
    assert who(node, "alice").allow_kill_job_processes
    # The lowered warning line raises the alert; both streams opened before carry on.
    wait_for(lambda: events_of(events, RAISED, "gpu_temp"), 10, "gpu_temp raised on the stream")
    seen = samples.count()
    wait_for(more_than(samples, seen + 2), 10, "sample batches after the reload")
    # The alert of an unchanged rule is the same alert, never cleared.
    still = firing(node.stub, alice, "gpu_lost")
    assert still is not None and (still.id, still.started_unix_ms) == (
        lost.id,
        lost.started_unix_ms,
    )
    assert not events_of(events, CLEARED, "gpu_lost")
    assert node.alive() and samples.error is None and events.error is None


def test_a_changed_rule_keeps_its_firing_alert_while_the_condition_holds(
    node: ReloadableDaemon, streams: tuple[Collected, Collected]
) -> None:
    """The detectors keep their state over a reload: a longer duration does not make the
    alert clear and wait to fire again; only a line the value no longer reaches clears it."""
    samples, events = streams
    alice = TOKENS["alice"]
    node.reload(config(START_USERS, "warning = 1\nwarning_for_s = 0"))
    wait_for(lambda: firing(node.stub, alice, "gpu_temp") is not None, 10, "gpu_temp raised")
    raised = firing(node.stub, alice, "gpu_temp")

    result = node.reload(config(START_USERS, "warning = 2\nwarning_for_s = 3600"))

    assert result == "reload: alert rules changed: gpu_temp"
    seen = samples.count()
    wait_for(more_than(samples, seen + 3), 10, "sample batches after the reload")
    still = firing(node.stub, alice, "gpu_temp")
    assert still is not None and raised is not None and still.id == raised.id
    assert not events_of(events, CLEARED, "gpu_temp")
    # Back to the default line (75 °C), which the idle GPU is far below: now it clears.
    node.reload(config(START_USERS))
    wait_for(lambda: events_of(events, CLEARED, "gpu_temp"), 10, "gpu_temp cleared")
    assert firing(node.stub, alice, "gpu_temp") is None


def test_a_bad_config_is_refused_whole_logged_and_the_old_one_serves(
    node: ReloadableDaemon,
) -> None:
    bad_value = config({"alice": "admin"}) + '[alerts.memory_temp]\nwarning = "hot"\n'
    result = node.reload(bad_value)

    assert result.startswith("reload rejected, the configuration in force is kept: ")
    assert f"{node.config}: alerts.memory_temp.warning: expected float" in result
    assert " ERROR gpufleet.daemon: reload rejected" in node.log()
    # Nothing of it was applied: bob (removed in the bad file) still calls.
    assert who(node, "bob").user == "bob"
    metrics = node.metrics()
    assert 'gpufleet_config_reloads_total{result="rejected"} 1.0' in metrics
    assert 'gpufleet_config_reloads_total{result="ok"} 0.0' in metrics
    assert "gpufleet_config_last_reload_successful 0.0" in metrics

    assert "is not valid TOML" in node.reload(config(START_USERS) + "[alerts\n")
    assert node.reload(config({"alice": "admin"})) == "reload: 1 user removed (bob)"
    assert refused(node, "bob") == grpc.StatusCode.UNAUTHENTICATED
    metrics = node.metrics()
    assert 'gpufleet_config_reloads_total{result="ok"} 1.0' in metrics
    assert 'gpufleet_config_reloads_total{result="rejected"} 2.0' in metrics
    assert "gpufleet_config_last_reload_successful 1.0" in metrics
    assert node.alive()


def test_settings_bound_at_start_are_named_and_kept(node: ReloadableDaemon) -> None:
    moved = config(START_USERS).replace("[daemon]\n", '[daemon]\nlisten = "127.0.0.1:1"\n')
    moved = moved.replace("[daemon]\n", "[daemon]\nhistory_seconds = 7200\n")

    result = node.reload(moved)

    assert result == "reload: no changes"
    # listen comes from the flag (flags win over the file): not changed, so not named.
    assert "WARNING gpufleet.daemon: reload: needs a restart: history_seconds (" in node.log()
    assert who(node, "alice").user == "alice"  # still serving where it listened


def tls_config(directory: Path, name: str, users: dict[str, str]) -> str:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    return f'[daemon]\n[tls]\ncert = "{cert}"\nkey = "{key}"\n' + users_toml(users)


def test_a_new_certificate_serves_new_connections_and_open_ones_keep_theirs(
    tmp_path: Path,
) -> None:
    """TLS beyond loopback: the reload swaps the port's certificate for the next handshake;
    a stream on a connection made before keeps delivering; a reload that would leave such a
    port without users is refused: as lowering the security posture, and, where the file
    allows that, as the start would refuse it."""
    old_ca, new_ca = Authority("old CA"), Authority("new CA")
    write(tmp_path, "old", old_ca.issue("localhost", server=True))
    write(tmp_path, "new", new_ca.issue("localhost", server=True))
    node = ReloadableDaemon(tmp_path, tls_config(tmp_path, "old", START_USERS))
    node.process.listen = "0.0.0.0:0"
    node.start(grpc.ssl_channel_credentials(old_ca.pem))
    samples, events = open_streams(node.stub, TOKENS["alice"])
    try:
        wait_for(more_than(samples, 0), 10, "a first sample batch over TLS")

        result = node.reload(tls_config(tmp_path, "new", START_USERS))

        assert result == "reload: tls certificate files changed"
        with node.connect(grpc.ssl_channel_credentials(new_ca.pem)) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            call = stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=bearer(TOKENS["bob"]))
            assert call.user == "bob"
        with node.connect(grpc.ssl_channel_credentials(old_ca.pem)) as channel:
            stale = pb_grpc.NodeServiceStub(channel).WhoAmI
            with pytest.raises(grpc.RpcError) as caught:
                stale(pb.WhoAmIRequest(), timeout=5, metadata=bearer(TOKENS["bob"]))
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # the old CA no longer fits
        seen = samples.count()
        wait_for(more_than(samples, seen + 2), 10, "the old connection's stream delivering")

        lowered = node.reload(tls_config(tmp_path, "new", {}))
        assert lowered.startswith("reload rejected") and "authentication turned off" in lowered
        allow = "[reload]\nallow_weaker_security = true\n"
        exposed = node.reload(allow + tls_config(tmp_path, "new", {}))
        assert exposed.startswith("reload rejected")
        assert "refusing to listen on 0.0.0.0:0 without tokens" in exposed
        assert who(node, "alice").user == "alice" and node.alive()
    finally:
        samples.close()
        events.close()
        node.stop()


@pytest.fixture
def two_recorders() -> Iterator[tuple[Recorder, Recorder]]:
    first, second = Recorder(), Recorder()
    yield first, second
    first.close()
    second.close()


def pushed(recorder: Recorder, alertname: str) -> int:
    return sum(
        1 for body in recorder.snapshot() for a in body
        if isinstance(a, dict) and a.get("labels", {}).get("alertname") == alertname
    )  # fmt: skip


def silence_posts(recorder: Recorder) -> list[object]:
    return [r.body for r in recorder.recorded() if r.method == "POST" and "silences" in r.path]


def test_a_changed_alertmanager_url_moves_the_push_with_its_alerts_and_silences(
    tmp_path: Path, two_recorders: tuple[Recorder, Recorder]
) -> None:
    first, second = two_recorders
    node = ReloadableDaemon(tmp_path, config(START_USERS, alertmanager=[first.url])).start()
    try:
        wait_for(lambda: pushed(first, "gpu_lost"), 10, "gpu_lost pushed to the first")
        matchers = [pb.SilenceMatcher(label="alertname", pattern="gpu_lost")]
        request = pb.CreateSilenceRequest(matchers=matchers, duration_s=3600, comment="swap")
        node.stub.CreateSilence(request, timeout=5, metadata=bearer(TOKENS["alice"]))
        wait_for(lambda: silence_posts(first), 10, "the silence mirrored into the first")

        result = node.reload(config(START_USERS, alertmanager=[second.url]))

        assert result == "reload: alertmanager urls changed"
        wait_for(lambda: pushed(second, "gpu_lost"), 10, "gpu_lost pushed to the second")
        wait_for(lambda: silence_posts(second), 10, "the silence mirrored into the second")
        # The first saw the watchdog ended (as on a clean stop), then nothing more.
        after = len(first.recorded())
        wait_for(lambda: pushed(second, "gpu_lost") >= 3, 10, "two more rounds to the second")
        assert len(first.recorded()) == after
        farewell = first.snapshot()[-1]
        assert [a["labels"]["alertname"] for a in farewell] == [WATCHDOG_ALERTNAME]
        assert node.alive()
    finally:
        node.stop()


def test_the_unit_reloads_by_sighup() -> None:
    unit = Path(__file__).resolve().parents[2] / "installer/systemd/gpufleet-daemon.service"
    assert "\nExecReload=/bin/kill -HUP $MAINPID\n" in unit.read_text(encoding="utf-8")


# -- gpufleet daemon --check-config ---------------------------------------------------------


def check_config(path: Path, *flags: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "node_daemon", "daemon", "--check-config", str(path), *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)}, check=False)  # fmt: skip


def test_check_config_says_ok_or_why_not_and_starts_nothing(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(config(START_USERS, "warning = 70"), encoding="utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(config(START_USERS, 'warning = "hot"'), encoding="utf-8")
    no_jwks = tmp_path / "no-jwks.toml"
    no_jwks.write_text(f'[auth]\njwks_file = "{tmp_path}/missing.json"\n', encoding="utf-8")
    exposed = tmp_path / "exposed.toml"
    exposed.write_text('[daemon]\nlisten = "0.0.0.0:50051"\n', encoding="utf-8")

    ok = check_config(good, cwd=tmp_path)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, f"{good}: OK\n", "")
    wrong = check_config(bad, cwd=tmp_path)
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert f"{bad}: alerts.gpu_temp.warning: expected float" in wrong.stderr
    missing = check_config(no_jwks, cwd=tmp_path)
    assert missing.returncode == 2 and "missing.json" in missing.stderr
    refused = check_config(exposed, cwd=tmp_path)
    assert refused.returncode == 2 and "refusing to listen on 0.0.0.0:50051" in refused.stderr
    assert check_config(tmp_path / "absent.toml", cwd=tmp_path).returncode == 2
    # Flags still win, as at start: the flag makes the exposed file acceptable.
    assert check_config(exposed, "--listen", "127.0.0.1:0", cwd=tmp_path).returncode == 0
    # It never started anything: no state directory, no journal anywhere under HOME.
    assert not list(tmp_path.rglob("*.sqlite3")) and not (tmp_path / ".local").exists()
