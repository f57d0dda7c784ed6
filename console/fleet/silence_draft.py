"""A silence being written in the console: what the "New silence" dialog edits, checked.

Plain data, no Qt: the dialog shows `problem()` and sends `request()` once
there is none, to each connected node `matching_targets()` names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from console.fleet.alert_rows import AlertRow
from console.fleet.durations import duration_ms_text
from console.fleet.silences import (
    ALERTNAME,
    GPU,
    NODE,
    SEVERITY,
    SilenceMatcher,
)
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.silence_globs import glob_matches

MAX_LENGTH_MS = 7 * 24 * 3_600_000  # the daemon's limit, after the start
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class SilenceRequest:
    """What is sent: the node pattern travels too (the daemon matches its own `node` label).

    Both ends are absolute, so the copies on several nodes end together and
    read as one silence; a start of 0 is "now" on each node.
    """

    matchers: tuple[SilenceMatcher, ...]
    starts_unix_ms: int
    ends_unix_ms: int
    comment: str


@dataclass(frozen=True)
class SilenceDraft:
    # Patterns, exact or glob (`*`, `?`); an empty one is not sent.
    node: str = ""
    rule: str = ""
    gpu: str = ""
    severity: str = ""
    starts_unix_ms: int = 0  # 0: now; later: a maintenance window
    duration_ms: int | None = HOUR_MS  # the end: a duration from the start...
    ends_unix_ms: int = 0  # ...or, where duration_ms is None, a time
    comment: str = ""

    @classmethod
    def for_alert(cls, alert: AlertRow, node_name: str) -> SilenceDraft:
        """Prefilled from an alert: its node, rule and GPU."""
        gpu = "" if alert.gpu_index is None else str(alert.gpu_index)
        return cls(node=node_name, rule=alert.rule, gpu=gpu)

    def matchers(self) -> tuple[SilenceMatcher, ...]:
        patterns = ((NODE, self.node), (ALERTNAME, self.rule), (GPU, self.gpu),
                    (SEVERITY, self.severity))  # fmt: skip
        return tuple(SilenceMatcher(label, p.strip()) for label, p in patterns if p.strip())

    def times(self, now_unix_ms: int) -> tuple[int, int]:
        """(start, end) in ms; the start is `now` for a silence that starts now."""
        start = self.starts_unix_ms or now_unix_ms
        end = start + self.duration_ms if self.duration_ms is not None else self.ends_unix_ms
        return start, end

    def problem(self, now_unix_ms: int) -> str | None:
        """What stops it being sent, in words; None when it may be."""
        return (
            self._matcher_problem()
            or self._time_problem(now_unix_ms)
            or (None if self.comment.strip() else "say why these alerts may stay quiet (comment)")
        )

    def _matcher_problem(self) -> str | None:
        if not self.matchers():
            return "name at least one of node, rule, GPU or severity (use * for any)"
        gpu = self.gpu.strip()
        if gpu and not all(c.isdigit() or c in "*?" for c in gpu):
            return f"GPU {gpu!r}: a GPU index, e.g. 3, or a glob such as 1?"
        severity = self.severity.strip()
        if severity and not any(glob_matches(severity, s.label) for s in Severity):
            return f"severity {severity!r} matches none of info, warning, critical"
        return None

    def _time_problem(self, now_unix_ms: int) -> str | None:
        start, end = self.times(now_unix_ms)
        if self.starts_unix_ms and start <= now_unix_ms:
            return "the start is in the past: start now, or pick a later time"
        if end <= start:
            return "the end is not after the start"
        if end - start > MAX_LENGTH_MS:
            return f"at most 7 days long (this is {duration_ms_text(end - start)})"
        return None

    def request(self, now_unix_ms: int) -> SilenceRequest:
        _, end = self.times(now_unix_ms)
        return SilenceRequest(self.matchers(), self.starts_unix_ms, end, self.comment.strip())


def matching_targets(node_pattern: str, nodes: Iterable[tuple[str, str]]) -> list[str]:
    """The nodes, as (target, name), whose name the pattern matches; all for no pattern."""
    pattern = node_pattern.strip()
    return [t for t, name in nodes if not pattern or glob_matches(pattern, name)]
