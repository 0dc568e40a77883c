"""OIDC issuer trust: RS256/ES256 tokens verified against the issuer's JWKS, groups → roles.

Keys are generated here; the JWKS is served by an injected fetcher, and once by a real local
HTTP server through OIDC discovery (the default fetcher)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi.testclient import TestClient

from corral.api.app import create_app
from corral.api.auth import AuthSettings
from corral.services.auth.oidc import OidcSettings
from corral.services.runtime import Runtime

ISSUER = "https://idp.example.test/realms/corral"
AUDIENCE = "corral-api"

ROLES = {
    "gpu-users": {"external_roles": ["idp-gpu"], "sync_mode": "import"},
    "forced": {"external_roles": ["idp-forced"], "sync_mode": "force"},
    "ignored": {"external_roles": ["idp-ignored"], "sync_mode": "ignore"},
    "unmapped": {"external_roles": [], "sync_mode": "force"},
}


@dataclass
class Idp:
    rsa_key: rsa.RSAPrivateKey
    ec_key: ec.EllipticCurvePrivateKey
    fetched: list[str]

    def jwks(self) -> dict[str, Any]:
        rsa_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.rsa_key.public_key()))
        ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.ec_key.public_key()))
        return {"keys": [{**rsa_jwk, "kid": "rsa1", "use": "sig"}, {**ec_jwk, "kid": "ec1"}]}

    def fetch(self, url: str) -> Any:
        self.fetched.append(url)
        return self.jwks()

    def token(
        self, *, key: Any = None, alg: str = "RS256", kid: str = "rsa1", **claims: Any
    ) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300, **claims}
        signing = key or (self.ec_key if alg == "ES256" else self.rsa_key)
        return jwt.encode(body, signing, algorithm=alg, headers={"kid": kid})


@pytest.fixture(scope="module")
def idp() -> Idp:
    return Idp(
        rsa.generate_private_key(public_exponent=65537, key_size=2048),
        ec.generate_private_key(ec.SECP256R1()),
        [],
    )


@dataclass
class Oidc:
    client: TestClient
    runtime: Runtime
    admin: str
    idp: Idp

    def get(self, path: str, token: str) -> tuple[int, Any]:
        response = self.client.get(path, headers={"Authorization": f"Bearer {token}"})
        return response.status_code, response.json()

    def login(self, username: str, groups: list[str]) -> dict[str, Any]:
        token = self.idp.token(sub=f"id-{username}", preferred_username=username, groups=groups)
        status, body = self.get("/api/profile/settings", token)
        assert status == 200, body
        return body

    def admin_call(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.admin}"}
        response = self.client.request(method, path, headers=headers, **kwargs)
        assert response.status_code < 300, response.json()
        return response.json()


def add_roles(runtime: Runtime, client: TestClient, admin: str) -> None:
    roles = {name: {"description": name, "policies": [], **body} for name, body in ROLES.items()}
    response = client.post(
        "/api/configs/apply",
        json={"bundle": {"roles": roles}},
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert response.status_code == 200, response.json()


@pytest.fixture
def oidc(runtime: Runtime, idp: Idp) -> Oidc:
    settings = AuthSettings(
        session_key=b"s" * 32,
        oidc=OidcSettings(ISSUER, AUDIENCE, jwks_url="https://idp.example.test/jwks"),
        jwks_fetch=idp.fetch,
    )
    client = TestClient(create_app(runtime, settings), raise_server_exceptions=False)
    admin = runtime.tokens.create(name="admin", username="admin", roles=["osmo-admin"])
    add_roles(runtime, client, admin)
    return Oidc(client, runtime, admin, idp)


def test_a_valid_token_maps_groups_to_roles_and_creates_the_user(oidc: Oidc) -> None:
    body = oidc.login("ann", ["idp-gpu", "osmo-user", "idp-ignored", "unmapped", "strangers"])
    # osmo-user: no external_roles → the group of the same name; [] maps nothing
    assert body["roles"] == ["gpu-users", "osmo-user"]
    assert body["pools"] == ["default"]
    user = oidc.admin_call("GET", "/api/auth/user/ann")
    assert ([r["role_name"] for r in user["roles"]], user["created_by"]) == (
        ["gpu-users", "osmo-user"],
        "oidc",
    )
    assert {r["assigned_by"] for r in user["roles"]} == {"oidc"}


def test_es256_tokens_are_accepted(oidc: Oidc) -> None:
    token = oidc.idp.token(alg="ES256", kid="ec1", preferred_username="eve", groups=[])
    assert oidc.get("/api/profile/settings", token)[1]["profile"]["username"] == "eve"


def test_import_adds_and_never_removes(oidc: Oidc) -> None:
    assert oidc.login("ann", ["idp-gpu"])["roles"] == ["gpu-users"]
    assert oidc.login("ann", [])["roles"] == ["gpu-users"]


def test_force_adds_and_removes(oidc: Oidc) -> None:
    assert oidc.login("ann", ["idp-forced"])["roles"] == ["forced"]
    assert oidc.login("ann", [])["roles"] == []
    oidc.admin_call("POST", "/api/auth/user/ann/roles", json={"role_name": "forced"})
    oidc.admin_call("POST", "/api/auth/user/ann/roles", json={"role_name": "unmapped"})
    # force roles follow the IdP even when an admin assigned them
    assert oidc.login("ann", [])["roles"] == []


def test_ignore_never_changes(oidc: Oidc) -> None:
    assert oidc.login("ann", ["idp-ignored"])["roles"] == []
    oidc.admin_call("POST", "/api/auth/user/ann/roles", json={"role_name": "ignored"})
    assert oidc.login("ann", [])["roles"] == ["ignored"]


def test_admin_assigned_roles_without_mapping_are_kept(oidc: Oidc) -> None:
    oidc.admin_call("POST", "/api/auth/user", json={"id": "ann", "roles": ["osmo-admin"]})
    assert oidc.login("ann", ["idp-gpu"])["roles"] == ["gpu-users", "osmo-admin"]


def test_the_groups_claim_is_configurable(runtime: Runtime, idp: Idp) -> None:
    settings = AuthSettings(
        session_key=b"s" * 32,
        oidc=OidcSettings(ISSUER, None, "https://x/jwks", groups_claim="roles"),
        jwks_fetch=idp.fetch,
    )
    client = TestClient(create_app(runtime, settings))
    token = idp.token(aud="anything", email="fay@example.test", roles="osmo-user")
    response = client.get("/api/profile/settings", headers={"Authorization": f"Bearer {token}"})
    assert (response.json()["profile"]["username"], response.json()["roles"]) == (
        "fay@example.test",
        ["osmo-user"],
    )


REFUSALS = [
    (
        {"iss": "https://evil.example.test"},
        {},
        f"The identity token was not issued by the trusted issuer {ISSUER}.",
    ),
    (
        {"aud": "someone-else"},
        {},
        "The identity token is not meant for this server: its audience must include "
        f"{AUDIENCE} (CORRAL_OIDC_AUDIENCE, CORRAL_OIDC_CLIENT_ID).",
    ),
    ({"exp": int(time.time()) - 60}, {}, "The identity token has expired; log in again."),
    (
        {},
        {"kid": "rsa9"},
        "The identity token is signed with key 'rsa9', which the issuer's JWKS does not list.",
    ),
    (
        {},
        {"kid": "k" * 20_000},
        "The identity token is signed with key "
        f"'{'k' * 64}'… (20,000 characters), which the issuer's JWKS does not list.",
    ),
    (
        {"preferred_username": None, "sub": None},
        {},
        "The identity token names no user: it has no preferred_username or email or sub claim.",
    ),
]


@pytest.mark.parametrize(("claims", "header", "message"), REFUSALS)
def test_refusals(oidc: Oidc, claims: dict[str, Any], header: dict[str, Any], message: str) -> None:
    base = {"preferred_username": "ann", "groups": ["osmo-user"]}
    merged = {k: v for k, v in {**base, **claims}.items() if v is not None}
    token = oidc.idp.token(**header, **merged)
    assert oidc.get("/api/pool", token) == (401, {"message": message, "error_code": "UNAUTHORIZED"})
    assert oidc.runtime.users.get("ann") is None  # nothing synced from a refused token


def test_a_bad_signature_is_refused(oidc: Oidc) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = oidc.idp.token(key=other, preferred_username="ann")
    assert oidc.get("/api/pool", token)[1]["message"] == (
        "The identity token's signature does not verify against the issuer's keys."
    )


def test_a_shared_secret_token_claiming_the_issuer_is_refused(oidc: Oidc) -> None:
    token = jwt.encode(
        {"iss": ISSUER, "sub": "x", "exp": int(time.time()) + 60},
        "k" * 32,
        algorithm="HS256",
        headers={"kid": "rsa1"},
    )
    assert oidc.get("/api/pool", token)[1]["message"] == (
        "The identity token is signed with HS256; corral accepts RS256 and ES256 tokens from "
        "the OIDC issuer."
    )


def test_session_tokens_still_work_next_to_oidc(oidc: Oidc) -> None:
    response = oidc.client.post(
        "/api/auth/session", headers={"Authorization": f"Bearer {oidc.admin}"}
    )
    status, body = oidc.get("/api/auth/user", response.json()["token"])
    assert status == 200 and [u["id"] for u in body["users"]] == ["admin"]


def test_keys_are_fetched_once_and_cached(oidc: Oidc) -> None:
    before = len(oidc.idp.fetched)
    oidc.login("ann", [])
    oidc.login("ann", [])
    oidc.get("/api/pool", oidc.idp.token(kid="unknown", preferred_username="ann"))
    assert len(oidc.idp.fetched) - before == 1  # an unknown kid refetches at most once a minute


# ----------------------------------------------------------- discovery over real HTTP


@pytest.fixture
def http_idp(idp: Idp) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            documents = {
                "/.well-known/openid-configuration": {"issuer": base, "jwks_uri": f"{base}/k"},
                "/k": idp.jwks(),
            }
            data = json.dumps(documents.get(self.path, {})).encode()
            self.send_response(200 if self.path in documents else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_discovery_over_http(runtime: Runtime, idp: Idp, http_idp: str) -> None:
    settings = AuthSettings(session_key=b"s" * 32, oidc=OidcSettings(http_idp, AUDIENCE))
    client = TestClient(create_app(runtime, settings))
    token = idp.token(iss=http_idp, preferred_username="gus", groups=["osmo-user"])
    response = client.get("/api/pool", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.json()
    assert list(response.json()["pools"]) == ["default"]
