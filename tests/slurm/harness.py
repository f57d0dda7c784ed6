"""A real Slurm on loopback for tests: munged, slurmctld, slurmd per node, slurmrestd.

Debian bookworm's packages (Slurm 22.05), started as root from a generated
configuration in a temporary directory, and stopped and removed at the end.
Every step waits on Slurm's own answer (`scontrol ping`, `sinfo`, the REST
ping) with a deadline, and a step that times out fails with the tail of that
daemon's log. slurmrestd refuses to run as root or SlurmUser, so it runs as an
unprivileged account the harness creates (and removes again if it created it),
with SLURM_JWT=daemon: it forwards each caller's JWT to slurmctld.
"""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from console.connections.slurm_rest import API_VERSION
from tests.slurm.accounting import start_accounting
from tests.slurm.slurm_config import ClusterLayout, cgroup_conf, gpu_files, gres_conf, slurm_conf
from tests.tools import free_port

REST_USER = "gpufleet-slurmrest"
REST_USER_MARK = "gpufleet tests, slurmrestd"
PLUGIN_DIR = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm")
# What each piece comes from, for the skip message.
NEEDED = {
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "slurmrestd": "slurmrestd",
    "scontrol": "slurm-client",
    "sbatch": "slurm-client",
    "sinfo": "slurm-client",
}
START_DEADLINE_S = 60.0
# MariaDB's first start and slurmdbd making its tables, on a busy 2-core machine.
ACCOUNTING_DEADLINE_S = 60.0
STOP_DEADLINE_S = 15.0
PR_SET_PDEATHSIG = 1


def missing_pieces() -> str | None:
    """Why the real Slurm cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "slurmctld and slurmd run as root here, and the tests are not root"
    lost = sorted({pkg for tool, pkg in NEEDED.items() if shutil.which(tool) is None})
    if not (PLUGIN_DIR / "auth_jwt.so").exists():
        lost.append("slurm-wlm-jwt-plugin")
    if shutil.which("useradd") is None:
        lost.append("passwd (useradd)")
    if lost:
        return f"Debian packages missing: {', '.join(lost)}"
    return None


@dataclass(frozen=True)
class SlurmCluster:
    """A running test cluster and the commands to ask it things."""

    layout: ClusterLayout
    startup_s: float

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.layout.nodes

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.layout.rest_port}"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.layout.conf)}

    def run(self, *args: str, user: str | None = None) -> str:
        """Run a Slurm command against this cluster; its stdout, or an error with stderr."""
        if args[:1] == ("sbatch",) and not any(a.startswith(("--output", "-o")) for a in args):
            # A job's output would land in the test run's directory (the checkout) as
            # slurm-N.out: no test reads it.
            args = ("sbatch", "--output=/dev/null", *args[1:])
        done = subprocess.run(
            args, env=self.env(), capture_output=True, text=True, timeout=30, user=user
        )
        if done.returncode != 0:
            said = (done.stderr + done.stdout).strip()
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}): {said}")
        return done.stdout

    def scontrol_show(self, kind: str, name: str) -> str:
        """`scontrol show KIND NAME` in one-line form (Key=Value pairs)."""
        return self.run("scontrol", "-o", "show", kind, name)

    def token(self, username: str, lifespan_s: int = 3600) -> str:
        """A JWT for `username`, issued by slurmctld (`scontrol token`)."""
        out = self.run("scontrol", "token", f"username={username}", f"lifespan={lifespan_s}")
        return out.strip().removeprefix("SLURM_JWT=")

    def submit_held(self, *sbatch_args: str, user: str | None = None) -> int:
        """A job that stays pending (held) until released; its id."""
        args = ["sbatch", "--parsable", "--hold", *sbatch_args, "--wrap", "sleep 600"]
        if user is not None:
            args += [f"--uid={user}", f"--gid={pwd.getpwnam(user).pw_gid}"]
        return int(self.run(*args).strip().split(";")[0])

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.layout.log_dir / name
        if not path.exists():
            return f"({path} was never written)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _die_with_parent() -> None:
    """In the child before exec: a test run killed outright takes its daemons with it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _quiet(args: Sequence[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=10)


class _Daemons:
    """The processes started so far, stopped in reverse order."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, args: Sequence[str], env: dict[str, str], **kw: object) -> None:
        with open(self._log_dir / f"{name}.out", "wb") as out:
            proc = subprocess.Popen(  # type: ignore[call-overload]
                args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent, **kw,
            )  # fmt: skip
        self._procs.append((name, proc))

    def wait(self, check: Callable[[], bool], what: str, log: Callable[[], str],
             deadline: float) -> None:  # fmt: skip
        """Poll Slurm's answer until `check` holds; fail at the deadline or when a daemon dies."""
        while not check():
            dead = [name for name, proc in self._procs if proc.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = f"{', '.join(dead)} exited" if dead else "timed out"
                raise AssertionError(f"{why} waiting for {what}; its log ends:\n{log()}")
            time.sleep(0.1)

    def stop(self) -> None:
        for _, proc in reversed(self._procs):
            proc.terminate()
        for _, proc in reversed(self._procs):
            try:
                proc.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_DEADLINE_S)


@contextmanager
def _rest_account() -> Iterator[pwd.struct_passwd]:
    """The unprivileged account slurmrestd runs as, removed after.

    Marked by its comment, so one left by a run killed outright is removed by the next.
    """
    try:
        pwd.getpwnam(REST_USER)
    except KeyError:
        added = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
             "--comment", REST_USER_MARK, REST_USER],
            check=False, capture_output=True, text=True,
        )  # fmt: skip
        if added.returncode not in (0, 9):  # 9: another run added it meanwhile
            raise AssertionError(f"useradd {REST_USER} failed: {added.stderr}") from None
    account = pwd.getpwnam(REST_USER)
    try:
        yield account
    finally:
        if account.pw_gecos == REST_USER_MARK:
            subprocess.run(["userdel", REST_USER], check=False, capture_output=True)


