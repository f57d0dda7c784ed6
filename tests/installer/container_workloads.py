"""Workloads under the installed unit, inside the e2e container: one transient unit each.

Run by tests/installer/container_e2e.sh, as root, with the installed venv's
Python (grpc and gpufleet only: nothing of tests/ is importable there), while
the daemon runs under gpufleet-daemon.service with the fake NVML. Argument:
the local account to submit workloads for (the script created it, with a
supplementary group and a private note in its home). Prints `RESULT name
value` lines; test_in_container.py says what each must be.

A probe workload reports who, where and in which cgroup it runs, what it sees
of its home and of the daemon's state, and its environment and argv as
received; a long one (with a child that setsid()s away) survives a restart of
the daemon, is re-adopted, and a cancel ends every process in its cgroup.
"""

from __future__ import annotations

import base64
import pwd
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import grpc

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc

ADDRESS = "127.0.0.1:50051"
STATE = Path("/var/lib/gpufleet")
ENDED = (pb.WORKLOAD_STATE_FINISHED, pb.WORKLOAD_STATE_FAILED, pb.WORKLOAD_STATE_CANCELLED)
# What PID 1 would expand ($NAME, ${NAME}, %n) or an environment file would mangle.
TRICKY_VALUE = 'two words "quoted" $HOME ${USER} `id` \\back\\slash\nnext line %n'
TRICKY_ARG = "arg $HOME ${USER} $$ %n \\"
SECRET = "s3cret-token-5d41402abc"
PROBE = r"""
echo "user=$(id -un)"
echo "groups=$(id -Gn)"
sed 's/^/cgroup=/' /proc/self/cgroup
echo "note=$(cat "$HOME/note" 2>&1)"
cat /var/lib/gpufleet/journal.sqlite3 >/dev/null 2>&1 && echo state=readable || echo state=denied
(echo x >>/var/lib/gpufleet/audit.sqlite3) 2>/dev/null && echo write=done || echo write=denied
echo "cwd=$(pwd)"
echo "var=$(printf %s "$MY_VAR" | base64 -w0)"
echo "arg=$(printf %s "$1" | base64 -w0)"
exit 3
"""
T = TypeVar("T")


def result(name: str, value: object) -> None:
    print(f"RESULT {name} {value}", flush=True)


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    """Poll another process's state (a unit, a daemon) until `probe` answers."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = probe()
        except grpc.RpcError:
            found = None  # the daemon is restarting
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(0.2)


def stub() -> pb_grpc.NodeServiceStub:
    return pb_grpc.NodeServiceStub(grpc.insecure_channel(ADDRESS))


def workload(node: pb_grpc.NodeServiceStub, workload_id: str) -> pb.Workload | None:
    listed = node.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5).workloads
    return next((w for w in listed if w.id == workload_id), None)


def start(node: pb_grpc.NodeServiceStub, owner: str, argv: list[str], env: dict[str, str],
          gpu: int) -> pb.Workload:  # fmt: skip
    request = pb.SubmitWorkloadRequest(argv=argv, env=env, owner=owner, gpu_count=1)
    queued = node.SubmitWorkload(request, timeout=10)
    assign = pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[gpu])
    return node.AssignWorkload(assign, timeout=30)


def ended(node: pb_grpc.NodeServiceStub, workload_id: str) -> pb.Workload:
    def done() -> pb.Workload | None:
        found = workload(node, workload_id)
        return found if found is not None and found.state in ENDED else None

    return wait_for(f"workload {workload_id} to end", done)


def systemctl_show(unit: str, prop: str) -> str:
    command = ["systemctl", "show", "-p", prop, "--value", unit]
    return subprocess.run(command, capture_output=True, text=True, check=False).stdout.strip()


def unit_pattern(workload_id: str) -> re.Pattern[str]:
    return re.compile(rf"/gpufleet-workload-[0-9a-f]{{8}}-{re.escape(workload_id)}\.service$")


def in_unit(workload_id: str) -> list[int]:
    """Every process whose cgroup is the workload's unit, in any hierarchy."""
    pattern, pids = unit_pattern(workload_id), []
    for entry in Path("/proc").iterdir():
        try:
            lines = (entry / "cgroup").read_text().splitlines() if entry.name.isdigit() else []
        except OSError:
            continue
        if any(pattern.search(line.split(":", 2)[-1]) for line in lines):
            pids.append(int(entry.name))
    return pids


def settled(main: int, pids: list[int]) -> list[int] | None:
    """`pids` once the main process has a child and every other one is a `sleep`."""
    others = [pid for pid in pids if pid != main]
    return pids if others and all(command(pid) == "sleep" for pid in others) else None


