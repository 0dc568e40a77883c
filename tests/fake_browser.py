"""A stand-in for a person's browser, for ``corral login --method browser`` in the tests: the
CLI opens it through Python's ``webbrowser`` (``BROWSER="python -m tests.fake_browser %s"``).
It opens the URL, signs in on the tests' provider as ``FAKE_BROWSER_USER`` and follows the
provider back to the CLI's loopback server."""

from __future__ import annotations

import os
import sys

import httpx


def main() -> None:
    url = sys.argv[1]
    with httpx.Client(follow_redirects=True, timeout=30) as browser:
        browser.get(url).raise_for_status()  # the provider's sign-in page
        form = {"username": os.environ["FAKE_BROWSER_USER"], "action": "approve"}
        browser.post(url, data=form).raise_for_status()  # back to the CLI, which says done


if __name__ == "__main__":
    main()
