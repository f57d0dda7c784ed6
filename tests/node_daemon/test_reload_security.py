"""#28, defect 3 and one item of 12, on a real daemon process and a real SIGHUP.

A reload that would lower the security posture (authentication off, TLS off, listen
widened, insecure on) is refused whole, as a WARNING, a journal event and a rejected
reload on /metrics, unless the new file says `[reload] allow_weaker_security = true`;
an empty daemon.toml (what `> daemon.toml` leaves for a moment) is the main case.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from tests.certs import Authority, write
from tests.conftest import wait_for
from tests.node_daemon.reload_harness import (
    Collected,
    ReloadableDaemon,
    bearer,
)
from tests.node_daemon.test_reload import START_USERS, TOKENS, config, tls_config, users_toml
from tests.tools import free_port

REFUSED = "reload rejected, the configuration in force is kept: "
ALLOW = "[reload]\nallow_weaker_security = true\n"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[ReloadableDaemon]:
    daemon = ReloadableDaemon(tmp_path, config(START_USERS)).start()
    yield daemon
    daemon.stop()


def anonymous_answers(node: ReloadableDaemon) -> list[grpc.StatusCode]:
    """QueryAudit (admin) and Reserve (operator) without credentials: their status codes."""
    until = int((time.time() + 3600) * 1000)
    calls = (
        (node.stub.QueryAudit, pb.QueryAuditRequest(limit=10)),
        (node.stub.Reserve, pb.ReserveRequest(gpu_indices=[0], holder="anyone",
                                              until_unix_ms=until, reason="test")),
    )  # fmt: skip
    codes = []
    for call, request in calls:
        try:
            call(request, timeout=5)
            codes.append(grpc.StatusCode.OK)
        except grpc.RpcError as exc:
            codes.append(exc.code())
    return codes


def reload_events(node: ReloadableDaemon, token: str | None, count: int) -> list[str]:
    """The summaries of the journal's CONFIG_RELOAD events, once there are `count`."""
    metadata = bearer(token) if token is not None else None
    stream = node.stub.StreamEvents(pb.StreamEventsRequest(after_seq=0), metadata=metadata)
    events = Collected(stream, "events")

    def summaries() -> list[str]:
        found = [e for e in events.items() if isinstance(e, pb.Event)]
        return [e.summary for e in found if e.kind == pb.EVENT_KIND_CONFIG_RELOAD]

    try:
        wait_for(lambda: len(summaries()) >= count, 10, f"{count} CONFIG_RELOAD events")
        return summaries()
    finally:
        events.close()


def test_an_empty_file_keeps_authentication_on_and_says_why(node: ReloadableDaemon) -> None:
    assert anonymous_answers(node) == [grpc.StatusCode.UNAUTHENTICATED] * 2

    result = node.reload("")

    assert result.startswith(REFUSED)
    assert f"{node.config} would lower the security posture: authentication turned off" in result
    assert "the file is empty" in result and "[reload] allow_weaker_security = true" in result
    assert f" WARNING gpufleet.daemon: {REFUSED}" in node.log()
    # Nothing of it applied: anonymous callers are still refused, the users still call.
    assert anonymous_answers(node) == [grpc.StatusCode.UNAUTHENTICATED] * 2
    caller = node.stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=bearer(TOKENS["bob"]))
    assert caller.user == "bob"
    metrics = node.metrics()
    assert 'gpufleet_config_reloads_total{result="rejected"} 1.0' in metrics
    assert "gpufleet_config_last_reload_successful 0.0" in metrics
    (event,) = reload_events(node, TOKENS["alice"], 1)
    assert event.startswith("config reload refused, the configuration in force is kept: ")
    assert "authentication turned off" in event
    # A file with content but no users is refused alike (no "empty" then).
    other = node.reload("[alerts.gpu_temp]\nwarning = 70\n")
    assert other.startswith(REFUSED) and "authentication turned off" in other
    assert "the file is empty" not in other
    assert node.alive()


def test_the_explicit_key_applies_the_lowering_with_a_warning_and_an_event(
    node: ReloadableDaemon,
) -> None:
    result = node.reload(ALLOW)

    assert result == "reload: 2 users removed (alice, bob)"
    assert (
        f" WARNING gpufleet.daemon: reload: {node.config} lowers the security posture, as its "
        "[reload] allow_weaker_security = true allows: authentication turned off"
    ) in node.log()
    assert anonymous_answers(node) == [grpc.StatusCode.OK] * 2  # as the file asked
    assert 'gpufleet_config_reloads_total{result="ok"} 1.0' in node.metrics()
    (event,) = reload_events(node, None, 1)
    assert event.startswith(f"config reload applied: {node.config} lowers the security")
    # Raising the posture again needs no key; the applied file's key does not carry over.
    assert node.reload(config(START_USERS)) == "reload: 2 users added (alice, bob)"
    assert node.reload("").startswith(REFUSED)
    assert anonymous_answers(node) == [grpc.StatusCode.UNAUTHENTICATED] * 2


def test_a_file_that_turns_tls_off_or_insecure_on_is_refused(tmp_path: Path) -> None:
    authority = Authority("CA")
    write(tmp_path, "server", authority.issue("localhost", server=True))
    tls = tls_config(tmp_path, "server", START_USERS)
    node = ReloadableDaemon(tmp_path, tls).start(grpc.ssl_channel_credentials(authority.pem))
    try:
        no_tls = node.reload(config(START_USERS))
        assert no_tls.startswith(REFUSED) and "TLS turned off ([tls] removed" in no_tls

        insecure = node.reload(tls.replace("[daemon]\n", "[daemon]\ninsecure = true\n"))
        assert insecure.startswith(REFUSED) and "insecure turned on" in insecure

        assert node.reload(ALLOW + config(START_USERS)) == "reload: no changes"
        assert "needs a restart: tls (" in node.log()  # allowed, and kept for the next start
        caller = node.stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=bearer(TOKENS["bob"]))
        assert caller.user == "bob" and node.alive()  # still over TLS
        assert 'gpufleet_config_reloads_total{result="rejected"} 2.0' in node.metrics()
    finally:
        node.stop()


def test_a_file_that_widens_listen_is_refused(tmp_path: Path) -> None:
    port = free_port()
    on = f'[daemon]\nlisten = "127.0.0.1:{port}"\n' + users_toml(START_USERS)
    node = ReloadableDaemon(tmp_path, on)
    node.process.listen = None  # the file's listen, not the flag's
    node.start()
    try:
        wide = node.reload(on.replace("127.0.0.1", "0.0.0.0"))
        assert wide.startswith(REFUSED)
        assert (
            f"listen widened from 127.0.0.1:{port} (loopback) to 0.0.0.0:{port} (every address)"
        ) in wide
        assert "needs a restart" not in node.log()  # refused whole, not kept for a restart
        assert node.reload(on.replace("127.0.0.1", "localhost")) == "reload: no changes"
    finally:
        node.stop()
