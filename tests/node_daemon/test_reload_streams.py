"""#28, one item of 12, on a real daemon process and a real SIGHUP: a stream of a user that
a reload removes or revokes ends within seconds, with why; the other users' streams go on.
(A retired JWKS key's streams: test_reload_rotation.py.)"""

from __future__ import annotations

import time
from pathlib import Path

import grpc

from tests.conftest import wait_for
from tests.node_daemon.reload_harness import Collected, ReloadableDaemon, more_than, open_streams
from tests.node_daemon.test_reload import TOKENS, config


def stream_errors(streams: tuple[Collected, Collected]) -> list[grpc.RpcError | None]:
    return [s.error for s in streams]


def test_a_stream_of_a_user_a_reload_revokes_ends_and_the_others_go_on(
    tmp_path: Path,
) -> None:
    users = {"alice": "admin", "bob": "viewer", "carol": "viewer"}
    node = ReloadableDaemon(tmp_path, config(users)).start()
    opened = {name: open_streams(node.stub, TOKENS[name]) for name in users}
    try:
        for samples, _ in opened.values():
            wait_for(more_than(samples, 0), 10, "a first sample batch on each stream")

        assert node.reload(config({"alice": "admin", "carol": "viewer"})) == (
            "reload: 1 user removed (bob)"
        )
        removed_at = time.monotonic()
        wait_for(lambda: None not in stream_errors(opened["bob"]), 6, "bob's streams ended")
        ended_s = time.monotonic() - removed_at
        for error in stream_errors(opened["bob"]):
            assert error is not None and error.code() == grpc.StatusCode.UNAUTHENTICATED
            assert error.details().startswith("stream ended by a config reload: unknown token")
        assert ended_s < 6

        revoked = (
            config({"alice": "admin", "carol": "viewer"}) + '[auth]\nrevoked_users = ["carol"]\n'
        )
        node.reload(revoked)
        wait_for(lambda: None not in stream_errors(opened["carol"]), 6, "carol's streams ended")
        for error in stream_errors(opened["carol"]):
            assert error is not None and error.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "revoked" in error.details()

        samples = opened["alice"][0]
        seen = samples.count()
        wait_for(more_than(samples, seen + 2), 10, "alice's stream delivering after both")
        assert stream_errors(opened["alice"]) == [None, None] and node.alive()
        assert "WARNING node_daemon.auth.interceptor: auth: StreamSamples stream of bob" in (
            node.log()
        )
    finally:
        for streams in opened.values():
            for stream in streams:
                stream.close()
        node.stop()
