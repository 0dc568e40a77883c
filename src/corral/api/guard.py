"""The gate every request passes before any route reads it (pure ASGI middleware).

In this order, so that an anonymous or oversized request costs the server next to nothing:

0. **The path.** Doubled slashes are merged (``//api/pool`` is ``/api/pool``), as OSMO's CLI
   sends them and the proxies in front of OSMO merge them.
1. **Authentication first.** A request without a valid bearer token is answered 401 before its
   body is read; the caller found is kept for the route (``request.state.principal``), which
   does not look the token up again. ``/health``, ``/metrics``, ``/api/version`` and
   ``/api/auth/login`` (how to sign in) are public.
   OSMO's token exchange (``POST /api/auth/jwt/access_token``) may instead carry its API token
   in a small JSON body, ``{"token": ...}``, as OSMO's CLI sends it: that body is read (at most
   ``TOKEN_BODY_BYTES``) and the token in it authenticates the request.
2. **Size.** A body longer than ``max_body_bytes`` is answered 413: at once when its
   ``Content-Length`` says so, else as soon as the bytes read pass the limit.
3. **Shape.** A JSON body nested deeper than ``MAX_NESTING``, holding a lone surrogate or an
   integer beyond 64 bits is answered 400 naming where (:func:`check_json_limits`), before any
   recursive code sees it. Syntax errors are left to the route's own reader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse

from corral.api import browser_session
from corral.api.auth import Authorizer, Principal
from corral.domain.formats.documents import check_json_limits
from corral.errors import CorralError, ForbiddenError, PayloadTooLargeError, UnauthorizedError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PATHS = frozenset({"/health", "/metrics", "/api/version", "/api/auth/login"})
#: OSMO's exchange of an API token for a short-lived one; its CLI sends the token in the body.
TOKEN_EXCHANGE_PATH = "/api/auth/jwt/access_token"
TOKEN_BODY_BYTES = 16 * 2**10
#: Asked for by browsers on their own, with no credentials: answered without any.
ANONYMOUS_PATHS = frozenset({*PUBLIC_PATHS, "/favicon.ico"})
DEFAULT_MAX_BODY_BYTES = 10 * 2**20
#: A body this small is checked on the event loop (it takes microseconds; a trip to a worker
#: thread and back costs more); a larger one in a worker thread.
INLINE_CHECK_BYTES = 64 * 2**10
_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class RequestLimits:
    """How much a request may send (``corral server --max-body-bytes``)."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


class ClientLeft(Exception):
    """The client went away before its body was read whole."""


