"""The dashboard's login: a session cookie, and the token that proves a form came from a page.

Logging in takes what the CLI uses — an API token, or a trusted OIDC issuer's token — and
exchanges it for a session token (the same short-lived session ``POST /api/auth/session``
gives), kept in an ``HttpOnly``, ``SameSite=Strict`` cookie scoped to ``/ui``. The REST API
never reads the cookie: it takes bearer tokens only, so no other site can make a browser call
it. Every request under ``/ui`` that changes something must also carry the CSRF token the page
was drawn with, derived from the session by the server's key.
"""

from __future__ import annotations

import hashlib
import hmac

COOKIE = "corral_session"
CSRF_HEADER = "x-corral-csrf"
#: Reachable without a session: the login page, its form, and the static files.
PUBLIC_PREFIXES = ("/ui/login", "/ui/static/")
PREFIX = "/ui"


def csrf_token(key: bytes, session_token: str) -> str:
    """The token a page of this session sends back with every change it asks for."""
    return hmac.new(key, b"csrf:" + session_token.encode(), hashlib.sha256).hexdigest()[:40]


def csrf_ok(key: bytes, session_token: str, sent: str) -> bool:
    return hmac.compare_digest(csrf_token(key, session_token), sent)


def is_ui(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def is_public(path: str) -> bool:
    return any(path.startswith(prefix) for prefix in PUBLIC_PREFIXES)


def cookie_of(header: str) -> str | None:
    """The session cookie's value in a ``Cookie`` header, if any."""
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return value
    return None
