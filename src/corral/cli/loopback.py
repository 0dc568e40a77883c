"""A one-time web server on this machine's loopback address, for the browser to come back to
after signing in (RFC 8252's loopback redirect): it answers one request with the sign-in's
``state``, and nothing else that reaches it counts."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

from corral.errors import UserError

CALLBACK_PATH = "/callback"
WAIT_SECONDS = 300.0
_DONE_PAGE = (
    b"<!doctype html><title>corral</title><p>Signed in to corral. You may close this tab and "
    b"go back to the terminal.</p>"
)


class _Redirects(HTTPServer):
    """The server, holding what came back: the query of the sign-in's redirect."""

    expected_state = ""
    query: dict[str, list[str]] | None = None

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a browser that left early: the wait goes on, and its end says what happened


class _Handler(BaseHTTPRequestHandler):
    server: _Redirects

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        state = (query.get("state") or [""])[0]
        ours = hmac.compare_digest(state.encode(), self.server.expected_state.encode())
        if parts.path != CALLBACK_PATH or not ours:
            self.send_error(404)
            return
        self.server.query = query
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(_DONE_PAGE)

    def log_message(self, format: str, *args: object) -> None:
        pass  # the terminal shows the login's own progress


def wait_for_redirect(
    start: Callable[[str], object], state: str, wait_seconds: float = WAIT_SECONDS
) -> tuple[str, str]:
    """Listen, call ``start`` with the redirect URL, and wait for the browser to come back
    with ``state``: the redirect URL and the authorization code."""
    with _Redirects(("127.0.0.1", 0), _Handler) as server:
        server.expected_state = state
        server.timeout = 0.5
        redirect_uri = f"http://127.0.0.1:{server.server_port}{CALLBACK_PATH}"
        start(redirect_uri)
        deadline = time.monotonic() + wait_seconds
        while server.query is None:
            if time.monotonic() > deadline:
                raise UserError(
                    f"No sign-in came back within {wait_seconds:.0f} s; run corral login again."
                )
            server.handle_request()
        query = server.query
    if "error" in query:
        described = (query.get("error_description") or [""])[0]
        raise UserError(f"The provider refused the sign-in: {query['error'][0]} {described}")
    code = (query.get("code") or [""])[0]
    if not code:
        raise UserError("The browser came back without a sign-in code.")
    return redirect_uri, code
