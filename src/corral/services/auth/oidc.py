"""Trusting an OpenID Connect issuer: verify its signed ID/access tokens, read user and groups.

Configured by ``CORRAL_OIDC_ISSUER`` (required to enable), ``CORRAL_OIDC_AUDIENCE`` (checked when
set), ``CORRAL_OIDC_JWKS_URL`` (default: the ``jwks_uri`` of the issuer's discovery document),
``CORRAL_OIDC_GROUPS_CLAIM`` (default ``groups``) and ``CORRAL_OIDC_USERNAME_CLAIM`` (default:
``preferred_username``, else ``email``, else ``sub``). Only asymmetric signatures (RS256, ES256)
are accepted, so a token signed with a shared secret can never pass as the issuer's.

Fetching is injectable (``fetch(url) -> JSON``) so that tests serve keys without a network.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from corral.errors import UnauthorizedError, quoted

ALGORITHMS = ("RS256", "ES256")
USERNAME_CLAIMS = ("preferred_username", "email", "sub")
REFETCH_AFTER_SECONDS = 60.0
EXPIRED = "The identity token has expired; log in again."
#: How far the clocks of this server and the issuer may differ before a token is refused.
CLOCK_LEEWAY_SECONDS = 60

JsonFetcher = Callable[[str], Any]


def http_fetch(url: str) -> Any:
    response = httpx.get(url, timeout=10.0)
    response.raise_for_status()
    return response.json()


@dataclass(frozen=True)
class OidcSettings:
    issuer: str
    audience: str | None = None
    jwks_url: str | None = None
    groups_claim: str = "groups"
    username_claim: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> OidcSettings | None:
        issuer = environ.get("CORRAL_OIDC_ISSUER")
        if not issuer:
            return None
        return cls(
            issuer=issuer,
            audience=environ.get("CORRAL_OIDC_AUDIENCE") or None,
            jwks_url=environ.get("CORRAL_OIDC_JWKS_URL") or None,
            groups_claim=environ.get("CORRAL_OIDC_GROUPS_CLAIM") or "groups",
            username_claim=environ.get("CORRAL_OIDC_USERNAME_CLAIM") or None,
        )


@dataclass(frozen=True)
class OidcIdentity:
    username: str
    groups: list[str]


class OidcVerifier:
    def __init__(self, settings: OidcSettings, fetch: JsonFetcher = http_fetch) -> None:
        self.settings = settings
        self._fetch = fetch
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")

    # --------------------------------------------------------------------------- keys

    def _jwks_url(self) -> str:
        if self.settings.jwks_url:
            return self.settings.jwks_url
        discovery = self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = self._fetch(discovery)
        url = document.get("jwks_uri") if isinstance(document, dict) else None
        if not isinstance(url, str):
            raise UnauthorizedError(f"The issuer's discovery document {discovery} has no jwks_uri.")
        return url

    def _refresh(self) -> None:
        url = self.settings.jwks_url or "the issuer's JWKS"
        try:
            url = self._jwks_url()
            keys = jwt.PyJWKSet.from_dict(self._fetch(url)).keys
        except UnauthorizedError:
            raise
        except Exception as err:  # network, JSON or key-format trouble: say where
            message = f"Cannot read the OIDC issuer's keys from {url}: {err}"
            raise UnauthorizedError(message) from None
        self._keys = {str(key.key_id): key for key in keys if key.key_id}
        self._fetched_at = time.monotonic()

    def _key(self, kid: str | None) -> jwt.PyJWK:
        if kid is None:
            raise UnauthorizedError("The identity token has no key id (kid) in its header.")
        stale = time.monotonic() - self._fetched_at > REFETCH_AFTER_SECONDS
        if kid not in self._keys and stale:  # new key after a rotation: fetch at most once a minute
            self._refresh()
        if kid not in self._keys:
            raise UnauthorizedError(
                f"The identity token is signed with key {quoted(kid)}, which the issuer's JWKS "
                "does not list."
            )
        return self._keys[kid]

    # ------------------------------------------------------------------------- verify

    def verify(self, token: str) -> OidcIdentity:
        """The user and groups of a token the trusted issuer signed; 401 otherwise."""
        return self.identity(self.claims(token, self.settings.audience))

    def identity(self, claims: Mapping[str, Any]) -> OidcIdentity:
        return OidcIdentity(self._username(claims), self._groups(claims))

    def claims(self, token: str, audience: str | list[str] | None) -> dict[str, Any]:
        """The claims of a token the trusted issuer signed, meant for ``audience`` (any one of
        a list; None: any); 401 otherwise."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as err:
            raise UnauthorizedError(f"The identity token is malformed: {err}.") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise UnauthorizedError(
                f"The identity token is signed with {algorithm}; corral accepts "
                f"{' and '.join(ALGORITHMS)} tokens from the OIDC issuer."
            )
        return self._decode(token, self._key(header.get("kid")), audience)

    def fresh_claims(self, token: str, client_id: str) -> dict[str, Any]:
        """The claims of an ID token the issuer has just given ``client_id``: already expired
        means the clocks differ; several audiences need ``azp`` to name the client."""
        try:
            claims = self.claims(token, client_id)
        except UnauthorizedError as err:
            if err.message != EXPIRED:
                raise
            raise UnauthorizedError(
                f"The ID token the issuer has just issued has already expired by this server's "
                f"clock: this server's clock is ahead of the issuer's ({self.settings.issuer}) "
                f"by more than {CLOCK_LEEWAY_SECONDS} s; synchronise them (NTP)."
            ) from None
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != client_id:
            raise UnauthorizedError(
                f"The ID token names several audiences and its authorized party (azp) is "
                f"{claims.get('azp')!r}, not this server's client {client_id}."
            )
        return claims

    def _decode(
        self, token: str, key: jwt.PyJWK, audience: str | list[str] | None
    ) -> dict[str, Any]:
        settings = self.settings
        try:
            return jwt.decode(
                token,
                key,
                algorithms=list(ALGORITHMS),
                issuer=settings.issuer,
                audience=audience,
                leeway=CLOCK_LEEWAY_SECONDS,
                options={"require": ["exp", "iss"], "verify_aud": audience is not None},
            )
        except jwt.ExpiredSignatureError:
            raise UnauthorizedError(EXPIRED) from None
        except jwt.ImmatureSignatureError:
            raise UnauthorizedError(
                f"The identity token was issued after this server's clock says it is now, by "
                f"more than {CLOCK_LEEWAY_SECONDS} s: the clocks of this server and of the "
                f"issuer {settings.issuer} differ; synchronise them (NTP)."
            ) from None
        except jwt.InvalidSignatureError:
            raise UnauthorizedError(
                "The identity token's signature does not verify against the issuer's keys."
            ) from None
        except jwt.InvalidIssuerError:
            raise UnauthorizedError(
                f"The identity token was not issued by the trusted issuer {settings.issuer}."
            ) from None
        except jwt.InvalidAudienceError:
            raise UnauthorizedError(
                f"The identity token is not meant for this server: its audience must "
                f"include {_either(audience)} (CORRAL_OIDC_AUDIENCE, CORRAL_OIDC_CLIENT_ID)."
            ) from None
        except jwt.InvalidTokenError as err:
            raise UnauthorizedError(f"The identity token is invalid: {err}.") from None

    def _username(self, claims: Mapping[str, Any]) -> str:
        names = (self.settings.username_claim,) if self.settings.username_claim else USERNAME_CLAIMS
        for name in names:
            value = claims.get(name)
            if isinstance(value, str) and value:
                return value
        raise UnauthorizedError(
            f"The identity token names no user: it has no {' or '.join(names)} claim."
        )

    def _groups(self, claims: Mapping[str, Any]) -> list[str]:
        value = claims.get(self.settings.groups_claim)
        if isinstance(value, str):
            return [value]
        if isinstance(value, list):
            return [str(group) for group in value]
        return []


def _either(audience: str | list[str] | None) -> str:
    return " or ".join(audience) if isinstance(audience, list) else str(audience)
