#!/usr/bin/env bash
# Device check (#15): the NVML backend's health signals on a real NVIDIA GPU, beside
# what nvidia-smi says, written to $OUT/health_check.txt (raw outputs beside it).
#
#     bash bench/device_health_check.sh          # from the repository root
#
# Reads only: it never sets a power limit, MIG mode or anything else on the GPU.
# Needs a Python (3.10+) that imports pynvml (nvidia-ml-py): .venv/bin/python if it
# works, else python3; a copy of pynvml.py in .device/ (untracked, so it travels to
# the device machine: `mkdir -p .device && cp .venv/lib/python3.11/site-packages/pynvml.py
# .device/`) is put on the path. Every command has a timeout and may be absent; the
# whole check takes well under 2 minutes.
set -u

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$(mktemp -d)}
RAW="$OUT/health_raw"
REPORT="$OUT/health_check.txt"
STEP_S=20
mkdir -p "$RAW"
cd "$REPO" || exit 1

# Run a command with a timeout into $RAW/NAME.txt; an absent command is noted, not fatal.
capture() {
    local name=$1
    shift
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "(absent: $1)" >"$RAW/$name.txt"
        return 0
    fi
    timeout "$STEP_S" "$@" >"$RAW/$name.txt" 2>&1
    echo "(exit $?)" >>"$RAW/$name.txt"
}

capture smi_list nvidia-smi -L
capture smi_gpu nvidia-smi --query-gpu=index,power.limit,retired_pages.single_bit_ecc.count,retired_pages.double_bit.count --format=csv,noheader,nounits
capture smi_range nvidia-smi --query-gpu=index,uuid,power.default_limit,power.min_limit,power.max_limit,mig.mode.current --format=csv,noheader,nounits
capture smi_remapped nvidia-smi --query-remapped-rows=gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv
capture smi_nvlink_status nvidia-smi nvlink -s
capture smi_nvlink_errors nvidia-smi nvlink -e
capture smi_query nvidia-smi -q
capture smi_mig nvidia-smi mig -lgi

PYTHON=python3
if [ -x .venv/bin/python ] && .venv/bin/python -c "import pynvml" >/dev/null 2>&1; then
    PYTHON=.venv/bin/python
fi
export PYTHONPATH="$REPO:$REPO/protos:$REPO/.device${PYTHONPATH:+:$PYTHONPATH}"
export RAW

timeout 60 "$PYTHON" - >"$REPORT" 2>&1 <<'EOF'
"""Ours (NvmlBackend, read once, plus its cost) beside nvidia-smi's raw outputs."""
import csv
import io
import json
import os
import re
import statistics
import time
from pathlib import Path

RAW = Path(os.environ["RAW"])
SIGNALS = [
    "pcie_replay_total", "remapped_rows_correctable", "remapped_rows_uncorrectable",
    "row_remap_pending", "row_remap_failure", "retired_pages_sbe", "retired_pages_dbe",
    "retired_pages_pending", "nvlink_crc_flit_errors_total", "nvlink_crc_data_errors_total",
    "nvlink_replay_errors_total", "nvlink_recovery_errors_total", "nvlink_links_active",
    "nvlink_links_down", "recovery_action", "power_limit_w",
]


def val(reading, field):
    from gpufleet.v1.gpu_metrics import BY_FIELD

    return reading[BY_FIELD[field]]


def raw(name):
    path = RAW / f"{name}.txt"
    return path.read_text(errors="replace") if path.exists() else "(not run)"


def ours():
    from node_daemon.backends.nvml import NvmlBackend

    backend, every_tick = NvmlBackend(), NvmlBackend(slow_interval_s=0.0)
    try:
        facts = backend.open()
        started = time.perf_counter()
        readings = backend.read_gpus()
        first_s = time.perf_counter() - started
        cached = []
        for _ in range(20):
            started = time.perf_counter()
            backend.read_gpus()
            cached.append(time.perf_counter() - started)
        processes = backend.read_processes()
        every_tick.open()
        slow = []
        for _ in range(5):
            started = time.perf_counter()
            every_tick.read_gpus()
            slow.append(time.perf_counter() - started)
    finally:
        backend.close()
        every_tick.close()
    gpus = len(readings) or 1
    print("## Ours: NvmlBackend")
    print(f"driver {facts.driver_version}, CUDA {facts.cuda_version}, {len(readings)} GPU(s)")
    print(f"read_gpus() per GPU: first (with the slow read) {first_s / gpus * 1e6:.0f} us, "
          f"then (slow signals kept) p50 {statistics.median(cached) / gpus * 1e6:.0f} us, "
          f"slow read every time p50 {statistics.median(slow) / gpus * 1e6:.0f} us")
    for gpu, reading in zip(facts.gpus, readings):
        print(f"\nGPU {reading.index} {gpu.name} {gpu.uuid}: health {reading.health.name} "
              f"{reading.error or ''}")
        print(f"  mig_enabled={gpu.mig_enabled} power_limit_w(enforced)={gpu.power_limit_w} "
              f"default={gpu.power_limit_default_w} min={gpu.power_limit_min_w} "
              f"max={gpu.power_limit_max_w}")
        for field in SIGNALS:
            print(f"  {field} = {val(reading, field)}")
        print(f"  nvlink_down_links = {reading.nvlink_down_links}")
        for m in reading.mig:
            print(f"  MIG GI {m.gpu_instance_id} CI {m.compute_instance_id} {m.profile} {m.uuid} "
                  f"used {m.mem_used_bytes} of {m.mem_total_bytes} B, "
                  f"pids {[p.pid for p in m.processes]}")
        print(f"  processes: {[p.pid for p in processes.get(reading.index, [])]}")
    return facts, readings


