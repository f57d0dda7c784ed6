"""`gpufleet submit` where the console extra is not installed: queue on one node by HOST:PORT.

With the console extra, `gpufleet submit` is the fleet's (console/terminal/queue.py):
the profile's nodes, TLS and token, host names, a node chosen for you. This one,
for a daemon-only install, talks plain gRPC to the node given (a local daemon),
through the shared client's blocking face.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from gpufleet.client import calls
from gpufleet.client.blocking import NodeClient
from gpufleet.client.errors import CallError
from gpufleet.client.words import enum_word
from gpufleet.client.workload_args import add_workload_arguments, workload_argv, workload_env
from gpufleet.subcommand import add_subcommand
from gpufleet.v1 import node_pb2 as pb

CALL_DEADLINE_S = 10.0


SUBMIT_PAGE = (
    "Queue a command on a node's workload queue. It waits there until an "
    "admin assigns it to GPUs (console drag and drop, or --assign), or, with --auto, "
    "until the placement policy finds GPUs that fit."
)


def add_submit_command(subparsers: argparse._SubParsersAction) -> None:
    summary = "queue a workload on a node"
    parser = add_subcommand(subparsers, "submit", run_submit, summary, SUBMIT_PAGE)
    parser.add_argument("--node", required=True, metavar="HOST:PORT", help="the node daemon")
    add_workload_arguments(parser)


def run_submit(args: argparse.Namespace) -> int:
    argv = workload_argv(args)
    if not argv:
        print(
            "gpufleet submit: give the command after --, e.g. -- python train.py", file=sys.stderr
        )
        return 2
    user = getpass.getuser()
    try:
        with NodeClient(args.node) as client:
            workload = client.call(
                calls.SUBMIT_WORKLOAD, deadline_s=CALL_DEADLINE_S,
                name=args.name, argv=argv, env=workload_env(args), owner=args.owner or user,
                gpu_count=args.gpus, min_free_memory_bytes=args.min_memory,
                auto_place=args.auto, actor=user,
            )  # fmt: skip
            if args.assign:
                gpus = [int(g) for g in args.assign.split(",")]
                workload = client.call(
                    calls.ASSIGN_WORKLOAD, deadline_s=CALL_DEADLINE_S,
                    workload_id=workload.id, gpu_indices=gpus, actor=user,
                )  # fmt: skip
    except CallError as exc:
        print(f"gpufleet submit: {exc.reason}", file=sys.stderr)
        return 1
    return _print_workload(workload)


def _print_workload(workload: pb.Workload) -> int:
    state = enum_word(pb.WorkloadState, workload.state)
    where = f" on GPU {', '.join(map(str, workload.gpu_indices))}" if workload.gpu_indices else ""
    print(f"{workload.id} {state}{where}")
    return 0
