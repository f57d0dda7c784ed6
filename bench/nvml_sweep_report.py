"""bench/nvml_sweep.py's numbers: statistics, our / their ratios, the table, the markdown."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from results import md_row

from node_daemon.config import DaemonConfig

Result = dict[str, Any]
Counts = Mapping[str, Mapping[str, Mapping[str, Mapping[str, int]]]]
OURS = "gpufleet"
# (what is compared, our operation, their tool, their operation)
PAIRS = (
    ("GPU metrics", "metrics", "nvitop", "metrics"),
    ("processes", "processes", "nvitop", "processes"),
    ("full sweep", "sweep", "nvitop", "sweep"),
    ("full sweep", "sweep", "gpustat", "sweep"),
)
OP_LABELS = {
    ("gpufleet", "metrics"): "NvmlBackend.read_gpus()",
    ("gpufleet", "processes"): "NvmlBackend.read_processes()",
    ("gpufleet", "sweep"): "read_gpus() + read_processes()",
    ("gpufleet", "processes_cached"): "read_processes(), /proc details cached (prototype)",
    ("nvitop", "metrics"): "Device.as_snapshot() x GPUs",
    ("nvitop", "processes"): "device.processes() + GpuProcess.take_snapshots()",
    ("nvitop", "sweep"): "snapshots + processes",
    ("gpustat", "sweep"): "gpustat.new_query() (GPUs + processes)",
}
VARIANT_LABELS = {
    "fake": "the project's fake NVML, as the tests build it",
    "fake+stubs": "the fake plus NOT_SUPPORTED stubs for the functions it lacks",
}


@dataclass
class Series:
    """Per-sweep seconds of one (tool, operation), and the median of each block."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    block_wall: list[float] = field(default_factory=list)
    block_cpu: list[float] = field(default_factory=list)

    def add_block(self, block: Mapping[str, Sequence[float]]) -> None:
        self.wall += block["wall"]
        self.cpu += block["cpu"]
        self.block_wall.append(statistics.median(block["wall"]))
        self.block_cpu.append(statistics.median(block["cpu"]))


def _us_per_gpu(seconds: float, gpus: int) -> float:
    return round(seconds * 1e6 / gpus, 1)


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def series_stats(series: Series, gpus: int) -> dict[str, object]:
    return {
        "sweeps": len(series.wall),
        "wall_us_per_gpu": {
            "p50": _us_per_gpu(_percentile(series.wall, 50), gpus),
            "p90": _us_per_gpu(_percentile(series.wall, 90), gpus),
        },
        "cpu_us_per_gpu": {"p50": _us_per_gpu(_percentile(series.cpu, 50), gpus)},
        "block_p50_us_per_gpu": {
            "min": _us_per_gpu(min(series.block_wall), gpus),
            "max": _us_per_gpu(max(series.block_wall), gpus),
        },
    }


def call_stats(count: Mapping[str, Mapping[str, int]], gpus: int) -> dict[str, object]:
    calls, missing = count["calls"], count["missing"]
    return {
        "nvml_calls_per_gpu": round(sum(calls.values()) / gpus, 2),
        "missing_lookups_per_gpu": round(sum(missing.values()) / gpus, 2),
        "functions": dict(sorted(calls.items())),
        "missing_functions": dict(sorted(missing.items())),
    }


def round_ratios(ours: Sequence[float], theirs: Sequence[float]) -> dict[str, float]:
    """ours / theirs per round (blocks of the same round ran back to back)."""
    ratios = [a / b for a, b in zip(ours, theirs, strict=False) if b > 0]
    return {
        "median": round(statistics.median(ratios), 3),
        "min": round(min(ratios), 3),
        "max": round(max(ratios), 3),
        "rounds": len(ratios),
    }


def pair_ratios(series: Mapping[str, Mapping[str, Series]], variants: Sequence[str]) -> list[dict]:
    rows: list[dict] = []
    for variant in variants:
        mine = series.get(f"{OURS}@{variant}", {})
        for what, our_op, tool, their_op in PAIRS:
            theirs = series.get(f"{tool}@{variant}", {})
            if our_op not in mine or their_op not in theirs:
                continue
            wall = round_ratios(mine[our_op].block_wall, theirs[their_op].block_wall)
            cpu = round_ratios(mine[our_op].block_cpu, theirs[their_op].block_cpu)
            rows.append(
                {
                    "variant": variant,
                    "what": what,
                    "ours": our_op,
                    "theirs": f"{tool} {their_op}",
                    "wall_ratio": wall,
                    "cpu_ratio": cpu,
                    "met": wall["median"] <= 1.0,
                }
            )
    return rows


