"""Slurm's accounting for the test cluster: MariaDB in a temporary datadir, and slurmdbd.

Started by tests/slurm/harness.py before slurmctld when a cluster is asked for with
accounting (slurm_cluster(accounting=True)), stopped with the cluster's other daemons.
MariaDB listens on a free loopback port and its own socket, never the system's; the
database, its account and the cluster's Slurm accounts are made here.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests.slurm.slurm_config import CLUSTER, ClusterLayout
from tests.tools import free_port

if TYPE_CHECKING:
    from tests.slurm.harness import _Daemons

# What each piece comes from, for the skip message.
NEEDED = {"mariadbd": "mariadb-server", "mariadb-install-db": "mariadb-server",
          "mariadb": "mariadb-client", "slurmdbd": "slurmdbd", "sacctmgr": "slurm-client",
          "sacct": "slurm-client"}  # fmt: skip
# The Slurm accounts of the test cluster, and who may charge them.
ACCOUNTS = ("ml", "vision")
DB_USER = "slurm"
DB_NAME = "slurm_acct_db"


def missing_accounting() -> str | None:
    """Why slurmdbd cannot run here, or None when it can."""
    lost = sorted({pkg for tool, pkg in NEEDED.items() if shutil.which(tool) is None})
    return f"Debian packages missing: {', '.join(lost)}" if lost else None


@dataclass(frozen=True)
class Accounting:
    """Where the accounting pieces of one cluster live and listen."""

    root: Path
    db_port: int
    dbd_port: int
    password: str

    @property
    def socket(self) -> Path:
        return self.root / "mysql.sock"

    def slurm_conf_lines(self, munge_socket: Path) -> list[str]:
        """What replaces slurm.conf's accounting_storage/none."""
        return [
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={self.dbd_port}",
            # The connection to slurmdbd authenticates through this munge socket, not
            # AuthInfo's (Slurm's own default path otherwise).
            f"AccountingStoragePass={munge_socket}",
            # Slurm accounts no GPUs unless told to: without this AllocTRES lacks gres/gpu.
            "AccountingStorageTRES=gres/gpu",
        ]


def plan(layout: ClusterLayout) -> Accounting:
    return Accounting(layout.root / "db", free_port(), free_port(), secrets.token_hex(12))


def slurmdbd_conf(acct: Accounting, layout: ClusterLayout) -> str:
    return "\n".join([
        "AuthType=auth/munge", f"AuthInfo=socket={layout.munge_socket}",
        "DbdHost=localhost", "DbdAddr=127.0.0.1", f"DbdPort={acct.dbd_port}",
        "SlurmUser=root", f"LogFile={layout.log_dir}/slurmdbd.log",
        f"PidFile={layout.root}/run/slurmdbd.pid", "DebugLevel=info",
        "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
        f"StoragePort={acct.db_port}", f"StorageUser={DB_USER}",
        f"StoragePass={acct.password}", f"StorageLoc={DB_NAME}",
    ]) + "\n"  # fmt: skip


def _run(args: list[str], env: dict[str, str], what: str) -> str:
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{what} failed ({done.returncode}): {done.stderr or done.stdout}")
    return done.stdout


def _sql(acct: Accounting, env: dict[str, str], statement: str) -> str:
    args = ["mariadb", "--no-defaults", f"--socket={acct.socket}", "-u", "root", "-e", statement]
    return _run(args, env, "mariadb")


def start_accounting(
    daemons: _Daemons, layout: ClusterLayout, env: dict[str, str], deadline: float,
    log: Callable[[str], str],
) -> Accounting:  # fmt: skip
    """MariaDB, then slurmdbd, each waited for; the cluster and its accounts registered;
    slurm.conf pointed at this slurmdbd."""
    acct = plan(layout)
    use_in_slurm_conf(layout, acct)  # sacctmgr finds slurmdbd through slurm.conf too
    acct.root.mkdir(mode=0o700)
    data = acct.root / "data"
    # --force: a fresh root may resolve neither its host name nor localhost (no
    # /etc/hosts); the server skips name resolution anyway (--skip-name-resolve).
    _run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
          "--auth-root-authentication-method=socket", "--skip-test-db", "--force"], env,
         "mariadb-install-db")  # fmt: skip
    daemons.start("mariadbd", [
        "mariadbd", "--no-defaults", f"--datadir={data}", "--user=root",
        f"--socket={acct.socket}", f"--port={acct.db_port}", "--bind-address=127.0.0.1",
        "--skip-name-resolve", f"--pid-file={acct.root}/mariadbd.pid",
        f"--log-error={layout.log_dir}/mariadbd.log", "--innodb-buffer-pool-size=16M",
        "--skip-log-bin",
    ], env)  # fmt: skip
    daemons.wait(acct.socket.exists, "mariadbd", lambda: log("mariadbd.log"), deadline)
    _sql(acct, env, f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{acct.password}'; "
                    f"GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';")  # fmt: skip
    conf = layout.conf.parent / "slurmdbd.conf"
    conf.write_text(slurmdbd_conf(acct, layout))
    conf.chmod(0o600)  # slurmdbd refuses a config others can read (it holds the password)
    daemons.start("slurmdbd", ["slurmdbd", "-D"], env)
    said: list[str] = []
    daemons.wait(lambda: _dbd_up(env, said), "slurmdbd",
                 lambda: log("slurmdbd.log") + "\nsacctmgr said: " + "".join(said[-1:]),
                 deadline)  # fmt: skip
    sacctmgr = ["sacctmgr", "-i"]
    _run([*sacctmgr, "add", "cluster", CLUSTER], env, "sacctmgr add cluster")
    _run([*sacctmgr, "add", "account", *ACCOUNTS, f"cluster={CLUSTER}"], env, "add account")
    _run([*sacctmgr, "add", "user", "root", f"account={','.join(ACCOUNTS)}",
          f"cluster={CLUSTER}"], env, "sacctmgr add user")  # fmt: skip
    return acct


def _dbd_up(env: dict[str, str], said: list[str]) -> bool:
    args = ["sacctmgr", "-n", "-P", "list", "cluster"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=10, check=False)
    said.append(done.stderr.strip())
    return done.returncode == 0


def use_in_slurm_conf(layout: ClusterLayout, acct: Accounting) -> None:
    """Point the generated slurm.conf at this slurmdbd (before slurmctld reads it)."""
    text = layout.conf.read_text()
    none = "AccountingStorageType=accounting_storage/none"
    if none not in text:
        raise AssertionError(f"{layout.conf} has no {none} line to replace")
    layout.conf.write_text(
        text.replace(none, "\n".join(acct.slurm_conf_lines(layout.munge_socket)))
    )
