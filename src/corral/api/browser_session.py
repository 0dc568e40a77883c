"""The dashboard's login: a session cookie, and the token that proves a form came from a page.

Logging in takes what the CLI uses — an API token, or a trusted OIDC issuer's token — and
exchanges it for a session token (the same short-lived session ``POST /api/auth/session``
gives), kept in an ``HttpOnly``, ``SameSite=Strict`` cookie scoped to ``/ui``. The REST API
never reads the cookie: it takes bearer tokens only, so no other site can make a browser call
it. Every request under ``/ui`` that changes something must also carry the CSRF token the page
was drawn with, derived from the session by the server's key. A change that a browser says
comes from another site (``Sec-Fetch-Site``, ``Origin``) is refused before anything else, the
login included: another site must not log a browser in as someone else.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from urllib.parse import urlencode, urlsplit

COOKIE = "corral_session"
CSRF_HEADER = "x-corral-csrf"
#: Reachable without a session: the login page, its form, and the static files.
PUBLIC_PREFIXES = ("/ui/login", "/ui/static/")
PREFIX = "/ui"


def local_target(target: str) -> str:
    """``target`` if it is a page of this dashboard, else the overview: where a login goes
    next is never another site (no open redirect through ``next``)."""
    path = target.partition("?")[0].partition("#")[0]
    if path != PREFIX and not path.startswith(PREFIX + "/"):
        return PREFIX
    if "//" in target or "\\" in target or any(ord(c) < 0x21 or ord(c) == 0x7F for c in target):
        return PREFIX
    return target


#: Why the login page was sent to, by the code its address carries: the page says only these
#: (never text from the address, which anyone can write and send someone).
LOGIN_REASONS = {
    "login": "Log in to see the dashboard.",
    "ended": "Your session has ended; sign in again.",
    "expired": "Your session is no longer valid; log in again.",
}


def login_url(next_page: str, why: str) -> str:
    """The login page, and why (a key of :data:`LOGIN_REASONS`)."""
    return "/ui/login?" + urlencode({"next": next_page, "why": why})


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


def cross_site(headers: Mapping[str, str]) -> str | None:
    """Why a state-changing request comes from another site, by what the browser says of it
    (None: same origin, or a client that is not a browser and says nothing)."""
    fetch_site = headers.get("sec-fetch-site", "")
    if fetch_site and fetch_site not in ("same-origin", "none"):
        return f"the browser says it comes from a {fetch_site} page"
    origin = headers.get("origin")
    if origin is None:
        return None
    if urlsplit(origin).netloc.lower() != headers.get("host", "").lower():
        return f"it comes from the page of {origin}"
    return None
