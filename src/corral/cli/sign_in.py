"""Signing the CLI in through the server's OpenID Connect provider (docs/cli.md#login).

The server says where (``GET /api/auth/login``): the provider's device and browser endpoints,
its token endpoint and the CLI's client. The device flow (RFC 8628) prints a code and a URL and
waits; without a device endpoint, a browser opens on the provider and comes back to a one-time
server on this machine's loopback address (the authorization code flow with PKCE). The ID token
is the bearer token; it is renewed with the refresh token before it expires, and both are kept
per server in the credentials file (mode 0600).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import webbrowser
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from corral.cli.loopback import wait_for_redirect
from corral.credentials import read_entry, store_entry
from corral.errors import UserError

#: Renew the ID token this long before it expires (at most half its life).
REFRESH_MARGIN_SECONDS = 30
HTTP_TIMEOUT_SECONDS = 15.0
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"

Say = Callable[[str], None]


@dataclass(frozen=True)
class LoginInfo:
    """How the server's users sign in (``GET /api/auth/login``)."""

    issuer: str
    device_endpoint: str | None
    browser_endpoint: str
    token_endpoint: str
    client_id: str
    scopes: str


def login_info(url: str) -> LoginInfo:
    try:
        answer = httpx.get(f"{url}/api/auth/login", timeout=HTTP_TIMEOUT_SECONDS)
    except httpx.HTTPError as err:
        raise UserError(f"cannot reach corral at {url}: {err}.") from None
    body = _json(answer)
    if answer.status_code != 200:
        raise UserError(str(body.get("message") or f"{url} answered {answer.status_code}."))
    where = f"{url}/api/auth/login"
    return LoginInfo(
        issuer=_field(body, "issuer", where),
        device_endpoint=body.get("device_endpoint") or None,
        browser_endpoint=_field(body, "browser_endpoint", where),
        token_endpoint=_field(body, "token_endpoint", where),
        client_id=_field(body, "device_client_id", where),
        scopes=_field(body, "scopes", where),
    )


# -- the device flow --------------------------------------------------------------------------


def device_flow(info: LoginInfo, say: Say, sleep: Callable[[float], None] = time.sleep) -> Any:
    """The provider's tokens, once the person has signed in with the printed code."""
    assert info.device_endpoint is not None
    started = _post(info.device_endpoint, {"client_id": info.client_id, "scope": info.scopes})
    if started.status_code != 200:
        raise UserError(f"The provider refused to start a device sign-in: {_said(started)}.")
    grant = _json(started)
    answered = f"the provider's device endpoint {info.device_endpoint}"
    user_code = _field(grant, "user_code", answered)
    where = grant.get("verification_uri_complete") or _field(grant, "verification_uri", answered)
    say(f"To sign in, open {where}")
    say(f"and check that it shows the code {user_code}.")
    say("Waiting for you to sign in… (Ctrl-C to stop)")
    interval = _seconds(grant.get("interval"), 5.0)
    deadline = time.monotonic() + _seconds(grant.get("expires_in"), 600.0)
    form = {"grant_type": DEVICE_GRANT, "device_code": _field(grant, "device_code", answered)}
    while time.monotonic() < deadline:
        sleep(interval)
        answer = _post(info.token_endpoint, {**form, "client_id": info.client_id})
        if answer.status_code == 200:
            return _json(answer)
        error = _json(answer).get("error")
        if error == "slow_down":
            interval += 5
        elif error != "authorization_pending":
            raise UserError(_device_refusal(str(error), answer))
    raise UserError("The code expired before you signed in; run corral login again.")


def _device_refusal(error: str, answer: httpx.Response) -> str:
    if error == "access_denied":
        return "The sign-in was denied at the provider."
    if error == "expired_token":
        return "The code expired before you signed in; run corral login again."
    return f"The provider refused the sign-in: {_said(answer)}."


# -- the browser flow -------------------------------------------------------------------------


