"""Run a command on CPUs made slower: a rig for the console's frame goals on a slow machine.

    sudo .venv/bin/python bench/slow_cpu.py [--busy-ms 1.0] [--period-ms 2.0] -- \\
        .venv/bin/python bench/console_fleet.py --warmup 60 --out slow.json

On every CPU a real-time (SCHED_FIFO) process takes `--busy-ms` of each
`--period-ms` while the command runs, as a hypervisor's steal would, so every
thread of the command gets the rest of each CPU in slices of a millisecond:
the defaults leave about half of each CPU. It is an emulation, not a slower
chip: the command's CPU times stay this machine's, its waits grow (they show
as off-CPU time and "other processes" in console_fleet.py's report). It was
made because the machine where the console's frame p99 missed its goal is not
always at hand: compare two trees on it as a ratio in one sitting, and give
the speed probe (10 M additions, printed before the command) beside the
result. Needs root (a real-time priority); Linux only.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

PRIORITY = 50  # above every normal thread, below the kernel's own real-time threads


def take_share(cpu: int, busy_s: float, period_s: float) -> None:
    """In a child: spin `busy_s` of each `period_s` on `cpu`, forever (until killed)."""
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
    clock = time.perf_counter
    period_start = clock()
    while True:
        busy_until = period_start + busy_s
        while clock() < busy_until:
            pass
        period_start += period_s
        delay = period_start - clock()
        if delay > 0:
            time.sleep(delay)
        else:  # fell behind (the kernel's real-time throttle): start afresh
            period_start = clock()


def speed_probe() -> float:
    """Seconds for 10 M additions in one Python thread (the figure beside each result)."""
    started = time.perf_counter()
    total = 0
    for n in range(10_000_000):
        total += n
    return time.perf_counter() - started


def start_hogs(busy_s: float, period_s: float) -> list[int]:
    pids = []
    for cpu in sorted(os.sched_getaffinity(0)):
        pid = os.fork()
        if pid == 0:  # the child never returns
            try:
                take_share(cpu, busy_s, period_s)
            finally:
                os._exit(1)
        pids.append(pid)
    return pids


def stop_hogs(pids: Sequence[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for pid in pids:
        os.waitpid(pid, 0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy-ms", type=float, default=1.0,
                        help="what a hog takes of each period (default 1.0)")  # fmt: skip
    parser.add_argument("--period-ms", type=float, default=2.0, help="the period (default 2.0)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command: give it after --")
    if not 0 < args.busy_ms < args.period_ms:
        parser.error("--busy-ms must be more than 0 and less than --period-ms")
    if os.geteuid() != 0:
        parser.error("needs root: the hogs run at a real-time priority")
    print(f"slow_cpu: speed probe {speed_probe():.2f} s for 10 M additions (this machine)")
    hogs = start_hogs(args.busy_ms / 1000, args.period_ms / 1000)
    try:
        probe = speed_probe()
        share = 1 - args.busy_ms / args.period_ms
        print(f"slow_cpu: {len(hogs)} CPUs at about {share:.0%} each; speed probe {probe:.2f} s",
              flush=True)  # fmt: skip
        return subprocess.run(command, check=False).returncode
    finally:
        stop_hogs(hogs)


if __name__ == "__main__":
    sys.exit(main())
