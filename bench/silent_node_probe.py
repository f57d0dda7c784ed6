"""One tree's trials for silent_node.py: a console link notices a SIGSTOPped daemon.

    PYTHONPATH=TREE:TREE/protos python bench/silent_node_probe.py --trials N --out FILE.json

Run with a tree first on PYTHONPATH, so the daemon and the console code are
that tree's. Starts the daemon (simulated, 2 GPUs, 1 s tick), runs the
console's NodeLink on an asyncio loop (no Qt), and per trial: waits until the
link is connected and a sample batch has arrived, stops the daemon with
SIGSTOP, times the link's next state change (or gives up after
``--give-up`` seconds), resumes the daemon with SIGCONT and waits until the
link is connected again. Before that, ``--client-trials`` times, the other
side: a plain gRPC client streams samples and is stopped with SIGSTOP; timed
until the daemon drops its connection (no ESTABLISHED socket on the daemon's
port in /proc/net/tcp). Writes the seconds of each trial (and the states
reported), as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from rpc_transport_procs import stop_process

from console.connections.node_link import NodeLink
from console.fleet.updates import LinkState, LinkUpdate, Update


def start_daemon(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = workdir / "ready"
    argv = [sys.executable, "-m", "node_daemon", "daemon", "--backend", "simulated",
            "--gpus", "2", "--listen", "127.0.0.1:0", "--ready-file", str(ready),
            "--state-dir", str(workdir / "state")]  # fmt: skip
    with (workdir / "daemon.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while not (ready.exists() and ready.read_text(encoding="utf-8").strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"daemon did not start: {(workdir / 'daemon.log').read_text()}")
        time.sleep(0.05)  # a child's file: there is no event to wait on
    return proc, ready.read_text(encoding="utf-8").strip()


class Probe:
    def __init__(self, target: str, seed: int) -> None:
        self.updates: asyncio.Queue[Update] = asyncio.Queue()
        self.link = NodeLink(target, self.updates.put_nowait, random.Random(seed), backfill_s=0)

    async def next_state(self, timeout_s: float) -> LinkUpdate:
        async with asyncio.timeout(timeout_s):
            while True:
                update = await self.updates.get()
                if isinstance(update, LinkUpdate):
                    return update

    async def until_streaming(self) -> None:
        while (await self.next_state(120)).state != LinkState.CONNECTED:
            pass
        async with asyncio.timeout(60):  # then a sample batch: the streams are live
            while isinstance(await self.updates.get(), LinkUpdate):
                pass


async def trials(pid: int, target: str, args: argparse.Namespace) -> list[dict[str, object]]:
    probe = Probe(target, args.seed)
    task = asyncio.ensure_future(probe.link.run())
    found: list[dict[str, object]] = []
    try:
        for _ in range(args.trials):
            await probe.until_streaming()
            await asyncio.sleep(random.uniform(0, 2))  # stop at any phase of the pings
            os.kill(pid, signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                lost = await probe.next_state(args.give_up)
                found.append({"seconds": round(time.monotonic() - stopped, 3),
                              "state": lost.state.value, "detail": lost.detail})  # fmt: skip
            except TimeoutError:
                found.append({"seconds": None, "state": "still connected", "detail": ""})
            os.kill(pid, signal.SIGCONT)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return found


CLIENT = """
import sys, grpc
from gpufleet.v1 import node_pb2 as pb, node_pb2_grpc as pb_grpc
channel = grpc.insecure_channel(sys.argv[1])  # no keepalive of its own: the daemon's counts
for batch in pb_grpc.NodeServiceStub(channel).StreamSamples(pb.StreamSamplesRequest()):
    print("streaming", flush=True)
    sys.stdin.readline()  # read no further: the process is stopped from here on
"""


def established(port: int) -> int:
    """TCP connections to `port` that are open (ESTABLISHED, state 01), on this host."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text(encoding="utf-8").splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            count += int(local.rpartition(":")[2], 16) == port and state == "01"
    return count


def dead_client_trial(target: str, give_up_s: float) -> float | None:
    """Seconds from stopping a streaming client to the daemon dropping its connection."""
    port = int(target.rpartition(":")[2])
    client = subprocess.Popen([sys.executable, "-c", CLIENT, target],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert client.stdout is not None
        client.stdout.readline()
        time.sleep(random.uniform(0, 3))  # stop at any phase of the daemon's pings
        os.kill(client.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        while established(port) and time.monotonic() - stopped < give_up_s:
            time.sleep(0.05)  # the kernel's table: there is no event to wait on
        return None if established(port) else round(time.monotonic() - stopped, 3)
    finally:
        client.kill()
        client.wait(30)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--give-up", type=float, default=120.0, help="seconds per trial at most")
    parser.add_argument("--client-trials", type=int, default=0,
                        help="first, stop this many streaming clients")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="gpufleet-silent-") as workdir:
        proc, target = start_daemon(Path(workdir))
        try:
            clients = [dead_client_trial(target, args.give_up) for _ in range(args.client_trials)]
            found = asyncio.run(trials(proc.pid, target, args))
            result = {"trials": found, "client_trials": clients}
            args.out.write_text(json.dumps(result), encoding="utf-8")
        finally:
            stop_process(proc, 30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
