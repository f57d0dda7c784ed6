"""An alert's Now and Peak from the console's sample ring, and how they read."""

from __future__ import annotations

import dataclasses

import numpy as np

from console.fleet.alert_rows import AlertRow
from console.fleet.alert_values import RULE_METRICS, live_metric, live_values
from console.fleet.columns import COLUMN_COUNT, column, shown
from console.fleet.model import FleetModel, NodeRecord
from console.fleet.updates import InventoryUpdate, SamplesUpdate
from console.qt.alert_model import peak_text, value_text
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import POWER_W, TEMP_GPU_C, TEMP_MEM_C
from node_daemon.alerts.detectors import TREND_UNIT
from tests.console.hand_fed import gpus_of, simulated_node

TARGET = "127.0.0.1:1"


def alert(rule: str = "gpu_temp", unit: str = "°C", **changes: object) -> AlertRow:
    row = AlertRow(
        TARGET, "a-1", f"{rule}/gpu1", rule, Severity.CRITICAL, True, 1, "GPU-b", None, 88.0,
        unit, "GPU 1 temperature 88 °C", 10_000, 10_000, None, 1, "", None, None, "", "",
        peak_value=90.0,
    )  # fmt: skip
    return dataclasses.replace(row, **changes)


def node_with(temps: list[tuple[float, float]], gpus: int = 2) -> NodeRecord:
    """A node whose GPU 1 reported these (time s, temperature) samples, a second apart."""
    fleet = FleetModel(ring_capacity=8)
    fleet.add_node(TARGET)
    info = simulated_node("node-a", gpus_of(gpus, memory_total_bytes=None))
    fleet.apply(InventoryUpdate(TARGET, info))
    for time_s, temp in temps:
        rows = np.full((gpus, COLUMN_COUNT), np.nan, dtype=np.float32)
        rows[1, column(TEMP_GPU_C)] = temp
        rows[0, column(TEMP_GPU_C)] = 150.0  # another GPU's heat never counts
        fleet.apply(SamplesUpdate(TARGET, time_s, rows, (), replayed=False))
    return fleet.node(TARGET)


def test_the_rules_map_to_catalogue_metrics_in_their_shown_units() -> None:
    assert RULE_METRICS["gpu_temp"] is TEMP_GPU_C
    assert RULE_METRICS["memory_temp"] is TEMP_MEM_C
    assert RULE_METRICS["power"] is POWER_W
    assert shown(TEMP_GPU_C).unit == "°C" and shown(POWER_W).unit == "W"
    assert live_metric(alert("power", "W")) is POWER_W
    assert live_metric(alert("memory_temp")) is TEMP_MEM_C


def test_now_is_the_rings_newest_and_peak_the_higher_of_ring_and_daemon() -> None:
    node = node_with([(9.0, 99.0), (10.0, 92.0), (11.0, 95.0), (12.0, 91.0)])
    found = live_values(alert(), node)
    assert found.live and found.now == 91.0
    # 99 °C came before the alert started (10 s): only 92, 95, 91 and the daemon's 90 count.
    assert found.peak == 95.0
    higher = live_values(alert(peak_value=97.0), node)
    assert higher.peak == 97.0


def test_a_cleared_alerts_peak_ends_at_its_clearing() -> None:
    node = node_with([(10.0, 92.0), (11.0, 96.0), (12.0, 99.0)])
    found = live_values(alert(firing=False, cleared_unix_ms=11_000), node)
    assert found.now == 99.0 and found.peak == 96.0


def test_a_unit_that_is_not_the_metrics_keeps_the_daemons_value() -> None:
    # temp_trend's value is how fast the temperature rises: a rate, not a temperature.
    node = node_with([(10.0, 92.0)])
    trend = alert("temp_trend", TREND_UNIT, value=2.4, peak_value=3.1)
    assert "temp_trend" not in RULE_METRICS and live_metric(trend) is None
    found = live_values(trend, node)
    assert (found.now, found.peak, found.live) == (2.4, 3.1, False)


def test_now_and_peak_show_in_the_rules_own_unit() -> None:
    """temp_trend showed seconds ("240 s") in Now and Peak: a rate shows as one, to a tenth."""
    trend = alert("temp_trend", TREND_UNIT, value=2.4, peak_value=3.1)
    found = live_values(trend, node_with([(10.0, 92.0)]))
    assert (value_text(trend, found.now), peak_text(trend, found.peak)) == (
        "2.4 °C/min",
        "3.1 °C/min",
    )
    hot = alert(value=88.4)
    assert (value_text(hot), peak_text(hot, 90.0)) == ("88 °C", "90 °C")  # whole degrees
    leak = alert("memory_leak", "MiB/min", value=512.3)
    assert value_text(leak) == "512 MiB/min"


def test_rules_without_a_metric_node_alerts_and_missing_samples_keep_the_daemons_value() -> None:
    node = node_with([(10.0, 92.0)])
    xid = alert("xid", "xid", value=79.0, peak_value=None)
    assert live_values(xid, node) == live_values(xid, None)
    assert live_values(xid, node).now == 79.0
    node_alert = alert(gpu_index=None)
    assert live_values(node_alert, node).live is False
    power = alert("power", "W", value=710.0, peak_value=720.0)  # no power in these samples
    assert (live_values(power, node).now, live_values(power, node).peak) == (710.0, 720.0)
    assert live_values(alert(), node_with([])).now == 88.0  # no sample yet
