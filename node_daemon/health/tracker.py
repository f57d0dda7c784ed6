"""One GPU's health over time: what it has shown, what it kept, and its condition now.

Three kinds of reason make a condition:
- live ones, read off each tick (a pending remap, a link down, a lost GPU);
- sticky ones, which last until what cures them is seen: an Xid that asked for a
  reset lasts until a reset (a volatile counter starting again from 0, a pending
  flag clearing, a lost GPU answering again), one that asked for a reboot until the
  node's boot id changes, and an inspection (a failed remap, a repeat offender)
  until an admin clears it after the repair;
- held ones, predictions and lesser Xids, which stay `hold_s` after their sign ends.

Not thread-safe: the assessor calls it under its lock.
"""

from __future__ import annotations

from dataclasses import replace

from node_daemon.backends.readings import GpuHealth, GpuReading
from node_daemon.health.model import Drain, GpuCondition, HealthReason, HealthState
from node_daemon.health.predictions import Predictor
from node_daemon.health.settings import HealthSettings
from node_daemon.health.signals import (
    INSPECT_ACTION,
    LiveSignals,
    Signal,
    SlowdownWatch,
    lost_signal,
)
from node_daemon.health.store import StoredHealth
from node_daemon.health.xids import xid_verdict

# Reasons whose sign may go while the GPU is still not fine: kept, not read again.
_KEPT_LIVE = {"row_remap_failure"}
# Live reasons that are not faults of the GPU's own (for the repeat-offender count).
_NOT_FAULTS = {"recovery_drain_p2p", "nvlink_down", "ecc_uncorrectable"}
# Pending flags: their 1 -> 0 is a reset seen.
_PENDING = {"row_remap_pending", "retired_pages_pending"}
# Xids the catalogue puts in no lasting state hold this long at least.
XID_HOLD_S = 3600.0


