"""How alert summaries count things: read by people at 3 a.m., so as sentences."""

from __future__ import annotations


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """`1 uncorrectable ECC error`, `2 uncorrectable ECC errors`, `1 process`, `3 processes`."""
    word = singular if count == 1 else (plural or singular + "s")
    return f"{count} {word}"
