"""Aligned text tables for people; scripts read `--json` instead."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def local_time(unix_ms: int) -> str:
    """A time people read: local, to the second; '-' when unknown."""
    if unix_ms <= 0:
        return "-"
    return dt.datetime.fromtimestamp(unix_ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.0f} MiB"
