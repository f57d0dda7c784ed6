"""weakenings: what counts as lowering the security posture on a reload (#28), each named."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpufleet.policy import Role
from node_daemon.auth.identity import User
from node_daemon.auth.jwks import Jwks
from node_daemon.auth.settings import AuthSettings, TlsSettings
from node_daemon.config import DaemonConfig
from node_daemon.listen import ListenAddressError
from node_daemon.security_posture import weakenings

ALICE = User("alice", Role.ADMIN, (), "a" * 64)
TLS = TlsSettings(Path("/tls/server.crt"), Path("/tls/server.key"), Path("/tls/ca.crt"), True)
JWKS = Jwks(keys=(), source="jwks.json")
SECURED = DaemonConfig(listen="10.0.0.7:50051", auth=AuthSettings((ALICE,), tls=TLS))


def test_an_unchanged_or_stronger_config_lowers_nothing() -> None:
    assert weakenings(SECURED, replace(SECURED)) == ()
    open_node = replace(SECURED, auth=AuthSettings(), insecure=True)
    assert weakenings(open_node, SECURED) == ()  # auth and TLS turned on, insecure off


def test_each_lowering_is_named() -> None:
    no_auth = replace(SECURED, auth=AuthSettings(tls=TLS))
    assert weakenings(SECURED, no_auth)[0].startswith("authentication turned off")
    no_tls = replace(SECURED, auth=AuthSettings((ALICE,)))
    assert weakenings(SECURED, no_tls)[0].startswith("TLS turned off")
    optional = replace(
        SECURED, auth=AuthSettings((ALICE,), tls=replace(TLS, require_client_cert=False))
    )
    assert weakenings(SECURED, optional) == (
        "client certificates no longer required ([tls] require_client_cert)",
    )
    assert weakenings(SECURED, replace(SECURED, insecure=True)) == ("insecure turned on",)
    everything = replace(no_auth, auth=AuthSettings(), listen="0.0.0.0:50051", insecure=True)
    assert len(weakenings(SECURED, everything)) == 4  # auth, TLS, listen, insecure


@pytest.mark.parametrize(
    ("before", "after", "widened"),
    [
        ("127.0.0.1:50051", "10.0.0.7:50051", True),
        ("127.0.0.1:50051", "[::]:50051", True),
        ("10.0.0.7:50051", "0.0.0.0:50051", True),
        ("localhost:50051", "node7.example.org:50051", True),  # a name may resolve anywhere
        ("0.0.0.0:50051", "10.0.0.7:50051", False),
        ("10.0.0.7:50051", "10.0.0.8:50051", False),  # another address, not more of them
        ("127.0.0.1:50051", "[::1]:50052", False),
    ],
)
def test_listen_widened_is_more_reach(before: str, after: str, widened: bool) -> None:
    found = weakenings(replace(SECURED, listen=before), replace(SECURED, listen=after))
    assert bool(found) is widened
    assert all(f.startswith(f"listen widened from {before}") for f in found)


def test_a_jwt_check_dropped_lowers_it_and_a_bad_listen_is_an_error() -> None:
    jwt = replace(SECURED, auth=AuthSettings(jwks=JWKS, issuer="https://idp", audience=("g",)))
    unchecked = replace(jwt, auth=AuthSettings(jwks=JWKS))
    assert weakenings(jwt, unchecked) == (
        "the JWT issuer check dropped ([auth] issuer removed)",
        "the JWT audience check dropped ([auth] audience removed)",
    )
    with pytest.raises(ListenAddressError):
        weakenings(SECURED, replace(SECURED, listen="nowhere"))


@pytest.mark.parametrize(
    ("before", "after", "widened"),
    [
        (None, "127.0.0.1:9400", True),  # turned on: who runs what, with no authentication
        ("127.0.0.1:9400", "0.0.0.0:9400", True),
        ("10.0.0.7:9400", "127.0.0.1:9400", False),
        ("10.0.0.7:9400", None, False),  # turned off
    ],
)
def test_metrics_listen_widened_lowers_it(before: str | None, after: str | None,
                                          widened: bool) -> None:  # fmt: skip
    found = weakenings(replace(SECURED, metrics_listen=before),
                       replace(SECURED, metrics_listen=after))  # fmt: skip
    assert bool(found) is widened
    assert all(f.startswith("metrics_listen widened from") for f in found)
