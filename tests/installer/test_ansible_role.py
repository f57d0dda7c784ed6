"""The Ansible role (installer/ansible/site.yml) on three throwaway systemd containers.

The packages are this tree's (`installer/package.sh`, what `make package` runs, in
a copy of the checkout) plus the same wheel packaged once more at a higher
version (installer/deb/build-deb.sh --version): a real version bump. Three
containers (tests/installer/containers.py) boot this machine's root under
systemd, side by side; ansible-playbook reaches each through nsenter (the
connection plugin tests/installer/ansible_connection/gf_nsenter.py: the
containers have no network and no sshd), so every task runs inside, under its
systemd, as over ssh on a server. Checked from outside (nsenter, not Ansible):

- the first run installs the package, TLS, the JWKS, a user's token and
  daemon.toml on every node, and each daemon answers grpc.health.v1 SERVING
  over TLS; the Prometheus host's file_sd file lists the three;
- a second run changes nothing (changed=0 on every host);
- --check --diff after one variable changes shows that one line and nothing
  else, and changes nothing (file and daemon PID the same);
- the version bump with node 2 unable to serve (backend nvml: no GPU driver
  in the container, so its health is NOT_SERVING) upgrades node 1, checks it,
  upgrades node 2, finds it unhealthy and stops: node 3 keeps the old version,
  the same daemon and the same file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.certs import Authority, write
from tests.installer.built_packages import BuiltPackages, at_version, deb_field
from tests.installer.containers import Container, booted, run_in
from tests.installer.tools import INSTALLER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

NODES = ("gf-node-1", "gf-node-2", "gf-node-3")
PLAYBOOK = INSTALLER / "ansible" / "site.yml"
PROBE = INSTALLER / "ansible" / "roles" / "gpufleet_daemon" / "files" / "grpc_health_probe.py"
CONNECTION_PLUGINS = Path(__file__).parent / "ansible_connection"
VENV_PYTHON = "/opt/gpufleet/venv/bin/python"
TOKEN = "gft_ansible-role-test-token"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)",
                   re.MULTILINE)  # fmt: skip


@dataclass(frozen=True)
class Packages:
    old: Path
    old_version: str
    new: Path
    new_version: str


@dataclass(frozen=True)
class Run:
    rc: int
    output: str
    changed: dict[str, int]
    failed: dict[str, int]
    seconds: float


def ansible_playbook() -> Path:
    path = Path(sys.executable).parent / "ansible-playbook"
    if not path.exists():
        pytest.skip("!!! ansible-core NOT INSTALLED: the Ansible role is NOT TRIED (pip install "
                    "-e '.[test]') !!!")  # fmt: skip
    return path


@pytest.fixture(scope="module")
def packages(built_packages: BuiltPackages, tmp_path_factory: pytest.TempPathFactory) -> Packages:
    """This tree's .deb (as make package builds it; conftest, once) and the same a version up."""
    old = built_packages.deb
    if old is None:
        pytest.skip(f"!!! {built_packages.deb_missing} NOT INSTALLED: the Ansible role is NOT "
                    "TRIED !!!")  # fmt: skip
    old_version = deb_field(old, "Version")
    new_version = f"{old_version}+rollout1"  # dpkg orders it after old_version
    bumped = at_version(old, new_version, tmp_path_factory.mktemp("bumped") / "work")
    return Packages(old, old_version, bumped, new_version)


@pytest.fixture()
def nodes(tmp_path: Path) -> Iterator[dict[str, Container]]:
    started = time.monotonic()
    with booted(NODES, tmp_path / "containers") as containers:
        print(f"3 containers booted in {time.monotonic() - started:.1f} s")
        yield {container.name: container for container in containers}


