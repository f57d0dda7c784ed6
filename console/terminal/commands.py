"""The terminal subcommands: arguments, the calls each makes, a table or JSON out.

Exit codes and error lines: console/terminal/common.py. Nodes are named by
their host names (console/terminal/fleet_calls.py's survey).
"""

from __future__ import annotations

import argparse
import getpass

from console.terminal import health, moment, queue, silences
from console.terminal.common import (
    ONE_NODE_FAILED,
    Row,
    act,
    add_end,
    command,
    end_ms,
    latest_batch,
    node_rows,
    now_ms,
    print_json,
    print_rows,
    report,
    where,
)
from console.terminal.fleet_calls import EXIT_FAILED, EXIT_OK, on_fleet
from console.terminal.link import NodeLink, UsageProblem
from console.terminal.nodes import choose_nodes
from console.terminal.report import add_command as add_report
from console.terminal.table import format_table, local_time, mib
from gpufleet.client import calls
from gpufleet.client import messages as pb
from gpufleet.client.words import SEVERITY_NAMES, alert_firing, kill_outcome_word, severity_name


def add_terminal_commands(subparsers: argparse._SubParsersAction) -> None:
    """Registered through the `gpufleet.commands` entry points (console/cli.py's neighbours)."""
    status = command(subparsers, "status",
                     "reachability, GPUs, hottest GPU and alerts of each node", run_status,
                     done="every node reachable and no critical alert firing (with --at: "
                     "none firing at that moment)",
                     failed="a node refused or failed the request, or a critical alert fires "
                     "(with --at: a node could not answer for that moment, or a critical "
                     "alert fired then)")  # fmt: skip
    moment.add_at(status, "each node and each GPU's readings")
    command(subparsers, "ps", "processes on the nodes' GPUs", run_ps,
            done="every node answered")  # fmt: skip
    alerts = command(subparsers, "alerts", "firing alerts of the nodes", run_alerts,
                     done="every node answered")  # fmt: skip
    alerts.add_argument("--all", action="store_true", help="cleared alerts too")
    moment.add_at(alerts, "the alerts that were firing, acknowledged and silenced as then,")
    ack = command(subparsers, "ack", "acknowledge an alert on a node", run_ack, None,
                  done="acknowledged", failed=ONE_NODE_FAILED)  # fmt: skip
    ack.add_argument("alert_id", metavar="ALERT_ID", help="e.g. a-42 (from `gpufleet alerts`)")
    ack.add_argument("--comment", default="", help="what is being done about it")
    silences.add_commands(subparsers)
    _add_reserve(subparsers)
    release = command(subparsers, "release", "end a reservation early", run_release, None,
                      done="released", failed=ONE_NODE_FAILED)  # fmt: skip
    release.add_argument("reservation_id", metavar="RESERVATION_ID",
                         help="e.g. r-3 (as `gpufleet reserve` printed it)")  # fmt: skip
    release.add_argument("--gpu", type=int, action="append", default=[], dest="gpus",
                         metavar="GPU", help="release only this GPU of it (repeat for more); "
                         "the others stay reserved (default: the whole reservation)")  # fmt: skip
    kill = command(subparsers, "kill", "stop a process on a GPU (TERM, then KILL)", run_kill, None,
                   done="the process ended",
                   failed="the node refused or failed it (wrong role, no such process, "
                   "a pid reused since --start-time-ms)")  # fmt: skip
    kill.add_argument("gpu", type=int, metavar="GPU", help="the GPU's index on the node")
    kill.add_argument("pid", type=int, metavar="PID",
                      help="the process's id on the node (from `gpufleet ps`)")  # fmt: skip
    kill.add_argument("--start-time-ms", type=int, metavar="MS",
                      help="the process's start_time_unix_ms as `ps --json` showed it; "
                      "another process that got the same pid since is refused "
                      "(default: read it now)")  # fmt: skip
    kill.add_argument("--grace", type=int, default=10, metavar="SECONDS",
                      help="between TERM and KILL (default 10)")  # fmt: skip
    health.add_commands(subparsers)
    queue.add_commands(subparsers)
    add_report(subparsers)


