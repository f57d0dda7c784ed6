"""Slurm's compact strings read into the console's model, and the client's refusals (no Slurm)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from console.connections.slurm_rest import SlurmAccess, reservation_words
from console.fleet.slurm_model import (
    INFINITE,
    NO_VAL,
    ReservationAsk,
    SlurmNode,
    gpus_asked,
    minutes_or_unlimited,
    parse_gres,
)


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("gpu:8", {"gpu": 8}),
        ("gpu:a100:4(S:0-1),gpu:h100:2(IDX:0,3)", {"gpu:a100": 4, "gpu:h100": 2}),
        ("gpu:0", {"gpu": 0}),
        ("gpu:2(IDX:0-1),nic:1", {"gpu": 2, "nic": 1}),
        ("", {}),
        ("(null)", {}),
    ],
)
def test_gres_lists_become_counts(text: str, counts: dict[str, int]) -> None:
    assert parse_gres(text) == counts


@pytest.mark.parametrize(
    ("tres_req", "per_job", "per_node", "nodes", "gpus"),
    [
        ("cpu=1,mem=1G,node=1,billing=1,gres/gpu=4,gres/gpu:a100=4", "", "", 1, 4),
        ("cpu=2,gres/gpu:a100=2,gres/gpu:h100=1", "", "", 1, 3),
        ("cpu=1,mem=1G,node=2", "", "gres:gpu:3", 2, 6),
        ("cpu=1", "gres:gpu:a100:5", "", 1, 5),
        ("cpu=1,mem=1G", "", "", 1, None),
        ("cpu=1", "", "gres:gpus:2", 1, None),  # not "gpu": another GRES
    ],
)
def test_gpus_asked_from_whichever_tres_says(
    tres_req: str, per_job: str, per_node: str, nodes: int, gpus: int | None
) -> None:
    assert gpus_asked(tres_req, per_job, per_node, nodes) == gpus


def test_slurms_sentinels_mean_no_time_limit() -> None:
    assert minutes_or_unlimited(90) == timedelta(minutes=90)
    assert minutes_or_unlimited(INFINITE) is None
    assert minutes_or_unlimited(NO_VAL) is None


def test_free_gpus_count_typed_gres_once() -> None:
    node = SlurmNode("n1", "mixed", (), "", {"gpu:a100": 8}, {"gpu:a100": 3})
    assert (node.gpus, node.gpus_free, node.drained) == (8, 5, False)
    assert SlurmNode("n2", "idle", ("DRAIN",), "fan").drained
    assert SlurmNode("n3", "down", ("DRAIN",), "fan").down


def test_a_reservation_needs_whom_where_and_how_long() -> None:
    with pytest.raises(ValueError, match="users or accounts"):
        ReservationAsk("r", nodes=("n1",), duration=timedelta(hours=1))
    with pytest.raises(ValueError, match="nodes"):
        ReservationAsk("r", nodes=(), users=("ada",), duration=timedelta(hours=1))
    with pytest.raises(ValueError, match="end or a duration"):
        ReservationAsk("r", nodes=("n1",), users=("ada",))


def test_reservation_words_send_aware_times_as_unix_time() -> None:
    start = datetime(2026, 12, 24, 8, 0, tzinfo=UTC)
    ask = ReservationAsk("xmas", nodes=("n1", "n2"), users=("ada", "bob"), start=start,
                         duration=timedelta(hours=2), flags=("IGNORE_JOBS",))  # fmt: skip
    assert reservation_words(ask) == [
        "reservationname=xmas", "nodes=n1,n2", "users=ada,bob",
        f"starttime=uts{int(start.timestamp())}", "duration=120", "flags=IGNORE_JOBS",
    ]  # fmt: skip


@pytest.mark.parametrize("url", ["http://slurm.example.org:6820", "http://10.0.0.5:6820"])
def test_a_token_never_crosses_the_network_in_clear(url: str) -> None:
    with pytest.raises(ValueError, match="plain http beyond this machine"):
        SlurmAccess(url, "ada", "token")


def test_loopback_and_https_are_accepted_and_the_token_is_not_shown() -> None:
    for url in ("http://127.0.0.1:6820", "http://localhost:6820", "https://slurm.example.org"):
        assert "s3cret" not in repr(SlurmAccess(url, "ada", "s3cret"))
    with pytest.raises(ValueError, match="http:// or https://"):
        SlurmAccess("slurm.example.org:6820", "ada", "t")
