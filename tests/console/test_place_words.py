"""What typed text finds a GPU in the keyboard's choosers (console/fleet/place_words.py)."""

from __future__ import annotations

import pytest

from console.fleet.place_words import place_label, place_matches

NODES = ("gpu-node-02", "gpu-node-03")
GPUS = range(16)


def found(typed: str) -> list[str]:
    return [place_label(n, g) for n in NODES for g in GPUS if place_matches(typed, n, g)]


@pytest.mark.parametrize(
    "typed", ["node-02 3", "gpu-node-02:3", "gpu-node-02 GPU 3", "  GPU-NODE-02   gpu 3 "]
)
def test_a_node_and_an_index_find_that_gpu_alone(typed: str) -> None:
    assert found(typed) == ["gpu-node-02 · GPU 3"]


def test_a_number_is_the_index_exactly_never_a_part_of_a_name_or_a_longer_index() -> None:
    assert found("3") == ["gpu-node-02 · GPU 3", "gpu-node-03 · GPU 3"]
    assert found("node-02 13") == ["gpu-node-02 · GPU 13"]
    assert found("node-03 gpu 03") == ["gpu-node-03 · GPU 3"]


def test_words_narrow_and_nothing_typed_keeps_every_gpu() -> None:
    assert len(found("")) == len(NODES) * len(GPUS)
    assert len(found("node-03")) == len(GPUS)
    assert found("node-04 3") == []
    assert found("gpu-node-02:") == found("node-02")
