"""Hosts N simulated node daemons in one process, for the console benchmarks.

Run by the benchmarks as a child process, so the fleet's CPU is measured apart
from the console's:

    python bench/fleet_host.py --nodes 125 --gpus 8 --ready-file addresses.json
    python bench/fleet_host.py --nodes 125 --part 1/2 ...   # nodes 2, 4, ... of 125

With --part P/K the process hosts every K-th node from the P-th (one of K
processes hosting the fleet together): the fleet's Python then runs under K
interpreter locks, as real daemons run on machines of their own, instead of
125 daemons queueing for one.

Each daemon is the real NodeDaemon (gRPC server, sampler thread, history) with
the simulated backend, listening on its own loopback port. Once all serve, the
bound addresses are written to the ready file as JSON. SIGTERM or SIGINT, or
the parent closing our stdin (it died), stops every daemon.

With --seed-day each daemon's on-disk history first gets the demo's simulated day
(node_daemon.history.demo_day.seed_demo_day, as `gpufleet daemon --demo` does: the
last hour at the sampling tick, a tick a minute before it), written just before that
daemon starts: about 2 s of CPU a node, for the replay benchmark's past.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from node_daemon.commands.backend_choice import simulated_backend
from node_daemon.config import DaemonConfig, resolve_state_dir
from node_daemon.history.demo_day import seed_demo_day
from node_daemon.history.store import HISTORY_FILE
from node_daemon.listen import parse_listen_address
from node_daemon.server import NodeDaemon

log = logging.getLogger("bench.fleet_host")


class Served(Protocol):
    @property
    def address(self) -> object: ...


STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
STOP_GRACE_S = 1.0


def node_config(index: int, gpus: int, interval_s: float, state_dir: Path) -> DaemonConfig:
    # Few stream workers per server: 125 servers in one process must not
    # hold thousands of idle threads. Each daemon keeps its own journal.
    return DaemonConfig(
        listen="127.0.0.1:0",
        backend="simulated",
        seed=index,
        gpus=gpus,
        sample_interval_s=interval_s,
        max_streams=2,
        hostname=f"bench-{index + 1:03d}",
        state_dir=state_dir / f"node-{index + 1:03d}",
    )


def start_node(config: DaemonConfig, seed_day: bool = False) -> NodeDaemon:
    if seed_day:
        state_dir = resolve_state_dir(config)
        state_dir.mkdir(parents=True, exist_ok=True)
        seed_demo_day(
            state_dir / HISTORY_FILE, config.history, round(config.sample_interval_s * 1000),
            {"gpu_count": config.gpus, "seed": config.seed, "model": config.model},
        )  # fmt: skip
    address = parse_listen_address(config.listen)
    daemon = NodeDaemon(config, simulated_backend(config), address)
    daemon.start()
    return daemon


def start_fleet(
    nodes: int,
    gpus: int,
    interval_s: float,
    state_dir: Path,
    part: tuple[int, int] = (1, 1),
    seed_day: bool = False,
) -> list[NodeDaemon]:
    """Start this part's daemons with their sampling ticks spread over one interval.

    Real servers tick independently; starting node i at i/N of an interval keeps
    the fleet's batches from arriving at the console all at once.
    """
    daemons: list[NodeDaemon] = []
    first = time.monotonic()
    number, parts = part
    for index in range(number - 1, nodes, parts):
        delay = first + index * interval_s / nodes - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing the start, not waiting for an event
        daemons.append(start_node(node_config(index, gpus, interval_s, state_dir), seed_day))
    return daemons


def stop_fleet(daemons: Sequence[NodeDaemon]) -> None:
    """Stop every daemon, in parallel: each stop may wait out its grace period."""
    with ThreadPoolExecutor(max_workers=16, thread_name_prefix="bench-stop") as pool:
        list(pool.map(lambda d: d.stop(STOP_GRACE_S), daemons))


def write_ready_file(path: Path, daemons: Sequence[Served]) -> None:
    """Every server's address (a NodeDaemon's, a light node's), once all serve."""
    text = json.dumps({"pid": os.getpid(), "addresses": [str(d.address) for d in daemons]})
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def stop_when_parent_goes() -> None:
    """Send ourselves SIGTERM when stdin reaches EOF: the parent closed it or died."""

    def watch() -> None:
        sys.stdin.buffer.read()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="bench-parent-watch", daemon=True).start()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=125, help="daemons to host (default 125)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per daemon (default 8)")
    parser.add_argument("--interval", type=float, default=1.0, help="sampling tick, seconds")
    parser.add_argument("--ready-file", type=Path, required=True, help="JSON of addresses")
    parser.add_argument("--state-dir", type=Path, required=True, help="daemons' journals")
    parser.add_argument("--watch-stdin", action="store_true", help="stop on stdin EOF")
    parser.add_argument("--part", type=parse_part, default=(1, 1), metavar="P/K",
                        help="host every K-th node from the P-th (default 1/1: all)")  # fmt: skip
    parser.add_argument("--seed-day", action="store_true",
                        help="write the demo's simulated day into each history first")  # fmt: skip
    return parser.parse_args(argv)


def parse_part(text: str) -> tuple[int, int]:
    """ "2/3" -> (2, 3); argparse reports the error for anything else."""
    number, _, parts = text.partition("/")
    try:
        part = int(number), int(parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected P/K, e.g. 1/2, got {text!r}") from None
    if not 1 <= part[0] <= part[1]:
        raise argparse.ArgumentTypeError(f"expected 1 <= P <= K, got {text!r}")
    return part


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    # Block the stop signals before any thread exists, so every thread (gRPC's
    # too) inherits the mask and only sigwait below receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    if args.watch_stdin:
        stop_when_parent_goes()
    daemons = start_fleet(args.nodes, args.gpus, args.interval, args.state_dir, args.part,
                          args.seed_day)  # fmt: skip
    write_ready_file(args.ready_file, daemons)
    received = signal.sigwait(STOP_SIGNALS)
    log.warning("%s: stopping %d daemons", signal.Signals(received).name, len(daemons))
    stop_fleet(daemons)
    return 0


if __name__ == "__main__":
    sys.exit(main())
