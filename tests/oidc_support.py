"""The tests' OpenID Connect provider (``tests/oidc_provider.py``): the one ``./scripts/test``
started (``CORRAL_TEST_OIDC_PROVIDER``), else one started for this test session; and the
settings that make a ``corral server`` its client."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import REPO

PROVIDER_ENV = "CORRAL_TEST_OIDC_PROVIDER"
DASHBOARD = "corral-dashboard"
DASHBOARD_SECRET = "dashboard-secret"
CLI = "corral-cli"
OTHER = "other-app"


@dataclass(frozen=True)
class Provider:
    issuer: str

    def put_user(
        self, sub: str, groups: list[str], *, token_seconds: int = 300, clock_offset: int = 0
    ) -> None:
        body = {
            "claims": {"groups": groups, "email": f"{sub}@example.com"},
            "token_seconds": token_seconds,
            "clock_offset": clock_offset,
        }
        httpx.put(f"{self.issuer}/test/users/{sub}", json=body, timeout=10).raise_for_status()

    def events(self, kind: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.issuer}/test/events", timeout=10).json()
        return [event for event in answer["events"] if event["kind"] == kind]

    def approve_device(self, user_code: str, sub: str) -> None:
        form = {"user_code": user_code, "username": sub, "action": "approve"}
        httpx.post(f"{self.issuer}/device", data=form, timeout=10).raise_for_status()

    def device_tokens(self, client_id: str, sub: str) -> dict[str, Any]:
        """The provider's tokens for ``sub``, issued to ``client_id`` by the device flow."""
        start = httpx.post(
            f"{self.issuer}/device_authorization",
            data={"client_id": client_id, "scope": "openid profile"},
            timeout=10,
        ).json()
        self.approve_device(start["user_code"], sub)
        form = {
            "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
            "device_code": start["device_code"],
            "client_id": client_id,
        }
        answer = httpx.post(f"{self.issuer}/token", data=form, timeout=10)
        answer.raise_for_status()
        return dict(answer.json())

    def server_env(self, home: Path, client_id: str = DASHBOARD) -> dict[str, str]:
        """What makes a ``corral server`` sign people in through this provider (the secret in
        a 0600 file, as in production)."""
        secret = home / "oidc-client-secret"
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_text(DASHBOARD_SECRET + "\n")
        secret.chmod(0o600)
        return {
            "CORRAL_OIDC_ISSUER": self.issuer,
            "CORRAL_OIDC_CLIENT_ID": client_id,
            "CORRAL_OIDC_CLIENT_SECRET_FILE": str(secret),
            "CORRAL_OIDC_CLI_CLIENT_ID": CLI,
            "CORRAL_OIDC_PROVIDER_NAME": "Test IdP",
        }


@contextmanager
def running_provider() -> Iterator[Provider]:
    configured = os.environ.get(PROVIDER_ENV)
    if configured:
        yield Provider(configured.rstrip("/"))
        return
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.oidc_provider"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the test OIDC provider did not start: {line!r}")
        provider = Provider(line.split()[-1])
        _wait_for(provider)
        yield provider
    finally:
        process.terminate()
        process.wait(timeout=10)


def _wait_for(provider: Provider) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"the test OIDC provider at {provider.issuer} does not answer")


@dataclass(frozen=True)
class SignInAttempt:
    """A dashboard sign-in driven without a browser: where the provider was asked to sign in,
    and corral's answer to the provider's redirect back."""

    authorize_url: str
    callback: httpx.Response
    client: httpx.Client


def sign_in_without_browser(
    server_url: str,
    provider: Provider,
    user: str,
    *,
    next_page: str = "/ui",
    change: Callable[[str], str] = lambda url: url,
) -> SignInAttempt:
    """Start a sign-in at corral, sign in at the provider as ``user`` (``change`` may alter
    the authorization request first), and bring the answer back to corral's callback."""
    client = httpx.Client(timeout=30)
    started = client.get(f"{server_url}/ui/login/sso", params={"next": next_page})
    assert started.status_code == 303, started.text
    authorize_url = change(started.headers["location"])
    form = {"username": user, "action": "approve"}
    approved = client.post(authorize_url, data=form)
    assert approved.status_code == 302, approved.text
    callback = client.get(approved.headers["location"])
    return SignInAttempt(authorize_url, callback, client)