# -- reading --------------------------------------------------------------------------


def _firing(link: NodeLink, include_cleared: bool = False) -> list[pb.Alert]:
    return list(link.call(calls.LIST_ALERTS, include_cleared=include_cleared).alerts)


def _status_of(link: NodeLink, inventory: pb.Inventory) -> Row:
    temps = [
        (g.temp_gpu_c, g.index)
        for g in latest_batch(link, inventory).gpus
        if g.HasField("temp_gpu_c")
    ]
    counts = dict.fromkeys(SEVERITY_NAMES, 0)
    for alert in _firing(link):
        if alert_firing(alert.state) and severity_name(alert.severity) in counts:
            counts[severity_name(alert.severity)] += 1
    hottest = max(temps, default=None)
    return {
        **where(link), "reachable": True, "host": inventory.hostname,
        "gpus": len(inventory.gpus),
        "hottest_gpu": None if hottest is None else hottest[1],
        "hottest_temp_c": None if hottest is None else round(hottest[0], 1),
        "alerts": counts,
    }  # fmt: skip


def run_status(args: argparse.Namespace) -> int:
    if args.at is not None:
        moment.check_not_ahead(args.at)
    chosen = choose_nodes(args)
    if args.at is None:
        outcome = on_fleet(chosen.surveyed, chosen.security, _status_of)
    else:
        outcome = on_fleet(chosen.surveyed, chosen.security,
                           lambda link, node: moment.status_at(link, node, args.at))  # fmt: skip
    rows = [row for _, row in outcome.results]
    rows += [{"node": f.node, "address": f.address, "reachable": False, "host": None,
              "gpus": None, "hottest_gpu": None, "hottest_temp_c": None, "alerts": None,
              "error": f.reason} for f in outcome.failures]  # fmt: skip
    rows.sort(key=lambda r: chosen.order.index(r["address"]))
    if args.at is not None:
        return moment.print_status_at(args, outcome, rows)
    report(outcome, "status")
    if args.json:
        print_json({"nodes": rows})
    else:
        print(format_table(
            ("NODE", "ADDRESS", "STATE", "GPUS", "HOTTEST", "CRITICAL", "WARNING", "INFO"),
            [_status_cells(r) for r in rows],
        ))  # fmt: skip
    code = outcome.exit_code()
    critical = any(r["alerts"] and r["alerts"]["critical"] for r in rows)
    return code if code != EXIT_OK else (EXIT_FAILED if critical else EXIT_OK)


def _status_cells(row: Row) -> list[str]:
    if not row["reachable"]:
        return [row["node"], row["address"], "unreachable", "-", "-", "-", "-", "-"]
    hot = (
        "-"
        if row["hottest_gpu"] is None
        else f"GPU {row['hottest_gpu']} {row['hottest_temp_c']:.0f} °C"
    )
    counts = row["alerts"]
    return [row["node"], row["address"], "up", str(row["gpus"]), hot,
            str(counts["critical"]), str(counts["warning"]), str(counts["info"])]  # fmt: skip


def _processes_of(link: NodeLink, inventory: pb.Inventory) -> list[Row]:
    return [
        {**where(link), "gpu": gpu.index, "pid": p.pid, "user": p.user,
         "gpu_memory_bytes": p.gpu_memory_bytes if p.HasField("gpu_memory_bytes") else None,
         "start_time_unix_ms": p.start_time_unix_ms if p.HasField("start_time_unix_ms") else None,
         "slurm_job_id": p.slurm_job_id or None, "command": p.command}
        for gpu in latest_batch(link, inventory).gpus
        for p in gpu.processes
    ]  # fmt: skip


