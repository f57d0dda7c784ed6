"""One GPU's plotted metrics from a Prometheus-compatible store (its /api/v1/query_range).

The daemons' /metrics serve dcgm-exporter's names and labels, so a store that
scrapes them holds `DCGM_FI_DEV_GPU_TEMP{UUID="GPU-…"}` and its kin for as long
as it keeps data. One request asks for every plotted metric, each as the mean
and the peak over each step (avg_over_time, max_over_time), tagged with the
catalogue field and the statistic so the answer decodes without guessing.
The HTTP call blocks, so it runs in a named executor of its own; the network
thread's loop only awaits it. It is one bounded exchange
(console/connections/bounded_http.py): an answer of at most MAX_ANSWER_MIB, one
deadline for the whole call, and no redirect followed (the bearer token would
go with it); an answer of the wrong shape is a PrometheusError that says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from console.connections.bounded_http import MIB, HttpFailure, HttpLimits, exchange
from console.connections.manager import FetchError
from console.fleet.columns import PLOTTED, shown
from console.fleet.history_loader import HistoryAsk
from console.fleet.history_range import PROMETHEUS, FloatArray, HistorySlice
from console.settings import Profile

log = logging.getLogger(__name__)

TIMEOUT_S: Final = 30.0  # the whole call: connect, send, and every read of the answer
# One GPU's plotted metrics over any range are about a megabyte of JSON; far more is
# not an answer to this query, and is not read into the console's memory.
MAX_ANSWER_MIB: Final = 32
LIMITS: Final = HttpLimits(MAX_ANSWER_MIB * MIB, TIMEOUT_S)
# The mean and peak look back at least this far: a step shorter than the store's
# scrape interval would otherwise find no sample in most windows (a dotted curve).
MIN_WINDOW_S: Final = 30.0
FIELD_LABEL: Final = "gpufleet_field"
STAT_LABEL: Final = "gpufleet_stat"
# (statistic, PromQL *_over_time function, aggregation over duplicate series).
STATS: Final = (("mean", "avg_over_time", "avg"), ("peak", "max_over_time", "max"))


class PrometheusError(FetchError):
    """The store could not be asked, or answered with an error (the message says which)."""


@dataclass(frozen=True)
class PrometheusSource:
    """Where the profile's store is (profile keys prometheus_url, _ca_file, _token_file)."""

    url: str
    ca_file: Path | None = None
    token_file: Path | None = None  # a bearer token, read at each request (rotation)


def source_of(profile: Profile) -> PrometheusSource | None:
    """The profile's store (prometheus_url, prometheus_ca_file, prometheus_token_file)."""
    if profile.prometheus_url is None:
        return None
    return PrometheusSource(
        profile.prometheus_url, profile.prometheus_ca_file, profile.prometheus_token_file
    )


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def range_query(uuid: str, window_s: float) -> str:
    """PromQL for one GPU's plotted metrics, mean and peak over `window_s`, tagged by label."""
    parts = []
    window = f"{max(window_s, MIN_WINDOW_S):.0f}s"
    for metric in PLOTTED:
        if metric.dcgm is None:
            continue
        # GPU_I_ID="": the whole GPU, not a MIG instance's own series.
        selector = f'{metric.dcgm.name}{{UUID="{_quote(uuid)}",GPU_I_ID=""}}[{window}]'
        for stat, over_time, aggregate in STATS:
            expr = f"{aggregate} by (UUID) ({over_time}({selector}))"
            expr = f'label_replace({expr}, "{FIELD_LABEL}", "{metric.field}", "", "")'
            parts.append(f'label_replace({expr}, "{STAT_LABEL}", "{stat}", "", "")')
    return " or ".join(parts)


def decode_range(body: Any, ask: HistoryAsk) -> HistorySlice:
    """query_range's JSON answer on a grid of `ask.step_s`, in the shown units.

    Raises:
        PrometheusError: the answer is not a successful matrix.
    """
    try:
        return _decode_matrix(body, ask)
    except PrometheusError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as exc:
        # A store, or something posing as one, answered JSON of another shape.
        raise PrometheusError(
            f"Prometheus answered something that is not a matrix: {exc}"
        ) from None
    except RecursionError:
        raise PrometheusError("Prometheus answered JSON nested too deep") from None