def inventory(path: Path, nodes: dict[str, Container], tls: Path, extra: dict[str, object],
              per_host: dict[str, dict[str, object]]) -> Path:  # fmt: skip
    """An inventory (JSON is YAML): the nodes, a local Prometheus host, the role's variables."""
    hosts = {name: {"ansible_connection": "gf_nsenter", "gf_nsenter_pid": node.leader,
                    "ansible_python_interpreter": "/usr/bin/python3", **per_host.get(name, {})}
             for name, node in nodes.items()}  # fmt: skip
    prometheus = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                  "gpufleet_prometheus_file_sd": str(path.parent / "file_sd.json")}  # fmt: skip
    variables = {
        "gpufleet_backend": "simulated",
        "gpufleet_daemon_settings": {"gpus": 2, "seed": 7},
        "gpufleet_metrics_listen": "127.0.0.1:9401",
        "gpufleet_users": [{"name": "ops", "role": "admin", "token": TOKEN}],
        "gpufleet_jwks_file": str(tls / "jwks.json"),
        "gpufleet_auth": {"issuer": "https://sso.example.org/realms/gpufleet"},
        "gpufleet_tls_cert": str(tls / "server.crt"),
        "gpufleet_tls_key": str(tls / "server.key"),
        "gpufleet_tls_ca": str(tls / "ca.crt"),
        "gpufleet_health_tls_name": "localhost",
        "gpufleet_health_timeout_s": 20,
        "gpufleet_slurm": {"sacct_poll_interval_s": 600},
        **extra,
    }
    path.write_text(json.dumps({"all": {"vars": variables, "children": {
        "gpufleet_nodes": {"hosts": hosts},
        "gpufleet_prometheus": {"hosts": {"prometheus": prometheus}}}}}))  # fmt: skip
    return path


