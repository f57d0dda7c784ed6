"""The console's Slurm client against a broken or hostile slurmrestd (a real HTTP stand-in).

Each read goes through the console's own SlurmLink (its worker thread, the
bounded HTTP exchange, the tolerant readers) to a threaded stand-in server on
loopback. Junk of every kind becomes an error in the read's SlurmView (what the
Slurm panel shows), a huge answer is cut without the console's memory growing,
a drip ends at the call's deadline and the next read is not stuck behind it,
and a redirect is not followed: its target never sees the token.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from console.connections.manager import UpdateInbox
from console.connections.slurm_link import READ, SlurmLink
from console.fleet.model import FleetModel
from console.fleet.placement import Verdict
from console.fleet.slurm_view import SlurmView
from console.fleet.updates import QueryResult
from console.qt.frame_pump import FramePump
from console.qt.slurm_watch import SlurmWatch
from console.settings import SlurmProfile
from console.views.slurm.slurm_jobs_panel import SlurmJobsPanel
from tests.conftest import wait_for
from tests.console.slurmrestd_standin import (
    Answer,
    Standin,
    as_json,
    drip,
    not_http,
    raw,
    redirected_elsewhere,
    streamed,
)

TOKEN = "eyJhbGciOiJIUzI1NiJ9.the-users-own-slurm-token.c2lnbmF0dXJl"
MIB = 1 << 20
WAIT_S = 30.0  # what a read may take here at the most, on a loaded machine
GOOD_JOB = {"job_id": 42, "name": "train", "user_name": "ada", "job_state": "PENDING",
            "partition": "gpu", "priority": 10, "submit_time": 1_796_000_000}  # fmt: skip
# Lists 5,000 deep, spaced out so that the density check lets it through to the parser.
NESTED = b'{"jobs": ' + (b"[" + b" " * 70) * 5_000 + b"]" * 5_000 + b"}"
NESTED_NAME = json.dumps({"jobs": [{"job_id": 7, "name": json.loads("[" * 200 + "]" * 200)}]})


@dataclass
class Console:
    """The console's Slurm link to a stand-in, and the inbox its answers land in."""

    link: SlurmLink
    inbox: UpdateInbox
    ids: Iterator[int]

    def read(self) -> QueryResult:
        """One read of the queue, nodes and reservations, and its answer."""
        query_id = next(self.ids)
        self.link.read(query_id).result(timeout=WAIT_S)
        answers = [u for u in self.inbox.drain() if isinstance(u, QueryResult)]
        assert [(a.what, a.query_id) for a in answers] == [(READ, query_id)], answers
        assert isinstance(answers[0].payload, SlurmView)
        return answers[0]


@pytest.fixture
def standin() -> Iterator[Standin]:
    server = Standin()
    yield server
    server.close()


def console_of(standin: Standin, **limits: float) -> Console:
    profile = replace(SlurmProfile(standin.url, "ada"), **limits)  # type: ignore[arg-type]
    inbox = UpdateInbox()
    return Console(SlurmLink(profile, inbox, lambda: TOKEN), inbox, iter(range(1, 1000)))


@pytest.fixture
def console(standin: Standin) -> Iterator[Console]:
    made = console_of(standin)
    yield made
    made.link.close()


