"""A real headless browser for the report and viewer tests: Playwright's Python API driving a
Chromium that is already installed (Debian's ``chromium``; Playwright downloads no browser).

Without one the tests skip and say how to get one (``AES_BROWSER=1 bash launchers/setup.sh``
installs both); with ``AES_REQUIRE_BROWSER=1`` (CI, see ``.ci/run``) a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from typing import Iterator

import pytest

LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
HOW = ("install Debian's chromium and Playwright's Python API (apt-get install -y chromium; "
       ".venv/bin/pip install playwright; or AES_BROWSER=1 bash launchers/setup.sh), or point AES_CHROMIUM "
       "at a Chromium binary")


def _unavailable(reason: str) -> None:
    message = f"no headless browser: {reason}; {HOW}"
    if os.environ.get("AES_REQUIRE_BROWSER") == "1":
        pytest.fail(message + " (AES_REQUIRE_BROWSER=1: browser tests must run here)")
    pytest.skip(message)


def chromium_path() -> str | None:
    explicit = os.environ.get("AES_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@contextmanager
def browser_page(width: int = 1400, height: int = 1000) -> Iterator["object"]:
    """A Playwright page in a fresh headless Chromium (its own temporary profile dir)."""
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright's Python package is not installed")
    executable = chromium_path()
    if executable is None:
        _unavailable("no Chromium binary found (" + ", ".join(CANDIDATES) + ")")
    profile = tempfile.mkdtemp(prefix="aes-chromium-")
    try:
        with sync_playwright() as p:
            try:
                # Playwright owns --user-data-dir: a persistent context is the same as passing it
                context = p.chromium.launch_persistent_context(
                    profile, executable_path=executable, headless=True, args=LAUNCH_ARGS,
                    viewport={"width": width, "height": height}, timeout=60_000)
            except PlaywrightError as exc:
                _unavailable(f"{executable} did not start: {str(exc).splitlines()[0]}")
            try:
                page = context.new_page()
                page.set_default_timeout(30_000)
                yield page
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