def play(path: Path, *options: str) -> Run:
    env = {**os.environ, "ANSIBLE_CONNECTION_PLUGINS": str(CONNECTION_PLUGINS),
           "ANSIBLE_PIPELINING": "True", "ANSIBLE_HOME": str(path.parent / "ansible-home"),
           "ANSIBLE_LOCAL_TEMP": str(path.parent / "ansible-tmp"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_RETRY_FILES_ENABLED": "False", "ANSIBLE_FORKS": "3"}  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run([str(ansible_playbook()), "-i", str(path), str(PLAYBOOK), *options],
                          capture_output=True, text=True, env=env, cwd=path.parent,
                          timeout=300, check=False)  # fmt: skip
    output = proc.stdout + proc.stderr
    recap = {match[1]: (int(match[3]), int(match[5])) for match in RECAP.finditer(output)}
    return Run(proc.returncode, output, {h: c for h, (c, _) in recap.items()},
               {h: f for h, (_, f) in recap.items()}, time.monotonic() - started)  # fmt: skip


def inside(node: Container, script: str) -> str:
    answer = run_in(node, script)
    assert answer.returncode == 0, f"{node.name}: {script}: {answer.stderr}"
    return answer.stdout.strip()


def version(node: Container) -> str:
    return inside(node, "dpkg-query -W -f '${Version}' gpufleet-daemon")


def main_pid(node: Container) -> str:
    return inside(node, "systemctl show -P MainPID gpufleet-daemon")


def health(node: Container) -> str:
    """The daemon's gRPC health over TLS, asked from inside by the role's own probe."""
    answer = subprocess.run(
        [*node.nsenter(), VENV_PYTHON, "-", "--address", "127.0.0.1:50051", "--timeout", "10",
         "--ca", "/etc/gpufleet/tls/ca.crt", "--name", "localhost"],
        input=PROBE.read_text(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return answer.stdout.strip() + answer.stderr.strip()


def certificates(directory: Path) -> Path:
    directory.mkdir()
    authority = Authority()
    (directory / "ca.crt").write_bytes(authority.pem)
    write(directory, "server", authority.issue("localhost", server=True))
    gpufleet = Path(sys.executable).parent / "gpufleet"
    subprocess.run([str(gpufleet), "token", "keygen", "--out", str(directory / "keys")],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    shutil.copy(directory / "keys" / "jwks.json", directory / "jwks.json")
    return directory


def test_role_installs_is_idempotent_dry_runs_and_rolls_until_unhealthy(
    packages: Packages, nodes: dict[str, Container], tmp_path: Path
) -> None:
    tls = certificates(tmp_path / "tls")
    hosts = tmp_path / "inventory.yml"
    base = {"gpufleet_deb": str(packages.old)}

    # Installing and the run after it may take all three at once; the bump goes one by one.
    all_at_once = ("-e", "gpufleet_serial=3")
    first = play(inventory(hosts, nodes, tls, base, {}), *all_at_once)
    print(f"first run (install on 3 nodes): {first.seconds:.1f} s")
    assert first.rc == 0, first.output[-6000:]
    for name, node in nodes.items():
        assert version(node) == packages.old_version
        assert inside(node, "systemctl is-active gpufleet-daemon") == "active"
        assert "SERVING after" in health(node), name
        config = inside(node, "cat /etc/gpufleet/daemon.toml; stat -c '%U:%G %a' "
                              "/etc/gpufleet/daemon.toml /etc/gpufleet/tls/server.key")  # fmt: skip
        assert 'backend = "simulated"' in config and "[tls]" in config, config
        assert 'jwks_file = "/etc/gpufleet/jwks.json"' in config
        assert "sacct_poll_interval_s = 600" in config
        assert TOKEN not in config  # only its hash is written
        assert config.endswith("root:gpufleet 640\nroot:gpufleet 640"), config
    targets = json.loads((tmp_path / "file_sd.json").read_text())[0]["targets"]
    assert targets == [f"{name}:9401" for name in NODES]

    second = play(hosts, *all_at_once)
    print(f"second run (nothing to do): {second.seconds:.1f} s")
    assert second.rc == 0, second.output[-6000:]
    assert second.changed == dict.fromkeys([*NODES, "prometheus"], 0), second.output[-6000:]

    pids = {name: main_pid(node) for name, node in nodes.items()}
    settings = {"gpus": 2, "seed": 7, "sample_interval_s": 2.0}
    changed = json.dumps({"gpufleet_daemon_settings": settings})
    dry = play(hosts, *all_at_once, "--check", "--diff", "-e", changed)
    print(f"dry run (--check --diff, one setting changed): {dry.seconds:.1f} s")
    assert dry.rc == 0, dry.output[-6000:]
    changed_lines = [line for line in dry.output.splitlines()
                     if re.match(r"^[+-](?![+-]{2} )", line)]  # fmt: skip
    assert changed_lines == ["+sample_interval_s = 2.0"] * len(NODES), dry.output[-6000:]
    for name, node in nodes.items():
        assert "sample_interval_s" not in inside(node, "cat /etc/gpufleet/daemon.toml")
        assert main_pid(node) == pids[name]

    # Node 2 cannot serve on the new version: no GPU driver, so its health stays NOT_SERVING.
    bump = play(inventory(hosts, nodes, tls, {"gpufleet_deb": str(packages.new)},
                          {"gf-node-2": {"gpufleet_backend": "nvml"}}))  # fmt: skip
    print(f"rolling bump until node 2 (node 1, its check, node 2): {bump.seconds:.1f} s")
    assert bump.rc != 0, bump.output[-6000:]
    assert bump.failed.get("gf-node-2") == 1, bump.output[-6000:]
    assert "NOT_SERVING" in bump.output, bump.output[-6000:]
    first_node, failed_node, untouched = (nodes[name] for name in NODES)
    assert version(first_node) == packages.new_version
    assert "SERVING after" in health(first_node)
    assert main_pid(first_node) != pids["gf-node-1"]
    assert version(failed_node) == packages.new_version
    assert version(untouched) == packages.old_version
    assert main_pid(untouched) == pids["gf-node-3"]
    assert "gf-node-3" not in bump.output.split("PLAY RECAP")[0], bump.output[-6000:]
    # One node at a time: node 1 was checked healthy before node 2 was changed at all.
    checked = bump.output.index("ok: [gf-node-1]", bump.output.index("gRPC health is SERVING"))
    assert checked < bump.output.index("changed: [gf-node-2]"), bump.output[-6000:]