def number(text):
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return None  # [N/A], [Not Supported]


def same(label, mine, theirs):
    if theirs is None:
        verdict = "n/a (nvidia-smi has none)" if mine is None else "ours only"
    elif mine is None:
        verdict = "DIFF: ours unset"
    else:
        verdict = "ok" if abs(float(mine) - theirs) < 0.5 else "DIFF"
    print(f"  {label:34} ours {mine!s:>10}   nvidia-smi {theirs!s:>10}   {verdict}")


def csv_rows(name):
    text = raw(name)
    lines = [line for line in text.splitlines() if line and not line.startswith("(exit")]
    return list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))


def per_gpu_blocks(text):
    """nvidia-smi nvlink output: {uuid: [lines]} by its 'GPU N: name (UUID: ...)' headers."""
    blocks, current = {}, None
    for line in text.splitlines():
        header = re.match(r"GPU \d+: .*\(UUID: (\S+)\)", line)
        if header:
            current = blocks.setdefault(header.group(1), [])
        elif current is not None:
            current.append(line.strip())
    return blocks


def compare(facts, readings):
    by_uuid = {gpu.uuid: (gpu, r) for gpu, r in zip(facts.gpus, readings)}
    by_index = {gpu.index: (gpu, r) for gpu, r in zip(facts.gpus, readings)}
    print("\n## Ours beside nvidia-smi")
    for row in csv_rows("smi_gpu"):
        if len(row) < 4 or not row[0].strip().isdigit() or int(row[0]) not in by_index:
            continue
        gpu, r = by_index[int(row[0])]
        print(f"GPU {gpu.index} (--query-gpu)")
        same("power.limit (W)", val(r, "power_limit_w"), number(row[1]))
        same("retired_pages.single_bit_ecc.count", val(r, "retired_pages_sbe"), number(row[2]))
        same("retired_pages.double_bit.count", val(r, "retired_pages_dbe"), number(row[3]))
    for row in csv_rows("smi_range"):
        if len(row) < 6 or row[1].strip() not in by_uuid:
            continue
        gpu, _r = by_uuid[row[1].strip()]
        print(f"GPU {gpu.index} (power range, MIG)")
        same("power.default_limit (W)", gpu.power_limit_default_w, number(row[2]))
        same("power.min_limit (W)", gpu.power_limit_min_w, number(row[3]))
        same("power.max_limit (W)", gpu.power_limit_max_w, number(row[4]))
        print(f"  mig.mode.current: ours {gpu.mig_enabled}, nvidia-smi {row[5].strip()}")
    for row in csv_rows("smi_remapped")[1:]:
        if len(row) < 5 or row[0].strip() not in by_uuid:
            continue
        gpu, r = by_uuid[row[0].strip()]
        print(f"GPU {gpu.index} (--query-remapped-rows)")
        for field, text in zip(["remapped_rows_correctable", "remapped_rows_uncorrectable",
                                "row_remap_pending", "row_remap_failure"], row[1:5]):
            flag = {"yes": 1.0, "no": 0.0}.get(text.strip().lower())
            same(field, val(r, field), flag if flag is not None else number(text))
    status = per_gpu_blocks(raw("smi_nvlink_status"))
    errors = per_gpu_blocks(raw("smi_nvlink_errors"))
    counters = {"replay errors": "nvlink_replay_errors_total",
                "recovery errors": "nvlink_recovery_errors_total",
                "crc errors": "nvlink_crc_flit_errors_total",
                "flit crc errors": "nvlink_crc_flit_errors_total",
                "data crc errors": "nvlink_crc_data_errors_total"}
    for uuid, (gpu, r) in by_uuid.items():
        links = [line for line in status.get(uuid, []) if re.match(r"Link \d+:", line)]
        inactive = [line for line in links if "inactive" in line.lower()]
        print(f"GPU {gpu.index} (nvlink -s: {len(links)} links listed)")
        same("links active", val(r, "nvlink_links_active"), float(len(links) - len(inactive)) if links else None)
        same("links down", val(r, "nvlink_links_down"), float(len(inactive)) if links else None)
        sums = {}
        for line in errors.get(uuid, []):
            match = re.match(r"Link \d+: ([A-Za-z /-]+?)\s*:\s*(\d+)", line)
            if match:
                name = match.group(1).strip().lower()
                sums[name] = sums.get(name, 0) + int(match.group(2))
        print(f"  nvlink -e sums: {json.dumps(sums) if sums else 'none listed'}")
        for name, total in sums.items():
            if name in counters:
                same(f"{name} (all links)", val(r, counters[name]), float(total))
    query = raw("smi_query")
    wanted = r"Replays Since Reset|Recovery Action|Pending Page|Pending\s*:|Remapping Failure|MIG Mode|Current\s*:"
    print("\n## nvidia-smi -q, the lines about these signals")
    for line in query.splitlines():
        if re.search(wanted, line):
            print("  " + line.strip())


print("# Health signals: NvmlBackend vs nvidia-smi (bench/device_health_check.sh)")
print(time.strftime("%Y-%m-%d %H:%M:%S %Z"))
try:
    facts, readings = ours()
except Exception as exc:  # report, then still show nvidia-smi's side
    print(f"NvmlBackend failed: {type(exc).__name__}: {exc}")
    facts = readings = None
if facts is not None:
    try:
        compare(facts, readings)
    except Exception as exc:
        print(f"comparison failed: {type(exc).__name__}: {exc}")
for name in ("smi_list", "smi_gpu", "smi_range", "smi_remapped", "smi_nvlink_status",
             "smi_nvlink_errors", "smi_mig"):
    print(f"\n## raw: {name}\n{raw(name).rstrip()}")
EOF
echo "python exit $?" >>"$REPORT"
cat "$REPORT"
