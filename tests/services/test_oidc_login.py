"""The dashboard's sign-in (``services/auth/oidc_login.py``) without a network: the provider's
discovery document and token answers are injected, its ID tokens signed here. What a person
is told when the provider cannot be reached, answers for another issuer, refuses the client,
or hands back an ID token for another audience; a sign-in's cookie that was changed or is too
old; and where the client secret may come from."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from corral.errors import CorralError, UnauthorizedError, UnavailableError, UserError
from corral.services.auth import oidc_login
from corral.services.auth.oidc import OidcSettings, OidcVerifier
from corral.services.auth.oidc_login import OidcClient, Provider, SingleSignOn

ISSUER = "https://idp.example.test"
CLIENT = "corral-dashboard"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
DISCOVERY = {
    "issuer": ISSUER,
    "authorization_endpoint": f"{ISSUER}/authorize",
    "token_endpoint": f"{ISSUER}/token",
    "jwks_uri": f"{ISSUER}/jwks",
}


def fetch(url: str) -> Any:
    if url.endswith("/jwks"):
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
        return {"keys": [{**public, "kid": "k1"}]}
    return DISCOVERY


class TokenEndpoint:
    """Answers the code exchange with ``answer`` (status, JSON), and keeps what it was sent."""

    def __init__(self, status: int = 200, answer: dict[str, Any] | None = None) -> None:
        self.status = status
        self.answer = answer or {}
        self.sent: list[Mapping[str, str]] = []

    def __call__(
        self, url: str, form: Mapping[str, str], auth: tuple[str, str] | None
    ) -> httpx.Response:
        self.sent.append(form)
        return httpx.Response(self.status, json=self.answer)


def sso(post: Any, fetcher: Any = fetch) -> SingleSignOn:
    used: set[str] = set()

    def first_use(once: str, _: object) -> bool:
        fresh = once not in used
        used.add(once)
        return fresh

    verifier = OidcVerifier(OidcSettings(ISSUER), fetcher)
    client = OidcClient(CLIENT, "secret")
    return SingleSignOn(client, Provider(ISSUER, fetcher), verifier, b"k" * 32, first_use, post)


def id_token(expected_nonce: str, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": CLIENT, "sub": "ann", "iat": now, "exp": now + 300}
    body = {**body, "nonce": expected_nonce, **claims}
    return jwt.encode(body, KEY, "RS256", headers={"kid": "k1"})


def begun(sign_on: SingleSignOn) -> tuple[dict[str, str], str]:
    url, cookie = sign_on.begin("https://corral.example/ui/login/callback", "/ui", False)
    return dict(parse_qsl(urlsplit(url).query)), cookie


def message(err: pytest.ExceptionInfo[CorralError]) -> str:
    return err.value.message


def test_a_good_sign_in_sends_the_verifier_and_names_the_user() -> None:
    endpoint = TokenEndpoint()
    sign_on = sso(endpoint)
    query, cookie = begun(sign_on)
    assert query["code_challenge_method"] == "S256" and query["client_id"] == CLIENT
    endpoint.answer = {"id_token": id_token(query["nonce"], preferred_username="ann")}
    signed = sign_on.finish("code", sign_on.flow(cookie, query["state"]), "https://cb")
    assert signed.identity.username == "ann"
    assert oidc_login._s256(endpoint.sent[0]["code_verifier"]) == query["code_challenge"]


def test_an_unreachable_provider_names_the_setting_and_is_not_asked_again_at_once() -> None:
    asked: list[str] = []

    def down(url: str) -> Any:
        asked.append(url)
        raise httpx.ConnectError("connection refused")

    sign_on = sso(TokenEndpoint(), down)
    with pytest.raises(UnavailableError):
        begun(sign_on)
    with pytest.raises(UnavailableError) as err:
        begun(sign_on)
    assert len(asked) == 1
    assert message(err) == (
        f"Cannot reach the OIDC provider at {ISSUER}/.well-known/openid-configuration "
        "(connection refused). Check CORRAL_OIDC_ISSUER, and that this server can reach the "
        "provider."
    )


def test_a_discovery_document_of_another_issuer_is_refused() -> None:
    with pytest.raises(UnavailableError) as err:
        begun(sso(TokenEndpoint(), lambda url: {**DISCOVERY, "issuer": ISSUER + "/"}))
    assert "names the issuer 'https://idp.example.test/', not 'https://idp.example.test'" in (
        message(err)
    )


def test_endpoints_that_are_not_text_are_taken_as_absent() -> None:
    odd = {**DISCOVERY, "end_session_endpoint": {"x": 1}, "device_authorization_endpoint": 7}
    endpoints = Provider(ISSUER, lambda url: odd).endpoints()
    assert (endpoints.end_session, endpoints.device) == (None, None)
    with pytest.raises(UnavailableError, match="lists no authorization or token endpoint"):
        Provider(ISSUER, lambda url: {**DISCOVERY, "token_endpoint": ["x"]}).endpoints()


def test_a_refused_client_says_which_settings_to_check() -> None:
    sign_on = sso(TokenEndpoint(401, {"error": "invalid_client"}))
    query, cookie = begun(sign_on)
    with pytest.raises(UnauthorizedError) as err:
        sign_on.finish("code", sign_on.flow(cookie, query["state"]), "https://cb")
    assert message(err) == (
        "The provider refused the sign-in (invalid_client). Check CORRAL_OIDC_CLIENT_ID and the "
        "client secret."
    )


@pytest.mark.parametrize(
    ("claims", "says"),
    [
        (
            {"aud": "someone-else"},
            "The identity token is not meant for this server: its audience must include "
            "corral-dashboard (CORRAL_OIDC_AUDIENCE, CORRAL_OIDC_CLIENT_ID).",
        ),
        (
            {"aud": [CLIENT, "someone-else"], "azp": "someone-else"},
            "The ID token names several audiences and its authorized party (azp) is "
            "'someone-else', not this server's client corral-dashboard.",
        ),
        ({"nonce": None}, "The ID token's nonce is not this sign-in's"),
    ],
)
def test_an_id_token_for_someone_else_is_refused(claims: dict[str, Any], says: str) -> None:
    endpoint = TokenEndpoint()
    sign_on = sso(endpoint)
    query, cookie = begun(sign_on)
    endpoint.answer = {"id_token": id_token(query["nonce"], **claims)}
    with pytest.raises(UnauthorizedError) as err:
        sign_on.finish("code", sign_on.flow(cookie, query["state"]), "https://cb")
    assert message(err).startswith(says)


def test_a_changed_or_old_sign_in_cookie_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    sign_on = sso(TokenEndpoint())
    query, cookie = begun(sign_on)
    body, _, mac = cookie.partition(".")
    with pytest.raises(UserError, match="its cookie is missing or was changed"):
        sign_on.flow(f"{body}x.{mac}", query["state"])
    later = time.time() + oidc_login.SIGN_IN_SECONDS + 1
    monkeypatch.setattr(oidc_login.time, "time", lambda: later)
    with pytest.raises(UserError, match="This sign-in took over 10 minutes"):
        sign_on.flow(cookie, query["state"])


def test_the_client_secret_file_must_be_private(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    secret.chmod(0o644)
    environ = {"CORRAL_OIDC_CLIENT_ID": CLIENT, "CORRAL_OIDC_CLIENT_SECRET_FILE": str(secret)}
    with pytest.raises(UserError) as err:
        OidcClient.from_env(environ)
    assert message(err) == (
        f"CORRAL_OIDC_CLIENT_SECRET_FILE {secret} may be read by other users (mode 644); make "
        f"it yours alone: chmod 600 {secret}"
    )
    secret.chmod(0o600)
    client = OidcClient.from_env(environ)
    assert client is not None and client.client_secret == "s3cret"
    assert "s3cret" not in repr(client)
