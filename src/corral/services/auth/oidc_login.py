"""Signing people in through the trusted OpenID Connect provider (docs/access.md#single-sign-on).

The dashboard is a client of the provider and uses the authorization code flow with PKCE. A
sign-in keeps nothing on the server until it ends: its ``state`` is random, and its ``nonce``
and PKCE verifier are derived from the state with the server's key, so any replica finishes a
sign-in that another began, and no verifier is stored anywhere. A cookie binds the state to the
browser that began the sign-in (``flow_cookie``), and a state is used once: it is recorded
among the ended sessions' ids (``store/revoked_sessions.py``), so a replayed callback fails.

The provider's endpoints come from its discovery document, read again after an hour; when it
cannot be read, sign-ins are refused at once for the next 10 s instead of each waiting on it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from corral.errors import UnauthorizedError, UnavailableError, UserError
from corral.files import read_private_text
from corral.services.auth.oidc import JsonFetcher, OidcIdentity, OidcVerifier

DEFAULT_SCOPES = "openid profile email"
#: How long a browser may take between leaving for the provider and coming back.
SIGN_IN_SECONDS = 600
DISCOVERY_SECONDS = 3600.0
#: After the discovery document could not be read, how long the failure is answered as is.
RETRY_SECONDS = 10.0
HTTP_TIMEOUT_SECONDS = 10.0
#: What a provider answers a silent sign-in (``prompt=none``) that needs the person.
NEEDS_PERSON = frozenset({"login_required", "interaction_required", "consent_required"})

TokenPoster = Callable[[str, Mapping[str, str], tuple[str, str] | None], httpx.Response]
#: Records a sign-in's state as used, until it expires: False when it was used already.
FirstUse = Callable[[str, datetime], bool]


def http_post(url: str, data: Mapping[str, str], auth: tuple[str, str] | None) -> httpx.Response:
    return httpx.post(url, data=dict(data), auth=auth, timeout=HTTP_TIMEOUT_SECONDS)


@dataclass(frozen=True)
class OidcClient:
    """How corral is registered at the provider (``CORRAL_OIDC_CLIENT_*``)."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    #: Where the provider sends the browser back; None: this server's URL + /ui/login/callback.
    redirect_url: str | None = None
    scopes: str = DEFAULT_SCOPES
    #: The public client the CLI signs in with (device flow, loopback PKCE).
    cli_client_id: str | None = None
    #: Shown on the button: "Sign in with <provider_name>".
    provider_name: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> OidcClient | None:
        client_id = environ.get("CORRAL_OIDC_CLIENT_ID")
        if not client_id:
            return None
        return cls(
            client_id=client_id,
            client_secret=_client_secret(environ),
            redirect_url=environ.get("CORRAL_OIDC_REDIRECT_URL") or None,
            scopes=environ.get("CORRAL_OIDC_SCOPES") or DEFAULT_SCOPES,
            cli_client_id=environ.get("CORRAL_OIDC_CLI_CLIENT_ID") or None,
            provider_name=environ.get("CORRAL_OIDC_PROVIDER_NAME") or None,
        )

    @property
    def cli_client(self) -> str:
        return self.cli_client_id or self.client_id

    @property
    def audiences(self) -> list[str]:
        """The clients whose ID tokens the API accepts when no audience is configured."""
        return list(dict.fromkeys([self.client_id, self.cli_client]))


def _client_secret(environ: Mapping[str, str]) -> str | None:
    """The secret from ``CORRAL_OIDC_CLIENT_SECRET``, else from the 0600 file
    ``CORRAL_OIDC_CLIENT_SECRET_FILE`` (never a flag: a command line is visible to all)."""
    if environ.get("CORRAL_OIDC_CLIENT_SECRET"):
        return environ["CORRAL_OIDC_CLIENT_SECRET"]
    name = environ.get("CORRAL_OIDC_CLIENT_SECRET_FILE")
    if not name:
        return None
    text = read_private_text(Path(name), "CORRAL_OIDC_CLIENT_SECRET_FILE")
    return text or None


@dataclass(frozen=True)
class ProviderEndpoints:
    authorization: str
    token: str
    end_session: str | None
    device: str | None


