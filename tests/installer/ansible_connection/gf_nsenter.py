"""Ansible connection to a throwaway systemd-nspawn container, through nsenter.

The test's containers (tests/installer/containers.py) have a private network and
no sshd; this runs each of Ansible's commands inside one of them, as root, in
its init's namespaces (mount, UTS, IPC, network, PID, cgroup), so modules run
under the container's systemd exactly as over ssh on a server. Files travel
through the command's standard input and output. Used only by
tests/installer/test_ansible_role.py (ANSIBLE_CONNECTION_PLUGINS).
"""

from __future__ import annotations

import subprocess
from typing import Any

from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = """
name: gf_nsenter
short_description: run tasks inside a local container's namespaces (nsenter)
description:
  - Runs commands in the namespaces of a local process (a container's init) as root.
author: gpufleet tests
options:
  leader_pid:
    description: PID, on the controller, of the container's init.
    type: int
    vars:
      - name: gf_nsenter_pid
"""

ENV = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "LANG=C.UTF-8", "HOME=/root"]  # fmt: skip


class Connection(ConnectionBase):
    """Commands and files into a container through nsenter."""

    transport = "gf_nsenter"
    has_pipelining = True

    def _inside(self, argv: list[str]) -> list[str]:
        pid = str(self.get_option("leader_pid"))
        return ["nsenter", "-t", pid, "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w", *ENV, *argv]

    def _connect(self) -> Connection:
        self._connected = True
        return self

    def exec_command(self, cmd: str, in_data: bytes | None = None,
                     sudoable: bool = True) -> tuple[int, bytes, bytes]:  # fmt: skip
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        proc = subprocess.run(self._inside(["/bin/sh", "-c", cmd]), input=in_data or b"",
                              capture_output=True, check=False)  # fmt: skip
        return proc.returncode, proc.stdout, proc.stderr

    def put_file(self, in_path: str, out_path: str) -> None:
        super().put_file(in_path, out_path)
        with open(in_path, "rb") as source:
            proc = subprocess.run(self._inside(["/bin/sh", "-c", 'cat > "$1"', "sh", out_path]),
                                  stdin=source, capture_output=True, check=False)  # fmt: skip
        if proc.returncode:
            raise OSError(f"put {out_path}: {proc.stderr.decode(errors='replace')}")

    def fetch_file(self, in_path: str, out_path: str) -> None:
        super().fetch_file(in_path, out_path)
        with open(out_path, "wb") as target:
            proc = subprocess.run(self._inside(["cat", "--", in_path]), stdout=target,
                                  stderr=subprocess.PIPE, check=False)  # fmt: skip
        if proc.returncode:
            raise OSError(f"fetch {in_path}: {proc.stderr.decode(errors='replace')}")

    def close(self, *args: Any) -> None:
        self._connected = False
