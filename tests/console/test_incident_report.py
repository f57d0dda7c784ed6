"""`gpufleet report` (#30's incident report) end to end.

A real daemon over loopback, with its history on disk and self-healing on, heats a GPU
to a critical alert that an operator acknowledges through the real RPC, self-healing
caps its power, and the alert clears as it cools. The command runs as a real process;
what its HTML says is held against the daemon's own ListAlerts, QueryHistory and journal.
The node's host name and the acknowledgement's comment carry markup, which must arrive
escaped.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from console.fleet import incident as record
from console.fleet.incident import (
    AlertLife,
    NodeStory,
    Outage,
    Window,
    key_moments,
    marks,
)
from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings, TlsSettings
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.history.settings import HistorySettings
from node_daemon.server import NodeDaemon
from tests.certs import Authority, write
from tests.conftest import DaemonFactory, wait_for
from tests.console.test_replay import HEAT_AND_COOL
from tests.console.test_terminal import gpufleet, home, unreachable  # noqa: F401
from tests.node_daemon.test_healing_daemon import Events, settings
from tests.node_daemon.test_state_at import critical_alert, hot_alert, now_ms

HOSTILE_HOST = "gpu-<script>alert('host')</script>"
HOSTILE_COMMENT = '<script>alert("ack")</script> fan <b>2</b>'
# Self-healing caps a GPU hot for a simulated second; restores it once cool.
POWER_CAP = settings('[healing]\nmode = "on"\n[healing.power_cap]\nabove_c = 80\n'
                     "above_for_s = 1\ncool_c = 70\nrestore_after_cool_s = 1\n")  # fmt: skip


@dataclass
class Incident:
    address: str
    node: pb_grpc.NodeServiceStub
    alert: pb.Alert  # GPU 1's temperature alert, cleared
    start: int  # the window: before the alert, after its clear (Unix ms)
    end: int


def local_iso(at_ms: int) -> str:
    return dt.datetime.fromtimestamp(at_ms / 1000).isoformat(timespec="milliseconds")


def _cleared(node: pb_grpc.NodeServiceStub) -> bool:
    alert = hot_alert(node, include_cleared=True)
    return alert is not None and alert.HasField("cleared_unix_ms")


@pytest.fixture
def incident(start_daemon: DaemonFactory) -> Iterator[Incident]:
    backend = SimulatedBackend(gpu_count=2, scenario=HEAT_AND_COOL, step_s=5.0)
    started = now_ms()
    daemon = start_daemon(backend=backend, hostname=HOSTILE_HOST, healing=POWER_CAP,
                          history=HistorySettings(flush_interval_s=0.5))  # fmt: skip
    journal = Events(daemon)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        node = pb_grpc.NodeServiceStub(channel)
        wait_for(lambda: critical_alert(node), 30, "GPU 1's critical temperature alert")
        raised = critical_alert(node)
        assert raised is not None
        request = pb.AcknowledgeAlertRequest(alert_id=raised.id, comment=HOSTILE_COMMENT)
        node.AcknowledgeAlert(request, timeout=5)
        try:
            journal.wait_healing(30, action="power_cap")
        finally:
            journal.close()
        wait_for(lambda: _cleared(node), 30, "the alert cleared as GPU 1 cooled")
        alert = hot_alert(node, include_cleared=True)
        assert alert is not None
        end = alert.cleared_unix_ms + 200
        wait_for(lambda: now_ms() > end + 300, what="samples after the clear")
        yield Incident(str(daemon.address), node, alert, started, end)


def report(home: Path, *argv: str) -> tuple[int, str, str, str]:  # noqa: F811
    """`gpufleet report ... --out FILE`: its exit code, output, errors and the page."""
    out = home / "incident.html"
    out.unlink(missing_ok=True)
    code, stdout, stderr = gpufleet(home, "report", *argv, "--out", str(out))
    return code, stdout, stderr, out.read_text(encoding="utf-8") if out.exists() else ""


def row_of(page: str, alert_id: str) -> str:
    match = re.search(rf"<tr><td>[^<]*</td><td>{re.escape(alert_id)}</td>.*?</tr>", page)
    assert match, f"no row of {alert_id}"
    return match[0]


def charts_of(page: str, gpu: int) -> dict[str, tuple[int, float]]:
    """GPU `gpu`'s charts: metric → (points drawn, the max its label says)."""
    figure = re.search(rf'<figure class="gpu"[^>]*data-gpu="{gpu}".*?</figure>', page)
    if not figure:
        return {}
    return {m[1]: (int(m[2]), float(m[3])) for m in re.finditer(
        r'data-metric="(\w+)" data-points="(\d+)" data-max="([\d.]+)"', figure[0])}  # fmt: skip