class Provider:
    """The provider's endpoints, from ``<issuer>/.well-known/openid-configuration``."""

    def __init__(self, issuer: str, fetch: JsonFetcher) -> None:
        self.issuer = issuer
        self._fetch = fetch
        self._endpoints: ProviderEndpoints | None = None
        self._read_at = float("-inf")
        self._failure: UnavailableError | None = None
        self._failed_at = float("-inf")
        self._lock = threading.Lock()

    def endpoints(self) -> ProviderEndpoints:
        with self._lock:
            now = time.monotonic()
            if self._failure is not None and now - self._failed_at < RETRY_SECONDS:
                raise self._failure  # fail fast: no request waits on a provider that is down
            if self._endpoints is None or now - self._read_at > DISCOVERY_SECONDS:
                try:
                    self._endpoints = self._discover()
                except UnavailableError as err:
                    self._failure, self._failed_at = err, now
                    raise
                self._failure = None
                self._read_at = now
            return self._endpoints

    def _discover(self) -> ProviderEndpoints:
        url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            document = self._fetch(url)
        except Exception as err:  # network, status or JSON: the person needs the URL and why
            raise UnavailableError(
                f"Cannot reach the OIDC provider at {url} ({err}). Check CORRAL_OIDC_ISSUER, "
                "and that this server can reach the provider."
            ) from None
        if not isinstance(document, dict) or document.get("issuer") != self.issuer:
            found = document.get("issuer") if isinstance(document, dict) else None
            raise UnavailableError(
                f"The discovery document at {url} names the issuer {found!r}, not "
                f"{self.issuer!r}: set CORRAL_OIDC_ISSUER to exactly the provider's issuer."
            )
        endpoints = ProviderEndpoints(
            _text(document, "authorization_endpoint"),
            _text(document, "token_endpoint"),
            _text(document, "end_session_endpoint") or None,
            _text(document, "device_authorization_endpoint") or None,
        )
        if not endpoints.authorization or not endpoints.token:
            raise UnavailableError(
                f"The discovery document at {url} lists no authorization or token endpoint."
            )
        return endpoints


def _text(document: Mapping[str, Any], key: str) -> str:
    value = document.get(key)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Flow:
    """A sign-in under way, as its browser's cookie holds it."""

    state: str
    next: str
    silent: bool
    expires: int


@dataclass(frozen=True)
class SignedIn:
    identity: OidcIdentity
    id_token: str


