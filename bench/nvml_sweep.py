"""Benchmark: the daemon's NVML sweep cost per GPU per tick, beside nvitop's and gpustat's.

    .venv/bin/python bench/nvml_sweep.py [--sweeps 2000] [--gpus 8] [--processes 3]
                                         [--block 50] [--venv DIR] [--no-compare]
                                         [--out FILE.json] [--md FILE.md]
    .venv/bin/python bench/nvml_sweep.py --smoke     # seconds; no markdown written

Every tool reads the same fake ``libnvidia-ml.so.1`` (tests/fake_nvml/fake_nvml.c,
compiled with gcc), 8 GPUs with 3 live processes each, each tool in its own
process with the fake first on ``LD_LIBRARY_PATH``, so its pynvml loads the fake
by soname and the real ctypes path runs:

- gpufleet: the daemon's ``NvmlBackend`` (``read_gpus()``, ``read_processes()``);
- nvitop: ``Device.as_snapshot()`` per device, ``device.processes()`` + snapshots;
- gpustat: ``gpustat.new_query()``.

nvitop and gpustat go into a venv of their own (``--venv``, default
``$TMPDIR/gpufleet-bench-venv``) with the project installed editable, and every
tool (ours too) runs from it, so all use the same nvidia-ml-py. Without it (no
network, ``--no-compare``) only our numbers are measured, and the report says so.

The tools are interleaved: in each round every (tool, operation) runs one block
of ``--block`` sweeps after a short warm-up, the order rotating from round to
round, so a noisy neighbour hits all alike. Reported per operation: wall time
per sweep / GPUs (p50, p90 over all sweeps), CPU time (p50), and our / their
ratio computed per round and summarised by its median.

NVML calls per GPU are counted in one separate, untimed sweep by wrapping
pynvml's function lookup. The fake lacks some functions nvitop and gpustat ask
for (a real driver has them): a second library, the fake plus stubs answering
NOT_SUPPORTED for exactly those, makes every asked-for call a C call; both
libraries are measured in the same run.
"""

from __future__ import annotations

import argparse
import math
import sys
import timeit
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import nvml_sweep_report
from machine import code_version, describe_machine
from nvml_sweep_fake import ROOT, FakeNvml, FakeNvmlError, fake_node, with_stubs
from nvml_sweep_report import Series, build_result
from nvml_sweep_venv import DEFAULT_VENV, Venv, ensure_venv, imports_ok
from nvml_sweep_workers import Worker, WorkerError, start_worker
from results import measure_and_write

from node_daemon.backends import procinfo

COMPARED = ("nvitop", "gpustat")
DEFAULT_MD = Path(__file__).resolve().parent / "results" / "nvml_sweep.md"
# What stops a run before it measures anything: the fake library, a child process.
CANNOT_MEASURE = (FakeNvmlError, WorkerError)
SMOKE = {"sweeps": 20, "block": 10, "warmup": 2}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--sweeps", type=int, default=2000, help="timed sweeps per tool and operation")
    arg("--block", type=int, default=50, help="sweeps per block (one tool, one operation)")
    arg("--warmup", type=int, default=5, help="untimed sweeps before each block")
    arg("--gpus", type=int, default=8, help="GPUs of the fake (default 8, at most 16)")
    arg("--processes", type=int, default=3, help="live processes listed on each GPU")
    arg("--venv", type=Path, default=DEFAULT_VENV, help="venv for nvitop and gpustat")
    arg("--no-compare", action="store_true", help="measure gpufleet only")
    arg("--no-stubs", action="store_true", help="skip the library with stubs")
    arg("--smoke", action="store_true", help="a few sweeps: does it all still run?")
    arg("--out", type=Path, metavar="FILE.json", help="write the result as JSON")
    arg("--md", type=Path, metavar="FILE.md", help=f"markdown report (default {DEFAULT_MD}; "
        "none with --smoke)")  # fmt: skip
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, min(getattr(args, key), value))
    return args


def comparison_venv(args: argparse.Namespace) -> Venv:
    """The venv with the project, nvitop and gpustat; python None where there is none."""
    if args.no_compare:
        return Venv(None, "comparison skipped (--no-compare)")
    modules = ["node_daemon", "nvitop", "gpustat"]
    timeout_s = 120.0 if args.smoke else 900.0
    return ensure_venv(
        args.venv,
        ["-e", str(ROOT), *COMPARED],
        lambda python: imports_ok(python, modules),
        timeout_s,
    )


# ---------------------------------------------------------------- workers


@contextmanager
def worker_pool() -> Iterator[list[Worker]]:
    """Every worker started in the block is stopped when it ends, however it ends."""
    workers: list[Worker] = []
    try:
        yield workers
    finally:
        for worker in workers:
            worker.stop()