class RequestGuard:
    def __init__(self, app: App, authorizer: Authorizer, limits: RequestLimits) -> None:
        self.app = app
        self.authorizer = authorizer
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "//" in scope["path"]:
            scope["path"] = merge_slashes(scope["path"])
        if scope["type"] != "http" or scope["path"] in ANONYMOUS_PATHS:
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/" and _wants_a_page(scope):  # a browser at the server's address
            await RedirectResponse("/ui", status_code=303)(scope, receive, send)
            return
        if browser_session.is_ui(scope["path"]):
            await self._dashboard(scope, receive, send)
            return
        try:
            if _token_in_body(scope):
                body = await self._read_body(scope, receive, TOKEN_BODY_BYTES)
                receive = _replay(body, receive)
                token = token_of_body(body)
                principal = await run_in_threadpool(self.authorizer.authenticate_token, token)
                scope.setdefault("state", {})["principal"] = principal
                await self.app(scope, receive, send)
                return
            principal = await run_in_threadpool(self.authorizer.authenticate, Request(scope))
            scope.setdefault("state", {})["principal"] = principal
            if scope["method"] in _WITH_BODY:
                body = await self._read_body(scope, receive)
                receive = _replay(body, receive)
        except CorralError as err:
            await JSONResponse(err.to_dict(), status_code=err.status_code)(scope, receive, send)
            return
        except ClientLeft:
            return
        await self.app(scope, receive, send)

    async def _dashboard(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A dashboard request: authenticated by its session cookie (a page without one
        redirects to the login page); a change must carry the page's CSRF token."""
        path = scope["path"]
        request = Request(scope)
        if scope["method"] not in ("GET", "HEAD"):
            reason = browser_session.cross_site(request.headers)
            if reason is not None:
                refused = ForbiddenError(
                    f"Refused: {reason}, not from this dashboard. Open the dashboard at its own "
                    "address and try again."
                )
                await JSONResponse(refused.to_dict(), status_code=403)(scope, receive, send)
                return
        if browser_session.is_public(path):
            await self._with_body(scope, receive, send)
            return
        token = browser_session.cookie_of(request.headers.get("cookie", ""))
        try:
            if token is None:
                raise UnauthorizedError("Log in to see the dashboard.")
            principal = await run_in_threadpool(self.authorizer.authenticate_token, token)
        except CorralError as err:
            if scope["method"] == "GET":
                target = browser_session.login_url(path, "login" if token is None else "expired")
                if token is not None and self.authorizer.sso is not None:
                    # An ended session: try the provider silently before asking the person.
                    target = "/ui/login/sso?" + urlencode({"next": path, "silent": "true"})
                await RedirectResponse(target, status_code=303)(scope, receive, send)
            else:
                await JSONResponse(err.to_dict(), status_code=err.status_code)(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            sent = request.headers.get(browser_session.CSRF_HEADER, "")
            if not browser_session.csrf_ok(self.authorizer.sessions.key, token, sent):
                refused = ForbiddenError(
                    "The request lacks this page's CSRF token; reload the page and try again."
                )
                await JSONResponse(refused.to_dict(), status_code=403)(scope, receive, send)
                return
        state = scope.setdefault("state", {})
        state["principal"] = principal
        state["session_token"] = token
        await self._with_body(scope, receive, send)

    async def _with_body(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand the request on, its body (if it may have one) read within the size limits."""
        if scope["method"] in _WITH_BODY:
            try:
                body = await self._read_body(scope, receive)
            except CorralError as err:
                await JSONResponse(err.to_dict(), status_code=err.status_code)(scope, receive, send)
                return
            except ClientLeft:
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    async def _read_body(self, scope: Scope, receive: Receive, limit: int | None = None) -> bytes:
        limit = limit or self.limits.max_body_bytes
        declared = Request(scope).headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self._too_large(int(declared), limit)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise ClientLeft  # nobody to answer: the route does not run on half a body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise self._too_large(None, limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and _is_json(scope):
            if len(body) <= INLINE_CHECK_BYTES:
                _check_json(body)
            else:
                await run_in_threadpool(_check_json, body)
        return body

    def _too_large(self, declared: int | None, limit: int) -> PayloadTooLargeError:
        size = f" ({declared:,} bytes)" if declared is not None else ""
        return PayloadTooLargeError(
            f"The request body{size} is larger than this server's limit of {limit:,} bytes; "
            "send less (split a bundle, leave large files out of the workflow), or ask an "
            "admin to raise corral server --max-body-bytes."
        )


def _wants_a_page(scope: Scope) -> bool:
    """Whether a GET asks for HTML (a browser), not JSON (the API's clients)."""
    if scope["method"] not in ("GET", "HEAD"):
        return False
    accept = Request(scope).headers.get("accept", "")
    return "text/html" in accept


def merge_slashes(path: str) -> str:
    """``//api//pool`` as ``/api/pool``: OSMO's CLI joins its base URL and ``/api/...`` with a
    slash between, and proxies in front of OSMO merge the two, as this does."""
    return re.sub("/{2,}", "/", path)


def _token_in_body(scope: Scope) -> bool:
    """An OSMO token exchange with its API token in the body, not in a header."""
    return (
        scope["path"] == TOKEN_EXCHANGE_PATH
        and scope["method"] == "POST"
        and "authorization" not in Request(scope).headers
    )


def token_of_body(body: bytes) -> str:
    """The API token of an OSMO token exchange's body, ``{"token": "..."}`` (401 otherwise)."""
    try:
        token = json.loads(body).get("token") if body else None
    except (ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or not token.strip():
        raise UnauthorizedError(
            'Send your API token, as {"token": "<token>"} in the body of this request or as '
            "'Authorization: Bearer <token>'."
        )
    return token.strip()


def guarded_principal(request: Request) -> Principal | None:
    """The caller the guard authenticated, if it did."""
    found = request.scope.get("state", {}).get("principal")
    return found if isinstance(found, Principal) else None


def _is_json(scope: Scope) -> bool:
    content_type = Request(scope).headers.get("content-type", "")
    return content_type == "" or "json" in content_type


def _check_json(body: bytes) -> None:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return  # the route's reader reports it
    check_json_limits(text, "request body")


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the route the body already read, then defers to the client."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