def test_the_report_holds_the_alert_its_ack_the_healing_and_the_hot_gpu_s_history(
    home: Path,  # noqa: F811
    incident: Incident,
) -> None:
    code, out, err, page = report(home, "--node", incident.address, "--from",
                                  local_iso(incident.start), "--to", local_iso(incident.end),
                                  "--no-screenshots", "--json")  # fmt: skip
    assert (code, err) == (0, "")
    said = json.loads(out)
    assert said["alerts"] >= 1 and said["gpus_plotted"] >= 1 and said["errors"] == []

    alert = incident.alert
    row = row_of(page, alert.id)
    assert f'data-ms="{alert.started_unix_ms}"' in row  # raised
    assert f'data-ms="{alert.cleared_unix_ms}"' in row  # cleared
    assert f'data-ms="{alert.acknowledged_unix_ms}"' in row and "by local" in row
    assert "critical" in row and "gpu_temp" in row

    audit = page.split("<h2>Who did what (audit)</h2>")[1].split("<h2>")[0]
    assert "AcknowledgeAlert" in audit and "local" in audit
    healing = page.split("<h2>Self-healing</h2>")[1].split("<h2>")[0]
    assert "power_cap" in healing and "done" in healing
    assert page.count('class="mark"') >= 4  # raise, ack, clear, audit, healing on the line

    hot = charts_of(page, 1)
    assert set(hot) == {"temp_gpu_c", "power_w", "util_gpu_pct"}
    figure = re.search(r'data-gpu="1" data-start-ms="(\d+)" data-end-ms="(\d+)"', page)
    assert figure
    history = incident.node.QueryHistory(pb.QueryHistoryRequest(
        start_unix_ms=int(figure[1]), end_unix_ms=int(figure[2]), metrics=["temp_gpu_c"],
        gpu_indices=[1], max_points=800), timeout=5)  # fmt: skip
    temps = [v for v in history.series[0].max_values if not math.isnan(v)]
    assert hot["temp_gpu_c"] == (len(temps), pytest.approx(max(temps), abs=0.001))
    assert max(temps) >= 85.0
    assert charts_of(page, 0) == {}  # GPU 0 idled through it: not plotted

    assert "<script" not in page and "<b>2</b>" not in page
    assert "gpu-&lt;script&gt;alert(&#x27;host&#x27;)&lt;/script&gt;" in page
    assert "&lt;script&gt;alert(&quot;ack&quot;)&lt;/script&gt; fan &lt;b&gt;2&lt;/b&gt;" in page


@pytest.fixture
def calm(start_daemon: DaemonFactory) -> NodeDaemon:
    daemon = start_daemon(gpus=2, hostname="gpu-calm")
    wait_for(lambda: daemon.sampler.latest is not None, what="a first sample")
    return daemon


def test_an_unreachable_node_is_named_in_the_report_and_its_exit_code(
    home: Path,  # noqa: F811
    calm: NodeDaemon,
    unreachable: str,  # noqa: F811
) -> None:
    code, _, err, page = report(home, "--node", str(calm.address), "--node", unreachable,
                                "--from", "-1m", "--to", "-0s")  # fmt: skip
    assert code == 3
    assert f"gpufleet report: {unreachable}: unreachable" in err
    assert f"{unreachable} ({unreachable}) could not be reached" in page
    assert "No alert fired in the window." in page
    assert "No GPU had an alert or a self-healing action in the window." in page
    # The end of the window, as `gpufleet console --at END --screenshot` drew it.
    shots = page.split("<h2>The grid at key moments</h2>")[1]
    assert shots.count('src="data:image/png;base64,iVBORw0KGgo') == 1, shots[:2000]


@pytest.mark.parametrize(("argv", "said"), [
    (("--from", "yesterday", "--to", "-1m"), "'yesterday' is not a TIME"),
    (("--from", "-1m", "--to", "-2m"), "is not before --to"),
    (("--from", "-1m", "--to", "2999-01-01T00:00"), "is in the future"),
    (("--from", "-2m", "--to", "-1m", "--pdf"), "no PDF converter is installed"),
])  # fmt: skip
def test_usage_errors_exit_2_before_any_node_is_asked(
    home: Path,  # noqa: F811
    unreachable: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    argv: tuple[str, ...],
    said: str,
) -> None:
    """The node named is unreachable: had it been asked, the exit would be 3."""
    (home / "bin").mkdir()
    monkeypatch.setenv("PATH", str(home / "bin"))  # no converter there
    code, _, err, page = report(home, "--node", unreachable, *argv)
    assert code == 2 and said in err and "unreachable" not in err
    assert page == ""  # nothing written


