"""Playwright for Python driving Debian's chromium, headless, without a browser download."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
#: ./scripts/test sets this: there a missing browser is a failure, not a skip.
REQUIRED_ENV = "CORRAL_REQUIRE_BROWSER"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing() -> str | None:
    if shutil.which(CHROMIUM) is None:
        return f"{CHROMIUM} is not installed (apt-get install chromium; ./scripts/test does)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]'; ./scripts/test does)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium browser; skipped (with the reason) where none is installed, unless
    ./scripts/test runs the suite."""
    missing = _missing()
    if missing is not None:
        if os.environ.get(REQUIRED_ENV):
            pytest.fail(missing)
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()
