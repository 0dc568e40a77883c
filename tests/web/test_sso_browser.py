"""Single sign-on in a real browser: chromium signs in through the tests' OpenID Connect
provider (``tests/oidc_provider.py``, on another site than the server), lands on the overview as
a user whose group maps to ``osmo-user``, and signs out of corral and of the provider. A sign-in
whose ``state``, ``nonce`` or PKCE challenge is tampered with is refused with a page that says
why, and sets no session."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from corral.services.auth.sessions import SessionSigner
from tests.conftest import LiveServer
from tests.oidc_support import DASHBOARD, Provider
from tests.web.browser import chromium
from tests.web.test_dashboard_browser import screenshot

SESSION_COOKIE = "corral_session"


@pytest.fixture
def server(sso_server: LiveServer) -> LiveServer:
    return sso_server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as found:
        yield found


def sign_in(page: Any, provider_user: str) -> None:
    """From corral's login page through the provider's sign-in form."""
    page.click("#sso")
    page.wait_for_url(re.compile(r"http://localhost:\d+/authorize.*"))
    page.fill("input[name=username]", provider_user)
    page.click("button[value=approve]")


def session_cookies(page: Any) -> list[str]:
    return [c["name"] for c in page.context.cookies() if c["name"] == SESSION_COOKIE]


def test_sign_in_through_the_provider_and_out(
    server: LiveServer, oidc_provider: Provider, browser: Any, tmp_path: Path
) -> None:
    oidc_provider.put_user("sso-alice", ["osmo-user", "lab-42"])
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(server.url + "/ui")
    assert page.locator("#sso").inner_text() == "Sign in with Test IdP"
    assert (
        "(corral login signs the CLI in through Test IdP)"
        in page.locator(".hint").last.inner_text()
    )
    banner = " ".join((server.home / "server.log").read_text().split())
    assert f"Dashboard: {server.url}/ui (sign in through Test IdP, or log in with" in banner
    screenshot(page, "sso-login", tmp_path)
    sign_in(page, "sso-alice")
    page.wait_for_url(server.url + "/ui")
    assert page.locator("h1").first.inner_text() == "Overview"
    assert page.locator("#user").inner_text() == "sso-alice"
    screenshot(page, "sso-signed-in", tmp_path)
    admin = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"})
    roles = admin.get("/api/auth/user/sso-alice").json()["roles"]
    assert [(r["role_name"], r["assigned_by"]) for r in roles] == [("osmo-user", "oidc")]

    page.click("text=Log out")
    page.wait_for_url(server.url + "/ui/login")
    assert session_cookies(page) == []
    ended = oidc_provider.events("end_session")[-1]
    assert ended["client_id"] == DASHBOARD
    assert ended["post_logout_redirect_uri"] == server.url + "/ui/login"
    assert ended["id_token_hint"].count(".") == 2
    # The provider's session ended too: signing in again asks for the person.
    page.click("#sso")
    page.wait_for_url(re.compile(r"http://localhost:\d+/authorize.*"))
    assert page.locator("input[name=username]").is_visible()
    context.close()


def test_sign_in_at_phone_width(
    server: LiveServer, oidc_provider: Provider, browser: Any, tmp_path: Path
) -> None:
    oidc_provider.put_user("sso-phone", ["osmo-user"])
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(server.url + "/ui/workflows")
    button = page.locator("#sso").bounding_box()
    assert button is not None and button["x"] >= 0 and button["x"] + button["width"] <= 390
    screenshot(page, "sso-login-phone", tmp_path)
    sign_in(page, "sso-phone")
    page.wait_for_url(server.url + "/ui/workflows")
    assert page.locator("#user").inner_text() == "sso-phone"
    context.close()


def test_an_ended_session_signs_in_again_silently_while_the_provider_allows(
    server: LiveServer, oidc_provider: Provider, browser: Any
) -> None:
    oidc_provider.put_user("sso-silent", ["osmo-user"])
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(server.url + "/ui/login")
    sign_in(page, "sso-silent")
    page.wait_for_url(server.url + "/ui")
    key = (server.home / "data" / "session.key").read_bytes().strip()
    ended = SessionSigner(key, timedelta(seconds=-10)).mint("sso-silent").token

    def end_the_session() -> None:
        cookie = {"name": SESSION_COOKIE, "value": ended, "domain": "127.0.0.1", "path": "/ui"}
        context.add_cookies([cookie])  # in place of the session's cookie

    end_the_session()
    exchanges = len(oidc_provider.events("token"))
    page.goto(server.url + "/ui/pools")
    page.wait_for_url(server.url + "/ui/pools")  # through the provider, without its page
    assert page.locator("#user").inner_text() == "sso-silent"
    assert len(oidc_provider.events("token")) == exchanges + 1
    page.goto(oidc_provider.issuer + "/end_session")  # the provider forgets the browser
    end_the_session()
    page.goto(server.url + "/ui/pools")
    page.wait_for_url(re.compile(r".*/ui/login\?.*"))
    # the reason the page is shown, not an error: no alert red
    assert page.locator("p.notice").inner_text() == "Your session has ended; sign in again."
    assert page.locator("p.error").count() == 0
    assert session_cookies(page) == []
    context.close()


def _replace(url: str, **values: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(values)
    return urlunsplit(parts._replace(query=urlencode(query)))


def _other_challenge() -> str:
    verifier = secrets.token_urlsafe(48)
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


def _request_changed(change: Callable[[str], str]) -> Callable[[Any], None]:
    """A route handler sending the request to another URL."""
    return lambda route: route.continue_(url=change(route.request.url))


def _answer_changed(change: Callable[[str], str]) -> Callable[[Any], None]:
    """A route handler changing where the provider's answer sends the browser back."""

    def handle(route: Any) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        answer = route.fetch(max_redirects=0)
        route.fulfill(status=302, headers={"location": change(answer.headers["location"])})

    return handle


#: Each tampering of a sign-in at the provider, and what corral's page then says.
TAMPERING: dict[str, tuple[Callable[[Any], None], str]] = {
    "state": (
        _answer_changed(lambda url: _replace(url, state=secrets.token_urlsafe(32))),
        "The provider came back with another sign-in's state",
    ),
    "nonce": (
        _request_changed(lambda url: _replace(url, nonce=secrets.token_urlsafe(32))),
        "The ID token's nonce is not this sign-in's",
    ),
    "code verifier": (
        _request_changed(lambda url: _replace(url, code_challenge=_other_challenge())),
        "The provider refused the sign-in (invalid_grant: Code challenge failed.)",
    ),
}


@pytest.mark.parametrize("tampered", list(TAMPERING))
def test_a_tampered_sign_in_is_refused_with_a_page_and_sets_no_session(
    server: LiveServer, oidc_provider: Provider, browser: Any, tmp_path: Path, tampered: str
) -> None:
    handler, said = TAMPERING[tampered]
    oidc_provider.put_user("sso-mallory", ["osmo-user"])
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.route(re.compile(r"http://localhost:\d+/authorize.*"), handler)
    page.goto(server.url + "/ui/login")
    sign_in(page, "sso-mallory")
    page.wait_for_url(re.compile(r".*/ui/login/callback.*"))
    alert = page.locator("p.error[role=alert]")
    assert said in alert.inner_text()
    assert session_cookies(page) == []
    screenshot(page, f"sso-refused-{tampered.replace(' ', '-')}", tmp_path)
    context.close()
