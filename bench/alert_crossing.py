"""Benchmark: a GPU crossing its critical temperature line -> the alert held by a real
Alertmanager, with adaptive sampling off and on (issue #31).

    python bench/alert_crossing.py            # 48 crossings each way, 60 s at rest (~9 min)
    python bench/alert_crossing.py --smoke    # 8 crossings each way, 10 s at rest

A real daemon (`python -m node_daemon daemon --backend nvml`, sweeps every 1 s) reads 8
GPUs through the real nvidia-ml-py ctypes path from the project's fake
libnvidia-ml.so.1, whose state file this process writes as a GPU would change; it pushes
to one real Alertmanager (Debian's prometheus-alertmanager, as the tests run it).

- **A crossing.** One GPU at a time (in turn) heats from 80 °C by 1 °C every 300 ms: at
  the write of 85 °C it crosses the `gpu_temp` critical line (85 °C, `critical_for_s`
  0). That write's time is the crossing. Each trial starts after a random wait of 0 to
  1 s (seeded), so the crossings fall at every phase of the daemon's 1 s tick. From
  then this process polls Alertmanager's `/api/v2/alerts` every 5 ms until it holds
  the GPU's critical `gpu_temp` alert: the time of the answer that first holds it is
  "in Alertmanager".
  The GPU then cools to 40 °C and the next crossing waits until Alertmanager no longer
  holds the alert.
- **Off and on.** The same crossings with `fast_sample_interval_s = 0` (the 1 s tick
  alone) and with the default (0.1 s looks at GPUs near a line), one daemon after the
  other in one run.
- **At rest.** Then every GPU at 40 °C, 10 clients streaming samples
  (StreamSamples), and the daemon's CPU (utime + stime from /proc) over `--rest-s`:
  nothing is near a line, so nothing is looked at (its `looks` stay 0).

Writes bench/results/alert_crossing.json and .md (--out / --md; --smoke writes nothing
unless asked).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from machine import code_version, run_header
from nvml_sweep_fake import ROOT
from results import goal_list, parse_with_outputs, run_and_write, run_line

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.fake_nvml.fixture import FakeNvmlState, build_fake_nvml
from tests.node_daemon.alertmanager_harness import AlertmanagerProcess, Recorder

NAME = "alert_crossing"
GPUS = 8
START_C, LINE_C, TOP_C, COOL_C = 80, 85, 88, 40
STEP_S = 0.3  # 1 °C every STEP_S: 3.3 °C a second
POLL_S = 0.005
GOAL_P99_S = 0.5
SUBSCRIBERS = 10


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--crossings", type=int, default=48, help="crossings each way (default 48)")
    arg("--rest-s", type=float, default=60.0, help="seconds measured at rest (default 60)")
    args = parse_with_outputs(parser, argv, NAME, "8 crossings each way, 10 s at rest")
    if args.smoke:
        args.crossings, args.rest_s = 8, 10.0
    if args.crossings < 1 or args.rest_s <= 0:
        parser.error("--crossings >= 1, --rest-s > 0")
    return args


class Daemon:
    """A daemon process over the fake NVML, pushing to `am_url`."""

    def __init__(self, workdir: Path, nvml: FakeNvmlState, am_url: str, fast_s: float) -> None:
        workdir.mkdir(parents=True)
        config = workdir / "daemon.toml"
        config.write_text(
            f"[daemon]\nsample_interval_s = 1.0\nfast_sample_interval_s = {fast_s}\n"
            f'alertmanager_urls = ["{am_url}"]\n'
        )
        ready = workdir / "ready"
        env = {**os.environ, "LD_LIBRARY_PATH": str(nvml.lib_dir),
               "FAKE_NVML_STATE": str(nvml.path),
               "PYTHONPATH": f"{ROOT}:{ROOT / 'protos'}"}  # fmt: skip
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "node_daemon", "daemon", "--backend", "nvml",
             "--config", str(config), "--listen", "127.0.0.1:0", "--ready-file", str(ready),
             "--state-dir", str(workdir / "state")],
            env=env, stdout=(workdir / "daemon.log").open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the daemon did not start: {(workdir / 'daemon.log').read_text()}"
                )
            time.sleep(0.05)
        self.target = ready.read_text().strip()

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def am_holds(am_url: str, gpu: int) -> bool:
    with urllib.request.urlopen(f"{am_url}/api/v2/alerts?active=true", timeout=5) as reply:
        alerts = json.loads(reply.read())
    return any(
        a["labels"].get("alertname") == "gpu_temp" and a["labels"].get("gpu") == str(gpu)
        and a["labels"].get("severity") == "critical" and a["status"]["state"] == "active"
        for a in alerts
    )  # fmt: skip


def wait(condition: Any, timeout_s: float, what: str) -> float:
    """Poll `condition` every POLL_S; the time (time.time()) of the answer that held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return time.time()
        time.sleep(POLL_S)
    raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")


