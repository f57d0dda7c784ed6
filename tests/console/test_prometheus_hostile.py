"""The console's Prometheus client against a broken or hostile store (issue #28, defect 8's twin).

The plots of older ranges ask a Prometheus-compatible store with the operator's
bearer token, as the Slurm panel asks slurmrestd with their Slurm token, and
the same three holes were open: a body of any size buffered, a drip holding a
read for as long as it liked, and a redirect followed with the token to
wherever it pointed. A real HTTP stand-in (tests/console/slurmrestd_standin.py)
answers each; every one must be a PrometheusError that says what is wrong.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.connections.bounded_http import MIB, HttpLimits
from console.connections.prometheus_range import (
    PrometheusError,
    PrometheusRange,
    PrometheusSource,
)
from console.fleet.history_loader import HistoryAsk
from console.fleet.history_range import PROMETHEUS
from tests.console.slurmrestd_standin import (
    Standin,
    as_json,
    drip,
    raw,
    redirected_elsewhere,
    streamed,
)

QUERY = "/api/v1/query_range"
TOKEN = "prom-secret-token"
ASK = HistoryAsk("node:1", 0, "GPU-0", PROMETHEUS, 1_000.0, 1_060.0, 15.0)
GOOD = {"status": "success", "data": {"resultType": "matrix", "result": []}}


@pytest.fixture
def standin() -> Iterator[Standin]:
    server = Standin()
    yield server
    server.close()


def fetch(standin: Standin, tmp_path: Path, limits: HttpLimits | None = None) -> object:
    token = tmp_path / "prometheus.token"
    token.write_text(TOKEN)
    client = PrometheusRange(PrometheusSource(standin.url, token_file=token))
    if limits is not None:
        client = PrometheusRange(client.source, limits)
    try:
        return asyncio.run(client.fetch(ASK))
    finally:
        client.close()


def refusal(standin: Standin, tmp_path: Path, limits: HttpLimits | None = None) -> str:
    with pytest.raises(PrometheusError) as raised:
        fetch(standin, tmp_path, limits)
    return str(raised.value)


def test_a_good_answer_is_read(standin: Standin, tmp_path: Path) -> None:
    standin.answers[QUERY] = as_json(GOOD)
    assert fetch(standin, tmp_path) is not None
    assert standin.authorizations_seen == [f"Bearer {TOKEN}"]


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_not_followed_and_its_target_never_sees_the_token(
    standin: Standin, tmp_path: Path, status: int
) -> None:
    with redirected_elsewhere(standin, QUERY, QUERY, status) as (elsewhere, target):
        message = refusal(standin, tmp_path)
    assert elsewhere.paths_seen == [] and elsewhere.authorizations_seen == []
    assert f"redirect (HTTP {status}) to {target!r}: not followed" in message
    assert TOKEN not in message


def test_a_100_mb_answer_is_cut_at_the_limit(standin: Standin, tmp_path: Path) -> None:
    standin.answers[QUERY] = streamed(100 * MIB)
    message = refusal(standin, tmp_path, HttpLimits(4 * MIB, 30.0))
    assert "over the 4 MiB an answer may be" in message


def test_a_drip_ends_by_the_deadline(standin: Standin, tmp_path: Path) -> None:
    standin.answers[QUERY] = drip(0.3)
    started = time.monotonic()
    message = refusal(standin, tmp_path, HttpLimits(MIB, 1.5))
    # Bounded by the deadline, not by a per-read timeout the drip keeps renewing; the
    # margin is wide for a loaded machine, and the drip alone would never end.
    assert time.monotonic() - started < 20
    assert "within 1.5 s" in message


def matrix(result: object) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}},
                      allow_nan=True).encode()  # fmt: skip


JUNK = {
    "list": b"[]",
    "no-data": json.dumps({"status": "success"}).encode(),
    "data-a-string": json.dumps({"status": "success", "data": "x"}).encode(),
    "result-a-number": matrix(5),
    "series-a-string": matrix(["x"]),
    "value-not-a-number": matrix([{"metric": {}, "values": [[1000, "hot"]]}]),
    "stamp-huge": matrix([{"metric": {}, "values": [[1e400, "1"]]}]).replace(b"Infinity", b"1e400"),
    "nested": b"[" * 100_000 + b"]" * 100_000,
    "html": b"<html>gateway</html>",
    "empty": b"",
    "error-status": json.dumps({"status": "error", "error": "bad query"}).encode(),
}


@pytest.mark.parametrize("kind", sorted(JUNK))
def test_every_junk_answer_is_an_error_that_says_so(
    standin: Standin, tmp_path: Path, kind: str
) -> None:
    standin.answers[QUERY] = raw(JUNK[kind])
    message = refusal(standin, tmp_path)
    assert message.startswith("Prometheus")
    assert TOKEN not in message


def test_an_error_status_without_json_is_said_by_its_status(
    standin: Standin, tmp_path: Path
) -> None:
    standin.answers[QUERY] = raw(b"upstream down", 502)
    assert refusal(standin, tmp_path).endswith("HTTP 502 Bad Gateway")