def browser_flow(
    info: LoginInfo, say: Say, open_browser: Callable[[str], bool] = webbrowser.open
) -> Any:
    """The provider's tokens, after a sign-in in a browser that comes back to this machine."""
    state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
    challenge = _b64(hashlib.sha256(verifier.encode()).digest())

    def authorize_url(redirect_uri: str) -> str:
        query = {
            "response_type": "code",
            "client_id": info.client_id,
            "redirect_uri": redirect_uri,
            "scope": info.scopes,
            "state": state,
            "nonce": nonce,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        url = f"{info.browser_endpoint}?{urlencode(query)}"
        say(f"Opening a browser to sign in. If none opens, visit:\n{url}")
        # In a thread: a browser named by $BROWSER may run until the sign-in is over, and
        # the loopback server must answer it meanwhile.
        threading.Thread(target=open_browser, args=(url,), daemon=True).start()
        return url

    redirect_uri, answer = wait_for_redirect(authorize_url, state)
    form = {
        "grant_type": "authorization_code",
        "code": answer,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
        "client_id": info.client_id,
    }
    tokens = _json(_ok(_post(info.token_endpoint, form), "exchange the sign-in's code"))
    if _claims(tokens.get("id_token", "")).get("nonce") != nonce:
        raise UserError("The provider's ID token is not this sign-in's (its nonce differs).")
    return tokens


# -- keeping the tokens -----------------------------------------------------------------------


def remember(url: str, token_endpoint: str, client_id: str, tokens: Mapping[str, Any]) -> str:
    """Store the tokens for ``url`` with where and as whom to renew them; the ID token, which
    the CLI sends."""
    id_token = tokens.get("id_token")
    if not isinstance(id_token, str):
        raise UserError(
            "The provider answered without an ID token: the server's CORRAL_OIDC_SCOPES must "
            "include openid."
        )
    entry = {
        "token": id_token,
        "refresh_token": tokens.get("refresh_token"),
        "token_endpoint": token_endpoint,
        "client_id": client_id,
        "refresh_at": _refresh_at(_claims(id_token)),
    }
    store_entry(url, entry)
    return id_token


def current_token(url: str) -> str | None:
    """The token stored for ``url``, renewed first when it is a sign-in's and about to
    expire."""
    entry = read_entry(url)
    token = entry.get("token")
    refresh_at = entry.get("refresh_at")
    if not isinstance(token, str):
        return None
    if not entry.get("refresh_token") or not isinstance(refresh_at, int | float):
        return token
    if refresh_at > time.time():
        return token
    return _refreshed(url, entry)


def _refresh_at(claims: Mapping[str, Any]) -> float | None:
    """When to renew a token with these claims: shortly before it expires."""
    expires, issued = claims.get("exp"), claims.get("iat")
    if not isinstance(expires, int | float):
        return None
    life = expires - issued if isinstance(issued, int | float) else 2 * REFRESH_MARGIN_SECONDS
    return float(expires - min(REFRESH_MARGIN_SECONDS, life / 2))


def _refreshed(url: str, entry: dict[str, Any]) -> str:
    form = {
        "grant_type": "refresh_token",
        "refresh_token": str(entry["refresh_token"]),
        "client_id": str(entry["client_id"]),
    }
    try:
        answer = _post(str(entry["token_endpoint"]), form)
    except UserError as err:
        raise UserError(f"{err.message} Your sign-in to {url} could not be renewed.") from None
    if answer.status_code != 200:
        raise UserError(
            f"Your sign-in to {url} has expired, and the provider refused to renew it "
            f"({_said(answer)}): run corral login {url}"
        )
    tokens = _json(answer)
    tokens.setdefault("refresh_token", entry["refresh_token"])
    return remember(url, str(entry["token_endpoint"]), str(entry["client_id"]), tokens)


# -- plumbing ---------------------------------------------------------------------------------


def _post(url: str, form: Mapping[str, str]) -> httpx.Response:
    try:
        return httpx.post(url, data=dict(form), timeout=HTTP_TIMEOUT_SECONDS)
    except httpx.HTTPError as err:
        raise UserError(
            f"Cannot reach the sign-in provider at {url} ({err}). Check your network; the "
            "server's admin sets the provider (CORRAL_OIDC_ISSUER)."
        ) from None


def _ok(answer: httpx.Response, doing: str) -> httpx.Response:
    if answer.status_code != 200:
        raise UserError(f"The provider refused to {doing}: {_said(answer)}.")
    return answer


def _json(answer: httpx.Response) -> dict[str, Any]:
    try:
        body = answer.json()
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {}


def _seconds(value: Any, default: float) -> float:
    """A provider's number of seconds, within reason (RFC 8628 makes both optional)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 3600:
        return float(value)
    return default


def _field(body: Mapping[str, Any], key: str, where: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise UserError(f"{where} answered without {key}; ask the server's admin.")
    return value


def _said(answer: httpx.Response) -> str:
    body = _json(answer)
    error = body.get("error") or f"HTTP {answer.status_code}"
    described = body.get("error_description")
    return f"{error}: {described}" if described else str(error)


def _claims(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified: the server checks the signature of every token it is
    sent; the CLI reads only when it expires and the nonce it was issued for."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