class SingleSignOn:
    """The dashboard's sign-in through the provider (see the module docstring)."""

    def __init__(
        self,
        client: OidcClient,
        provider: Provider,
        verifier: OidcVerifier,
        key: bytes,
        first_use: FirstUse,
        post: TokenPoster = http_post,
    ) -> None:
        self.client = client
        self.provider = provider
        self._verifier = verifier
        self._key = key
        self._first_use = first_use
        self._post = post

    @property
    def provider_name(self) -> str:
        return self.client.provider_name or urlsplit(self.provider.issuer).hostname or "SSO"

    # -- starting ----------------------------------------------------------------------------

    def begin(self, redirect_url: str, next_page: str, silent: bool) -> tuple[str, str]:
        """Where to send the browser, and the cookie that binds the sign-in to it."""
        state = secrets.token_urlsafe(32)
        query = {
            "response_type": "code",
            "client_id": self.client.client_id,
            "redirect_uri": redirect_url,
            "scope": self.client.scopes,
            "state": state,
            "nonce": self._derived("nonce", state),
            "code_challenge": _s256(self._derived("pkce", state)),
            "code_challenge_method": "S256",
        }
        if silent:
            query["prompt"] = "none"
        url = _with_query(self.provider.endpoints().authorization, query)
        flow = Flow(state, next_page, silent, int(time.time()) + SIGN_IN_SECONDS)
        return url, self._seal(flow)

    def _derived(self, purpose: str, state: str) -> str:
        return _b64(
            hmac.new(self._key, f"oidc-{purpose}:{state}".encode(), hashlib.sha256).digest()
        )

    def _seal(self, flow: Flow) -> str:
        body = _b64(json.dumps(flow.__dict__, separators=(",", ":")).encode())
        return f"{body}.{self._mac(body)}"

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, f"oidc-flow:{body}".encode(), hashlib.sha256).digest())

    # -- coming back -------------------------------------------------------------------------

    def flow(self, cookie: str | None, state: str) -> Flow:
        """The sign-in this browser began, if ``state`` is its and was not used before; 400
        otherwise."""
        body, _, mac = (cookie or "").partition(".")
        if not body or not hmac.compare_digest(self._mac(body), mac):
            raise UserError(
                "This sign-in was not started in this browser (its cookie is missing or was "
                "changed). Start again from the login page."
            )
        flow = Flow(**json.loads(base64.urlsafe_b64decode(body + "==")))
        if flow.expires < time.time():
            raise UserError(
                f"This sign-in took over {SIGN_IN_SECONDS // 60} minutes. Start again from "
                "the login page."
            )
        if not hmac.compare_digest(flow.state.encode(), state.encode()):
            raise UserError(
                "The provider came back with another sign-in's state: this is not the sign-in "
                "this browser began. Start again from the login page."
            )
        used = "oidc:" + hashlib.sha256(state.encode()).hexdigest()[:59]
        if not self._first_use(used, datetime.fromtimestamp(flow.expires, UTC)):
            raise UserError(
                "This sign-in was finished already (its answer from the provider came twice). "
                "Start again from the login page."
            )
        return flow

    def finish(self, code: str, flow: Flow, redirect_url: str) -> SignedIn:
        """Exchange ``code`` for the ID token and check it (signature, issuer, audience,
        expiry, nonce); 401 with the reason otherwise."""
        answer = self._token(
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect_url,
                "code_verifier": self._derived("pkce", flow.state),
            }
        )
        id_token = answer.get("id_token")
        if not isinstance(id_token, str):
            raise UnauthorizedError(
                "The provider answered without an ID token: add the 'openid' scope to "
                "CORRAL_OIDC_SCOPES."
            )
        claims = self._verifier.fresh_claims(id_token, self.client.client_id)
        nonce = claims.get("nonce")
        if not isinstance(nonce, str) or not hmac.compare_digest(
            nonce.encode(), self._derived("nonce", flow.state).encode()
        ):
            raise UnauthorizedError(
                "The ID token's nonce is not this sign-in's: it was issued for another "
                "sign-in (replayed or injected). Sign in again."
            )
        return SignedIn(self._verifier.identity(claims), id_token)

    def _token(self, form: dict[str, str]) -> dict[str, Any]:
        url = self.provider.endpoints().token
        auth = None
        if self.client.client_secret is not None:
            auth = (self.client.client_id, self.client.client_secret)
        else:
            form["client_id"] = self.client.client_id
        try:
            response = self._post(url, form, auth)
        except httpx.HTTPError as err:
            raise UnavailableError(
                f"Cannot reach the OIDC provider's token endpoint {url} ({err}). Check that "
                "this server can reach the provider (CORRAL_OIDC_ISSUER)."
            ) from None
        return _token_answer(response, url)

    def end_session_url(self, id_token: str | None, after: str) -> str | None:
        """Where to send the browser to end its session at the provider as well (None: the
        provider advertises no ``end_session_endpoint``, or cannot be reached)."""
        try:
            endpoint = self.provider.endpoints().end_session
        except UnavailableError:
            return None
        if endpoint is None:
            return None
        query = {"client_id": self.client.client_id, "post_logout_redirect_uri": after}
        if id_token:
            query["id_token_hint"] = id_token
        return _with_query(endpoint, query)


def _token_answer(response: httpx.Response, url: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise UnavailableError(
            f"The provider's token endpoint {url} answered {response.status_code} without JSON."
        )
    if response.status_code != 200:
        error = str(body.get("error", "error"))
        hint = (
            " Check CORRAL_OIDC_CLIENT_ID and the client secret."
            if error in ("invalid_client", "unauthorized_client")
            else ""
        )
        described = body.get("error_description")
        why = f"{error}: {described}" if described else error
        raise UnauthorizedError(f"The provider refused the sign-in ({why}).{hint}")
    return body


def _with_query(url: str, query: Mapping[str, str]) -> str:
    return url + ("&" if urlsplit(url).query else "?") + urlencode(query)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _s256(verifier: str) -> str:
    return _b64(hashlib.sha256(verifier.encode()).digest())
