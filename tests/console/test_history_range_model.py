"""History older than the ring, as a model (no Qt): merge, source choice, steps, the loader.

Also the decoding of what it rests on: the inventory's tiers and alert lines, and
Prometheus's answers.

The loader runs against a recording asker (it keeps the asks it is given and
answers nothing by itself): the tests play the network thread's answers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from console.connections.decode import decode_inventory
from console.connections.prometheus_range import PrometheusSource, decode_range, range_query
from console.fleet.history_loader import LOADING, HistoryAsk, HistoryLoader, Wanted
from console.fleet.history_range import (
    DAEMON,
    PROMETHEUS,
    HistorySlice,
    TierReach,
    choose_source,
    merge,
    prometheus_step_s,
    source_note,
)
from console.fleet.updates import AlertLine, QueryResult
from console.settings import SettingsError, load_settings
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import MEM_USED_BYTES, TEMP_GPU_C

NOW = 1_790_000_000.0
DAY = 86400.0
TIERS = (
    TierReach("raw", 1.0, 3600, NOW - 3600),
    TierReach("10s", 10.0, DAY, NOW - DAY),
    TierReach("1m", 60.0, 30 * DAY, NOW - 3 * DAY),
)


def history(start: float, end: float, step: float, value: float = 50.0) -> HistorySlice:
    times = np.arange(start, end, step, dtype=np.float64)
    means = {TEMP_GPU_C.field: np.full(len(times), value)}
    peaks = {TEMP_GPU_C.field: np.full(len(times), value + 10)}
    return HistorySlice(DAEMON, step, start, end, times, means, peaks, "1m", TIERS, NOW - 3 * DAY)


def ring_part(first: float, last: float) -> tuple[np.ndarray, np.ndarray]:
    times = np.arange(first, last + 1, 1.0)
    return times, np.full(len(times), 70.0)


def test_merge_takes_history_before_the_ring_and_never_a_point_twice() -> None:
    ring_t, ring_v = ring_part(NOW - 1000, NOW)
    curve = merge(history(NOW - 6 * 3600, NOW, 60.0), TEMP_GPU_C.field, ring_t, ring_v)
    finite = curve.times[np.isfinite(curve.values)]
    assert finite[0] == NOW - 6 * 3600  # the older part is there
    assert len(np.unique(finite)) == len(finite)  # no time twice
    assert np.all(np.diff(curve.times) > 0)  # in time order
    # Ring values from the ring's first sample on; the history's before it.
    assert np.all(curve.values[curve.times >= NOW - 1000] == 70.0)
    before = curve.values[curve.times < NOW - 1000]
    assert np.all(before[np.isfinite(before)] == 50.0)
    # The peak line covers the fetched part only, where it is downsampled.
    assert len(curve.peak_times) and curve.peak_times.max() < NOW - 1000
    assert np.all(curve.peak_values[np.isfinite(curve.peak_values)] == 60.0)


def test_merge_leaves_a_gap_where_no_source_has_data() -> None:
    older = history(NOW - 7200, NOW - 3600, 60.0)  # stops an hour ago; the ring starts later
    ring_t, ring_v = ring_part(NOW - 1000, NOW)
    curve = merge(older, TEMP_GPU_C.field, ring_t, ring_v)
    gap = np.flatnonzero(np.isnan(curve.values))
    assert len(gap) == 1 and curve.times[gap[0] - 1] < curve.times[gap[0]] < NOW - 1000
    # A hole inside the slice (the daemon was down) is a gap too.
    holed = history(NOW - 7200, NOW, 60.0)
    keep = (holed.times < NOW - 5000) | (holed.times > NOW - 4000)
    holed = HistorySlice(DAEMON, 60.0, holed.start_s, holed.end_s, holed.times[keep],
                         {k: v[keep] for k, v in holed.means.items()},
                         {k: v[keep] for k, v in holed.peaks.items()})  # fmt: skip
    curve = merge(holed, TEMP_GPU_C.field, ring_t, ring_v)
    hole = curve.times[np.isnan(curve.values)]
    assert len(hole) == 1 and NOW - 5000 < hole[0] < NOW - 4000


def test_without_history_the_ring_alone() -> None:
    ring_t, ring_v = ring_part(NOW - 100, NOW)
    curve = merge(None, TEMP_GPU_C.field, ring_t, ring_v)
    assert curve.times is ring_t and not len(curve.peak_times)


def test_the_daemon_answers_what_its_tiers_hold_prometheus_what_is_older() -> None:
    assert choose_source(NOW - DAY, TIERS, prometheus=True) == DAEMON
    assert choose_source(NOW - 3 * DAY + 30, TIERS, prometheus=True) == DAEMON  # within slack
    assert choose_source(NOW - 7 * DAY, TIERS, prometheus=True) == PROMETHEUS
    assert choose_source(NOW - 7 * DAY, TIERS, prometheus=False) == DAEMON  # what it holds
    assert choose_source(NOW - 3600, (), prometheus=True) == PROMETHEUS  # a node without history
    assert choose_source(NOW - 3600, (), prometheus=False) is None


@pytest.mark.parametrize(
    ("span", "step"),
    [(3600.0, 2.0), (6 * 3600.0, 15.0), (DAY, 60.0), (7 * DAY, 600.0), (30.0, 1.0)],
)
def test_prometheus_steps_keep_a_range_within_2000_points(span: float, step: float) -> None:
    assert prometheus_step_s(span) == step
    assert span / step <= 2000


def test_the_note_says_where_the_data_came_from_and_where_none_reaches() -> None:
    from_prometheus = HistorySlice(PROMETHEUS, 60.0, NOW - DAY, NOW,
                                   np.arange(NOW - DAY, NOW, 60.0), {}, {})  # fmt: skip
    assert source_note(from_prometheus, NOW - DAY, "gpu-node-01") == "1 min steps from Prometheus"
    young = history(NOW - 6 * 3600, NOW, 10.0)
    young = HistorySlice(DAEMON, 10.0, NOW - DAY, NOW, young.times, young.means, young.peaks,
                         "10s", (), NOW - 6 * 3600)  # fmt: skip
    note = source_note(young, NOW - DAY, "gpu-node-01")
    assert note.startswith("10 s steps from gpu-node-01's history; no history before ")


class RecordingAsker:
    def __init__(self) -> None:
        self.asks: list[tuple[HistoryAsk, int]] = []
        self.cancelled: list[int] = []

    def ask(self, ask: HistoryAsk, query_id: int):
        self.asks.append((ask, query_id))
        return lambda: self.cancelled.append(query_id)


def wanted(gpu: int = 0, span: float = DAY, now: float = NOW, tiers=TIERS) -> Wanted:
    return Wanted("node:1", gpu, f"GPU-{gpu}", "gpu-node-01", tiers, now - span, now, now - 1000)


def answer(ask: HistoryAsk, query_id: int, value: float = 50.0) -> QueryResult:
    found = history(ask.start_s, ask.end_s, 60.0, value)
    found = HistorySlice(ask.source, 60.0, ask.start_s, ask.end_s, found.times, found.means,
                         found.peaks)  # fmt: skip
    return QueryResult(ask.target, "history", query_id, True, "done", found)


def test_the_loader_asks_once_then_answers_from_its_cache() -> None:
    asker = RecordingAsker()
    loader = HistoryLoader(asker, prometheus=True)
    assert loader.slice_for(wanted()) == (None, LOADING)
    assert loader.slice_for(wanted(now=NOW + 1)) == (None, LOADING)  # the same ask, not a second
    assert len(asker.asks) == 1 and asker.asks[0][0].source == DAEMON
    assert loader.take(answer(*asker.asks[0]))
    found, note = loader.slice_for(wanted(now=NOW + 5))  # a live range moved on: still held
    assert found is not None and note == "1 min steps from gpu-node-01's history"
    assert len(asker.asks) == 1
    # A range that moves past what was fetched, or a far shorter one, is asked again.
    loader.slice_for(wanted(span=3600.0))
    assert len(asker.asks) == 2
    # Within the ring: nothing to fetch, no note.
    assert loader.slice_for(wanted(span=300.0)) == (None, None)


def test_a_stale_answer_is_dropped() -> None:
    asker = RecordingAsker()
    loader = HistoryLoader(asker)
    loader.slice_for(wanted(gpu=0))
    loader.slice_for(wanted(gpu=1))  # another GPU: the first ask is cancelled
    (first, first_id), (second, second_id) = asker.asks
    assert asker.cancelled == [first_id] and loader.pending == 1
    assert not loader.take(answer(first, first_id, value=11.0))  # came anyway: dropped
    assert loader.dropped == 1
    assert loader.take(answer(second, second_id, value=22.0))
    found, _ = loader.slice_for(wanted(gpu=1))
    assert found is not None and set(found.means[TEMP_GPU_C.field]) == {22.0}
    assert loader.slice_for(wanted(gpu=0))[0] is None  # GPU 0's stale answer was not kept
    # Not a history answer at all (usage, audit): not the loader's.
    assert not loader.take(QueryResult("node:1", "usage", 10**9, True, "done", None))


def test_a_failed_source_falls_back_to_the_other_and_says_why_when_none_is_left() -> None:
    asker = RecordingAsker()
    clock = [0.0]
    loader = HistoryLoader(asker, prometheus=True, clock=lambda: clock[0])
    loader.slice_for(wanted())
    ask, query_id = asker.asks[-1]
    assert loader.take(QueryResult("node:1", "history", query_id, False, "UNAVAILABLE: disk"))
    loader.slice_for(wanted())
    ask, query_id = asker.asks[-1]
    assert ask.source == PROMETHEUS
    assert loader.take(QueryResult("node:1", "history", query_id, False, "connection refused"))
    found, note = loader.slice_for(wanted())
    assert found is None and note is not None
    assert "gpu-node-01: UNAVAILABLE: disk" in note and "Prometheus: connection refused" in note
    clock[0] = 31.0  # later: asked again
    loader.slice_for(wanted())
    assert asker.asks[-1][0].source == DAEMON


def test_prometheus_query_and_answer_decode_into_shown_units() -> None:
    query = range_query('GPU-"x"', 60.0)
    assert 'DCGM_FI_DEV_GPU_TEMP{UUID="GPU-\\"x\\"",GPU_I_ID=""}[60s]' in query
    assert "max_over_time(DCGM_FI_DEV_FB_USED" in query
    ask = HistoryAsk("node:1", 0, "GPU-x", PROMETHEUS, NOW - 600, NOW, 60.0)

    def series(field: str, stat: str, values: list[tuple[float, str]]) -> dict:
        labels = {"UUID": "GPU-x", "gpufleet_field": field, "gpufleet_stat": stat}
        return {"metric": labels, "values": [[t, v] for t, v in values]}

    body = {"status": "success", "data": {"resultType": "matrix", "result": [
        series(TEMP_GPU_C.field, "mean", [(NOW - 480, "61"), (NOW - 420, "62")]),
        series(TEMP_GPU_C.field, "peak", [(NOW - 480, "70"), (NOW - 420, "71")]),
        series(MEM_USED_BYTES.field, "mean", [(NOW - 480, "2048")]),  # MiB, as dcgm-exporter
    ]}}  # fmt: skip
    found = decode_range(body, ask)
    assert list(found.times) == [NOW - 480, NOW - 420]  # trimmed to what the store holds
    assert list(found.means[TEMP_GPU_C.field]) == [61.0, 62.0]
    assert list(found.peaks[TEMP_GPU_C.field]) == [70.0, 71.0]
    assert found.means[MEM_USED_BYTES.field][0] == pytest.approx(2.0)  # GiB
    assert np.isnan(found.means[MEM_USED_BYTES.field][1])
    error = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}
    with pytest.raises(Exception, match="parse error at char 3"):
        decode_range(error, ask)


@pytest.mark.parametrize(
    ("url", "token", "error"),
    [
        ("http://127.0.0.1:9090", True, None),
        ("http://localhost:9090", True, None),
        ("https://prom.example:9090", True, None),
        ("http://prom.example:9090", False, None),
        ("http://prom.example:9090", True, "plain http beyond this machine"),
        ("prom.example:9090", False, "must be an http:// or https:// URL"),
    ],
)
def test_prometheus_url_in_a_profile(
    tmp_path: Path, url: str, token: bool, error: str | None
) -> None:
    path = tmp_path / "console.toml"
    extra = f'prometheus_token_file = "{tmp_path / "prom.token"}"\n' if token else ""
    path.write_text(f'[profiles.p]\nnodes = ["a:1"]\nprometheus_url = "{url}"\n{extra}')
    if error is not None:
        with pytest.raises(SettingsError, match=error):
            load_settings(path)
        return
    profile = load_settings(path).profile("p")
    assert profile.prometheus_url == url
    assert (profile.prometheus_token_file is not None) == token
    assert PrometheusSource(url).url == url


def test_prometheus_files_without_a_url_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "console.toml"
    path.write_text('[profiles.p]\nnodes = ["a:1"]\nprometheus_ca_file = "/etc/ca.pem"\n')
    with pytest.raises(SettingsError, match="need prometheus_url"):
        load_settings(path)


def test_a_pan_sends_one_ask_per_round_trip() -> None:
    asker = RecordingAsker()
    loader = HistoryLoader(asker)
    for shift in range(0, 3000, 300):  # a drag back in time, mouse move by mouse move
        paused = Wanted(
            "node:1", 0, "GPU-0", "n", TIERS, NOW - DAY - shift, NOW - shift, NOW - 1000
        )
        loader.slice_for(paused)
    assert len(asker.asks) == 1  # the first is left to land, not cancelled per move
    assert loader.take(answer(*asker.asks[0]))
    found, _ = loader.slice_for(paused)  # the answer does not reach as far back as the drag
    assert found is not None and len(asker.asks) == 2
    assert asker.asks[1][0].start_s <= paused.start_s


def test_a_past_range_moving_on_is_asked_half_a_span_ahead_up_to_the_ring() -> None:
    asker = RecordingAsker()
    loader = HistoryLoader(asker)
    ring_first = NOW - 1000

    def at(moment: float) -> Wanted:  # incident replay: 15 min around a moment, Play moving it
        return Wanted("node:1", 0, "GPU-0", "n", TIERS, moment - 720, moment + 180, ring_first)

    loader.slice_for(at(NOW - 7200))
    ((ask, query_id),) = asker.asks
    assert ask.end_s == NOW - 7200 + 180 + 450  # half the span more
    assert loader.take(answer(ask, query_id))
    for frame in range(1, 8):  # Play at 60x: a minute a second, frames of 7.5 s
        found, _ = loader.slice_for(at(NOW - 7200 + 60 * frame))
        assert found is not None
    assert len(asker.asks) == 1  # answered from the one slice until it is left behind
    loader.slice_for(at(ring_first - 300))  # near the ring: asked up to its start, no further
    assert asker.asks[-1][0].end_s == ring_first


def test_the_inventory_carries_the_nodes_alert_lines_and_history_tiers() -> None:
    inventory = pb.Inventory(hostname="n", sample_interval_ms=1000)
    inventory.alert_thresholds.add(
        metric=TEMP_GPU_C.field, rule="gpu_temp", severity=pb.SEVERITY_CRITICAL, value=88.0
    )
    inventory.history_tiers.add(name="1m", step_ms=60_000, retention_s=2_592_000,
                                oldest_unix_ms=1_790_000_123_456)  # fmt: skip
    inventory.history_tiers.add(name="raw", step_ms=1000, retention_s=3600)  # empty yet
    info = decode_inventory("n:1", inventory).info
    assert info.alert_thresholds == (
        AlertLine(TEMP_GPU_C.field, "gpu_temp", Severity.CRITICAL, 88.0),
    )
    # Rounded down to 10 minutes: a poll 30 s later leaves the inventory equal.
    assert info.history_tiers == (
        TierReach("1m", 60.0, 2_592_000.0, 1_789_999_800.0),
        TierReach("raw", 1.0, 3600.0, None),
    )
