"""The generated configuration of the test cluster: slurm.conf and gres.conf text.

One slurmctld and one slurmd per node, all on 127.0.0.1, each slurmd on its own
port. Debian's Slurm is built without --enable-multiple-slurmd, which refuses two
nodes on one NodeHostname; each node therefore gets its own (made-up)
NodeHostname with the same NodeAddr, and its slurmd is started with `-N NAME`.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

GPUS_PER_NODE = 8
CPUS_PER_NODE = 8
MEMORY_MB = 16000
PARTITION = "gpu"
CLUSTER = "gpufleet-test"


@dataclass(frozen=True)
class ClusterLayout:
    """Where everything of one test cluster lives and listens."""

    root: Path
    nodes: tuple[str, ...]
    ctld_port: int
    node_ports: tuple[int, ...]
    rest_port: int

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket.2"

    @property
    def jwt_key(self) -> Path:
        return self.root / "etc" / "jwt_hs256.key"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"


def slurm_conf(layout: ClusterLayout) -> str:
    """slurm.conf for the layout: munge between daemons, JWT as the alternative for REST."""
    root = layout.root
    lines = [
        f"ClusterName={CLUSTER}",
        # slurmctld only runs where SlurmctldHost names this host; its address is loopback.
        f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
        f"SlurmctldPort={layout.ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={layout.jwt_key}",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/run/slurmctld.pid",
        f"SlurmdPidFile={root}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={layout.log_dir}/slurmctld.log",
        f"SlurmdLogFile={layout.log_dir}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=debug2",
        # No cgroups in a test container: track processes by /proc, no task binding.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        # slurmdbd would need MariaDB; the tests run without accounting.
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        # The nodes claim 8 CPUs and 8 GPUs whatever this machine has.
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
    ]
    for name, port in zip(layout.nodes, layout.node_ports, strict=True):
        lines.append(
            f"NodeName={name} NodeHostname={name} NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={CPUS_PER_NODE} RealMemory={MEMORY_MB} Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
        )
    nodes = ",".join(layout.nodes)
    lines.append(f"PartitionName={PARTITION} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def cgroup_conf() -> str:
    """The cgroup plugin named, not detected: slurmd 22.05 detects it from the filesystem
    at /sys/fs/cgroup and stops where there is none ("No filesystem mounted on
    /sys/fs/cgroup": a chroot with /sys bound without its submounts). Named, v1 loads
    without touching a hierarchy: with proctrack/linuxproc, task/none and no
    accounting gather, nothing asks it for one.
    """
    return "CgroupPlugin=cgroup/v1\n"


def gres_conf(layout: ClusterLayout) -> str:
    """Eight GPUs per node, backed by placeholder files (see `gpu_files`).

    Slurm 22.05's gres/gpu plugin drops a GPU without File= ("Removing
    file-less GPU"), Flags=CountOnly included, and the node then registers
    with fewer GPUs than configured and is set INVAL; so each GPU names a file.
    Nothing opens them: without ConstrainDevices no cgroup needs real devices.
    """
    nodes = ",".join(layout.nodes)
    files = f"{layout.root}/dev/gpu[0-{GPUS_PER_NODE - 1}]"
    return f"NodeName={nodes} Name=gpu File={files}\n"


def gpu_files(layout: ClusterLayout) -> list[Path]:
    """The placeholder files gres.conf names, one per GPU (the nodes share them)."""
    return [layout.root / "dev" / f"gpu{i}" for i in range(GPUS_PER_NODE)]
