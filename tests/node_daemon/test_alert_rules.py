"""Detectors, one rule at a time, with readings built by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from node_daemon.alerts import detectors, rules
from node_daemon.alerts.findings import GpuTick
from node_daemon.alerts.occurrence_detectors import XidDetector
from node_daemon.backends.readings import GpuHealth, GpuReading, GpuStatic, ProcessReading
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.errors import ConfigError

H100 = GpuStatic(index=0, uuid="GPU-1", name="NVIDIA H100 80GB HBM3", power_limit_w=700.0)
MIB = 1024**2


def tick(t: float, static: GpuStatic = H100, processes=(), **fields) -> GpuTick:  # type: ignore[no-untyped-def]
    return GpuTick(t, GpuReading(index=0, **fields), static, processes)


def severities(detector, ticks) -> list:  # type: ignore[no-untyped-def]
    out = []
    for t in ticks:
        found = list(detector.evaluate(t))
        out.append(found[0].severity if found else None)
    return out


def temp_detector(**overrides) -> detectors.ThresholdDetector:  # type: ignore[no-untyped-def]
    settings = replace(rules.AlertSettings().gpu_temp, **overrides)
    return detectors.ThresholdDetector("gpu_temp", "temperature", settings, TEMP_GPU_C)


W, C = Severity.WARNING, Severity.CRITICAL


def test_temperature_levels_with_duration_and_hysteresis() -> None:
    detector = temp_detector()  # warning 75 for 10 s, critical 85 at once, hysteresis 3
    temps = [70, 76, 76, 76, 86, 84, 82.5, 81.9, 74, 72.1, 71.9]
    times = [0, 1, 6, 11, 12, 13, 14, 15, 16, 17, 18]
    got = severities(detector, [tick(t, temp_gpu_c=v) for t, v in zip(times, temps, strict=True)])
    assert got == [None, None, None, W, C, C, C, W, W, W, None]


def test_warning_resets_its_timer_when_the_value_dips() -> None:
    detector = temp_detector()
    temps = [(0, 76), (5, 74), (6, 76), (15, 76), (16, 76)]
    got = severities(detector, [tick(t, temp_gpu_c=v) for t, v in temps])
    assert got == [None, None, None, None, W]


def test_per_model_override() -> None:
    l40s = GpuStatic(index=0, uuid="GPU-2", name="NVIDIA L40S")
    hot_card = rules.ThresholdSettings(warning=80.0, critical=88.0)
    detector = temp_detector(models={"NVIDIA L40S": hot_card})
    assert severities(detector, [tick(0, l40s, temp_gpu_c=86)]) == [None]  # warning needs 10 s
    assert severities(detector, [tick(0, H100, temp_gpu_c=86)]) == [C]


def test_unknown_temperature_never_alerts() -> None:
    assert severities(temp_detector(), [tick(0, temp_gpu_c=None)]) == [None]


def test_power_above_limit_for_a_while() -> None:
    detector = detectors.PowerDetector(rules.PowerSettings(for_s=30))
    got = severities(detector, [tick(0, power_w=720), tick(29, power_w=720), tick(30, power_w=720)])
    assert got == [None, None, W]
    assert severities(detector, [tick(31, power_w=650)]) == [None]


def test_throttle_names_reasons() -> None:
    detector = detectors.ThrottleDetector(rules.ThrottleSettings(for_s=0))
    finding = next(detector.evaluate(tick(0, throttle_reasons=0x20 | 0x4)))
    assert "software thermal slowdown" in finding.summary and "power cap" in finding.summary
    assert list(detector.evaluate(tick(1, throttle_reasons=0))) == []


def test_ecc_uncorrectable_is_critical_and_correctable_rate_warns() -> None:
    detector = detectors.EccDetector(
        rules.EccSettings(correctable_threshold=10, correctable_window_s=600)
    )
    assert list(detector.evaluate(tick(0, ecc_uncorrected_total=0, ecc_corrected_total=5))) == []
    found = {
        f.rule: f
        for f in detector.evaluate(tick(60, ecc_uncorrected_total=2, ecc_corrected_total=15))
    }
    assert found["ecc_uncorrectable"].severity is C and found["ecc_uncorrectable"].value == 2
    assert "GPU 0: 2 uncorrectable ECC errors since" in found["ecc_uncorrectable"].summary
    assert found["ecc_correctable"].severity is W and found["ecc_correctable"].value == 10
    # Ten minutes later the old errors have left the window.
    later = {
        f.rule
        for f in detector.evaluate(tick(700, ecc_uncorrected_total=2, ecc_corrected_total=15))
    }
    assert later == {"ecc_uncorrectable"}


def test_one_ecc_error_is_one_error_not_one_errors() -> None:
    detector = detectors.EccDetector(
        rules.EccSettings(correctable_threshold=1, correctable_window_s=600)
    )
    list(detector.evaluate(tick(0, ecc_uncorrected_total=0, ecc_corrected_total=0)))
    found = {
        f.rule: f.summary
        for f in detector.evaluate(tick(60, ecc_uncorrected_total=1, ecc_corrected_total=1))
    }
    assert found == {
        "ecc_uncorrectable": "GPU 0: 1 uncorrectable ECC error since the driver loaded",
        "ecc_correctable": "GPU 0: 1 correctable ECC error in the last 10 min",
    }


def test_an_unlisted_xid_still_reads_as_a_sentence() -> None:
    finding = next(XidDetector(rules.XidSettings()).evaluate(tick(0, xids=(200,))))
    assert finding.summary == "GPU 0: Xid 200: not in the catalogue; see NVIDIA's Xid catalogue"


def test_xids_are_counted_classified_and_clear_later() -> None:
    detector = XidDetector(rules.XidSettings(clear_after_s=60))
    first = next(detector.evaluate(tick(0, xids=(13,))))
    assert first.severity is W and first.new_occurrences == 1 and "Xid 13" in first.summary
    assert first.summary == "GPU 0: Xid 13: graphics engine exception; restart the application"
    second = next(detector.evaluate(tick(1, xids=(79, 13))))
    assert second.severity is C and second.new_occurrences == 2  # counted, not latched
    quiet = next(detector.evaluate(tick(30)))
    assert quiet.new_occurrences == 0 and quiet.severity is C
    assert list(detector.evaluate(tick(62))) == []


def test_lost_gpu_is_critical() -> None:
    reading = GpuReading(index=0, health=GpuHealth.LOST, error="GPU is lost")
    finding = next(detectors.LostDetector().evaluate(GpuTick(0, reading, H100, ())))
    assert finding.severity is C and "lost" in finding.summary


def leaky(memory_mib: float, pid: int = 42) -> tuple[ProcessReading, ...]:
    return (
        ProcessReading(
            pid=pid, gpu_memory_bytes=int(memory_mib * MIB), user="bob", command="serve.py"
        ),
    )


# The memory leak rule has its own tests: tests/node_daemon/test_leak_detector.py.


def test_idle_occupied_gpu_is_waste() -> None:
    detector = detectors.IdleDetector(rules.IdleSettings(after_s=60, max_util_pct=5))
    held = leaky(1000)
    assert severities(detector, [tick(0, processes=held, util_gpu_pct=0)]) == [None]
    assert severities(detector, [tick(61, processes=held, util_gpu_pct=0)]) == [W]
    summary = next(detector.evaluate(tick(62, processes=held, util_gpu_pct=0))).summary
    assert summary.startswith("GPU 0 held by 1 process of bob but idle"), summary
    assert severities(detector, [tick(62, processes=(), util_gpu_pct=0)]) == [
        None
    ]  # nobody holds it


def test_trend_predicts_crossing_the_critical_line() -> None:
    detector = detectors.TrendDetector(
        rules.TrendSettings(window_s=60, horizon_s=300), rules.ThresholdSettings(critical=85.0)
    )
    found = []
    for t in range(0, 61, 2):
        found = list(detector.evaluate(tick(t, temp_gpu_c=70 + t * 0.05)))  # +3 °C/min
    assert found and found[0].severity is W
    assert "heading for 85 °C" in found[0].summary and "crosses in about" in found[0].summary
    # Its value is the rule's own measure, the rate of rise (°C/min), not the seconds left.
    assert found[0].unit == "°C/min" and found[0].value == pytest.approx(3.0, abs=0.2)
    flat = detectors.TrendDetector(
        rules.TrendSettings(window_s=60), rules.ThresholdSettings(critical=85.0)
    )
    for t in range(0, 61, 2):
        found = list(flat.evaluate(tick(t, temp_gpu_c=80.0)))
    assert found == []


def test_settings_from_toml_table() -> None:
    settings = rules.parse_alert_settings(
        {"gpu_temp": {"warning": 78, "models": {"NVIDIA L40S": {"warning": 82, "critical": 90}}},
         "xid": {"critical": [79], "clear_after_s": 10}},
        "daemon.toml",
    )  # fmt: skip
    assert settings.gpu_temp.warning == 78 and settings.gpu_temp.critical == 85
    assert settings.gpu_temp.for_model("NVIDIA L40S").critical == 90
    assert settings.xid.critical == (79,)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"gpu_tmp": {}}, "unknown alert rule [alerts.gpu_tmp]"),
        ({"gpu_temp": {"warnign": 70}}, "unknown key 'warnign'"),
        ({"gpu_temp": {"warning": "hot"}}, "alerts.gpu_temp.warning: expected"),
        ({"idle": {"after_s": -5}}, "alerts.idle.after_s: expected"),
    ],
)
def test_bad_settings_name_the_key(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        rules.parse_alert_settings(table, "daemon.toml")


def test_trend_ignores_warming_towards_a_safe_temperature() -> None:
    """A load step on a healthy GPU: a fast rise that settles at 71 °C is no alarm."""
    backend = SimulatedBackend(gpu_count=2, model="h100", scenario=Scenario((
        ScenarioEvent(1, 0, "load", 0.0), ScenarioEvent(60, 0, "load", 100.0),
        ScenarioEvent(1, 1, "load", 0.0), ScenarioEvent(60, 1, "overheat"),
    )))  # fmt: skip
    facts = backend.open()
    detector = detectors.TrendDetector(
        rules.AlertSettings().temp_trend, rules.AlertSettings().gpu_temp
    )
    warned: dict[int, float] = {}
    for t in range(1, 240):
        for reading in backend.read_gpus():
            tick_ = GpuTick(float(t), reading, facts.gpus[reading.index], ())
            if list(detector.evaluate(tick_)):
                warned.setdefault(reading.index, reading[TEMP_GPU_C])
    assert 0 not in warned  # the healthy GPU
    assert 1 in warned and warned[1] < 85.0  # the failing one, before it crosses
