"""Headless Debian Chromium driven by Playwright, for the dashboard's browser tests.

Never downloads a browser: Playwright is pointed at the system binary (``/usr/bin/chromium``,
or ``SWITCHYARD_CHROMIUM``), which ``make test`` installs (``make chromium``). When it is
missing the tests fail with the command that installs it; ``SWITCHYARD_SKIP_BROWSER=1`` turns
that failure into a skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

INSTALL_HINT = (
    "the dashboard's browser tests need Debian's chromium and Playwright's Python package: "
    "apt-get install -y chromium chromium-driver (`make chromium` does this as root) and "
    "pip install playwright (the dev extra; no browser download); "
    "or set SWITCHYARD_SKIP_BROWSER=1 to skip them"
)

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def chromium_binary() -> str:
    """The system Chromium, or a test failure (a skip with ``SWITCHYARD_SKIP_BROWSER=1``)."""
    found = os.environ.get("SWITCHYARD_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        found = None
    if found is None:
        if os.environ.get("SWITCHYARD_SKIP_BROWSER") == "1":
            pytest.skip("chromium or playwright is not installed (SWITCHYARD_SKIP_BROWSER=1)")
        pytest.fail(INSTALL_HINT)
    return found


@contextlib.contextmanager
def browser_context(viewport: tuple[int, int] = (1280, 900)) -> Iterator[Any]:
    """A fresh Chromium profile (its own temporary user-data-dir), closed afterwards."""
    binary = chromium_binary()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="switchyard-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=binary,
            headless=True,
            args=FLAGS,
            viewport={"width": viewport[0], "height": viewport[1]},
        )
        try:
            yield context
        finally:
            context.close()
