"""The terminal subcommands: arguments, the calls each makes, a table or JSON out.

Exit codes: 0 done, 1 a node refused or failed (`status`: a critical alert
fires), 2 a usage error, 3 a node could not be reached. Errors go to standard
error, one line each, naming the node and the reason.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from console.fleet.silence_draft import SilenceDraft, matching_targets
from console.terminal.fleet_calls import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Outcome, on_each
from console.terminal.link import (
    CALL_DEADLINE_S,
    CallFailed,
    NodeLink,
    UsageProblem,
    add_node_arguments,
    resolve,
)
from console.terminal.table import format_table, local_time, mib
from gpufleet.v1 import node_pb2 as pb

EXIT_CODES = (
    "Exit codes: 0 done, 1 a node refused or failed (status: a critical alert fires), "
    "2 a usage error, 3 a node could not be reached."
)
SEVERITIES = {pb.SEVERITY_INFO: "info", pb.SEVERITY_WARNING: "warning",
              pb.SEVERITY_CRITICAL: "critical"}  # fmt: skip
Row = dict[str, Any]


def add_terminal_commands(subparsers: argparse._SubParsersAction) -> None:
    """Registered through the `gpufleet.commands` entry points (console/cli.py's neighbours)."""
    _command(subparsers, "status", "reachability, GPUs, hottest GPU and alerts of each node",
             run_status)  # fmt: skip
    _command(subparsers, "ps", "processes on the nodes' GPUs", run_ps)
    alerts = _command(subparsers, "alerts", "firing alerts of the nodes", run_alerts)
    alerts.add_argument("--all", action="store_true", help="cleared alerts too")
    ack = _command(subparsers, "ack", "acknowledge an alert on a node", run_ack, None)
    ack.add_argument("target", metavar="NODE", help="HOST:PORT of the node")
    ack.add_argument("alert_id", metavar="ALERT_ID", help="e.g. a-42 (from `gpufleet alerts`)")
    ack.add_argument("--comment", default="", help="what is being done about it")
    _add_silence(subparsers)
    _add_reserve(subparsers)
    release = _command(subparsers, "release", "end a reservation early", run_release, None)
    release.add_argument("target", metavar="NODE", help="HOST:PORT of the node")
    release.add_argument("reservation_id", metavar="RESERVATION_ID")
    kill = _command(subparsers, "kill", "stop a process on a GPU (TERM, then KILL)", run_kill, None)
    kill.add_argument("target", metavar="NODE", help="HOST:PORT of the node")
    kill.add_argument("gpu", type=int, metavar="GPU")
    kill.add_argument("pid", type=int, metavar="PID")
    kill.add_argument("--start-time-ms", type=int, metavar="MS",
                      help="the process's start_time_unix_ms as `ps --json` showed it; "
                      "another process that got the same pid since is refused "
                      "(default: read it now)")  # fmt: skip
    kill.add_argument("--grace", type=int, default=10, metavar="SECONDS",
                      help="between TERM and KILL (default 10)")  # fmt: skip


def _command(
    subparsers: argparse._SubParsersAction,
    name: str,
    help_: str,
    run: Callable[[argparse.Namespace], int],
    node_flag: str | None = "--node",
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_, description=f"{help_[0].upper()}{help_[1:]}. {EXIT_CODES}"
    )
    add_node_arguments(parser, node_flag)
    parser.set_defaults(run=lambda args: _guarded(run, args, name))
    return parser


def _guarded(run: Callable[[argparse.Namespace], int], args: argparse.Namespace, name: str) -> int:
    try:
        return run(args)
    except UsageProblem as exc:
        print(f"gpufleet {name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # ^C: the shell's code for SIGINT, and no traceback
        print(f"gpufleet {name}: interrupted", file=sys.stderr)
        return 130


def _report(outcome: Outcome[Any], name: str) -> None:
    for failure in outcome.failures:
        print(f"gpufleet {name}: {failure}", file=sys.stderr)


def _errors(outcome: Outcome[Any]) -> list[Row]:
    return [{"node": f.node, "reason": f.reason, "unreachable": f.unreachable}
            for f in outcome.failures]  # fmt: skip


def _print_json(data: Row) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


# -- reading --------------------------------------------------------------------------


def latest_batch(link: NodeLink, inventory: pb.Inventory | None = None) -> pb.SampleBatch:
    """The node's next sweep (metrics and its newest process lists).

    The stream's deadline covers two sampling periods, so a node that samples
    slowly (a long `interval`) is waited for, not called unreachable.
    """
    if inventory is None:
        inventory = link.call(link.stub.GetInventory, pb.GetInventoryRequest())
    deadline_s = max(CALL_DEADLINE_S, 2 * inventory.sample_interval_ms / 1000 + 2)
    for batch in link.stream(link.stub.StreamSamples, pb.StreamSamplesRequest(), deadline_s):
        if not batch.replayed:
            return batch
    raise CallFailed(link.target, "the sample stream ended without a sample", unreachable=False)


def _firing(link: NodeLink, include_cleared: bool = False) -> list[pb.Alert]:
    request = pb.ListAlertsRequest(include_cleared=include_cleared)
    return list(link.call(link.stub.ListAlerts, request).alerts)


def _status_of(link: NodeLink) -> Row:
    inventory = link.call(link.stub.GetInventory, pb.GetInventoryRequest())
    temps = [
        (g.temp_gpu_c, g.index)
        for g in latest_batch(link, inventory).gpus
        if g.HasField("temp_gpu_c")
    ]
    counts = dict.fromkeys(SEVERITIES.values(), 0)
    for alert in _firing(link):
        if alert.state == pb.ALERT_STATE_FIRING and alert.severity in SEVERITIES:
            counts[SEVERITIES[alert.severity]] += 1
    hottest = max(temps, default=None)
    return {
        "node": link.target, "reachable": True, "host": inventory.hostname,
        "gpus": len(inventory.gpus),
        "hottest_gpu": None if hottest is None else hottest[1],
        "hottest_temp_c": None if hottest is None else round(hottest[0], 1),
        "alerts": counts,
    }  # fmt: skip


def run_status(args: argparse.Namespace) -> int:
    targets, security = resolve(args)
    outcome = on_each(targets, security, _status_of)
    rows = [row for _, row in outcome.results]
    rows += [{"node": f.node, "reachable": False, "host": None, "gpus": None, "hottest_gpu": None,
              "hottest_temp_c": None, "alerts": None, "error": f.reason}
             for f in outcome.failures]  # fmt: skip
    rows.sort(key=lambda r: targets.index(r["node"]))
    _report(outcome, "status")
    if args.json:
        _print_json({"nodes": rows})
    else:
        print(format_table(
            ("NODE", "STATE", "HOST", "GPUS", "HOTTEST", "CRITICAL", "WARNING", "INFO"),
            [_status_cells(r) for r in rows],
        ))  # fmt: skip
    code = outcome.exit_code()
    critical = any(r["alerts"] and r["alerts"]["critical"] for r in rows)
    return code if code != EXIT_OK else (EXIT_FAILED if critical else EXIT_OK)


def _status_cells(row: Row) -> list[str]:
    if not row["reachable"]:
        return [row["node"], "unreachable", "-", "-", "-", "-", "-", "-"]
    hot = (
        "-"
        if row["hottest_gpu"] is None
        else f"GPU {row['hottest_gpu']} {row['hottest_temp_c']:.0f} °C"
    )
    counts = row["alerts"]
    return [row["node"], "up", row["host"], str(row["gpus"]), hot,
            str(counts["critical"]), str(counts["warning"]), str(counts["info"])]  # fmt: skip


def _processes_of(link: NodeLink) -> list[Row]:
    return [
        {"node": link.target, "gpu": gpu.index, "pid": p.pid, "user": p.user,
         "gpu_memory_bytes": p.gpu_memory_bytes if p.HasField("gpu_memory_bytes") else None,
         "start_time_unix_ms": p.start_time_unix_ms if p.HasField("start_time_unix_ms") else None,
         "slurm_job_id": p.slurm_job_id or None, "command": p.command}
        for gpu in latest_batch(link).gpus
        for p in gpu.processes
    ]  # fmt: skip


def run_ps(args: argparse.Namespace) -> int:
    targets, security = resolve(args)
    outcome = on_each(targets, security, _processes_of)
    rows = [row for _, node_rows in outcome.results for row in node_rows]
    _report(outcome, "ps")
    if args.json:
        _print_json({"processes": rows, "errors": _errors(outcome)})
    else:
        print(format_table(
            ("NODE", "GPU", "PID", "USER", "MEMORY", "STARTED", "SLURM JOB", "COMMAND"),
            [[r["node"], str(r["gpu"]), str(r["pid"]), r["user"] or "-",
              "-" if r["gpu_memory_bytes"] is None else mib(r["gpu_memory_bytes"]),
              local_time(r["start_time_unix_ms"] or 0), r["slurm_job_id"] or "-", r["command"]]
             for r in rows],
        ))  # fmt: skip
    return outcome.exit_code()


def _alert_row(target: str, alert: pb.Alert) -> Row:
    state = "firing" if alert.state == pb.ALERT_STATE_FIRING else "cleared"
    return {
        "node": target, "id": alert.id, "severity": SEVERITIES.get(alert.severity, "unknown"),
        "rule": alert.rule, "gpu": alert.gpu_index if alert.HasField("gpu_index") else None,
        "value": alert.value if alert.HasField("value") else None,
        "peak": alert.peak_value if alert.HasField("peak_value") else None, "unit": alert.unit,
        "started_unix_ms": alert.started_unix_ms, "state": state,
        "acknowledged_by": alert.acknowledged_by or None,
        "silenced_until_unix_ms": alert.silenced_until_unix_ms
        if alert.HasField("silenced_until_unix_ms") else None,
        "summary": alert.summary,
    }  # fmt: skip


def run_alerts(args: argparse.Namespace) -> int:
    targets, security = resolve(args)
    outcome = on_each(targets, security, lambda link: _firing(link, include_cleared=args.all))
    rows = [_alert_row(t, a) for t, alerts in outcome.results for a in alerts
            if args.all or a.state == pb.ALERT_STATE_FIRING]  # fmt: skip
    _report(outcome, "alerts")
    if args.json:
        _print_json({"alerts": rows, "errors": _errors(outcome)})
    else:
        print(format_table(
            ("NODE", "ID", "SEVERITY", "RULE", "GPU", "VALUE/PEAK", "SINCE", "STATE"),
            [[r["node"], r["id"], r["severity"], r["rule"],
              "-" if r["gpu"] is None else str(r["gpu"]), _value_text(r),
              local_time(r["started_unix_ms"]), _state_text(r)] for r in rows],
        ))  # fmt: skip
    return outcome.exit_code()


def _value_text(row: Row) -> str:
    if row["value"] is None:
        return "-"
    peak = "" if row["peak"] is None else f"/{row['peak']:g}"
    return f"{row['value']:g}{peak} {row['unit']}".rstrip()


def _state_text(row: Row) -> str:
    extra = [f"acked by {row['acknowledged_by']}"] if row["acknowledged_by"] else []
    if row["silenced_until_unix_ms"]:
        extra.append(f"silenced until {local_time(row['silenced_until_unix_ms'])}")
    return ", ".join([row["state"], *extra])


# -- acting ---------------------------------------------------------------------------


def _act(args: argparse.Namespace, name: str, work: Callable[[NodeLink], Row]) -> int:
    """One action on the node named on the command line, with the profile's credentials."""
    _, security = _security_only(args)
    outcome = on_each([args.target], security, work)
    _report(outcome, name)
    return _print_results(args, outcome)


def _print_results(args: argparse.Namespace, outcome: Outcome[Row]) -> int:
    """What the actions did: one line each, or {"results", "errors"} with --json."""
    rows = [row for _, row in outcome.results]
    if args.json:
        _print_json({"results": rows, "errors": _errors(outcome)})
    else:
        for row in rows:
            print(row["done"])
    return outcome.exit_code()


def _security_only(args: argparse.Namespace) -> tuple[list[str], Any]:
    """The profile's credentials; the node is the one named, so no node list is needed."""
    args.node = [args.target]
    return resolve(args)


def run_ack(args: argparse.Namespace) -> int:
    def ack(link: NodeLink) -> Row:
        request = pb.AcknowledgeAlertRequest(alert_id=args.alert_id, comment=args.comment,
                                             actor=getpass.getuser())  # fmt: skip
        alert = link.call(link.stub.AcknowledgeAlert, request)
        return {**_alert_row(link.target, alert),
                "done": f"{link.target}: {alert.id} ({alert.rule}) acknowledged "
                        f"by {alert.acknowledged_by}"}  # fmt: skip

    return _act(args, "ack", ack)


def run_release(args: argparse.Namespace) -> int:
    def release(link: NodeLink) -> Row:
        request = pb.ReleaseReservationRequest(reservation_id=args.reservation_id,
                                               actor=getpass.getuser())  # fmt: skip
        return _reservation_row(link.target, link.call(link.stub.ReleaseReservation, request),
                                "released")  # fmt: skip

    return _act(args, "release", release)


def _reservation_row(target: str, r: pb.Reservation, verb: str) -> Row:
    gpus = ",".join(str(i) for i in r.gpu_indices)
    return {"node": target, "id": r.id, "gpus": list(r.gpu_indices), "holder": r.holder,
            "until_unix_ms": r.until_unix_ms, "active": r.active, "reason": r.reason,
            "done": f"{target}: reservation {r.id} of GPU {gpus} for {r.holder} {verb}"
                    + (f" until {local_time(r.until_unix_ms)}" if r.active else "")}  # fmt: skip


def _add_reserve(subparsers: argparse._SubParsersAction) -> None:
    reserve = _command(subparsers, "reserve", "reserve GPUs of a node for a user or team",
                       run_reserve, None)  # fmt: skip
    reserve.add_argument("target", metavar="NODE", help="HOST:PORT of the node")
    reserve.add_argument("--gpu", type=int, action="append", required=True, metavar="N",
                         help="a GPU index; repeat for more")  # fmt: skip
    reserve.add_argument("--holder", required=True, help="a user, or team:NAME")
    _add_end(reserve)
    reserve.add_argument("--reason", required=True, help="why")


def run_reserve(args: argparse.Namespace) -> int:
    until = _end_ms(args, _now_ms())

    def reserve(link: NodeLink) -> Row:
        request = pb.ReserveRequest(gpu_indices=args.gpu, holder=args.holder,
                                    until_unix_ms=until, reason=args.reason,
                                    actor=getpass.getuser())  # fmt: skip
        return _reservation_row(link.target, link.call(link.stub.Reserve, request), "made")

    return _act(args, "reserve", reserve)


def run_kill(args: argparse.Namespace) -> int:
    def kill(link: NodeLink) -> Row:
        started = args.start_time_ms
        if started is None:
            started = _start_time(link, args.gpu, args.pid)
        request = pb.KillProcessRequest(gpu_index=args.gpu, pid=args.pid,
                                        start_time_unix_ms=started, grace_s=args.grace,
                                        actor=getpass.getuser())  # fmt: skip
        # The daemon waits up to the grace period for TERM to work: the deadline covers it.
        response = link.call(link.stub.KillProcess, request, args.grace + 10.0)
        outcome = pb.KillOutcome.Name(response.outcome).removeprefix("KILL_OUTCOME_").lower()
        return {"node": link.target, "gpu": args.gpu, "pid": args.pid,
                "start_time_unix_ms": started, "outcome": outcome, "detail": response.detail,
                "done": f"{link.target}: pid {args.pid} on GPU {args.gpu}: {outcome}"
                        + (f" ({response.detail})" if response.detail else "")}  # fmt: skip

    return _act(args, "kill", kill)


def _start_time(link: NodeLink, gpu: int, pid: int) -> int:
    for sample in latest_batch(link).gpus:
        for process in sample.processes:
            if sample.index == gpu and process.pid == pid:
                return process.start_time_unix_ms
    raise CallFailed(link.target, f"no process {pid} on GPU {gpu} (`gpufleet ps` lists them)",
                     unreachable=False)  # fmt: skip


# -- silences -------------------------------------------------------------------------

DURATION = re.compile(r"^(\d+)([smhd])$")
UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _add_end(parser: argparse.ArgumentParser) -> None:
    end = parser.add_mutually_exclusive_group(required=True)
    end.add_argument("--for", dest="for_ms", type=_duration, metavar="DURATION",
                     help="how long: 90s, 30m, 2h, 1d")  # fmt: skip
    end.add_argument("--until", dest="until_ms", type=_time, metavar="TIME",
                     help="when it ends: ISO 8601, e.g. 2026-12-01T18:00 (local unless "
                     "it names a zone)")  # fmt: skip


def _duration(text: str) -> int:
    match = DURATION.match(text.strip())
    if not match or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 90s, 30m, 2h or 1d")
    return int(match[1]) * UNIT_MS[match[2]]


def _time(text: str) -> int:
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a time such as 2026-12-01T18:00") from None
    return int(moment.astimezone().timestamp() * 1000)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _end_ms(args: argparse.Namespace, now_ms: int) -> int:
    end: int = now_ms + args.for_ms if args.for_ms is not None else args.until_ms
    if end <= now_ms:
        raise UsageProblem(f"the end, {local_time(end)}, is not in the future")
    return end


def _add_silence(subparsers: argparse._SubParsersAction) -> None:
    silence = _command(subparsers, "silence", "keep matching alerts quiet on the matching nodes",
                       run_silence, "--at")  # fmt: skip
    arg = silence.add_argument
    arg("--node", dest="node_pattern", default="", metavar="PAT",
        help="node (host name) pattern, exact or glob: gpu-node-0*")  # fmt: skip
    arg("--rule", default="", metavar="PAT", help="rule pattern: gpu_temp, ecc_*")
    arg("--gpu", default="", metavar="N", help="GPU index or glob")
    arg("--severity", default="", metavar="S", help="info, warning, critical or a glob")
    _add_end(silence)
    arg("--comment", required=True, help="why these alerts may stay quiet")


def _hostname(link: NodeLink) -> str:
    return link.call(link.stub.GetInventory, pb.GetInventoryRequest()).hostname


def run_silence(args: argparse.Namespace) -> int:
    targets, security = resolve(args)
    now = _now_ms()
    draft = SilenceDraft(node=args.node_pattern, rule=args.rule, gpu=args.gpu,
                         severity=args.severity, duration_ms=None, ends_unix_ms=_end_ms(args, now),
                         comment=args.comment)  # fmt: skip
    problem = draft.problem(now)
    if problem:
        raise UsageProblem(problem)
    names = on_each(targets, security, _hostname)
    chosen = matching_targets(draft.node, names.results)
    wanted = draft.request(now)
    request = pb.CreateSilenceRequest(
        matchers=[pb.SilenceMatcher(label=m.label, pattern=m.pattern) for m in wanted.matchers],
        starts_unix_ms=wanted.starts_unix_ms, ends_unix_ms=wanted.ends_unix_ms,
        comment=wanted.comment, actor=getpass.getuser())  # fmt: skip

    def create(link: NodeLink) -> Row:
        made = link.call(link.stub.CreateSilence, request)
        return {"node": link.target, "id": made.id, "ends_unix_ms": made.ends_unix_ms,
                "matchers": {m.label: m.pattern for m in made.matchers},
                "done": f"{link.target}: silence {made.id} "
                        f"until {local_time(made.ends_unix_ms)}"}  # fmt: skip

    outcome = on_each(chosen, security, create)
    outcome.failures[:0] = names.failures
    _report(outcome, "silence")
    if not chosen and not names.failures:
        print(f"gpufleet silence: no node is named like {draft.node!r} "
              f"(nodes: {', '.join(n for _, n in names.results)})", file=sys.stderr)  # fmt: skip
        return EXIT_FAILED
    return _print_results(args, outcome)
