"""An OpenID Connect provider for the tests, run as a process: ``python -m tests.oidc_provider``.

It is built from authlib's server side, which implements the specifications the flows rest on:
the authorization code and refresh grants (RFC 6749), PKCE (RFC 7636, required of every client,
S256 only), the device authorization grant (RFC 8628), and OpenID Connect Core's ID tokens
(RS256, with ``nonce``). ``oidc-provider-mock`` (PyPI) was read first and not used: its codes
keep no PKCE challenge, so a wrong ``code_verifier`` passes, and it has no device flow.

Clients: ``corral-dashboard`` (confidential, secret ``dashboard-secret``), ``corral-cli``
(public), and ``other-app`` (public; not corral's). Any loopback redirect URL is accepted. A
user signs in by typing a name on the authorize page (or the device page); the provider then
remembers the browser (a cookie), so a second sign-in, or ``prompt=none``, needs no page, until
``/end_session``.

Test controls, under ``/test``:

- ``PUT /test/users/<sub>``: ``{"claims": {...}, "token_seconds": N, "clock_offset": S}``, the
  user's claims (``groups``, ``preferred_username``...), how long their tokens live (default
  300 s), and how far the provider's clock is off when it signs their tokens;
- ``GET /test/events``: what happened, in order (``{"kind": "end_session", ...}``,
  ``{"kind": "token", "grant_type": ...}``).

It prints ``listening on <issuer>`` once it serves.
"""

from __future__ import annotations

import argparse
import hmac
import html
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import flask
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, TokenMixin, grants
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc8628 import (
    DeviceAuthorizationEndpoint,
    DeviceCodeGrant,
    DeviceCredentialDict,
)
from authlib.oidc.core import AuthorizationCodeMixin, OpenIDCode, OpenIDToken, UserInfo
from joserfc.jwk import RSAKey
from werkzeug.serving import make_server

DASHBOARD = "corral-dashboard"
DASHBOARD_SECRET = "dashboard-secret"
CLI = "corral-cli"
#: A client that is not corral's: its tokens are signed by the provider, for someone else.
OTHER = "other-app"
SCOPES = ("openid", "profile", "email", "groups", "offline_access")
SESSION_COOKIE = "op_session"


@dataclass
class User:
    sub: str
    claims: dict[str, Any]
    token_seconds: int = 300
    clock_offset: int = 0


@dataclass
class Client(ClientMixin):  # type: ignore[misc]
    client_id: str
    secret: str | None

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> None:
        return None

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in (scope or "").split() if s in SCOPES)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return urlsplit(redirect_uri).hostname in ("127.0.0.1", "localhost")

    def check_client_secret(self, client_secret: str) -> bool:
        return self.secret is not None and hmac.compare_digest(self.secret, client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if self.secret is None:
            return method == "none"
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in (
            "authorization_code",
            "refresh_token",
            DeviceCodeGrant.GRANT_TYPE,
        )


@dataclass
class Code(AuthorizationCodeMixin):  # type: ignore[misc]
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    sub: str
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time


@dataclass
class RefreshToken(TokenMixin):  # type: ignore[misc]
    token: str
    client_id: str
    scope: str
    sub: str
    revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return 86400

    def is_expired(self) -> bool:
        return False

    def is_revoked(self) -> bool:
        return self.revoked


class Store:
    """Everything the provider knows, in memory, behind one lock."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.key = RSAKey.generate_key(2048, {"kid": secrets.token_hex(8)}, private=True)
        self.clients = {
            DASHBOARD: Client(DASHBOARD, DASHBOARD_SECRET),
            CLI: Client(CLI, None),
            OTHER: Client(OTHER, None),
        }
        self.users: dict[str, User] = {}
        self.codes: dict[str, Code] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.devices: dict[str, DeviceCredentialDict] = {}
        self.device_grants: dict[str, tuple[str, bool]] = {}  # user code -> (sub, approved)
        self.browsers: dict[str, str] = {}  # provider session cookie -> sub
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def user(self, sub: str) -> User:
        with self.lock:
            return self.users.setdefault(sub, User(sub, {"preferred_username": sub}))

    def note(self, kind: str, **details: Any) -> None:
        with self.lock:
            self.events.append({"kind": kind, **details})


STORE: Store  # set by serve()


def _now_for(sub: str) -> int:
    return int(time.time()) + STORE.user(sub).clock_offset


class IdTokens(OpenIDToken):  # type: ignore[misc]
    """ID tokens signed with the provider's key, for every grant that issues tokens."""

    def resolve_client_private_key(self, client: Client) -> RSAKey:
        return STORE.key

    def get_client_algorithm(self, client: Client) -> str:
        return "RS256"

    def get_encode_header(self, client: Client) -> dict[str, str]:
        return {"alg": "RS256", "kid": str(STORE.key.kid)}

    def get_client_claims(self, client: Client) -> dict[str, Any]:
        return {"iss": STORE.issuer, "aud": [client.get_client_id()]}

    def get_compatible_claims(self, request: Any) -> dict[str, Any]:
        user = STORE.user(request.user.sub)
        now = _now_for(user.sub)
        claims = self.get_client_claims(request.client)
        claims.update(iat=now, auth_time=now, exp=now + user.token_seconds)
        return claims

    def generate_user_info(self, user: User, scope: str) -> UserInfo:
        return UserInfo(sub=user.sub, **STORE.user(user.sub).claims)

    def exists_nonce(self, nonce: str, request: Any) -> bool:
        with STORE.lock:
            return any(code.nonce == nonce for code in STORE.codes.values())


class CodeIdTokens(IdTokens, OpenIDCode):  # type: ignore[misc]
    pass


_PUBLIC_TOO = ["client_secret_basic", "client_secret_post", "none"]


class CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = _PUBLIC_TOO

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        with STORE.lock:
            STORE.codes[code] = Code(
                code,
                request.client.client_id,
                request.payload.redirect_uri,
                request.payload.scope,
                request.user.sub,
                data.get("nonce"),
                data.get("code_challenge"),
                data.get("code_challenge_method"),
            )

    def query_authorization_code(self, code: str, client: Client) -> Code | None:
        with STORE.lock:
            found = STORE.codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        with STORE.lock:
            STORE.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: Code) -> User:
        return STORE.user(authorization_code.sub)


class RefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = _PUBLIC_TOO
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str) -> RefreshToken | None:
        with STORE.lock:
            found = STORE.refresh.get(refresh_token)
        return found if found is not None and not found.revoked else None

    def authenticate_user(self, refresh_token: RefreshToken) -> User:
        return STORE.user(refresh_token.sub)

    def revoke_old_credential(self, refresh_token: RefreshToken) -> None:
        refresh_token.revoked = True


class DeviceGrant(DeviceCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = _PUBLIC_TOO

    def query_device_credential(self, device_code: str) -> DeviceCredentialDict | None:
        with STORE.lock:
            return STORE.devices.get(device_code)

    def query_user_grant(self, user_code: str) -> tuple[User, bool] | None:
        with STORE.lock:
            grant = STORE.device_grants.get(user_code)
        if grant is None:
            return None
        return STORE.user(grant[0]), grant[1]

    def should_slow_down(self, credential: DeviceCredentialDict) -> bool:
        return False


class DeviceEndpoint(DeviceAuthorizationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = _PUBLIC_TOO
    INTERVAL = 1

    def get_verification_uri(self) -> str:
        return STORE.issuer + "/device"

    def save_device_credential(self, client_id: str, scope: str, data: dict[str, Any]) -> None:
        credential = DeviceCredentialDict(
            client_id=client_id,
            scope=scope,
            expires_at=int(time.time()) + data["expires_in"],
            **data,
        )
        with STORE.lock:
            STORE.devices[data["device_code"]] = credential


def _save_token(token: dict[str, Any], request: Any) -> None:
    if "refresh_token" in token:
        with STORE.lock:
            STORE.refresh[token["refresh_token"]] = RefreshToken(
                token["refresh_token"],
                request.client.client_id,
                token.get("scope", ""),
                request.user.sub,
            )


def _expires_in(client: Client, grant_type: str) -> int:
    return 300  # replaced per user in _token_generator


def _token_generator(generator: BearerTokenGenerator) -> Any:
    def generate(grant_type: str, client: Client, user: User | None = None, **kw: Any) -> Any:
        token = generator(grant_type, client, user=user, **kw)
        if user is not None:
            token["expires_in"] = STORE.user(user.sub).token_seconds
        return token

    return generate


def _server(app: flask.Flask) -> AuthorizationServer:
    server = AuthorizationServer(app, query_client=STORE.clients.get, save_token=_save_token)
    bearer = BearerTokenGenerator(
        access_token_generator=lambda **_: secrets.token_urlsafe(32),
        refresh_token_generator=lambda **_: secrets.token_urlsafe(32),
        expires_generator=_expires_in,
    )
    server.register_token_generator("default", _token_generator(bearer))
    server.register_grant(CodeGrant, [CodeChallenge(required=True), CodeIdTokens()])
    server.register_grant(RefreshGrant, [IdTokens()])
    server.register_grant(DeviceGrant, [IdTokens()])
    server.register_endpoint(DeviceEndpoint)
    return server


def _page(title: str, body: str, status: int = 200) -> flask.Response:
    html = f"<!doctype html><title>{title}</title><h1>{title}</h1>{body}"
    return flask.Response(html, status, mimetype="text/html")


def _signed_in_user() -> User | None:
    cookie = flask.request.cookies.get(SESSION_COOKIE, "")
    with STORE.lock:
        sub = STORE.browsers.get(cookie)
    return STORE.user(sub) if sub else None


def _remember_browser(response: flask.Response, sub: str) -> flask.Response:
    cookie = secrets.token_urlsafe(16)
    with STORE.lock:
        STORE.browsers[cookie] = sub
    response.set_cookie(SESSION_COOKIE, cookie, httponly=True, samesite="Lax")
    return response


def _sign_in_form(extra: str = "") -> str:
    return (
        f'<form method="post">{extra}<label>Username <input name="username" autofocus></label>'
        '<button name="action" value="approve">Sign in</button>'
        '<button name="action" value="deny">Deny</button></form>'
    )


def make_app() -> flask.Flask:
    app = flask.Flask(__name__)
    server = _server(app)

    @app.get("/.well-known/openid-configuration")
    def discovery() -> Any:
        issuer = STORE.issuer
        return {
            "issuer": issuer,
            "authorization_endpoint": issuer + "/authorize",
            "token_endpoint": issuer + "/token",
            "jwks_uri": issuer + "/jwks",
            "end_session_endpoint": issuer + "/end_session",
            "device_authorization_endpoint": issuer + "/device_authorization",
            "response_types_supported": ["code"],
            "grant_types_supported": [
                "authorization_code",
                "refresh_token",
                DeviceGrant.GRANT_TYPE,
            ],
            "code_challenge_methods_supported": ["S256"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "subject_types_supported": ["public"],
            "scopes_supported": list(SCOPES),
        }

    @app.get("/jwks")
    def jwks() -> Any:
        return {"keys": [STORE.key.as_dict(private=False)]}

    @app.route("/authorize", methods=["GET", "POST"])
    def authorize() -> Any:
        user = _signed_in_user()
        if flask.request.method == "GET":
            try:
                server.get_consent_grant(end_user=user)
            except OAuth2Error as err:
                if err.redirect_uri:
                    return server.handle_error_response(flask.request, err)
                return _page("Bad request", f"<p>{err.error}: {err.description}</p>", 400)
            if user is not None:
                return server.create_authorization_response(grant_user=user)
            return _page("Sign in to the test provider", _sign_in_form())
        form = flask.request.form
        if form.get("action") == "deny":
            return server.create_authorization_response(grant_user=None)
        user = STORE.user(form.get("username", "").strip() or "anonymous")
        return _remember_browser(server.create_authorization_response(grant_user=user), user.sub)

    @app.post("/token")
    def token() -> Any:
        STORE.note("token", grant_type=flask.request.form.get("grant_type"))
        return server.create_token_response()

    @app.post("/device_authorization")
    def device_authorization() -> Any:
        return server.create_endpoint_response(DeviceEndpoint.ENDPOINT_NAME)

    @app.route("/device", methods=["GET", "POST"])
    def device() -> Any:
        if flask.request.method == "GET":
            code = flask.request.args.get("user_code", "")
            field = f'<label>Code <input name="user_code" value="{html.escape(code)}"></label>'
            return _page("Sign in a device", _sign_in_form(field))
        form = flask.request.form
        with STORE.lock:
            STORE.device_grants[form["user_code"]] = (
                form.get("username", "anonymous"),
                form.get("action") != "deny",
            )
        return _page("Device signed in", "<p>You may close this page.</p>")

    @app.get("/end_session")
    def end_session() -> Any:
        args = flask.request.args
        STORE.note("end_session", **{k: args[k] for k in args})
        with STORE.lock:
            STORE.browsers.pop(flask.request.cookies.get(SESSION_COOKIE, ""), None)
        target = args.get("post_logout_redirect_uri")
        if target and urlsplit(target).hostname in ("127.0.0.1", "localhost"):
            state = args.get("state")
            answer = flask.redirect(target + (f"?{urlencode({'state': state})}" if state else ""))
        else:
            answer = _page("Signed out of the test provider", "")
        answer.delete_cookie(SESSION_COOKIE)
        return answer

    @app.put("/test/users/<sub>")
    def set_user(sub: str) -> Any:
        body = flask.request.get_json()
        user = User(
            sub,
            {"preferred_username": sub, **body.get("claims", {})},
            int(body.get("token_seconds", 300)),
            int(body.get("clock_offset", 0)),
        )
        with STORE.lock:
            STORE.users[sub] = user
        return {"sub": sub}

    @app.get("/test/events")
    def events() -> Any:
        with STORE.lock:
            return {"events": list(STORE.events)}

    return app


def serve(host: str = "127.0.0.1", port: int = 0, issuer_host: str = "localhost") -> None:
    """Serve on ``host``; the issuer is named by ``issuer_host``, another site than the
    ``127.0.0.1`` the tests' corral servers use, so cookies cross sites as in production."""
    global STORE
    http = make_server(host, port, None, threaded=True)  # type: ignore[arg-type]
    STORE = Store(f"http://{issuer_host}:{http.server_port}")
    http.app = make_app()
    print(f"listening on {STORE.issuer}", flush=True)
    http.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--issuer-host", default="localhost")
    arguments = parser.parse_args()
    serve(arguments.host, arguments.port, arguments.issuer_host)


if __name__ == "__main__":
    main()
