"""bench/daemon_streams.py's numbers: medians over rounds, the goal, the table, the markdown."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from nvml_sweep_report import shown_argv

Case = dict[str, Any]
Result = dict[str, Any]

GOAL_PCT = 1.0
GOAL_SUBSCRIBERS = 10
# What the issue quotes for the tools a GPU server runs today (not measured here).
REFERENCES = "nvidia-smi dmon alone takes about 7.5 %, dcgm-exporter 15 to 20 %"
# A main thread above this share of a core is doing more than waiting for a signal.
MAIN_THREAD_NOTABLE_PCT = 0.02
# A stream wake with an hour of history costing this many times one with a minute
# means wait_after scans the whole ring.
SCAN_GROWTH = 3.0


def _median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 3) if values else 0.0


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": _median(values), "min": min(values), "max": max(values)}


def _thread_medians(cases: Sequence[Case]) -> dict[str, float]:
    groups = sorted({g for c in cases for g in c["thread_cpu_pct"]})
    return {g: _median([c["thread_cpu_pct"].get(g, 0.0) for c in cases]) for g in groups}


def streams_label(events: bool) -> str:
    return "samples + events" if events else "samples only"


def aggregate(cases: Sequence[Case], events: bool = True) -> list[dict[str, Any]]:
    """One row per (backend, subscribers, streams): medians over the rounds.

    `events`: the streams every K was measured with; the goal is judged on those.
    """
    keys = sorted(
        {(c["backend"], c["subscribers"], c.get("events", events)) for c in cases},
        key=lambda key: (key[0], key[2] != events, key[1]),
    )
    rows = []
    for backend, k, with_events in keys:
        mine = [
            c
            for c in cases
            if c["backend"] == backend
            and c["subscribers"] == k
            and c.get("events", events) == with_events
        ]
        idle = [
            c["daemon_cpu_pct"] for c in cases if c["backend"] == backend and not c["subscribers"]
        ]
        cpu = [c["daemon_cpu_pct"] for c in mine]
        row: dict[str, Any] = {
            "backend": backend,
            "subscribers": k,
            "events": with_events,
            "streams": streams_label(with_events) if k else "",
            "rounds": len(mine),
            "window_s": _median([c["window_s"] for c in mine]),
            "daemon_cpu_pct": _spread(cpu),
            "above_idle_pct": round(_median(cpu) - _median(idle), 3) if idle and k else None,
            "subscribers_cpu_pct": _median([c["subscribers_cpu_pct"] for c in mine]),
            "daemon_rss_mib": _median([c["daemon_memory_mib"]["rss"] for c in mine]),
            "daemon_peak_mib": max(c["daemon_memory_mib"]["peak"] for c in mine),
            "daemon_threads": _median([c["daemon_threads"] for c in mine]),
            "thread_cpu_pct": _thread_medians(mine),
        }
        if k:
            row["batches_min"] = min(c["batches_min"] for c in mine)
            row["expected_batches"] = min(c["expected_batches"] for c in mine)
            row["stream_errors"] = sum(len(c["errors"]) for c in mine)
            row["batch_bytes_mean"] = _median([c["batch_bytes_mean"] for c in mine])
            row["events_received"] = _median([c["events_received"] for c in mine])
        if k == GOAL_SUBSCRIBERS and with_events == events:
            row["goal_met"] = _median(cpu) <= GOAL_PCT
        rows.append(row)
    return rows


# ---------------------------------------------------------------- console summary


def format_summary(result: Result) -> str:
    config = result["config"]
    lines = [
        f"daemon_streams: {config['gpus']} GPUs at {config['interval_s']} s, "
        f"{config['seconds']} s measured per case in {config['rounds']} round(s)",
        f"  {'backend':<10}{'subs':>5}  {'streams':<17}{'daemon %':>9}{'min':>7}{'max':>7}"
        f"{'RSS MiB':>9}{'subs %':>8}{'batches':>9}",
    ]
    for row in result["summary"]:
        cpu = row["daemon_cpu_pct"]
        batches = f"{row['batches_min']}/{row['expected_batches']}" if row["subscribers"] else ""
        lines.append(
            f"  {row['backend']:<10}{row['subscribers']:>5}  {row['streams']:<17}"
            f"{cpu['median']:>9.2f}{cpu['min']:>7.2f}{cpu['max']:>7.2f}{row['daemon_rss_mib']:>9.1f}"
            f"{row['subscribers_cpu_pct']:>8.2f}{batches:>9}"
        )
    lines += [f"  {line}" for line in _verdict(result)]
    return "\n".join(lines)


# ---------------------------------------------------------------- markdown


def _verdict(result: Result) -> list[str]:
    lines = []
    for row in result["summary"]:
        if "goal_met" not in row:
            continue
        cpu = row["daemon_cpu_pct"]["median"]
        mark = "**met**" if row["goal_met"] else "**not met**"
        lines.append(
            f"- {row['backend']} backend, {GOAL_SUBSCRIBERS} subscribers: {cpu:.2f} % of one "
            f"core (goal ≤ {GOAL_PCT:g} %) — {mark}."
        )
    return lines or [f"- No run with {GOAL_SUBSCRIBERS} subscribers: the goal was not checked."]


def _numbers_table(result: Result) -> list[str]:
    lines = [
        "| backend | subscribers | streams each | daemon CPU, % of one core: median [min, max] "
        "| above 0 "
        "subscribers | RSS MiB | peak RSS MiB | threads | subscriber process CPU % "
        "| batches per subscriber in window: fewest / expected |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["summary"]:
        cpu = row["daemon_cpu_pct"]
        above = "" if row["above_idle_pct"] is None else f"{row['above_idle_pct']:+.2f}"
        batches = f"{row['batches_min']} / {row['expected_batches']}" if row["subscribers"] else ""
        lines.append(
            f"| {row['backend']} | {row['subscribers']} | {row['streams']} | {cpu['median']:.2f} "
            f"[{cpu['min']:.2f}, {cpu['max']:.2f}] | {above} | {row['daemon_rss_mib']:.1f} "
            f"| {row['daemon_peak_mib']:.1f} | {row['daemon_threads']:g} "
            f"| {row['subscribers_cpu_pct']:.2f} | {batches} |"
        )
    return lines


def _thread_table(result: Result, backend: str) -> list[str]:
    rows = [r for r in result["summary"] if r["backend"] == backend]
    groups = sorted({g for r in rows for g in r["thread_cpu_pct"]})
    busy = [g for g in groups if any(r["thread_cpu_pct"].get(g, 0) >= 0.005 for r in rows)]
    header = " | ".join(_column(r) for r in rows)
    lines = [f"| thread ({backend}) | {header} |", "| --- |" + " ---: |" * len(rows)]
    for group in busy:
        cells = " | ".join(f"{r['thread_cpu_pct'].get(group, 0.0):.3f}" for r in rows)
        lines.append(f"| {group} | {cells} |")
    sums = " | ".join(f"{sum(r['thread_cpu_pct'].values()):.3f}" for r in rows)
    totals = " | ".join(f"{r['daemon_cpu_pct']['median']:.2f}" for r in rows)
    lines.append(f"| *all threads (schedstat)* | {sums} |")
    lines.append(f"| *process (/proc/PID/stat, as above)* | {totals} |")
    return lines


def _column(row: dict[str, Any]) -> str:
    label = f"{row['subscribers']} subscribers"
    return label if row["events"] or not row["subscribers"] else f"{label}, samples only"


def _row(
    result: Result, backend: str, subscribers: int, events: bool | None = None
) -> dict[str, Any] | None:
    """The summary row; `events` None: the streams every K was measured with."""
    wanted = result["config"]["events"] if events is None else events
    for row in result["summary"]:
        same = row["backend"] == backend and row["subscribers"] == subscribers
        if same and (not subscribers or row["events"] == wanted):
            return dict(row)
    return None


def _per_subscriber_lines(result: Result) -> list[str]:
    lines = []
    for backend in result["config"]["backends"]:
        events = result["config"]["events"]
        rows = [r for r in result["summary"] if r["backend"] == backend and r["events"] == events]
        idle = _row(result, backend, 0)
        most = max(rows, key=lambda r: r["subscribers"], default=None)
        if idle is None or most is None or not most["subscribers"]:
            continue
        extra = most["daemon_cpu_pct"]["median"] - idle["daemon_cpu_pct"]["median"]
        rss = most["daemon_rss_mib"] - idle["daemon_rss_mib"]
        streams = "two streams" if events else "one stream"
        lines.append(
            f"- {backend}: each subscriber ({streams}) adds about "
            f"{extra / most['subscribers']:.3f} % of a core and "
            f"{1024 * rss / most['subscribers']:.0f} KiB (0 → {most['subscribers']} "
            f"subscribers: {extra:+.2f} %, {rss:+.1f} MiB); the rest is the sampling itself."
        )
    return lines


def _main_thread_lines(result: Result) -> list[str]:
    shares = [
        r["thread_cpu_pct"].get("MainThread", 0.0)
        for r in result["summary"]
        if "thread_cpu_pct" in r
    ]
    if not shares:
        return []
    share = _median(shares)
    if share < MAIN_THREAD_NOTABLE_PCT:
        return []
    return [
        f"- The main thread takes {share:.3f} % of a core whatever the load "
        f"({100 * share / GOAL_PCT:.0f} % of the goal's budget): it sits in grpc's "
        "`server.wait_for_termination()` (node_daemon/server.py `NodeDaemon.wait`), which "
        "waits in 0.1 s slices (grpc/_common.py `MAXIMUM_WAIT_TIMEOUT`, a workaround for "
        "Ctrl-C on Windows): ten wake-ups a second that do nothing. Suggested fix (daemon "
        "code, not changed here): `NodeDaemon.wait()` first blocks on its `_stopped` event "
        "(`self._stopped.wait()`: one futex wait; on Linux the SIGTERM/SIGINT handlers "
        "still run), then calls `wait_for_termination()` for the shutdown only.",
    ]


def _sampler_lines(result: Result) -> list[str]:
    nvml, simulated = _row(result, "nvml", 0), _row(result, "simulated", 0)
    if nvml is None or simulated is None:
        return []
    a = nvml["thread_cpu_pct"].get("gpufleet-sampler", 0.0)
    b = simulated["thread_cpu_pct"].get("gpufleet-sampler", 0.0)
    return [
        f"- The sampler thread: {a:.3f} % of a core with the NVML backend, {b:.3f} % with "
        "the simulated one. The difference is reading NVML and, mostly, the process lists "
        "(every 3 s, 24 processes here): bench/results/nvml_sweep.md measures them and "
        "suggests caching each process's /proc details by (pid, start time).",
    ]


def _event_stream_lines(result: Result) -> list[str]:
    """What K event streams cost: K subscribers with both streams minus sample streams only."""
    lines = []
    for backend in result["config"]["backends"]:
        for k in result["config"].get("samples_only", []):
            both, samples = _row(result, backend, k, True), _row(result, backend, k, False)
            if both is None or samples is None or not k:
                continue
            # Per-thread schedstat sums: finer than /proc/PID/stat's 10 ms ticks.
            extra = sum(both["thread_cpu_pct"].values()) - sum(samples["thread_cpu_pct"].values())
            rpc = both["thread_cpu_pct"].get("gpufleet-rpc", 0.0) - samples["thread_cpu_pct"].get(
                "gpufleet-rpc", 0.0
            )
            events = both.get("events_received", 0)  # by all its subscribers, whole run
            lines.append(
                f"- {backend}, {k} subscribers: their {k} event streams cost {extra:.2f} % of a "
                f"core ({rpc:.2f} % on the stream threads; summed per thread), "
                f"{1e4 * extra / k:.0f} µs per stream per second, though the {k} streams "
                f"carried {events:g} events in all. "
                "StreamEvents (node_daemon/rpc/alert_servicer.py) wakes every `_POLL_S` = 1 s "
                "to check "
                "`context.is_active()` and queries the journal each time, event or not."
            )
    if lines:
        lines.append(
            "  Suggested fix (daemon code, not changed here): wake an event stream only for "
            "news — register `context.add_callback(...)` to notify the journal's condition "
            "when the RPC ends, and wait with a long timeout (e.g. 30 s) as a safety net; "
            "skip the journal query when `last_seq` has not moved. The sample streams do "
            "not need this: a batch wakes them every tick anyway."
        )
    return lines


def _findings(result: Result) -> list[str]:
    return [
        *_per_subscriber_lines(result),
        *_event_stream_lines(result),
        *_main_thread_lines(result),
        *_sampler_lines(result),
    ]


def _history_table(wakes: dict[str, float]) -> list[str]:
    lines = [
        "| batches in the history | µs per stream wake | % of a core at 10 subscribers | at 50 |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for entries, us in wakes.items():
        lines.append(f"| {entries} | {us:.1f} | {us * 10 / 1e4:.3f} | {us * 50 / 1e4:.3f} |")
    return lines


def _history_lines(result: Result) -> list[str]:
    scan = result["history_scan"]
    wakes = scan["us_per_wake"]
    full = str(scan["entries_full"])
    growth = wakes[full] / wakes["60"] if wakes.get("60") else 0.0
    intro = (
        "Each sample stream wakes once per tick and calls `SampleRing.wait_after"
        "(last_tick)` for the batches it has not sent. The measured windows hold about a "
        f"minute of history; a daemon that has run for an hour holds {full} batches. "
        "Measured in-process on the same `SampleRing` (projected at 1 Hz):"
    )
    if growth < SCAN_GROWTH:
        return [
            intro,
            "",
            *_history_table(wakes),
            "",
            f"A wake costs about the same with an hour of history as with a minute "
            f"({growth:.1f} times): the streams take only the batches they miss from the "
            "end of the history, so the numbers above hold for a long-running daemon.",
        ]
    return [
        intro,
        "",
        *_history_table(wakes),
        "",
        f"A wake with an hour of history costs {growth:.0f} times one with a minute: "
        "`wait_after` returns `[e for e in self._entries if e.tick > tick]`, a scan of "
        "the whole ring under the history's lock for one new batch, so a long-running "
        "daemon pays more than the windows above show.",
        "",
        "Suggested fix (daemon code, not changed here): walk the deque from the newest "
        "end and stop at the first entry with `tick <= last_tick` (new batches are "
        "always at the end), e.g. `itertools.takewhile` over `reversed(self._entries)` "
        "then reverse the few found; a stream that is behind pays for what it is "
        "missing, not for the hour it already has.",
    ]


def _baseline_lines(result: Result) -> list[str]:
    """This run beside an earlier one (--baseline), case by case."""
    base = result.get("baseline")
    if not base:
        return []
    events = base["config"].get("events", True)
    before = {
        (r["backend"], r["subscribers"]): r
        for r in base["summary"]
        if r.get("events", events) == events
    }
    commit = str(base["code"].get("commit"))[:12]
    now_commit = str(result["code"].get("commit"))[:12]
    lines = [
        f"The same benchmark on commit {commit} (before), and now on {now_commit}; "
        "daemon CPU in % of one core (medians), main thread's share apart:",
        "",
        "| backend | subscribers | before | now | main thread before | now |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["summary"]:
        old = before.get((row["backend"], row["subscribers"]))
        if old is None or row["events"] != result["config"]["events"]:
            continue
        lines.append(
            f"| {row['backend']} | {row['subscribers']} | {old['daemon_cpu_pct']['median']:.2f} "
            f"| {row['daemon_cpu_pct']['median']:.2f} "
            f"| {old['thread_cpu_pct'].get('MainThread', 0.0):.3f} "
            f"| {row['thread_cpu_pct'].get('MainThread', 0.0):.3f} |"
        )
    old_wakes, wakes = base["history_scan"]["us_per_wake"], result["history_scan"]["us_per_wake"]
    full = str(result["history_scan"]["entries_full"])
    if full in old_wakes and full in wakes:
        lines += [
            "",
            f"A stream wake with {full} batches of history: {old_wakes[full]:.1f} µs before, "
            f"{wakes[full]:.1f} µs now.",
        ]
    return lines


def _profile_lines(result: Result) -> list[str]:
    lines: list[str] = []
    for profile in result["profiles"]:
        lines += [f"### py-spy, {profile['backend']} backend, 10 subscribers", ""]
        if "error" in profile:
            lines += [f"No profile: {profile['error']}", ""]
            continue
        lines += [
            f"`py-spy record --gil`, {profile['seconds']:.0f} s at {profile['rate']} Hz: "
            f"{profile['samples']} samples of a thread holding the GIL (running Python) ≈ "
            f"{profile['cpu_pct_of_one_core']:.3f} % of one core. Work outside the GIL (gRPC's "
            "C core, the kernel) is not in it; the per-thread table above has all of it.",
            "",
            "| where | % of one core |",
            "| --- | ---: |",
        ]
        for title, key in (
            ("thread", "by_thread"),
            ("self (leaf function)", "self"),
            ("inclusive (project code)", "inclusive_project"),
        ):
            lines += [f"| **{title}** | |"]
            lines += [f"| `{name}` | {pct:.3f} |" for name, pct in profile[key]]
        lines.append("")
    return lines


def _machine_lines(result: Result) -> list[str]:
    machine, code = result["machine"], result["code"]
    changed = code.get("changed") or []
    packages = machine.get("packages", {})
    return [
        f"- CPU: {machine.get('cpu_model')}, {machine.get('nproc')} cores usable; "
        f"{machine.get('memory_gib')} GiB; Linux {machine.get('kernel')}; "
        f"Python {machine.get('python')}; grpcio {packages.get('grpcio')}, "
        f"protobuf {packages.get('protobuf')}",
        "- Shared and noisy: other work ran on the machine; the daemon's CPU is its own "
        "(/proc/PID/stat), but waiting for a core stretches its work; hence rounds and "
        "medians, and the spread shown.",
        f"- Code: commit {str(code.get('commit'))[:12]}"
        + (f", with uncommitted changes in {len(changed)} file(s)" if changed else ""),
    ]


def _method_lines(result: Result) -> list[str]:
    config = result["config"]
    streams = "a sample stream and an event stream" if config["events"] else "a sample stream"
    return [
        f"- The daemon as a real process: `python -m node_daemon daemon --backend B --gpus "
        f"{config['gpus']} --interval {config['interval_s']:g} --listen 127.0.0.1:0 "
        "--ready-file F --state-dir D --config C`; a fresh daemon for every case. Backend "
        f"`nvml` reads the fake `libnvidia-ml.so.1` of the tests ({config['gpus']} GPUs, "
        f"{config['processes_per_gpu_nvml']} live processes each, via `LD_LIBRARY_PATH` and "
        "`FAKE_NVML_STATE`): the real ctypes path, the process lists every 3 s included. "
        "Backend `simulated`: the demo's model.",
        f"- Subscribers: one separate process, K gRPC channels, each holding {streams} "
        "(as a console does), with the console's channel options (keepalive pings every "
        "10 s). Every message is decoded and counted.",
        f"- `max_streams` raised to {config['max_streams']} through the config file, in "
        "every case alike (each console holds two streams; the default 64 serves 32 "
        "consoles).",
        f"- Per case: {config['warmup_s']:g} s after all subscribers have their first batch, "
        f"then a window of {config['seconds'] / config['rounds']:g} s; {config['rounds']} "
        "round(s), the order of K rotating; medians over rounds.",
        "- Daemon CPU: utime + stime delta of /proc/PID/stat over the window's wall time "
        "(100 % = one core); per thread from /proc/PID/task/TID/schedstat (nanoseconds "
        "on a CPU; /proc/.../stat's 10 ms ticks are too coarse per thread), Python thread "
        "names from `py-spy dump`. Memory: VmRSS at the end, VmHWM. The subscriber "
        "process's CPU is measured apart: it is the consoles' cost, not the daemon's.",
    ]


def markdown(result: Result) -> str:
    config = result["config"]
    lines = [
        "# Daemon CPU and memory while streaming: 8 GPUs at 1 Hz to 1, 10 and 50 subscribers",
        "",
        f'Date: {result["date"]}. Issue "Fleet scale and speed": *daemon with 8 GPUs at 1 Hz '
        "streaming to 1, 10 and 50 subscribers: share of one core, memory. Goal: ≤ 1 % of a "
        f"core at 10 subscribers ({REFERENCES}).*",
        "",
        f"Command: `.venv/bin/python bench/daemon_streams.py{shown_argv(config['argv'])}`",
        "",
        "## Result",
        "",
        *_verdict(result),
        "",
        *_numbers_table(result),
        "",
        "## Where the daemon's CPU goes, per thread (% of one core, median)",
        "",
    ]
    for backend in config["backends"]:
        lines += [*_thread_table(result, backend), ""]
    lines += ["## Findings", "", *_findings(result), ""]
    lines += ["## Stream wakes and the length of the history", "", *_history_lines(result), ""]
    if result.get("baseline"):
        lines += ["## Before and after", "", *_baseline_lines(result), ""]
    if result["profiles"]:
        lines += ["## Profile", "", *_profile_lines(result)]
    lines += [
        "## Method",
        "",
        *_method_lines(result),
        "",
        "## Machine",
        "",
        *_machine_lines(result),
        "",
        "## Caveats",
        "",
        "- The windows are short: the history ring holds about a minute of batches, not "
        "the hour of a long-running daemon; the section above measures what that costs.",
        "- Daemon and subscribers share the machine's cores; on a GPU server the consoles "
        "are elsewhere and only the daemon's share counts.",
        "- The fake NVML answers each call in about a microsecond; a real driver is "
        "slower (bench/nvml_sweep.py counts the calls per sweep).",
        f"- The {REFERENCES} figures are the issue's, not measured here.",
    ]
    return "\n".join(lines) + "\n"