def command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""  # gone


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def in_any_argv(text: str) -> bool:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def probe(node: pb_grpc.NodeServiceStub, user: str) -> None:
    """Who, where and what a finished workload was, as it reported it."""
    account = pwd.getpwnam(user)
    started = start(node, user, ["sh", "-c", PROBE, "probe", TRICKY_ARG],
                    {"MY_VAR": TRICKY_VALUE}, gpu=1)  # fmt: skip
    done = ended(node, started.id)
    text = node.GetWorkloadOutput(pb.GetWorkloadOutputRequest(workload_id=started.id),
                                  timeout=5).output.decode()  # fmt: skip
    print(text, file=sys.stderr)
    seen: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        seen.setdefault(key, []).append(value)

    def one(key: str) -> str:
        return seen.get(key, [""])[0]

    def decoded(key: str) -> str:
        return base64.b64decode(one(key)).decode()

    result("wl_exit", f"{pb.WorkloadState.Name(done.state)}:{done.exit_code}")
    result("wl_user", one("user"))
    result("wl_groups", "yes" if "gfteam" in one("groups").split() else one("groups"))
    own = [c for c in seen.get("cgroup", []) if unit_pattern(done.id).search(c.split(":", 2)[-1])]
    result("wl_own_cgroup", "yes" if own else seen.get("cgroup"))
    result("wl_home", one("note"))
    result("wl_state_read", one("state"))
    result("wl_state_write", one("write"))
    work_dir = f"{account.pw_dir}/gpufleet-workloads/{done.id}"
    result("wl_cwd", "yes" if one("cwd") == work_dir else one("cwd"))
    result("wl_env_exact", "yes" if decoded("var") == TRICKY_VALUE else repr(decoded("var")))
    result("wl_argv_exact", "yes" if decoded("arg") == TRICKY_ARG else repr(decoded("arg")))
    env_file = STATE / "workloads" / done.id / "environment"
    result("wl_env_file_gone", "no" if env_file.exists() else "yes")
    if own:
        unit = Path(own[0].split(":", 2)[-1]).name
        wait_for(f"{unit} to go", lambda: systemctl_show(unit, "LoadState") == "not-found")
        result("wl_unit_released", "yes")


def long_running(node: pb_grpc.NodeServiceStub, user: str) -> None:
    """A restart of the daemon leaves it running and re-adopts it; a cancel ends all of it."""
    script = "setsid sleep 1000 & sleep 1000"
    started = start(node, user, ["sh", "-c", script], {"SECRET_TOKEN": SECRET}, gpu=1)
    # sh, and the sleep it put in a session of its own (dash may exec the last one itself).
    # Only once every other process is a sleep: a copy of sh not yet exec'd, or setsid
    # before its own exec, counts at first and is gone by the restart (seen under load).
    main = started.pid
    pids = wait_for("the workload's processes",
                    lambda: settled(main, in_unit(started.id)))  # fmt: skip
    result("wl_main_in_unit", "yes" if main in pids else f"{main} not in {pids}")
    uids = {
        int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0]) for pid in pids
    }
    result("wl_uid", "yes" if uids == {pwd.getpwnam(user).pw_uid} else uids)
    environ = Path(f"/proc/{main}/environ").read_bytes()
    result("wl_secret_in_env", "yes" if f"SECRET_TOKEN={SECRET}".encode() in environ else "no")
    result("wl_secret_in_argv", "yes" if in_any_argv(SECRET) else "no")
    subprocess.run(["systemctl", "restart", "gpufleet-daemon.service"], check=True)
    node = stub()
    again = wait_for("the restarted daemon", lambda: workload(node, started.id))
    result("wl_survives_restart", "yes" if all(map(alive, pids)) else "no")
    readopted = again.state == pb.WORKLOAD_STATE_RUNNING and again.pid == main
    state = pb.WorkloadState.Name(again.state)
    result("wl_readopted", "yes" if readopted else f"{state}:{again.pid}")
    node.CancelWorkload(pb.CancelWorkloadRequest(workload_id=started.id), timeout=10)
    done = ended(node, started.id)
    result("wl_cancelled", pb.WorkloadState.Name(done.state))
    wait_for("every process of the cancelled workload to end", lambda: not any(map(alive, pids)))
    result("wl_cgroup_emptied", "yes")


def refused(node: pb_grpc.NodeServiceStub, owner: str) -> str:
    request = pb.SubmitWorkloadRequest(argv=["id"], owner=owner, gpu_count=1)
    try:
        node.SubmitWorkload(request, timeout=10)
    except grpc.RpcError as exc:
        return exc.code().name  # type: ignore[no-any-return]
    return "accepted"


def main(user: str) -> None:
    node = stub()
    wait_for("GPUs with UUIDs", lambda: all(g.uuid for g in node.GetInventory(
        pb.GetInventoryRequest(), timeout=5).gpus) or None)  # fmt: skip
    probe(node, user)
    long_running(node, user)
    node = stub()
    result("wl_root_refused", refused(node, "root"))
    result("wl_daemon_account_refused", refused(node, "gpufleet"))


if __name__ == "__main__":
    main(sys.argv[1])