def _layout(root: Path, nodes: Sequence[str]) -> ClusterLayout:
    ports = tuple(free_port() for _ in nodes)
    return ClusterLayout(root, tuple(nodes), free_port(), ports, free_port())


def _write_files(layout: ClusterLayout) -> None:
    root = layout.root
    # slurmrestd (unprivileged) must read slurm.conf: the tree is world-readable,
    # the keys are root's alone.
    root.chmod(0o755)
    for sub in ("etc", "state", "spool", "run", "log", "dev"):
        (root / sub).mkdir(mode=0o755)
    (root / "munge").mkdir(mode=0o700)
    for name in layout.nodes:
        (root / "spool" / name).mkdir(mode=0o755)
    for gpu in gpu_files(layout):
        gpu.touch()
    layout.conf.write_text(slurm_conf(layout))
    (layout.conf.parent / "gres.conf").write_text(gres_conf(layout))
    (layout.conf.parent / "cgroup.conf").write_text(cgroup_conf())
    for key, size in ((root / "munge" / "munge.key", 1024), (layout.jwt_key, 32)):
        key.write_bytes(secrets.token_bytes(size))
        key.chmod(0o600)


def _start_munge(daemons: _Daemons, layout: ClusterLayout, env: dict[str, str]) -> None:
    munge = layout.root / "munge"
    daemons.start("munged", [
        "munged", "--foreground", "--force", f"--key-file={munge}/munge.key",
        f"--socket={layout.munge_socket}", f"--pid-file={munge}/munged.pid",
        f"--log-file={layout.log_dir}/munged.log", f"--seed-file={munge}/munged.seed",
    ], env)  # fmt: skip


def _ctld_up(env: dict[str, str]) -> bool:
    return "is UP" in _quiet(["scontrol", "ping"], env).stdout


def _nodes_idle(env: dict[str, str], count: int) -> bool:
    states = _quiet(["sinfo", "-h", "-N", "-o", "%t"], env).stdout.split()
    return len(states) == count and all(s == "idle" for s in states)


def _node_states(env: dict[str, str]) -> str:
    return _quiet(["sinfo", "-N", "-o", "%N %t %E"], env).stdout


def _rest_up(url: str, token: str) -> bool:
    request = urllib.request.Request(
        f"{url}/slurm/{API_VERSION}/ping",
        headers={"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": token},
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            return bool(json.load(answer).get("pings"))
    except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
        return False


@contextmanager
def slurm_cluster(
    nodes: Sequence[str] = ("gpu01", "gpu02"), accounting: bool = False
) -> Iterator[SlurmCluster]:
    """A real Slurm cluster on loopback for the duration of the block; `accounting`: with
    slurmdbd and MariaDB (tests/slurm/accounting.py), so sacct answers."""
    began = time.monotonic()
    deadline = began + START_DEADLINE_S + (ACCOUNTING_DEADLINE_S if accounting else 0.0)
    with ExitStack() as stack:
        # Before any daemon: removed after they all stopped (userdel refuses a user in use).
        account = stack.enter_context(_rest_account())
        root = Path(tempfile.mkdtemp(prefix="gpufleet-slurm-"))
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        layout = _layout(root, nodes)
        _write_files(layout)
        cluster = SlurmCluster(layout, 0.0)
        env = cluster.env()
        daemons = _Daemons(layout.log_dir)
        stack.callback(daemons.stop)
        _start_munge(daemons, layout, env)
        daemons.wait(layout.munge_socket.exists, "munged", lambda: cluster.log_tail("munged.log"),
              deadline)  # fmt: skip
        if accounting:
            start_accounting(daemons, layout, env, deadline, cluster.log_tail)
        daemons.start("slurmctld", ["slurmctld", "-D", "-c", "-f", str(layout.conf)], env)
        daemons.wait(lambda: _ctld_up(env), "slurmctld", lambda: cluster.log_tail("slurmctld.log"),
              deadline)  # fmt: skip
        for name in nodes:
            daemons.start(f"slurmd-{name}", ["slurmd", "-D", "-N", name, "-f", str(layout.conf)],
                          env)  # fmt: skip
        daemons.wait(lambda: _nodes_idle(env, len(nodes)), "the nodes to be idle",
              lambda: _node_states(env) + cluster.log_tail("slurmctld.log")
              + "".join(f"\n--- slurmd-{n}.out:\n" + cluster.log_tail(f"slurmd-{n}.out", 15)
                        for n in nodes),
              deadline)  # fmt: skip
        rest_env = {**env, "SLURM_JWT": "daemon"}
        daemons.start("slurmrestd", [
            "slurmrestd", "-a", "rest_auth/jwt", "-s", f"openapi/{API_VERSION}",
            f"127.0.0.1:{layout.rest_port}",
        ], rest_env, user=account.pw_uid, group=account.pw_gid, extra_groups=[])  # fmt: skip
        token = cluster.token("root")
        daemons.wait(lambda: _rest_up(cluster.rest_url, token), "slurmrestd",
              lambda: cluster.log_tail("slurmrestd.out"), deadline)  # fmt: skip
        yield SlurmCluster(layout, time.monotonic() - began)