def process_every() -> int:
    """The daemon reads processes every N sweeps (DaemonConfig defaults)."""
    config = DaemonConfig()
    return max(1, round(config.process_interval_s / config.sample_interval_s))


def daemon_tick(rows: Sequence[dict], variants: Sequence[str]) -> dict[str, dict[str, float]]:
    """Our average cost per GPU per tick: metrics every tick, processes every N-th."""
    every = process_every()
    ticks: dict[str, dict[str, float]] = {}
    for variant in variants:
        ours = {r["op"]: r for r in rows if r["tool"] == OURS and r["variant"] == variant}
        if "metrics" in ours and "processes" in ours:
            metrics = ours["metrics"]["wall_us_per_gpu"]["p50"]
            processes = ours["processes"]["wall_us_per_gpu"]["p50"]
            ticks[variant] = {
                "process_every": every,
                "us_per_gpu": round(metrics + processes / every, 1),
            }
    return ticks


def build_result(
    *,
    series: Mapping[str, Mapping[str, Series]],
    counts: Counts,
    versions: Mapping[str, Mapping[str, str | None]],
    skipped: Mapping[str, str],
    stubs: Sequence[str],
    procinfo_us: Mapping[str, float],
    config: Mapping[str, object],
    machine: Mapping[str, object],
    code: Mapping[str, object],
    date: str,
) -> Result:
    gpus = int(config["gpus"])
    rows = []
    for key, by_op in series.items():
        tool, _, variant = key.partition("@")
        for op, one in by_op.items():
            row: dict[str, object] = {"tool": tool, "variant": variant, "op": op}
            row |= series_stats(one, gpus)
            row |= call_stats(counts[key][op], gpus)
            rows.append(row)
    variants = [v for v in ("fake", "fake+stubs") if any(r["variant"] == v for r in rows)]
    return {
        "benchmark": "nvml_sweep",
        "date": date,
        "config": dict(config),
        "machine": dict(machine),
        "code": dict(code),
        "versions": {k: dict(v) for k, v in versions.items()},
        "skipped": dict(skipped),
        "stub_functions": list(stubs),
        "variants": variants,
        "operations": rows,
        "ratios": pair_ratios(series, variants),
        "daemon_tick": daemon_tick(rows, variants),
        "procinfo_us": dict(procinfo_us),
    }


# ---------------------------------------------------------------- text


def _rows(result: Result) -> list[dict]:
    return list(result["operations"])


def _ratios(result: Result) -> list[dict]:
    return list(result["ratios"])


def _op_line(row: Mapping) -> str:
    wall, cpu = row["wall_us_per_gpu"], row["cpu_us_per_gpu"]
    return (
        f"  {row['tool']:<9}{row['op']:<18}{wall['p50']:>10.1f}{wall['p90']:>10.1f}"
        f"{cpu['p50']:>10.1f}{row['nvml_calls_per_gpu']:>10.1f}{row['missing_lookups_per_gpu']:>9.1f}"
    )


def format_summary(result: Result) -> str:
    """The console summary: per library, per tool and operation; then the ratios."""
    config = result["config"]
    lines = [
        f"nvml_sweep: {config['gpus']} GPUs x {config['processes_per_gpu']} processes, "
        f"{config['sweeps']} sweeps per operation"
    ]
    for variant in result["variants"]:
        lines += ["", f"library: {variant}"]
        lines.append(
            f"  {'tool':<9}{'op':<18}{'us/GPU':>10}{'p90':>10}{'cpu us':>10}"
            f"{'calls/GPU':>10}{'missing':>9}"
        )
        lines += [_op_line(r) for r in _rows(result) if r["variant"] == variant]
    lines += ["", "ours / theirs (wall, per round: median [min..max]):"]
    for ratio in _ratios(result):
        wall = ratio["wall_ratio"]
        mark = "goal met" if ratio["met"] else "GOAL NOT MET"
        lines.append(
            f"  {ratio['variant']:<11}{ratio['what']:<12} vs {ratio['theirs']:<18}"
            f"{wall['median']:>7.2f} [{wall['min']:.2f}..{wall['max']:.2f}]  {mark}"
        )
    for tool, why in dict(result["skipped"]).items():
        lines.append(f"  skipped {tool}: {why}")
    return "\n".join(lines)


