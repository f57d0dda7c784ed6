"""What identifying a caller costs: JWT verification, a cached JWT, a static token.

    .venv/bin/python bench/jwt_verify.py                 # 2,000 rounds each
    .venv/bin/python bench/jwt_verify.py --rounds 200    # quicker

In process, no gRPC: the daemon's own code path for one bearer token
(node_daemon.auth.auth_state.AuthState.caller_for_token), timed with
time.perf_counter_ns over many calls, in microseconds per call:

- `verify` EdDSA and ES256: node_daemon.auth.jwt.verify alone (parse, signature,
  claims), a new token each round so nothing is cached;
- `first call` EdDSA and ES256: caller_for_token on a token it has not seen
  (verification, revocation check, cache insert);
- `cached`: caller_for_token on a token it verified before (the common case: a
  console sends the same token on every call);
- `static`: a gft_ token (SHA-256 and a dict lookup), for comparison;
- `refused`: a token signed by a key not in the JWKS (never cached);
- `WhoAmI over gRPC`: the whole round trip to a real in-process daemon on
  loopback (one channel, sequential calls), with a static token and with a
  (cached) JWT: what a console's call pays in all.

Prints one JSON object; `--out FILE` writes it too.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from results import print_report  # noqa: E402

from gpufleet.policy import Role  # noqa: E402
from gpufleet.v1 import node_pb2 as pb  # noqa: E402
from gpufleet.v1 import node_pb2_grpc as pb_grpc  # noqa: E402
from node_daemon.auth.auth_state import AuthState, Denied  # noqa: E402
from node_daemon.auth.identity import User  # noqa: E402
from node_daemon.auth.jwks import parse_jwks  # noqa: E402
from node_daemon.auth.jwt import JwtPolicy, verify  # noqa: E402
from node_daemon.auth.settings import AuthSettings  # noqa: E402
from node_daemon.auth.tokens import new_token, token_hash  # noqa: E402
from node_daemon.commands.backend_choice import simulated_backend  # noqa: E402
from node_daemon.config import DaemonConfig  # noqa: E402
from node_daemon.listen import parse_listen_address  # noqa: E402
from node_daemon.server import NodeDaemon  # noqa: E402
from tests.node_daemon.jwt_mint import Issuer, claims  # noqa: E402


def per_call_us(calls: list[Callable[[], object]]) -> dict[str, float]:
    """Each callable once, timed one by one: median, p99 and mean in µs."""
    times = []
    for call in calls:
        start = time.perf_counter_ns()
        call()
        times.append((time.perf_counter_ns() - start) / 1000)
    times.sort()
    return {"median_us": round(statistics.median(times), 2),
            "p99_us": round(times[int(len(times) * 0.99) - 1], 2),
            "mean_us": round(statistics.fmean(times), 2)}  # fmt: skip


def refuse(state: AuthState, token: str) -> None:
    try:
        state.caller_for_token(token, "peer")
    except Denied:
        return
    raise AssertionError("a forged token was accepted")


def over_grpc(settings: AuthSettings, tokens: dict[str, str], rounds: int) -> dict[str, object]:
    """WhoAmI round trips to a real daemon, per kind of token."""
    with tempfile.TemporaryDirectory() as state_dir:
        config = DaemonConfig(listen="127.0.0.1:0", backend="simulated", gpus=1,
                              state_dir=Path(state_dir), auth=settings)  # fmt: skip
        daemon = NodeDaemon(config, simulated_backend(config), parse_listen_address(config.listen))
        daemon.start()
        try:
            with grpc.insecure_channel(str(daemon.address)) as channel:
                stub = pb_grpc.NodeServiceStub(channel)
                results: dict[str, object] = {}
                for kind, token in tokens.items():
                    metadata = (("authorization", f"Bearer {token}"),)
                    call = partial(stub.WhoAmI, pb.WhoAmIRequest(), timeout=5, metadata=metadata)
                    results[f"WhoAmI over gRPC, {kind}"] = per_call_us([call] * rounds)
                return results
        finally:
            daemon.stop(grace_s=0.5)


def run(rounds: int) -> dict[str, object]:
    issuer = Issuer()
    static = new_token()
    settings = AuthSettings((User("sam", Role.ADMIN, (), token_hash(static)),),
                            jwks=parse_jwks(issuer.jwks(), "bench"),
                            revoked_jti=frozenset({f"r-{i}" for i in range(1000)}))  # fmt: skip
    policy = JwtPolicy(settings.jwks)  # type: ignore[arg-type]
    results: dict[str, object] = {}
    for alg, kid in (("EdDSA", "ed-1"), ("ES256", "ec-1")):
        tokens = [issuer.mint(claims(f"u{i}", groups=("ml",), jti=f"j{i}"), kid=kid)
                  for i in range(rounds)]  # fmt: skip
        results[f"verify {alg}"] = per_call_us([partial(verify, t, policy) for t in tokens])
        state = AuthState(settings)
        first = [partial(state.caller_for_token, t, "peer") for t in tokens]
        results[f"first call {alg}"] = per_call_us(first)
        results[f"cached {alg}"] = per_call_us([first[0]] * rounds)
    forged = [issuer.mint(claims(f"f{i}"), key=issuer.stranger) for i in range(rounds)]
    state = AuthState(settings)
    results["refused (other key)"] = per_call_us([partial(refuse, state, t) for t in forged])
    results["static gft_ token"] = per_call_us(
        [partial(state.caller_for_token, static, "peer")] * rounds
    )
    results.update(over_grpc(settings, {"static": static, "jwt": tokens[0]}, rounds))
    return {"rounds": rounds, "python": platform.python_version(),
            "machine": platform.processor() or platform.machine(), "results": results}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="20 rounds: does it still run?")
    args = parser.parse_args()
    report = run(20 if args.smoke else args.rounds)
    print_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