class GpuTracker:
    """The health of GPU `index`, from the record kept for it (if any) on."""

    def __init__(self, index: int, kept: StoredHealth | None = None) -> None:
        kept = kept or StoredHealth(index)
        self.index = index
        self.kept = kept
        self.sticky: dict[str, HealthReason] = {r.code: r for r in kept.sticky}
        self.held: dict[str, tuple[HealthReason, int]] = {}  # code -> (reason, until ms)
        self.live = LiveSignals()
        self.slowdown = SlowdownWatch()
        self.predictor = Predictor()
        self.xid_counts: dict[int, int] = {}
        self.seen = False  # a reading of it has come in this run
        self._live_codes: set[str] | None = None  # None until the first reading
        self._lost = False
        self._lost_signal: Signal | None = None
        self._repair_undated = False
        self._xids_shown: dict[int, int] = {}  # the counts as last put in a condition
        # Bumped by every change of what the store keeps: the assessor saves on a change.
        self.version = 0
        self.condition = GpuCondition(index, drain=kept.drain, power_capped_w=kept.power_capped_w)

    def _keep(self, **changes: object) -> None:
        self.kept = replace(self.kept, **changes)  # type: ignore[arg-type]
        self.version += 1

    # -- what comes in ---------------------------------------------------------

    def observe(self, reading: GpuReading, now_ms: int, settings: HealthSettings) -> None:
        if self._repair_undated:
            self._keep(repaired_ms=now_ms)
            self._repair_undated = False
        self.live.update(reading)
        self.slowdown.update(reading, now_ms)
        self.predictor.observe(reading, now_ms, settings)
        faults = self._faults_in(reading, now_ms, settings)
        if self.predictor.reset_seen:
            self._repaired(now_ms, HealthState.NEEDS_RESET)
        self._predict(now_ms, settings)
        if faults and settings.enabled:
            self._fault(now_ms, settings)
        self.seen = True

    def missed(self, now_ms: int, settings: HealthSettings) -> None:
        """A sweep came without this GPU (after it had been seen): a telemetry gap."""
        if self.seen:
            self.predictor.missed(now_ms)
            self._predict(now_ms, settings)

    def _predict(self, now_ms: int, settings: HealthSettings) -> None:
        if not settings.enabled:
            return
        for p in self.predictor.predictions(now_ms, settings):
            reason = HealthReason(p.code, p.state, p.summary, p.action, now_ms, p.lead_time_s)
            self._hold(reason, now_ms, settings.hold_s)

    def _faults_in(self, reading: GpuReading, now_ms: int, settings: HealthSettings) -> int:
        """Note Xids and the live signals' rising edges; how many faults they are."""
        faults = 0
        for code in reading.xids:
            self.xid_counts[code] = self.xid_counts.get(code, 0) + 1
            faults += self._xid(code, now_ms, settings)
        lost = reading.health is GpuHealth.LOST
        if self._lost and not lost:
            self._repaired(now_ms, HealthState.NEEDS_REBOOT)  # it answers again: reset or replugged
        faults += int(lost and not self._lost and self._live_codes is not None)
        self._lost, self._lost_signal = lost, lost_signal(reading)
        codes = {signal[0] for signal in self.live.current}
        if self._live_codes is not None:  # the first reading is where we start, not a fault
            rising = codes - self._live_codes - _NOT_FAULTS
            faults += len(rising)
            if (self._live_codes & _PENDING) - codes:
                self._repaired(now_ms, HealthState.NEEDS_RESET)
        for signal in self.live.current:
            if signal[0] in _KEPT_LIVE and signal[0] not in self.sticky and settings.enabled:
                self.sticky[signal[0]] = _dated(signal, now_ms)
                self.version += 1
        self._live_codes = codes
        return faults

    def _xid(self, code: int, now_ms: int, settings: HealthSettings) -> int:
        verdict = xid_verdict(code)
        if verdict.state in (None, HealthState.HEALTHY) or not settings.enabled:
            return 0
        reason = HealthReason(f"xid_{code}", verdict.state, verdict.summary, verdict.action, now_ms)
        if verdict.state is None or verdict.state.takes_new_work:
            self._hold(reason, now_ms, max(settings.hold_s, XID_HOLD_S))
            return 0
        if reason.code not in self.sticky:
            self.sticky[reason.code] = reason
            self.version += 1
        return 1

    def _hold(self, reason: HealthReason, now_ms: int, hold_s: float) -> None:
        """Keep `reason` until hold_s from now; one held already keeps its since."""
        held = self.held.get(reason.code)
        if held is not None:
            reason = _continued(held[0], reason)
        self.held[reason.code] = (reason, now_ms + int(hold_s * 1000))

    def _fault(self, now_ms: int, settings: HealthSettings) -> None:
        """A fault that needs a reset or more: after a recent repair, a repeat offender."""
        kept = self.kept
        window_ms = int(settings.repeat_window_h * 3600 * 1000)
        repeat = (
            kept.last_fault_ms is not None
            and kept.repaired_ms is not None
            and kept.last_fault_ms <= kept.repaired_ms
            and now_ms - kept.repaired_ms <= window_ms
        )
        if repeat and "repeat_offender" not in self.sticky:
            hours = (now_ms - (kept.repaired_ms or now_ms)) / 3_600_000
            self.sticky["repeat_offender"] = HealthReason(
                "repeat_offender",
                HealthState.NEEDS_INSPECTION,
                f"faulted again {hours:.1f} h after its last repair",
                INSPECT_ACTION,
                now_ms,
            )
        self._keep(last_fault_ms=now_ms)

    def _repaired(self, now_ms: int, cures: HealthState) -> None:
        """A reset (or more) was seen: the sticky reasons it cures go."""
        cured = [c for c, r in self.sticky.items() if r.state <= cures and c not in _KEPT_LIVE]
        cured = [c for c in cured if self.sticky[c].state is not HealthState.NEEDS_INSPECTION]
        for code in cured:
            del self.sticky[code]
        # A lesser Xid held for a while (63: a remap waits for the reset) is over too.
        for code, (reason, _until) in list(self.held.items()):
            if code.startswith("xid_") and reason.state <= cures:
                del self.held[code]
        self._keep(repaired_ms=now_ms)

    # -- what people do --------------------------------------------------------

    def clear(self, now_ms: int) -> None:
        """After a repair: forget the sticky and held reasons; a repair is noted."""
        self.sticky.clear()
        self.held.clear()
        self._keep(repaired_ms=now_ms)

    def needs_inspection(self, reason: HealthReason) -> None:
        """Self-healing's repair did not cure it: sticky until an admin clears it."""
        self.sticky[reason.code] = reason
        self.version += 1

    def reset_done(self, now_ms: int) -> None:
        """Self-healing reset it: what a reset cures goes (its counters may show nothing:
        a volatile count that was 0 stays 0)."""
        self._repaired(now_ms, HealthState.NEEDS_RESET)

    def reboot_seen(self) -> None:
        """The node rebooted while the daemon was down: dated at the first reading."""
        self._repaired(0, HealthState.NEEDS_REBOOT)
        self._repair_undated = True

    def set_drain(self, drain: Drain | None) -> None:
        self._keep(drain=drain)

    def set_power_capped(self, watts: float | None) -> None:
        self._keep(power_capped_w=watts)

    # -- what goes out ---------------------------------------------------------

    def judged(self, now_ms: int, settings: HealthSettings) -> GpuCondition:
        """The condition now (also kept in `condition`). Reasons that hold on are the
        same objects as the tick before: most ticks allocate nothing but the condition."""
        if self.held:
            self.held = {c: h for c, h in self.held.items() if h[1] > now_ms}
        reasons: dict[str, HealthReason] = {}
        if settings.enabled:
            previous = {r.code: r for r in self.condition.reasons}
            live = list(self.live.current)
            if self._lost_signal is not None:
                live.append(self._lost_signal)
            slowdown = self.slowdown.signal(now_ms, settings.hw_slowdown_for_s)
            if slowdown is not None:
                live.append(slowdown)
            for signal in live:
                reasons[signal[0]] = _reason_of(signal, previous.get(signal[0]), now_ms)
            reasons.update((c, h[0]) for c, h in self.held.items())
            reasons.update(self.sticky)
        ordered = tuple(sorted(reasons.values(), key=lambda r: (-r.state, r.code)))
        state = ordered[0].state if ordered else HealthState.HEALTHY
        since = self.condition.since_ms if state is self.condition.state else now_ms
        if self.xid_counts != self._xids_shown:
            self._xids_shown = dict(self.xid_counts)  # conditions share it: never mutated
        self.condition = GpuCondition(
            self.index, state, ordered, since or now_ms, self.kept.drain,
            self.kept.power_capped_w, self._xids_shown,
        )  # fmt: skip
        return self.condition

    def stored(self) -> StoredHealth:
        return replace(self.kept, sticky=tuple(sorted(self.sticky.values(), key=lambda r: r.code)))


def _dated(signal: Signal, now_ms: int) -> HealthReason:
    code, state, summary, action = signal
    return HealthReason(code, state, summary, action, now_ms)


def _reason_of(signal: Signal, before: HealthReason | None, now_ms: int) -> HealthReason:
    """The reason a live signal gives: the one before while it says the same."""
    code, state, summary, action = signal
    if before is not None and (before.state, before.summary, before.action) == signal[1:]:
        return before
    return HealthReason(code, state, summary, action, before.since_ms if before else now_ms)


def _continued(before: HealthReason, now: HealthReason) -> HealthReason:
    """A reason held on: the one before while it says the same, else now's from its since."""
    if (before.state, before.summary, before.action) == (now.state, now.summary, now.action):
        return before
    return replace(now, since_ms=before.since_ms)