def run_ps(args: argparse.Namespace) -> int:
    chosen = choose_nodes(args)
    outcome = on_fleet(chosen.surveyed, chosen.security, _processes_of)
    return print_rows(
        args, outcome, node_rows(outcome), name="ps", key="processes",
        headers=("NODE", "GPU", "PID", "USER", "MEMORY", "STARTED", "SLURM JOB", "COMMAND"),
        cells=lambda r: [
            r["node"], str(r["gpu"]), str(r["pid"]), r["user"] or "-",
            "-" if r["gpu_memory_bytes"] is None else mib(r["gpu_memory_bytes"]),
            local_time(r["start_time_unix_ms"] or 0), r["slurm_job_id"] or "-", r["command"]],
    )  # fmt: skip


def _alert_row(link: NodeLink, alert: pb.Alert) -> Row:
    state = "firing" if alert_firing(alert.state) else "cleared"
    return {
        **where(link), "id": alert.id, "severity": severity_name(alert.severity),
        "rule": alert.rule, "gpu": alert.gpu_index if alert.HasField("gpu_index") else None,
        "value": alert.value if alert.HasField("value") else None,
        "peak": alert.peak_value if alert.HasField("peak_value") else None, "unit": alert.unit,
        "started_unix_ms": alert.started_unix_ms, "state": state,
        "acknowledged_by": alert.acknowledged_by or None,
        "silenced_until_unix_ms": alert.silenced_until_unix_ms
        if alert.HasField("silenced_until_unix_ms") else None,
        "silence_id": alert.silence_id or None,
        "summary": alert.summary,
    }  # fmt: skip


def run_alerts(args: argparse.Namespace) -> int:
    if args.at is not None:
        return _alerts_at(args)
    chosen = choose_nodes(args)

    def alerts_of(link: NodeLink, _: pb.Inventory) -> list[Row]:
        return [_alert_row(link, a) for a in _firing(link, include_cleared=args.all)
                if args.all or alert_firing(a.state)]  # fmt: skip

    outcome = on_fleet(chosen.surveyed, chosen.security, alerts_of)
    return print_rows(
        args, outcome, node_rows(outcome), name="alerts", key="alerts",
        headers=("NODE", "ID", "SEVERITY", "RULE", "GPU", "VALUE/PEAK", "SINCE", "STATE"),
        cells=lambda r: [
            r["node"], r["id"], r["severity"], r["rule"],
            "-" if r["gpu"] is None else str(r["gpu"]), _value_text(r),
            local_time(r["started_unix_ms"]), _state_text(r)],
    )  # fmt: skip


def _alert_cells(row: Row) -> list[str]:
    return [row["node"], row["id"], row["severity"], row["rule"],
            "-" if row["gpu"] is None else str(row["gpu"]), _value_text(row),
            local_time(row["started_unix_ms"]), _state_text(row)]  # fmt: skip


def _alerts_at(args: argparse.Namespace) -> int:
    if args.all:
        raise UsageProblem("--all and --at do not go together: --at lists what fired then")
    moment.check_not_ahead(args.at)
    chosen = choose_nodes(args)
    outcome = on_fleet(chosen.surveyed, chosen.security,
                       lambda link, _: moment.alerts_at(link, args.at, _alert_row))  # fmt: skip
    return moment.print_alerts_at(args, outcome, _alert_cells)


def _value_text(row: Row) -> str:
    if row["value"] is None:
        return "-"
    peak = "" if row["peak"] is None else f"/{row['peak']:g}"
    return f"{row['value']:g}{peak} {row['unit']}".rstrip()


def _state_text(row: Row) -> str:
    extra = [f"acked by {row['acknowledged_by']}"] if row["acknowledged_by"] else []
    if row["silenced_until_unix_ms"]:
        extra.append(f"silenced until {local_time(row['silenced_until_unix_ms'])}")
    if row["silence_id"]:
        extra.append(f"silenced by {row['silence_id']}")
    return ", ".join([row["state"], *extra])


# -- acting ---------------------------------------------------------------------------