JUNK: list[tuple[str, str, Answer, str]] = [
    ("a list, not an object", "/jobs", as_json([]), "the answer is a list of 0, not an object"),
    ("no jobs at all", "/jobs", as_json({"meta": {}}), 'the answer has no "jobs"'),
    ("jobs a string", "/jobs", as_json({"jobs": "lots"}), '"jobs" is the string \'lots\''),
    ("jobs an object", "/jobs", as_json({"jobs": {"1": {}}}), '"jobs" is an object of 1 keys'),
    ("a job a number", "/jobs", as_json({"jobs": [42]}), "jobs[0] is 42, not an object"),
    ("a job without id", "/jobs", as_json({"jobs": [{"name": "x"}]}), 'no "job_id"'),
    ("an id a string", "/jobs", as_json({"jobs": [{"job_id": "42"}]}),
     '"job_id" is the string \'42\', not a whole number'),
    ("an id 1e400", "/jobs", raw(b'{"jobs": [{"job_id": 1e400}]}'),
     '"job_id" is Infinity, not a whole number'),
    ("an id of 31 digits", "/jobs", as_json({"jobs": [{"job_id": 10**30}]}),
     "beyond Slurm's 32 bits"),
    ("an id of 5000 digits", "/jobs", raw(b'{"jobs": [{"job_id": ' + b"9" * 5000 + b"}]}"),
     "not JSON (Exceeds the limit (4300 digits)"),
    ("a time past year 9999", "/jobs", as_json({"jobs": [{"job_id": 1, "submit_time": 10**15}]}),
     "jobs[0] (job 1): \"submit_time\" is 1000000000000000, not a time before the year 10000"),
    ("a negative time limit", "/jobs", as_json({"jobs": [{"job_id": 1, "time_limit": -5}]}),
     '"time_limit" is -5, beyond Slurm\'s 32 bits'),
    ("a GPU count of 20 digits", "/jobs",
     as_json({"jobs": [{"job_id": 1, "tres_per_node": "gres:gpu:" + "9" * 20}]}),
     "more digits than Slurm's 32 bits"),
    ("nested 5,000 deep", "/jobs", raw(NESTED), "JSON nested too deep to read"),
    ("20,000 tiny jobs", "/jobs", raw(b'{"jobs": [' + b",".join([b'{"job_id": 1}'] * 20_000)
                                      + b"]}"),
     "20002 objects and lists in 280011 bytes: far more than Slurm's answers hold"),
    ("a name nested 200 deep", "/jobs", raw(NESTED_NAME.encode()),
     '"name" is a list of 1, not a string'),
    ("HTML", "/jobs", raw(b"<html><body>It works!</body></html>"), "not JSON"),
    ("nothing", "/jobs", raw(b""), "with nothing (no JSON at all)"),
    ("errors not a list", "/jobs", as_json({"jobs": [], "errors": "bad"}),
     '"errors" that is not a list'),
    ("not HTTP", "/jobs", not_http(b"SSH-2.0-OpenSSH_9.2\r\n"), "not an HTTP answer"),
    ("flags a number", "/nodes", as_json({"nodes": [{"name": "gpu01", "state_flags": 5}]}),
     "nodes[0] ('gpu01'): \"state_flags\" is 5, not a list of strings"),
    ("flags a string", "/nodes", as_json({"nodes": [{"name": "gpu01", "state_flags": "DRAIN"}]}),
     "\"state_flags\" is the string 'DRAIN', not a list of strings"),
    ("a reservation's end a float", "/reservations",
     as_json({"reservations": [{"name": "r", "end_time": 1.5}]}),
     '"end_time" is 1.5, not a time in seconds'),
]  # fmt: skip


@pytest.mark.parametrize(("path", "answer", "said"), [j[1:] for j in JUNK],
                         ids=[j[0] for j in JUNK])  # fmt: skip
def test_every_junk_answer_is_a_read_error_that_says_what_is_wrong(
    standin: Standin, console: Console, path: str, answer: Answer, said: str
) -> None:
    standin.answers[path] = answer
    result = console.read()
    assert not result.ok
    assert isinstance(result.payload, SlurmView) and result.payload.error == result.message
    assert said in result.message and f"GET {path}" in result.message
    standin.answers.clear()
    assert console.read().ok  # the link reads on as soon as slurmrestd makes sense again


def test_a_failure_is_logged_once_while_it_lasts_and_never_with_the_token(
    standin: Standin, console: Console, caplog: pytest.LogCaptureFixture
) -> None:
    # A server that echoes the token back in its error: not shown, not logged.
    echo = {"errors": [{"description": f"token {TOKEN} not accepted", "error": "Unauthorized"}]}
    standin.answers["/jobs"] = as_json(echo, status=500)
    with caplog.at_level(logging.WARNING, logger="console.connections.slurm_link"):
        messages = [console.read().message for _ in range(3)]
    assert messages[0] == messages[2] and "token [token] not accepted: Unauthorized" in messages[0]
    assert TOKEN not in messages[0]
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and "[token]" in logged[0] and TOKEN not in logged[0]


def peak_rss_growth_mib(act: concurrent.futures.Future[None]) -> float:
    """How far the process's peak resident memory rose while `act` ran (Linux)."""
    before = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")  # VmHWM := VmRSS
    act.result(timeout=WAIT_S)
    return (_status_kib("VmHWM") - before) / 1024


def _status_kib(key: str) -> int:
    line = next(li for li in Path("/proc/self/status").read_text().splitlines()
                if li.startswith(f"{key}:"))  # fmt: skip
    return int(line.split()[1])


def test_a_100_mb_answer_is_cut_and_the_console_s_memory_stays_small(standin: Standin) -> None:
    console = console_of(standin, max_answer_bytes=4 * MIB)
    try:
        standin.answers["/jobs"] = streamed(100_000_000)
        console.link.read(0).result(timeout=WAIT_S)  # the link's worker and client made first
        console.inbox.drain()
        grown = peak_rss_growth_mib(console.link.read(1))
        result = console.inbox.drain()[0]
    finally:
        console.link.close()
    assert isinstance(result, QueryResult) and not result.ok
    assert "the answer is over the 4 MiB an answer may be (not read further)" in result.message
    assert grown < 30, f"the process's peak memory grew {grown:.0f} MiB"


