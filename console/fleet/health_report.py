"""The GPU detail's Health section as plain text: the state, its reasons, Xids, signals, MIG.

No Qt: the view (console.views.detail.health_section) only lays the lines out. Each
part is a (heading, lines) pair; a part with nothing to say is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.fleet.health import (
    FaultIncidentRow,
    FaultRecordRow,
    GpuCondition,
    HealingPolicyRow,
    HealthReason,
    HealthSignals,
    MigInstanceRow,
)
from console.fleet.health_words import drain_text, lead_text, reason_text, recovery_words
from console.fleet.placement import clock_text, gib_text
from console.fleet.xid_words import xid_text


@dataclass(frozen=True)
class Part:
    heading: str
    lines: tuple[str, ...]


def health_report(
    condition: GpuCondition | None,
    signals: HealthSignals,
    mig: tuple[MigInstanceRow, ...],
    mig_enabled: bool,
    default_power_limit_w: float | None,
    now_ms: int,
    healing: HealingPolicyRow | None = None,
) -> list[Part]:
    """Everything the node says about the GPU's health, worst first."""
    state = _state_part(condition, now_ms)
    parts = [Part(state.heading, (*state.lines, healing_text(healing)))] if healing else [state]
    if condition is not None and condition.reasons:
        parts.append(Part("Reasons", tuple(_reason_line(r, now_ms) for r in condition.reasons)))
    if signals.xid_counts:
        parts.append(Part("Xid errors since the daemon started", _xid_lines(signals)))
    lines = _signal_lines(signals, condition, default_power_limit_w)
    if lines:
        parts.append(Part("Signals", lines))
    if mig_enabled:
        parts.append(Part("MIG instances", _mig_lines(mig)))
    record = healing.fault_record(condition.gpu_index) if healing and condition else None
    if record is not None:
        parts.append(Part("Reliability", _reliability_lines(record, now_ms)))
    return parts


# Incidents listed in the detail, newest first; the rest are counted.
SHOWN_INCIDENTS = 3


def _reliability_lines(record: FaultRecordRow, now_ms: int) -> tuple[str, ...]:
    """ "score 75 of 100: 1 incident on record" and the newest incidents in words."""
    count = len(record.incidents)
    if not count:
        return (f"score {record.reliability_score:.0f} of 100: no fault on record",)
    plural = "incident" if count == 1 else "incidents"
    lines = [f"score {record.reliability_score:.0f} of 100: {count} {plural} on record"]
    newest = record.incidents[::-1][:SHOWN_INCIDENTS]
    lines += [_incident_line(i, now_ms) for i in newest]
    if count > SHOWN_INCIDENTS:
        lines.append(f"and {count - SHOWN_INCIDENTS} older")
    return tuple(lines)


def _incident_line(incident: FaultIncidentRow, now_ms: int) -> str:
    """ "Xid burst: 50 Xids (48, 63, 79) · needs reboot · 14:02 to 14:04"."""
    if incident.kind == "xid":
        xids = "Xid" if incident.count == 1 else "Xids"
        codes = ", ".join(map(str, incident.xid_codes))
        what = f"Xid burst: {incident.count:,} {xids} ({codes})"
    else:
        what = incident.kind.replace("_", " ")
    when = clock_text(incident.started_unix_ms, now_ms)
    if incident.ended:
        when += f" to {clock_text(incident.last_unix_ms, now_ms)}"
    else:
        when = f"since {when}"
    return f"{what} · {incident.state.words} · {when}"


_MODES = {
    "off": "off",
    "dry-run": "dry run (it only says what it would do)",
    "on": "on",
}


def healing_text(policy: HealingPolicyRow) -> str:
    """ "self-healing on this node: dry run (…): drain, power_cap; at most 6 actions an hour"."""
    mode = _MODES.get(policy.mode, policy.mode)
    if policy.mode == "off" or not policy.actions:
        return f"self-healing on this node: {mode}"
    actions = ", ".join(policy.actions)
    return (f"self-healing on this node: {mode}: {actions}; "
            f"at most {policy.max_actions_per_hour} actions an hour")  # fmt: skip


def _state_part(condition: GpuCondition | None, now_ms: int) -> Part:
    if condition is None:
        return Part("Health", ("not judged: this node's daemon reports no GPU health",))
    since = (
        f" since {clock_text(condition.since_unix_ms, now_ms)}" if condition.since_unix_ms else ""
    )
    lines = [f"{condition.state.words}{since}"]
    if condition.drained:
        lines.append(drain_text(condition))
    if not condition.state.takes_new_work:
        lines.append("the node places no new work on it")
    return Part("Health", tuple(lines))


def _reason_line(reason: HealthReason, now_ms: int) -> str:
    """ "Xid 79: GPU has fallen off the bus (reboot the node) · since 18:02 · usually …"."""
    bits = [f"{reason.state.words}: {reason_text(reason)}"]
    if reason.since_unix_ms:
        bits.append(f"since {clock_text(reason.since_unix_ms, now_ms)}")
    lead = lead_text(reason.lead_time_s)
    if lead:
        bits.append(lead)
    return " · ".join(bits)


