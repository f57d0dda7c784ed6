"""Ask a gpufleet daemon's grpc.health.v1 Check until it answers SERVING or time runs out.

Run by the role on the node with the daemon's own interpreter
(/opt/gpufleet/venv/bin/python), which has grpcio and grpcio-health-checking.
Exit status 0 when SERVING; 1, with the last answer or error, when not within
--timeout seconds.
"""

from __future__ import annotations

import argparse
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def channel(address: str, ca: str | None, name: str | None) -> grpc.Channel:
    """A plaintext channel, or TLS checked against ca for the server name."""
    if ca is None:
        return grpc.insecure_channel(address)
    with open(ca, "rb") as pem:
        credentials = grpc.ssl_channel_credentials(root_certificates=pem.read())
    options = [("grpc.ssl_target_name_override", name)] if name else []
    return grpc.secure_channel(address, credentials, options=options)


def probe(address: str, timeout_s: float, ca: str | None, name: str | None) -> str:
    """SERVING, or what the daemon last answered (or why it did not)."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    with channel(address, ca, name) as chan:
        stub = health_pb2_grpc.HealthStub(chan)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return last
            try:
                answer = stub.Check(health_pb2.HealthCheckRequest(), timeout=min(5.0, left))
                last = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return last
            except grpc.RpcError as error:
                last = f"{error.code().name}: {error.details()}"
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))  # poll, bounded


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--ca")
    parser.add_argument("--name")
    args = parser.parse_args()
    started = time.monotonic()
    status = probe(args.address, args.timeout, args.ca, args.name)
    waited = time.monotonic() - started
    print(f"{args.address}: {status} after {waited:.1f} s")
    if status != "SERVING":
        print(f"{args.address} is not SERVING within {args.timeout:g} s: {status}; "
              "see journalctl -u gpufleet-daemon", file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
