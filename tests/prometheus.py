"""A real Prometheus that scrapes one daemon each second: for the tests of the daemon's
/metrics and of the console's plots from Prometheus, and bench/history_range_load.py."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.tools import free_port


def prometheus_ready(url: str) -> bool:
    """Whether the Prometheus at `url` answers its readiness check."""
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def scraping_prometheus(
    binary: str, target: str, workdir: Path, tsdb: Path | None = None, ready_s: float = 30
) -> Iterator[str]:
    """Prometheus (`binary`) scraping `target` (HOST:PORT) every second; yields its URL.

    Its config goes in `workdir`, its store in `tsdb` (a backfilled one, say) or
    `workdir`/tsdb. Ready when it says so, within `ready_s`; stopped afterwards.
    """
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: gpufleet\n    static_configs:\n"
        f"      - targets: ['{target}']\n"
    )
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tsdb or workdir / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while not prometheus_ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Prometheus did not start within {ready_s:g} s")
            time.sleep(0.1)  # another process's server: its answer is all there is to poll
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