def _xid_lines(signals: HealthSignals) -> tuple[str, ...]:
    lines = []
    for code, count in signals.xid_counts:
        text = xid_text(code)
        times = "once" if count == 1 else f"{count:,} times"
        lines.append(f"Xid {code}, {times}: {text.meaning}")
        if text.advice:
            lines.append(f"    {text.advice}")
    return tuple(lines)


def _count(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,}"


def _flag(value: bool | None, yes: str) -> str:
    return "n/a" if value is None else (yes if value else "no")


def _signal_lines(
    s: HealthSignals, condition: GpuCondition | None, default_limit_w: float | None
) -> tuple[str, ...]:
    """A line per signal that says something is wrong; the quiet ones share one line.

    A healthy GPU's counters are all zero: "PCIe replays 0 · no remapped rows · …"
    keeps the section short, so the plots below keep their room.
    """
    loud: list[str] = []
    quiet: list[str] = []
    for text, ok in _signals_said(s):
        (quiet if ok else loud).append(text)
    lines = loud + ([" · ".join(quiet)] if quiet else [])
    return tuple(lines + _power_lines(s, condition, default_limit_w))


def _zero(*values: int | bool | None) -> bool:
    return not any(values)


def _signals_said(s: HealthSignals) -> list[tuple[str, bool]]:
    """(the signal in words, and whether all is well with it): the quiet words when it is."""
    said = []
    if s.pcie_replay_total is not None:
        said.append((f"PCIe replays: {_count(s.pcie_replay_total)}", not s.pcie_replay_total))
    if s.remapped_rows_correctable is not None or s.row_remap_pending is not None:
        rows = (s.remapped_rows_correctable, s.remapped_rows_uncorrectable,
                s.row_remap_pending, s.row_remap_failure)  # fmt: skip
        said.append(("no remapped rows", True) if _zero(*rows) else (
            f"remapped rows: {_count(s.remapped_rows_correctable)} correctable, "
            f"{_count(s.remapped_rows_uncorrectable)} uncorrectable; pending "
            f"{_flag(s.row_remap_pending, 'yes, waiting for a GPU reset')}; failure "
            f"{_flag(s.row_remap_failure, 'YES: the GPU needs inspection')}", False))  # fmt: skip
    if s.retired_pages_sbe is not None or s.retired_pages_pending is not None:
        pages = (s.retired_pages_sbe, s.retired_pages_dbe, s.retired_pages_pending)
        said.append(("no retired pages", True) if _zero(*pages) else (
            f"retired pages: {_count(s.retired_pages_sbe)} single-bit, "
            f"{_count(s.retired_pages_dbe)} double-bit; pending "
            f"{_flag(s.retired_pages_pending, 'yes, waiting for a GPU reset')}",
            False))  # fmt: skip
    said += _nvlink_said(s)
    if s.recovery_action is not None:
        said.append((f"driver's recovery action: {recovery_words(s.recovery_action)}",
                     not s.recovery_action))  # fmt: skip
    return said


def _nvlink_said(s: HealthSignals) -> list[tuple[str, bool]]:
    if s.nvlink_links_active is None and s.nvlink_links_down is None:
        return []
    down = s.nvlink_links_down or 0
    which = (
        f" (link {', '.join(str(n) for n in s.nvlink_down_links)})" if s.nvlink_down_links else ""
    )
    said = [(f"NVLink: {_count(s.nvlink_links_active)} links up, {down} down{which}", not down)]
    totals = (s.nvlink_crc_flit_errors_total, s.nvlink_crc_data_errors_total,
              s.nvlink_replay_errors_total, s.nvlink_recovery_errors_total)  # fmt: skip
    if any(t is not None for t in totals):
        flit, data, replay, recovery = (_count(t) for t in totals)
        said.append(("no NVLink errors", True) if _zero(*totals) else (
            f"NVLink errors: CRC flit {flit}, CRC data {data}, replay {replay}, "
            f"recovery {recovery}", False))  # fmt: skip
    return said


def _power_lines(
    s: HealthSignals, condition: GpuCondition | None, default_limit_w: float | None
) -> list[str]:
    lines = []
    if s.power_limit_w is not None:
        default = (f" (default {default_limit_w:.0f} W)"
                   if default_limit_w is not None and abs(default_limit_w - s.power_limit_w) >= 1
                   else "")  # fmt: skip
        lines.append(f"power limit: {s.power_limit_w:.0f} W{default}")
    if condition is not None and condition.power_capped_w is not None:
        lines.append(f"capped by self-healing to {condition.power_capped_w:.0f} W")
    return lines


def _mig_lines(mig: tuple[MigInstanceRow, ...]) -> tuple[str, ...]:
    if not mig:
        return ("MIG is enabled; no instances reported",)
    lines = []
    for m in mig:
        used = gib_text(m.mem_used_bytes) if m.mem_used_bytes is not None else "n/a"
        total = gib_text(m.mem_total_bytes) if m.mem_total_bytes is not None else "n/a"
        procs = ", ".join(f"{p.pid} {p.user or '?'}: {p.command or '?'}" for p in m.processes)
        lines.append(
            f"GI {m.gpu_instance_id} / CI {m.compute_instance_id} {m.profile}: {used} of {total}"
            + (f" · {procs}" if procs else " · no processes")
        )
    return tuple(lines)
