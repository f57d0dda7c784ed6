"""The Xid catalogue: its entries, the words it lends the Xid rule, what reaches Alertmanager."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.xid_catalogue import (
    XID_CATALOGUE,
    Action,
    Cause,
    describe_xid,
    xid_advice,
    xid_entry,
)
from node_daemon.alerts.alertmanager import AlertmanagerPusher
from node_daemon.alerts.am_payloads import alert_annotations
from node_daemon.alerts.findings import GpuTick
from node_daemon.alerts.occurrence_detectors import XidDetector
from node_daemon.alerts.rules import XidSettings, parse_alert_settings
from node_daemon.alerts.xid import critical_by_default
from node_daemon.backends.readings import GpuReading
from node_daemon.health.model import HealthState
from tests.conftest import wait_for
from tests.node_daemon import alertmanager_harness as harness
from tests.node_daemon.alertmanager_harness import Alertmanager, gpu_alert

# The codes issue #15 names, and the ones operators meet most.
NAMED = (13, 31, 32, 43, 45, 48, 54, 56, 57, 58, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109,
         119, 120, 121, 136, 140, 143, 144, 145, 146, 147, 148, 149, 150, 154, 155)  # fmt: skip


def xid_tick(t: float, *xids: int, gpu: int = 0) -> GpuTick:
    return GpuTick(t, GpuReading(index=gpu, xids=xids), None, ())


def test_the_catalogue_covers_nvidias_table_broadly() -> None:
    assert len(XID_CATALOGUE) >= 100
    assert set(NAMED) <= set(XID_CATALOGUE)
    for code, entry in XID_CATALOGUE.items():
        assert entry.code == code
        assert entry.meaning and entry.meaning == entry.meaning.strip(), code
        assert entry.causes and len(set(entry.causes)) == len(entry.causes), code
        assert not entry.note or entry.note.endswith("."), code


def test_health_states_are_the_wire_enums_numbers_and_the_catalogue_uses_them() -> None:
    wire = {
        name.removeprefix("GPU_HEALTH_STATE_"): number for name, number in pb.GpuHealthState.items()
    }
    assert {state.name: int(state) for state in HealthState} == {
        name: number for name, number in wire.items() if name != "UNSPECIFIED"
    }
    assert {e.health for e in XID_CATALOGUE.values()} >= {
        HealthState.HEALTHY,
        HealthState.NEEDS_RESET,
        HealthState.NEEDS_REBOOT,
    }


def test_actions_escalate_in_order_and_read_as_the_issue_says() -> None:
    assert list(Action) == sorted(Action)
    assert [a.words for a in Action][1:] == [
        "restart the application", "reset the GPU (nvidia-smi -r)", "reboot the node",
        "inspect the hardware (likely RMA)",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("code", "action", "health", "cause"),
    [
        (13, Action.RESTART_APPLICATION, HealthState.HEALTHY, Cause.APPLICATION),
        (31, Action.RESTART_APPLICATION, HealthState.HEALTHY, Cause.APPLICATION),
        (48, Action.RESET_GPU, HealthState.NEEDS_RESET, Cause.MEMORY),
        (63, Action.RESET_GPU, HealthState.DEGRADED, Cause.MEMORY),
        (64, Action.INSPECT_HARDWARE, HealthState.NEEDS_INSPECTION, Cause.MEMORY),
        (74, Action.RESET_GPU, HealthState.NEEDS_RESET, Cause.NVLINK),
        (79, Action.REBOOT_NODE, HealthState.NEEDS_REBOOT, Cause.BUS),
        (92, Action.NONE, HealthState.SUSPECT, Cause.MEMORY),
        (95, Action.RESET_GPU, HealthState.NEEDS_RESET, Cause.MEMORY),
        (54, Action.INSPECT_HARDWARE, HealthState.NEEDS_INSPECTION, Cause.POWER),
    ],
)
def test_well_known_codes(code: int, action: Action, health: HealthState, cause: Cause) -> None:
    entry = xid_entry(code)
    assert entry is not None
    assert (entry.action, entry.health, entry.causes[0]) == (action, health, cause)


def test_descriptions_and_advice_read_as_sentences() -> None:
    assert describe_xid(79) == "Xid 79: GPU has fallen off the bus"
    assert describe_xid(13) == "Xid 13: graphics engine exception"
    assert xid_advice(79) == (
        "Likely cause: the PCIe bus, the GPU hardware, power delivery or overheating. "
        "What to do: reboot the node. Recurring, inspect the GPU, its riser and its power."
    )
    assert xid_advice(48).startswith("Likely cause: GPU memory (HBM, ECC) or the GPU hardware.")


def test_an_unknown_code_says_where_to_look_and_asks_for_nothing() -> None:
    assert xid_entry(999) is None
    assert describe_xid(999) == "Xid 999: not in the catalogue; see NVIDIA's Xid catalogue"
    assert "look it up in NVIDIA's" in xid_advice(999)
    assert "docs.nvidia.com/deploy/xid-errors" in xid_advice(999)
    assert not critical_by_default(999)


def test_by_default_a_reset_or_worse_pages_and_the_rest_warns() -> None:
    severities = {}
    for t, code in enumerate((13, 31, 43, 92, 94, 48, 63, 79, 95, 119, 64, 999)):
        detector = XidDetector(XidSettings())
        severities[code] = next(detector.evaluate(xid_tick(t, code))).severity
    warning = {c for c, s in severities.items() if s is Severity.WARNING}
    assert warning == {13, 31, 43, 92, 94, 999}
    assert {c for c, s in severities.items() if s is Severity.CRITICAL} == {48, 63, 79, 95, 119, 64}


def test_an_explicit_critical_list_overrides_the_catalogue() -> None:
    settings = parse_alert_settings({"xid": {"critical": [13]}}, "daemon.toml").xid
    assert settings.critical == (13,)
    detector = XidDetector(settings)
    assert next(detector.evaluate(xid_tick(0, 13))).severity is Severity.CRITICAL
    assert next(XidDetector(settings).evaluate(xid_tick(0, 79))).severity is Severity.WARNING
    nothing = parse_alert_settings({"xid": {"critical": []}}, "daemon.toml").xid
    assert next(XidDetector(nothing).evaluate(xid_tick(0, 79))).severity is Severity.WARNING


def test_the_alert_tells_the_worst_xid_and_what_to_do() -> None:
    detector = XidDetector(XidSettings())
    first = next(detector.evaluate(xid_tick(0, 13)))
    assert first.summary == "GPU 0: Xid 13: graphics engine exception; restart the application"
    worse = next(detector.evaluate(xid_tick(1, 79, 13)))  # the 13 after the 79 tells nothing new
    assert worse.summary == "GPU 0: Xid 79: GPU has fallen off the bus; reboot the node"
    assert worse.value == 79 and worse.severity is Severity.CRITICAL
    later = next(detector.evaluate(xid_tick(2, 31)))
    assert later.value == 79  # a milder one does not hide it


def xid_record(code: int, occurrences: int = 1):  # type: ignore[no-untyped-def]
    summary = next(XidDetector(XidSettings()).evaluate(xid_tick(0, code, gpu=3))).summary
    return gpu_alert(
        key=f"xid/gpu3/{code}", rule="xid", value=float(code), unit="xid", summary=summary,
        severity=Severity.CRITICAL, occurrences=occurrences, peak_value=float(code),
    )  # fmt: skip


def test_annotations_of_an_unknown_xid_say_so() -> None:
    annotations = alert_annotations(xid_record(999), 0)
    assert annotations["xid_meaning"] == "not in the catalogue"
    assert annotations["xid_cause"] == "unknown"
    assert annotations["xid_action"].startswith("look it up in NVIDIA's Xid catalogue")
    other = alert_annotations(gpu_alert(), 0)
    assert (
        "xid_meaning" not in other and other["description"] == "gpu_temp, value 78°C, occurrences 1"
    )


def test_alertmanager_holds_and_notifies_what_an_xid_means_and_what_to_do(
    alertmanager: Alertmanager, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    pusher = make_pusher([alertmanager.url])
    pusher.publish([xid_record(79, occurrences=2)])
    labels = {"alertname": "xid", "severity": "critical", "node": "gpu-node-01", "gpu": "3",
              "UUID": harness.UUID}  # fmt: skip
    wait_for(lambda: alertmanager.notified("firing", labels), 10, "the Xid alert's notification")
    [held] = alertmanager.alerts()
    annotations = held["annotations"]
    assert annotations["summary"] == "GPU 3: Xid 79: GPU has fallen off the bus; reboot the node"
    assert annotations["xid_meaning"] == "GPU has fallen off the bus"
    assert (
        annotations["xid_cause"] == "the PCIe bus, the GPU hardware, power delivery or overheating"
    )
    assert annotations["xid_action"] == "reboot the node"
    assert annotations["description"] == (
        "Xid 79: GPU has fallen off the bus (seen 2 times). Likely cause: the PCIe bus, the GPU "
        "hardware, power delivery or overheating. What to do: reboot the node. Recurring, inspect "
        "the GPU, its riser and its power."
    )
    notified = [a for body in alertmanager.webhook.snapshot() for a in body["alerts"]]
    assert any(a["annotations"].get("xid_action") == "reboot the node" for a in notified)