def test_a_declared_length_over_the_limit_is_refused_before_reading(standin: Standin) -> None:
    console = console_of(standin, max_answer_bytes=1 * MIB)
    standin.answers["/jobs"] = as_json({"jobs": [], "pad": "x" * (2 * MIB)})
    try:
        result = console.read()
    finally:
        console.link.close()
    assert "the answer would be 2097" in result.message and "over the 1 MiB" in result.message


@pytest.mark.parametrize("in_headers", [False, True], ids=["body", "headers"])
def test_a_drip_ends_by_the_deadline_and_the_next_read_is_not_stuck(
    standin: Standin, in_headers: bool
) -> None:
    # A byte every 0.3 s: a timeout per socket read never fires; the whole call's does.
    console = console_of(standin, timeout_s=1.5)
    standin.answers["/jobs"] = drip(0.3, in_headers)
    try:
        started = time.monotonic()
        first = console.link.read(1)
        wait_for(lambda: standin.paths_seen, WAIT_S, "the dripping read to reach the stand-in")
        standin.answers.clear()  # the next read finds a good slurmrestd
        second = console.link.read(2)  # asked while the first drips
        first.result(timeout=WAIT_S)
        first_s = time.monotonic() - started
        second.result(timeout=WAIT_S)
        both_s = time.monotonic() - started
    finally:
        console.link.close()
    failed, read = console.inbox.drain()
    assert isinstance(failed, QueryResult) and isinstance(read, QueryResult)
    assert not failed.ok and "no whole answer within 1.5 s" in failed.message
    assert read.ok and read.query_id == 2
    assert first_s < 1.5 + 5 and both_s < 1.5 + 10, (first_s, both_s)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_not_followed_and_its_target_never_sees_the_token(
    standin: Standin, console: Console, status: int
) -> None:
    jobs = "/slurm/v0.0.38/jobs"
    with redirected_elsewhere(standin, "/jobs", jobs, status) as (elsewhere, target):
        result = console.read()
    assert elsewhere.paths_seen == [] and elsewhere.tokens_seen == []
    assert standin.tokens_seen == [TOKEN]  # slurm_url itself got it, once
    assert not result.ok and f"with a redirect (HTTP {status}) to {target}: not followed" in (
        result.message
    )


def test_the_slurm_panel_shows_a_junk_answer_as_its_last_read_failing(
    qtbot: QtBot, standin: Standin, console: Console
) -> None:
    # The console's own parts: the frame pump hands the link's answers to the watch and panel.
    pump = FramePump(console.inbox, FleetModel(), fps=30)
    watch = SlurmWatch(console.link)
    panel = SlurmJobsPanel(watch, lambda _: (None, Verdict(False, "not here")))
    qtbot.addWidget(panel)
    pump.queryFinished.connect(watch.on_query_finished)
    pump.start()
    try:
        standin.answers["/jobs"] = as_json({"jobs": [GOOD_JOB]})
        watch.read_now()
        qtbot.waitUntil(lambda: panel.model.rowCount() == 1, timeout=10_000)
        standin.answers["/jobs"] = as_json({"jobs": [{**GOOD_JOB, "priority": "high"}]})
        watch.read_now()
        qtbot.waitUntil(lambda: "last read failed" in panel.status.text(), timeout=10_000)
    finally:
        pump.stop()
        watch.stop()
    said = panel.status.text()
    assert "something that is not a Slurm job list" in said
    assert "jobs[0] (job 42): \"priority\" is the string 'high', not a whole number" in said
    assert panel.status.toolTip() in said and panel.model.rowCount() == 1  # the last good read


def test_a_failure_outside_slurm_s_answers_is_shown_too(caplog: pytest.LogCaptureFixture) -> None:
    # No settings file makes this profile; the link's last net catches what else may fail.
    inbox = UpdateInbox()
    link = SlurmLink(SlurmProfile("ftp://slurm.example", "ada"), inbox, lambda: TOKEN)
    try:
        with caplog.at_level(logging.WARNING, logger="console.connections.slurm_link"):
            link.read(1).result(timeout=WAIT_S)
    finally:
        link.close()
    [answer] = inbox.drain()
    assert isinstance(answer, QueryResult) and not answer.ok
    assert answer.message.startswith("reading Slurm failed: ValueError: slurm url must be")
    assert any(r.exc_info for r in caplog.records)  # a bug of ours: its traceback logged