def test_a_restart_is_an_outage_and_a_viewer_is_told_the_audit_needs_an_admin(
    home: Path,  # noqa: F811
    tmp_path: Path,
    start_daemon: DaemonFactory,
) -> None:
    ca = Authority()
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    cert, key = write(tmp_path, "server", ca.issue("localhost", server=True))
    vera = new_token()
    auth = AuthSettings((User("vera", Role.VIEWER, (), token_hash(vera)),),
                        TlsSettings(cert, key, None))  # fmt: skip
    state = tmp_path / "state"
    first = start_daemon(gpus=1, hostname="gpu-again", state_dir=state, auth=auth)
    wait_for(lambda: first.sampler.latest is not None, what="a first sample")
    first.stop(grace_s=0.5)
    again = start_daemon(gpus=1, hostname="gpu-again", state_dir=state, auth=auth)
    token = tmp_path / "vera.token"
    token.write_text(vera + "\n")
    token.chmod(0o600)
    settings = tmp_path / "console.toml"
    settings.write_text(f'[profiles.lab]\nnodes = ["localhost:{again.address.port}"]\n'
                        f'ca = "{tmp_path / "ca.crt"}"\ntoken_file = "{token}"\n')  # fmt: skip
    code, _, err, page = report(home, "--config", str(settings), "--profile", "lab",
                                "--from", "-1m", "--to", "-0s", "--no-screenshots")  # fmt: skip
    assert (code, err) == (0, "")
    outages = page.split("<h2>Node outages</h2>")[1].split("<h2>")[0]
    assert outages.count("<tr><td>") == 1  # the restart, not the first start
    assert "gpu-again" in outages and "the daemon started again" in outages
    audit = page.split("<h2>Who did what (audit)</h2>")[1].split("<h2>")[0]
    assert "gpu-again: no audit log: the node refused it (PERMISSION_DENIED" in audit
    assert "it takes the admin role" in audit


def test_key_moments_are_the_first_critical_the_outages_and_the_end_four_at_most() -> None:
    window = Window(1_000, 100_000)
    alerts = (AlertLife("n", "a-1", "gpu_temp", "critical", 1, "", 900, critical_ms=2_000),
              AlertLife("n", "a-2", "xid", "critical", 2, "", 3_000,
                        critical_ms=3_000))  # fmt: skip
    outages = tuple(Outage("n", t, None, "the daemon started again", t - 500)
                    for t in (50_000, 10_000, 20_000, 30_000))  # fmt: skip
    incident = record.Incident(window, 0, (NodeStory("n", "a:1", alerts=alerts, outages=outages),))
    assert [at for at, _ in key_moments(incident)] == [2_000, 10_000, 20_000, 100_000]
    # a-1 raised before the window (no mark), critical in it; a-2 raised critical.
    lanes = [(m.time_ms, m.lane, m.tone) for m in marks(incident) if m.lane == "alerts"]
    assert lanes[:2] == [(2_000, "alerts", "critical"), (3_000, "alerts", "critical")]


def test_a_gap_in_a_node_s_sampling_is_an_outage_shown_at_its_middle() -> None:
    window = Window(100_000, 1_000_000)
    # Every 5 s, but silent from 305 s to 400 s; samples before the window's start, and a
    # gap that ends before it, are not the window's.
    times = [*range(0, 60_000, 5_000), *range(95_000, 305_000, 5_000),
             *range(400_000, 1_100_000, 5_000)]  # fmt: skip
    gaps = record.history_gaps("gpu-quiet", times, 5_000, window)
    assert [(g.time_ms, g.since_ms, g.until_ms, g.shown_ms) for g in gaps] == [
        (305_000, 300_000, 400_000, 352_500)
    ]
    assert gaps[0].what.startswith("no samples for 1 min:"), gaps[0].what
    # Under GAP_STEPS steps (and GAP_MIN_MS) apart is sampling, however irregular.
    assert not record.history_gaps("n", [100_000, 125_000, 150_000], 10_000, window)
    # A gap straddling the window's start reaches into it.
    assert [g.time_ms for g in record.history_gaps("n", [0, 200_000], 5_000, window)] == [5_000]
    incident = record.Incident(window, 0, (NodeStory("gpu-quiet", "a:1", outages=tuple(gaps)),))
    assert key_moments(incident)[0] == (352_500, f"gpu-quiet: {gaps[0].what}")
