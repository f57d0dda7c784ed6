"""The report as PDF, through a converter found on PATH: WeasyPrint, wkhtmltopdf, or a
Chromium-family browser printing headless. None installed: --pdf is a usage error,
said before any node is asked.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

CONVERT_TIMEOUT_S = 120.0
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
NONE_INSTALLED = (
    "--pdf: no PDF converter is installed (looked on PATH for weasyprint, wkhtmltopdf, "
    f"{', '.join(BROWSERS)}); install one, or leave out --pdf for the HTML report alone"
)

Converter = Callable[[Path, Path], list[str]]  # (html, pdf) → the command line


def find_converter() -> Converter | None:
    """The first converter on PATH, as a maker of its command line; None where none is."""
    if shutil.which("weasyprint"):
        return lambda page, pdf: ["weasyprint", str(page), str(pdf)]
    if shutil.which("wkhtmltopdf"):
        return lambda page, pdf: ["wkhtmltopdf", "--quiet", str(page), str(pdf)]
    browser = next((b for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        return None

    def printed(page: Path, pdf: Path) -> list[str]:
        return [browser, "--headless", "--disable-gpu", "--no-pdf-header-footer",
                f"--print-to-pdf={pdf}", page.resolve().as_uri()]  # fmt: skip

    return printed


def convert(converter: Converter, page: Path) -> tuple[Path, str]:
    """PAGE.html → PAGE.pdf beside it; the PDF's path and "" when done, else what went wrong."""
    pdf = page.with_suffix(".pdf")
    argv = converter(page, pdf)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CONVERT_TIMEOUT_S,
                              check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return pdf, f"{argv[0]} did not finish ({exc})"
    if done.returncode != 0 or not pdf.is_file():
        lines = done.stderr.strip().splitlines()
        return pdf, f"{argv[0]} exited {done.returncode}" + (f": {lines[-1]}" if lines else "")
    return pdf, ""