def _fmt_range(block: Mapping[str, float]) -> str:
    return f"{block['min']:.0f} to {block['max']:.0f}"


def _machine_lines(result: Result) -> list[str]:
    machine = dict(result["machine"])
    code = dict(result["code"])
    versions = dict(result["versions"])
    tools = {k.partition("@")[0]: v for k, v in versions.items()}
    tool_versions = (
        ", ".join(f"{tool} {v.get(tool)}" for tool, v in tools.items() if tool != OURS)
        or "none (not installed)"
    )
    pynvml = next((v.get("nvidia-ml-py") for v in tools.values()), None)
    changed = code.get("changed") or []
    return [
        f"- CPU: {machine.get('cpu_model')}, {machine.get('nproc')} cores usable "
        f"({machine.get('cpu_count')} online), {machine.get('memory_gib')} GiB; "
        f"Linux {machine.get('kernel')}; Python {machine.get('python')}",
        "- Shared, noisy machine: the tools ran interleaved and are compared as ratios "
        "within the run.",
        f"- nvidia-ml-py {pynvml} for every tool; {tool_versions}",
        f"- Code: commit {str(code.get('commit'))[:12]}"
        + (f", with uncommitted changes in {len(changed)} file(s)" if changed else ""),
    ]


def _table(result: Result, variant: str) -> list[str]:
    lines = [
        "| tool | operation | µs/GPU p50 | p90 | CPU µs/GPU p50 | block p50 range "
        "| NVML calls/GPU | lookups of absent functions/GPU |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in _rows(result):
        if row["variant"] != variant:
            continue
        wall = row["wall_us_per_gpu"]
        label = OP_LABELS.get((row["tool"], row["op"]), row["op"])
        lines.append(md_row(
            row["tool"], f"`{label}`", f"{wall['p50']:.1f}", f"{wall['p90']:.1f}",
            f"{row['cpu_us_per_gpu']['p50']:.1f}", _fmt_range(row["block_p50_us_per_gpu"]),
            f"{row['nvml_calls_per_gpu']:g}", f"{row['missing_lookups_per_gpu']:g}",
        ))  # fmt: skip
    return lines


def _ratio_table(result: Result) -> list[str]:
    lines = [
        "| library | what | gpufleet vs | wall ratio, median [min, max] | CPU ratio, median "
        "| goal ≤ 1 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for ratio in _ratios(result):
        wall, cpu = ratio["wall_ratio"], ratio["cpu_ratio"]
        wall_range = f"{wall['median']:.2f} [{wall['min']:.2f}, {wall['max']:.2f}]"
        met = "met" if ratio["met"] else "**not met**"
        lines.append(md_row(ratio["variant"], ratio["what"], ratio["theirs"], wall_range,
                            f"{cpu['median']:.2f}", met))  # fmt: skip
    return lines


def _verdict(result: Result) -> list[str]:
    ratios = [r for r in _ratios(result) if r["variant"] == "fake"]
    if not ratios:
        skipped = dict(result["skipped"])
        why = "; ".join(sorted(set(skipped.values()))) or "no comparison tool ran"
        return [f"**No comparison in this run**: {why}. Only gpufleet's numbers are below."]
    lines = []
    for ratio in ratios:
        wall = ratio["wall_ratio"]
        verdict = "**met**" if ratio["met"] else "**not met**"
        if wall["median"] <= 1:
            how = f"{1 / wall['median']:.1f} times cheaper"
        else:
            how = f"{wall['median']:.1f} times costlier"
        if ratio["met"] and wall["max"] > 1:
            verdict += " on the median, not in every round"
        lines.append(
            f"- {ratio['what']} vs {ratio['theirs']}: gpufleet is {how} "
            f"(ratio {wall['median']:.2f}, rounds ranged {wall['min']:.2f} to {wall['max']:.2f}) "
            f"— goal {verdict}."
        )
    return lines


def _tick_lines(result: Result) -> list[str]:
    tick = dict(result["daemon_tick"]).get("fake")
    if not tick:
        return []
    gpus = int(result["config"]["gpus"])
    sweep_ms = tick["us_per_gpu"] * gpus / 1000
    return [
        "The daemon reads GPU metrics every tick and the process lists every "
        f"{tick['process_every']} ticks (`process_interval_s` 3 s at the 1 s tick), so its "
        f"average cost on this fake is **{tick['us_per_gpu']:.0f} µs per GPU per tick**, "
        f"{sweep_ms:.2f} ms per {gpus}-GPU sweep: {sweep_ms / 10:.3f} % of one core at 1 Hz.",
    ]


def _procinfo_lines(result: Result) -> list[str]:
    parts = dict(result["procinfo_us"])
    if not parts:
        return []
    lines = [
        "| what (one process, per process tick) | µs per call |",
        "| --- | ---: |",
    ]
    lines += [f"| {label} | {us:.1f} |" for label, us in parts.items()]
    return lines


def _our_p50(result: Result, op: str) -> float | None:
    for row in _rows(result):
        if row["tool"] == OURS and row["variant"] == "fake" and row["op"] == op:
            return float(row["wall_us_per_gpu"]["p50"])
    return None


def _cached_lines(processes: float, cached: float | None) -> list[str]:
    if cached is None:
        return []
    return [
        "",
        "Measured in the same run: the benchmark's prototype of that cache (the `procinfo` "
        "function wrapped in the worker process, daemon code unchanged) brings "
        f"`read_processes()` from {processes:.0f} to **{cached:.0f} µs per GPU** "
        f"({processes / cached:.1f} times less).",
    ]


def _processes_gap(result: Result) -> list[str]:
    """Why read_processes() costs what it does, and what caching would save."""
    parts = dict(result["procinfo_us"])
    whole, stat = (
        parts.get("describe_process (all of it)"),
        parts.get("/proc/PID/stat (start ticks)"),
    )
    processes, sweep = _our_p50(result, "processes"), _our_p50(result, "sweep")
    per_gpu = int(result["config"]["processes_per_gpu"])
    lines = ["## Where our time goes: the process lists", ""]
    if whole and stat and processes and sweep:
        cached = _our_p50(result, "processes_cached")
        gap = [r for r in _ratios(result) if r["what"] == "processes" and not r["met"]]
        versus = (
            f" It costs more than nvitop's (ratio {gap[0]['wall_ratio']['median']:.2f})."
            if gap
            else ""
        )
        lines += [
            f"On a process tick `read_processes()` is {100 * processes / sweep:.0f} % of our "
            f"sweep: {processes:.0f} µs per GPU for {per_gpu} processes, of which NVML (3 calls "
            f"per GPU) is a small part; the rest is "
            f"`node_daemon.backends.procinfo.describe_process`, "
            f"{whole:.0f} µs per process, run again for every process on every process tick: "
            f"it re-reads seven files that do not change during a process's life.{versus}",
            "",
            *_procinfo_lines(result),
            "",
            "Suggested fix (daemon code, not changed here): cache `ProcessDetails` by "
            "`(pid, start ticks)` — the start time in /proc/PID/stat is what identifies a "
            "process, so a listed pid with the same start ticks is the same process and needs "
            "one small read per tick instead of seven; read `btime` from /proc/stat once (it "
            "does not change while the machine runs; on a 128-core server /proc/stat is tens "
            "of KiB); cache uid → user name; drop entries whose pid is no longer listed. "
            "nvitop does much the same (psutil `Process` objects kept per pid).",
            *_cached_lines(processes, cached),
        ]
    return lines


def shown_argv(argv: Sequence[str]) -> str:
    """The command's arguments, each after a space, without --out and --md (paths)."""
    shown: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--out", "--md"):
            skip = True
        elif not arg.startswith(("--out=", "--md=")):
            shown.append(arg)
    return "".join(f" {arg}" for arg in shown)


def markdown(result: Result) -> str:
    config = dict(result["config"])
    stubs = list(result["stub_functions"])
    lines = [
        "# NVML sweep cost per GPU: gpufleet vs nvitop and gpustat",
        "",
        f'Date: {result["date"]}. Issue "Fleet scale and speed": *daemon sweep cost per '
        "GPU per tick with the NVML backend against the fake NVML library, side by side "
        "with nvitop's Device snapshot and gpustat's query reading the same library. "
        "Goal: our cost ≤ theirs.*",
        "",
        f"Command: `.venv/bin/python bench/nvml_sweep.py{shown_argv(config['argv'])}`",
        "",
        "## Result",
        "",
        *_verdict(result),
        "",
        *_tick_lines(result),
        "",
        "## Method",
        "",
        f"- One fake `libnvidia-ml.so.1` (tests/fake_nvml/fake_nvml.c, gcc -O2) with "
        f"{config['gpus']} GPUs, each listing {config['processes_per_gpu']} live processes "
        "(`sleep` children), so /proc reads find real processes.",
        "- Each tool in its own process, started with the fake first on `LD_LIBRARY_PATH`: "
        "its pynvml loads the fake by soname, the same ctypes path as on a GPU server. "
        "All tools, ours included, run from one venv with one nvidia-ml-py.",
        "- Operations: gpufleet `NvmlBackend.read_gpus()` (every metric the daemon "
        "streams), `read_processes()`, and both; nvitop `Device.as_snapshot()` for each "
        "device of `Device.all()` (listed once, as nvitop's monitor does), "
        "`device.processes()` + `GpuProcess.take_snapshots()`, and both; gpustat "
        "`gpustat.new_query()`, which reads GPUs and processes in one call.",
        f"- Interleaved: each round runs every (tool, operation) for a block of "
        f"{config['block']} sweeps after {config['warmup']} untimed ones, the order rotating "
        "each round. Wall time (`perf_counter`) and this thread's CPU time "
        "(`thread_time`) of each sweep, divided by the GPU count.",
        "- Ratios: gpufleet's block median over theirs in the same round, then the median "
        "over rounds.",
        "- NVML calls: one extra, untimed sweep with pynvml's function lookup wrapped, "
        "counting every call that reaches the library and every lookup of a function "
        "the library lacks.",
        "",
        "## Machine",
        "",
        *_machine_lines(result),
        "",
        "## Numbers",
        "",
    ]
    for variant in result["variants"]:
        lines += [f"### Library: {VARIANT_LABELS.get(variant, variant)}", ""]
        if variant == "fake+stubs":
            lines += [f"Stubs: {', '.join(f'`{name}`' for name in stubs)}.", ""]
        lines += [*_table(result, variant), ""]
    if _ratios(result):
        lines += ["### gpufleet / theirs", "", *_ratio_table(result), ""]
    lines += [*_processes_gap(result), ""]
    lines += [
        "## Caveats",
        "",
        "- The fake answers each call in about a microsecond (a `stat()` of its state "
        "file and a table lookup); a real driver's calls cost more, some far more. The "
        "NVML-call column says how the tools would scale on real hardware: multiply by "
        "the driver's cost per call and add it to each row.",
        "- The field sets differ: nvitop's snapshot asks for ~40 attributes (many the "
        "fake lacks: with the plain fake those cost nvitop a Python exception each, with "
        "the stubs a C call); gpustat reads 12 fields per GPU; gpufleet reads the 18 "
        "metrics it streams (plus Xid events, drained once per sweep).",
        "- gpustat: `new_query()` sleeps 0.1 s per GPU to measure process CPU percent; "
        "the benchmark removes that sleep (wall time, not work). It also calls "
        "`nvmlInit`/`nvmlShutdown` on every query, which is cheap on the fake and costly "
        "on a real driver — so gpustat's real cost is higher than shown.",
        "- Processes: each tool reads different things from /proc (gpufleet: start time, "
        "user, command line, container id, Slurm job; nvitop and gpustat: user, command "
        "line, CPU and memory use via psutil).",
    ]
    skipped = dict(result["skipped"])
    if skipped:
        lines += ["", "Skipped in this run:", ""]
        lines += [f"- {tool}: {why}" for tool, why in skipped.items()]
    return "\n".join(lines) + "\n"
