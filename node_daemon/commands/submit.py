"""`gpufleet submit` where the console extra is not installed: queue on one node by HOST:PORT.

With the console extra, `gpufleet submit` is the fleet's (console/terminal/queue.py):
the profile's nodes, TLS and token, host names, a node chosen for you. This one,
for a daemon-only install, talks plain gRPC to the node given (a local daemon).
"""

from __future__ import annotations

import argparse
import getpass
import re
import sys

import grpc

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str) -> int:
    """'40G', '512M', '1T' or plain bytes; binary units."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text.upper())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 40G or 512M")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def add_submit_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "submit",
        help="queue a workload on a node",
        description="Queue a command on a node's workload queue. It waits there until an "
        "admin assigns it to GPUs (console drag and drop, or --assign), or, with --auto, "
        "until the placement policy finds GPUs that fit.",
    )
    parser.add_argument("--node", required=True, metavar="HOST:PORT", help="the node daemon")
    add_workload_arguments(parser)
    parser.set_defaults(run=run_submit)


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """What a workload is, for both `gpufleet submit`s (this one and the fleet's)."""
    arg = parser.add_argument
    arg("--gpus", type=int, default=1, help="number of GPUs (default 1)")
    arg("--min-memory", type=parse_size, default=0, metavar="SIZE",
        help="free GPU memory each GPU must have, e.g. 40G")  # fmt: skip
    arg("--owner", default=None, help="who the workload is for (default: you)")
    arg("--name", default="", help="a short name (default: the command)")
    arg("--env", action="append", default=[], metavar="KEY=VALUE", help="environment; repeat")
    arg("--auto", action="store_true", help="let the fair queue start it when GPUs fit")
    arg("--assign", metavar="GPU[,GPU...]", help="start it at once on these GPU indices")
    arg("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]")


def run_submit(args: argparse.Namespace) -> int:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        print(
            "gpufleet submit: give the command after --, e.g. -- python train.py", file=sys.stderr
        )
        return 2
    env = dict(item.split("=", 1) for item in args.env if "=" in item)
    user = getpass.getuser()
    request = pb.SubmitWorkloadRequest(
        name=args.name, argv=argv, env=env, owner=args.owner or user, gpu_count=args.gpus,
        min_free_memory_bytes=args.min_memory, auto_place=args.auto, actor=user,
    )  # fmt: skip
    try:
        with grpc.insecure_channel(args.node) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            workload = stub.SubmitWorkload(request, timeout=10)
            if args.assign:
                gpus = [int(g) for g in args.assign.split(",")]
                assign = pb.AssignWorkloadRequest(
                    workload_id=workload.id, gpu_indices=gpus, actor=user
                )
                workload = stub.AssignWorkload(assign, timeout=10)
    except grpc.RpcError as exc:
        print(f"gpufleet submit: {exc.code().name}: {exc.details()}", file=sys.stderr)  # type: ignore[attr-defined]
        return 1
    state = pb.WorkloadState.Name(workload.state).removeprefix("WORKLOAD_STATE_").lower()
    where = f" on GPU {', '.join(map(str, workload.gpu_indices))}" if workload.gpu_indices else ""
    print(f"{workload.id} {state}{where}")
    return 0
