"""Hostile input against single sign-on, and the errors a person gets, on a real ``corral server``
process signing people in through the tests' OpenID Connect provider (issue 32; the rest of the
hostile-input table is ``tests/test_hostile_input.py``).

Forged ID tokens sent as bearer tokens: signed with another key, with ``alg: none``, issued
by the provider to another client, expired. Each is refused with a 401 that says why, creates
no user, and the server answers ``/health`` within 1 s after it. At the sign-in's callback: an
ID token carrying a nonce that an earlier sign-in used, a callback sent again, and a return URL
that leads to another site; none sets a session, and no sign-in leaves the dashboard."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import LiveServer
from tests.oidc_support import CLI, OTHER, Provider, sign_in_without_browser

SESSION_COOKIE = "corral_session"


@pytest.fixture
def server(sso_server: LiveServer) -> LiveServer:
    return sso_server


def _claims(provider: Provider, sub: str) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": provider.issuer,
        "aud": "corral-dashboard",
        "sub": sub,
        "preferred_username": sub,
        "groups": ["osmo-admin"],
        "iat": now,
        "exp": now + 300,
    }


def _provider_kid(provider: Provider) -> str:
    return str(httpx.get(f"{provider.issuer}/jwks", timeout=10).json()["keys"][0]["kid"])


def _wrong_key(provider: Provider) -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    headers = {"kid": _provider_kid(provider)}
    return jwt.encode(_claims(provider, "forger"), key, algorithm="RS256", headers=headers)


def _alg_none(provider: Provider) -> str:
    headers = {"kid": _provider_kid(provider)}
    return jwt.encode(_claims(provider, "forger"), None, algorithm="none", headers=headers)


def _other_client(provider: Provider) -> str:
    provider.put_user("forger", ["osmo-admin"])
    return str(provider.device_tokens(OTHER, "forger")["id_token"])


def _expired(provider: Provider) -> str:
    provider.put_user("forger", ["osmo-admin"], token_seconds=60, clock_offset=-600)
    return str(provider.device_tokens(CLI, "forger")["id_token"])


FORGED: dict[str, tuple[Callable[[Provider], str], str]] = {
    "signed with another key": (
        _wrong_key,
        "The identity token's signature does not verify against the issuer's keys.",
    ),
    "alg none": (
        _alg_none,
        "The identity token is signed with none; corral accepts RS256 and ES256 tokens from "
        "the OIDC issuer.",
    ),
    "issued to another client": (
        _other_client,
        "The identity token is not meant for this server: its audience must include "
        "corral-dashboard or corral-cli (CORRAL_OIDC_AUDIENCE, CORRAL_OIDC_CLIENT_ID).",
    ),
    "expired": (_expired, "The identity token has expired; log in again."),
}


@pytest.mark.parametrize("forgery", list(FORGED))
def test_a_forged_id_token_is_refused_and_makes_no_user(
    server: LiveServer, oidc_provider: Provider, forgery: str
) -> None:
    make, says = FORGED[forgery]
    token = make(oidc_provider)
    answer = httpx.get(
        f"{server.url}/api/profile/settings",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert (answer.status_code, answer.json()["message"]) == (401, says)
    admin = {"Authorization": f"Bearer {server.token}"}
    assert httpx.get(f"{server.url}/api/auth/user/forger", headers=admin).status_code == 404
    assert httpx.get(f"{server.url}/health", timeout=1).status_code == 200


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def _with(url: str, **values: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=urlencode({**_query(url), **values})))


def _sessions(response: httpx.Response) -> list[str]:
    return [c for c in response.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE)]


def test_an_id_token_with_a_nonce_used_before_is_refused(
    server: LiveServer, oidc_provider: Provider
) -> None:
    oidc_provider.put_user("sso-replay", ["osmo-user"])
    first = sign_in_without_browser(server.url, oidc_provider, "sso-replay")
    assert first.callback.status_code == 200 and _sessions(first.callback)
    used = _query(first.authorize_url)["nonce"]
    again = sign_in_without_browser(
        server.url, oidc_provider, "sso-replay", change=lambda url: _with(url, nonce=used)
    )
    assert again.callback.status_code == 401
    assert "The ID token&#39;s nonce is not this sign-in&#39;s" in again.callback.text
    assert _sessions(again.callback) == []


def test_a_callback_sent_again_is_refused(server: LiveServer, oidc_provider: Provider) -> None:
    oidc_provider.put_user("sso-twice", ["osmo-user"])
    attempt = sign_in_without_browser(server.url, oidc_provider, "sso-twice")
    assert attempt.callback.status_code == 200
    url = str(attempt.callback.request.url)
    flow = attempt.callback.request.headers["cookie"]
    fresh = httpx.get(url, timeout=10)  # another browser, without the sign-in's cookie
    assert fresh.status_code == 400 and "was not started in this browser" in fresh.text
    copied = httpx.get(url, headers={"cookie": flow}, timeout=10)
    assert copied.status_code == 400 and "This sign-in was finished already" in copied.text
    assert _sessions(fresh) == _sessions(copied) == []


@pytest.mark.parametrize(
    "elsewhere",
    [
        "https://evil.example/ui",
        "//evil.example/ui",
        "/ui//evil.example",
        "/ui\\evil.example",
        "/ui/%0d%0aLocation:%20https://evil.example",
        "javascript:alert(1)",
    ],
)
def test_the_callback_never_leads_to_another_site(
    server: LiveServer, oidc_provider: Provider, elsewhere: str
) -> None:
    oidc_provider.put_user("sso-redirect", ["osmo-user"])
    attempt = sign_in_without_browser(
        server.url, oidc_provider, "sso-redirect", next_page=elsewhere
    )
    page = attempt.callback.text
    assert attempt.callback.status_code == 200 and _sessions(attempt.callback)
    assert '<meta http-equiv="refresh" content="0; url=/ui">' in page
    assert 'href="/ui"' in page and "evil" not in page and "javascript" not in page


def test_a_user_in_no_mapped_group_is_told_what_to_ask_for(
    server: LiveServer, oidc_provider: Provider
) -> None:
    oidc_provider.put_user("sso-finance", ["finance", "staff"])
    attempt = sign_in_without_browser(server.url, oidc_provider, "sso-finance")
    assert attempt.callback.status_code == 403 and _sessions(attempt.callback) == []
    assert (
        "sso-finance signed in, but holds no corral role: the provider sent the groups finance, "
        "staff, and no role maps any of them. An admin adds one of the groups to a role&#39;s "
        "external_roles (docs/access.md), or grants a role: corral user roles add sso-finance "
        "osmo-user. If the provider sends groups in another claim, set CORRAL_OIDC_GROUPS_CLAIM."
    ) in attempt.callback.text


@pytest.mark.parametrize(
    ("offset", "says"),
    [
        (
            600,
            "The identity token was issued after this server&#39;s clock says it is now, by "
            "more than 60 s: the clocks of this server and of the issuer {issuer} differ; "
            "synchronise them (NTP).",
        ),
        (
            -600,
            "The ID token the issuer has just issued has already expired by this server&#39;s "
            "clock: this server&#39;s clock is ahead of the issuer&#39;s ({issuer}) by more than "
            "60 s; synchronise them (NTP).",
        ),
    ],
)
def test_a_skewed_clock_is_named(
    server: LiveServer, oidc_provider: Provider, offset: int, says: str
) -> None:
    user = f"sso-skew{offset}"
    oidc_provider.put_user(user, ["osmo-user"], token_seconds=120, clock_offset=offset)
    attempt = sign_in_without_browser(server.url, oidc_provider, user)
    assert attempt.callback.status_code == 401 and _sessions(attempt.callback) == []
    assert says.format(issuer=oidc_provider.issuer) in attempt.callback.text