def start_tools(
    pool: list[Worker],
    python: Path,
    tools: Sequence[str],
    fake: FakeNvml,
    variant: str,
    log_dir: Path,
    skipped: dict[str, str],
) -> list[Worker]:
    started = []
    for tool in tools:
        try:
            worker = start_worker(python, tool, fake, variant, log_dir)
        except WorkerError as exc:
            skipped[f"{tool}@{variant}"] = str(exc)
            print(f"nvml_sweep: {tool} skipped on {variant}: {exc}", file=sys.stderr)
            continue
        pool.append(worker)
        started.append(worker)
    return started


def count_calls(workers: Sequence[Worker]) -> dict[str, dict[str, dict[str, dict[str, int]]]]:
    """worker key -> op -> {"calls": ..., "missing": ...} for one untimed sweep."""
    return {worker.key: {op: worker.count(op) for op in worker.ops} for worker in workers}


def missing_functions(counts: dict[str, dict[str, dict[str, dict[str, int]]]]) -> list[str]:
    names = {
        name for by_op in counts.values() for count in by_op.values() for name in count["missing"]
    }
    return sorted(names)


def interleave(
    workers: Sequence[Worker], sweeps: int, block: int, warmup: int
) -> dict[str, dict[str, Series]]:
    """Time every (worker, op) in blocks, round-robin, the order rotating each round."""
    tasks = [(worker, op) for worker in workers for op in worker.ops]
    series = {worker.key: {op: Series() for op in worker.ops} for worker in workers}
    rounds = max(1, math.ceil(sweeps / block))
    for round_index in range(rounds):
        shift = round_index % len(tasks)
        for worker, op in tasks[shift:] + tasks[:shift]:
            series[worker.key][op].add_block(worker.time(op, block, warmup))
        print(f"\rnvml_sweep: round {round_index + 1}/{rounds}", end="", file=sys.stderr)
    print(file=sys.stderr)
    return series


# ---------------------------------------------------------------- /proc cost of one process


def procinfo_parts(pid: int) -> dict[str, Callable[[], object]]:
    """What `procinfo.describe_process` reads for one process, piece by piece."""
    proc = procinfo.PROC / str(pid)
    return {
        "describe_process (all of it)": lambda: procinfo.describe_process(pid),
        "/proc/PID exists": lambda: proc.is_dir(),
        "/proc/PID/stat (start ticks)": lambda: procinfo.process_start_ticks(pid),
        "/proc/stat (boot time)": procinfo.boot_time_unix_s,
        "/proc/PID/status + user name": lambda: procinfo.process_user(pid),
        "/proc/PID/cmdline": lambda: procinfo.process_command(pid),
        "/proc/PID/cgroup": lambda: procinfo.container_id_from_cgroup(
            (proc / "cgroup").read_text(encoding="utf-8")
        ),
        "/proc/PID/environ (Slurm job)": lambda: procinfo.slurm_job_from_environ(pid),
    }


def procinfo_breakdown(pid: int, number: int) -> dict[str, float]:
    """µs per call of each part (best of 5 repeats: noise only ever adds)."""
    return {
        label: round(min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6, 1)
        for label, call in procinfo_parts(pid).items()
    }


# ---------------------------------------------------------------- the run


def run(args: argparse.Namespace, workdir: Path) -> dict[str, object]:
    venv = comparison_venv(args)
    print(f"nvml_sweep: {venv.note}", file=sys.stderr)
    python = venv.python or Path(sys.executable)
    tools = ["gpufleet", *(COMPARED if venv.python else ())]
    skipped: dict[str, str] = {}
    if venv.python is None:
        skipped.update({tool: venv.note for tool in COMPARED})
    with fake_node(workdir, args.gpus, args.processes) as fake, worker_pool() as pool:
        workers = start_tools(pool, python, tools, fake, "fake", workdir, skipped)
        if not any(w.tool == "gpufleet" for w in workers):
            raise WorkerError(skipped.get("gpufleet@fake", "gpufleet worker did not start"))
        counts = count_calls(workers)
        stubs = [] if args.no_stubs else missing_functions(counts)
        if stubs:
            stubbed = with_stubs(fake, workdir / "lib-stubs", stubs)
            more = start_tools(pool, python, tools, stubbed, "fake+stubs", workdir, skipped)
            counts.update(count_calls(more))
            workers += more
        series = interleave(workers, args.sweeps, args.block, args.warmup)
        breakdown = procinfo_breakdown(fake.pids[0], 50 if args.smoke else 500)
    return build_result(
        series=series,
        counts=counts,
        versions={w.key: w.versions for w in workers},
        skipped=skipped,
        stubs=stubs,
        procinfo_us=breakdown,
        config={
            "gpus": args.gpus,
            "processes_per_gpu": args.processes,
            "sweeps": args.sweeps,
            "block": args.block,
            "warmup": args.warmup,
            "smoke": args.smoke,
            "python": str(python),
            "venv": venv.note,
            "argv": list(args.argv),
        },
        machine=describe_machine(),
        code=code_version(ROOT),
        date=datetime.now(UTC).date().isoformat(),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return measure_and_write("nvml_sweep", args, run, CANNOT_MEASURE, nvml_sweep_report)


if __name__ == "__main__":
    sys.exit(main())