def crossings(nvml: FakeNvmlState, am_url: str, count: int) -> list[float]:
    """`count` crossings in turn over the GPUs; each one's seconds to Alertmanager. The
    GPU heats on its schedule while Alertmanager is polled every POLL_S from the
    crossing on."""
    latencies, phase = [], random.Random(31)
    for n in range(count):
        # Each trial starts after the last one's resolution, which a sweep made: a random
        # wait puts its crossing at any phase of the tick, as a real GPU's would be.
        time.sleep(phase.uniform(0.0, 1.0))
        gpu, celsius, crossed = n % GPUS, START_C, 0.0
        nvml.set_gpu(gpu, temp=celsius)
        next_step, deadline = time.monotonic() + STEP_S, time.monotonic() + 30
        while True:
            now = time.monotonic()
            if now >= next_step and celsius < TOP_C:
                celsius += 1
                nvml.set_gpu(gpu, temp=celsius)
                next_step += STEP_S
                if celsius == LINE_C:
                    crossed = time.time()
            if crossed and am_holds(am_url, gpu):
                latencies.append(time.time() - crossed)
                break
            if now > deadline:
                raise TimeoutError(f"GPU {gpu}'s alert not in Alertmanager within 30 s")
            time.sleep(POLL_S)
        nvml.set_gpu(gpu, temp=COOL_C)
        wait(lambda g=gpu: not am_holds(am_url, g), 30, f"GPU {gpu}'s alert resolved")
    return latencies


def at_rest(daemon: Daemon, seconds: float) -> dict[str, float]:
    """The daemon's CPU over `seconds` with every GPU cool and SUBSCRIBERS streams."""
    stop = threading.Event()
    channel = grpc.insecure_channel(daemon.target)
    stub = pb_grpc.NodeServiceStub(channel)
    streams = [stub.StreamSamples(pb.StreamSamplesRequest()) for _ in range(SUBSCRIBERS)]

    def drain(stream: Any) -> None:
        try:
            for _ in stream:
                if stop.is_set():
                    break
        except grpc.RpcError:
            pass

    threads = [threading.Thread(target=drain, args=(s,), daemon=True) for s in streams]
    for thread in threads:
        thread.start()
    time.sleep(3.0)  # the streams open and settle before the measured span
    cpu, wall = daemon.cpu_s(), time.monotonic()
    time.sleep(seconds)
    cpu, wall = daemon.cpu_s() - cpu, time.monotonic() - wall
    stop.set()
    for stream in streams:
        stream.cancel()
    channel.close()
    return {"seconds": round(wall, 1), "cpu_pct_of_a_core": round(100 * cpu / wall, 2)}


def stats(latencies: Sequence[float]) -> dict[str, float | int]:
    v = np.asarray(latencies) * 1000
    return {"count": len(v), "p50_ms": round(float(np.percentile(v, 50)), 1),
            "p95_ms": round(float(np.percentile(v, 95)), 1),
            "p99_ms": round(float(np.percentile(v, 99)), 1), "max_ms": round(float(v.max()), 1),
            "min_ms": round(float(v.min()), 1)}  # fmt: skip


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    lib_dir = build_fake_nvml(tmp / "lib").parent
    recorder = Recorder()
    am = AlertmanagerProcess(tmp / "am", recorder)
    (tmp / "am").mkdir()
    am.start()
    result: dict[str, Any] = {**run_header(args.argv), "benchmark": NAME,
                              "code": code_version(ROOT), "runs": {}}  # fmt: skip
    try:
        for label, fast_s in (("off", 0.0), ("on", 0.1)):
            nvml = FakeNvmlState(tmp / f"nvml-{label}.txt", lib_dir)
            nvml.set(gpu_count=GPUS)
            for gpu in range(GPUS):
                nvml.set_gpu(gpu, temp=COOL_C)
            daemon = Daemon(tmp / label, nvml, am.url, fast_s)
            try:
                measured = crossings(nvml, am.url, args.crossings)
                rest = at_rest(daemon, args.rest_s)
            finally:
                daemon.stop()
            result["runs"][label] = {
                "fast_sample_interval_s": fast_s,
                "crossing_to_alertmanager": stats(measured),
                "at_rest": rest,
                "latencies_ms": [round(s * 1000, 1) for s in measured],
            }
            print(f"{label}: {result['runs'][label]['crossing_to_alertmanager']} {rest}",
                  file=sys.stderr)  # fmt: skip
    finally:
        am.stop()
        recorder.close()
    crossing, rest_pct = (
        result["runs"]["on"]["crossing_to_alertmanager"],
        (result["runs"]["on"]["at_rest"]["cpu_pct_of_a_core"]),
    )
    result["goals"] = [
        {"name": "crossing -> Alertmanager p99 (on, at least 40 crossings)",
         "goal": f"<= {GOAL_P99_S * 1000:g} ms", "value": crossing["p99_ms"],
         "met": crossing["p99_ms"] <= GOAL_P99_S * 1000 and crossing["count"] >= 40},
        {"name": "daemon CPU at rest, 10 subscribers (on)", "goal": "<= 1 % of a core",
         "value": rest_pct, "met": rest_pct <= 1},
    ]  # fmt: skip
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# {NAME}: a GPU crossing 85 °C -> its alert held by Alertmanager",
        "",
        run_line(result, f"{NAME}.py"),
        "",
        "| adaptive sampling | crossings | p50 | p95 | p99 | max | daemon CPU, rest, 10 streams |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, run_ in result["runs"].items():
        s = run_["crossing_to_alertmanager"]
        lines.append(
            f"| {label} ({run_['fast_sample_interval_s']} s) | {s['count']} | {s['p50_ms']} ms | "
            f"{s['p95_ms']} ms | {s['p99_ms']} ms | {s['max_ms']} ms | "
            f"{run_['at_rest']['cpu_pct_of_a_core']} % |"
        )
    return "\n".join([*lines, "", "## Goals", "", *goal_list(result["goals"])]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_write(NAME, args, run, markdown)


if __name__ == "__main__":
    sys.exit(main())
