"""A process of ours that has used gRPC can fork (preexec_fn, user=) without its child aborting.

gRPC's fork handlers, left on, restart its pollers in the child, and a child that
closes its descriptors before exec then dies of SIGABRT now and then (3 of 1,000
forks here; once in CI, in tests/test_accounts.py). Importing any of our packages
switches them off (gpufleet/__init__.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

FORKS = 600  # with the handlers on, about 3 in 1,000 die: this run fails ~5 times in 6

SCRIPT = textwrap.dedent(
    """
    import {package}  # as the console, a daemon or the test suite starts
    import subprocess
    from concurrent import futures

    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(4))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{{port}}") as channel:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        # A real fork (preexec_fn), as the console's demo and the tests' daemons start.
        codes = [subprocess.run(["true"], preexec_fn=lambda: None).returncode
                 for _ in range({forks})]
    server.stop(None)
    print(sorted(code for code in codes if code != 0))
    """
)


@pytest.mark.parametrize("package", ["console", "node_daemon"])
def test_no_forked_child_of_a_grpc_process_aborts(package: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    script = SCRIPT.format(package=package, forks=FORKS)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", f"children that died: {done.stdout} {done.stderr[-600:]}"


def test_a_setting_the_environment_gives_is_kept() -> None:
    env = {**os.environ, "GRPC_ENABLE_FORK_SUPPORT": "1"}
    code = "import console, os; print(os.environ['GRPC_ENABLE_FORK_SUPPORT'])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "1", done.stderr
