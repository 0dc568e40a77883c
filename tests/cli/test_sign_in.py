"""The CLI's side of signing in (``cli/sign_in.py``) without a provider: what it says when the
provider cannot be reached or refuses to renew a sign-in, and when a token is renewed."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from corral.cli import sign_in
from corral.credentials import read_entry, store_entry
from corral.errors import UserError

URL = "http://corral.example.test:8000"
TOKEN_ENDPOINT = "http://idp.example.test/token"
DEVICE = sign_in.LoginInfo("i", "http://idp.example.test/device", "b", TOKEN_ENDPOINT, "c", "s")


def unsigned(**claims: Any) -> str:
    """A JWT-shaped token: the CLI reads its claims and never checks its signature."""
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"e30.{body}.sig"


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRAL_CONFIG_DIR", str(tmp_path))


def signed_in(refresh_at: float) -> None:
    store_entry(
        URL,
        {
            "token": "old",
            "refresh_token": "r1",
            "token_endpoint": TOKEN_ENDPOINT,
            "client_id": "corral-cli",
            "refresh_at": refresh_at,
        },
    )


def provider_answers(
    monkeypatch: pytest.MonkeyPatch, status: int, body: dict[str, Any]
) -> list[Any]:
    sent: list[Any] = []

    def post(url: str, data: dict[str, str], timeout: float) -> httpx.Response:
        sent.append((url, data))
        return httpx.Response(status, json=body)

    monkeypatch.setattr(sign_in.httpx, "post", post)
    return sent


def test_a_token_is_renewed_once_due_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    now = int(time.time())
    fresh = unsigned(iat=now, exp=now + 300)
    sent = provider_answers(monkeypatch, 200, {"id_token": fresh, "refresh_token": "r2"})
    signed_in(refresh_at=time.time() + 60)
    assert sign_in.current_token(URL) == "old" and sent == []
    signed_in(refresh_at=time.time() - 1)
    assert sign_in.current_token(URL) == fresh
    assert sent == [
        (
            TOKEN_ENDPOINT,
            {"grant_type": "refresh_token", "refresh_token": "r1", "client_id": "corral-cli"},
        )
    ]
    kept = read_entry(URL)
    assert (kept["refresh_token"], kept["refresh_at"]) == ("r2", now + 300 - 30)


def test_a_refused_renewal_says_to_log_in_again(monkeypatch: pytest.MonkeyPatch) -> None:
    refusal = {"error": "invalid_grant", "error_description": "session ended"}
    provider_answers(monkeypatch, 400, refusal)
    signed_in(refresh_at=time.time() - 1)
    with pytest.raises(UserError) as err:
        sign_in.current_token(URL)
    assert err.value.message == (
        f"Your sign-in to {URL} has expired, and the provider refused to renew it "
        f"(invalid_grant: session ended): run corral login {URL}"
    )


def test_an_unreachable_provider_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def post(url: str, data: dict[str, str], timeout: float) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    monkeypatch.setattr(sign_in.httpx, "post", post)
    with pytest.raises(UserError) as err:
        sign_in.device_flow(DEVICE, print)
    assert err.value.message == (
        "Cannot reach the sign-in provider at http://idp.example.test/device (connection "
        "refused). Check your network; the server's admin sets the provider "
        "(CORRAL_OIDC_ISSUER)."
    )


def test_a_short_lived_token_is_renewed_at_half_its_life() -> None:
    assert sign_in._refresh_at({"iat": 1000, "exp": 1010}) == 1005
    assert sign_in._refresh_at({"iat": 1000, "exp": 4600}) == 4570
    assert sign_in._refresh_at({}) is None


def test_a_device_answer_without_its_code_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    provider_answers(monkeypatch, 200, {"device_code": "d", "verification_uri": "http://v"})
    with pytest.raises(UserError) as err:
        sign_in.device_flow(DEVICE, print)
    assert err.value.message == (
        "the provider's device endpoint http://idp.example.test/device answered without "
        "user_code; ask the server's admin."
    )


def test_odd_intervals_fall_back_to_the_defaults() -> None:
    assert [sign_in._seconds(v, 5.0) for v in (2, 0, -1, "7", True, 1e9, None)] == [
        2.0,
        5.0,
        5.0,
        5.0,
        5.0,
        5.0,
        5.0,
    ]