def run_ack(args: argparse.Namespace) -> int:
    def ack(link: NodeLink) -> Row:
        alert = link.call(calls.ACKNOWLEDGE_ALERT, alert_id=args.alert_id,
                          comment=args.comment, actor=getpass.getuser())  # fmt: skip
        return {**_alert_row(link, alert),
                "done": f"{link.node.name}: {alert.id} ({alert.rule}) acknowledged "
                        f"by {alert.acknowledged_by}"}  # fmt: skip

    return act(args, "ack", ack)


def run_release(args: argparse.Namespace) -> int:
    def release(link: NodeLink) -> Row:
        reply = link.call(
            calls.RELEASE_RESERVATION,
            reservation_id=args.reservation_id, actor=getpass.getuser(), gpu_indices=args.gpus,
        )  # fmt: skip
        gpus = ",".join(str(i) for i in sorted(set(args.gpus)))
        verb = f"kept (GPU {gpus} released)" if reply.active else "released"
        return _reservation_row(link, reply, verb)

    return act(args, "release", release)


def _reservation_row(link: NodeLink, r: pb.Reservation, verb: str) -> Row:
    gpus = ",".join(str(i) for i in r.gpu_indices)
    return {**where(link), "id": r.id, "gpus": list(r.gpu_indices), "holder": r.holder,
            "until_unix_ms": r.until_unix_ms, "active": r.active, "reason": r.reason,
            "done": f"{link.node.name}: reservation {r.id} of GPU {gpus} for {r.holder} {verb}"
                    + (f" until {local_time(r.until_unix_ms)}" if r.active else "")}  # fmt: skip


def _add_reserve(subparsers: argparse._SubParsersAction) -> None:
    reserve = command(subparsers, "reserve", "reserve GPUs of a node for a user or team",
                      run_reserve, None, done="reserved", failed=ONE_NODE_FAILED)  # fmt: skip
    reserve.add_argument("--gpu", type=int, action="append", required=True, metavar="N",
                         help="a GPU index; repeat for more")  # fmt: skip
    reserve.add_argument("--holder", required=True, help="a user, or team:NAME")
    add_end(reserve)
    reserve.add_argument("--reason", required=True, help="why")


def run_reserve(args: argparse.Namespace) -> int:
    until = end_ms(args, now_ms())

    def reserve(link: NodeLink) -> Row:
        made = link.call(calls.RESERVE, gpu_indices=args.gpu, holder=args.holder,
                         until_unix_ms=until, reason=args.reason,
                         actor=getpass.getuser())  # fmt: skip
        return _reservation_row(link, made, "made")

    return act(args, "reserve", reserve)


def run_kill(args: argparse.Namespace) -> int:
    def kill(link: NodeLink) -> Row:
        started = args.start_time_ms
        if started is None:
            started = _start_time(link, args.gpu, args.pid)
        # The daemon waits up to the grace period for TERM to work: the deadline covers it.
        response = link.call(calls.KILL_PROCESS, deadline_s=args.grace + 10.0,
                             gpu_index=args.gpu, pid=args.pid, start_time_unix_ms=started,
                             grace_s=args.grace, actor=getpass.getuser())  # fmt: skip
        outcome = kill_outcome_word(response.outcome)
        return {**where(link), "gpu": args.gpu, "pid": args.pid,
                "start_time_unix_ms": started, "outcome": outcome, "detail": response.detail,
                "done": f"{link.node.name}: pid {args.pid} on GPU {args.gpu}: {outcome}"
                        + (f" ({response.detail})" if response.detail else "")}  # fmt: skip

    return act(args, "kill", kill)


def _start_time(link: NodeLink, gpu: int, pid: int) -> int:
    for sample in latest_batch(link).gpus:
        for process in sample.processes:
            if sample.index == gpu and process.pid == pid:
                return process.start_time_unix_ms
    raise link.failed(f"no process {pid} on GPU {gpu} (`gpufleet ps` lists them)")