def _decode_matrix(body: Any, ask: HistoryAsk) -> HistorySlice:
    if not isinstance(body, dict) or body.get("status") != "success":
        why = body.get("error", body) if isinstance(body, dict) else body
        raise PrometheusError(f"Prometheus answered an error: {why}")
    data = body.get("data") or {}
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"Prometheus answered a {data.get('resultType')!r}, not a matrix")
    step = ask.step_s
    count = int((ask.end_s - ask.start_s) // step) + 1
    grid = ask.start_s + step * np.arange(count, dtype=np.float64)
    columns: dict[tuple[str, str], FloatArray] = {}
    for series in data.get("result", []):
        labels = series.get("metric", {})
        key = (labels.get(FIELD_LABEL, ""), labels.get(STAT_LABEL, ""))
        column = columns.setdefault(key, np.full(count, np.nan))
        for stamp, text in series.get("values", []):
            slot = round((float(stamp) - ask.start_s) / step)
            if 0 <= slot < count:
                column[slot] = float(text)
    return _slice(ask, grid, columns)


def _slice(
    ask: HistoryAsk, grid: FloatArray, columns: dict[tuple[str, str], FloatArray]
) -> HistorySlice:
    means: dict[str, FloatArray] = {}
    peaks: dict[str, FloatArray] = {}
    for metric in PLOTTED:
        if metric.dcgm is None:
            continue
        to_shown = shown(metric).scale / metric.dcgm.scale  # dcgm unit -> wire -> shown
        empty = np.full(len(grid), np.nan)
        means[metric.field] = columns.get((metric.field, "mean"), empty) * to_shown
        peaks[metric.field] = columns.get((metric.field, "peak"), empty) * to_shown
    held = np.zeros(len(grid), dtype=bool)
    for values in means.values():
        held |= np.isfinite(values)
    # Trimmed to what the store holds: where it starts is "no history before …".
    found = np.flatnonzero(held)
    cut = slice(int(found[0]), int(found[-1]) + 1) if len(found) else slice(0, 0)
    return HistorySlice(
        PROMETHEUS, ask.step_s, ask.start_s, ask.end_s, grid[cut],
        {f: v[cut] for f, v in means.items()}, {f: v[cut] for f, v in peaks.items()},
    )  # fmt: skip


class PrometheusRange:
    """Asks the profile's store; owns the 'gpufleet-prometheus' threads its calls block in."""

    def __init__(self, source: PrometheusSource, limits: HttpLimits = LIMITS) -> None:
        self.source = source
        self.limits = limits
        self._executor = ThreadPoolExecutor(2, thread_name_prefix="gpufleet-prometheus")

    async def fetch(self, ask: HistoryAsk) -> HistorySlice:
        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(self._executor, self._get, ask)
        return decode_range(body, ask)  # small: the limit on the answer bounds its work

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _get(self, ask: HistoryAsk) -> Any:
        """POST query_range (a long query would not fit a URL); the JSON body, errors too."""
        form = {
            "query": range_query(ask.uuid, ask.step_s),
            "start": f"{ask.start_s:.3f}",
            "end": f"{ask.end_s:.3f}",
            "step": f"{ask.step_s:g}",
        }
        url = self.source.url.rstrip("/") + "/api/v1/query_range"
        data = urllib.parse.urlencode(form).encode()
        try:
            answer = exchange(url, "POST", self._headers(), data, self.limits, self._tls())
        except (HttpFailure, OSError, ValueError) as exc:  # OSError: the CA file; ValueError: URL
            raise PrometheusError(f"Prometheus at {self.source.url}: {exc}") from None
        if 300 <= answer.status < 400:
            raise PrometheusError(
                f"Prometheus at {self.source.url} answered with a redirect (HTTP "
                f"{answer.status}) to {answer.location[:200]!r}: not followed, since the "
                "bearer token would go with it; set prometheus_url to where it points"
            )
        try:
            return json.loads(answer.body)
        except RecursionError:
            raise PrometheusError(
                f"Prometheus at {self.source.url}: JSON nested too deep"
            ) from None
        except ValueError:
            if 200 <= answer.status < 300:
                raise PrometheusError(f"Prometheus at {self.source.url}: not JSON") from None
            # Prometheus explains a 4xx/5xx in JSON; anything else is said by its status.
            raise PrometheusError(
                f"Prometheus at {self.source.url}: HTTP {answer.status} {answer.reason[:100]}"
            ) from None

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if self.source.token_file is not None:
            try:
                token = self.source.token_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise PrometheusError(f"prometheus_token_file: {exc}") from None
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _tls(self) -> ssl.SSLContext | None:
        if not self.source.url.startswith("https:"):
            return None
        ca = str(self.source.ca_file) if self.source.ca_file is not None else None
        return ssl.create_default_context(cafile=ca)
