"""Authentication (bearer tokens) and the authorization hook every endpoint goes through.

Today a token carries roles and ``osmo-admin`` may do everything; the check is phrased in
OSMO's semantic actions (``config:Read`` on ``config/pool``) so that role policies can be
evaluated here later without touching the endpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from corral.errors import ForbiddenError, UnauthorizedError
from corral.store.tokens import TokenStore

ADMIN_ROLE = "osmo-admin"


@dataclass(frozen=True)
class Principal:
    username: str
    roles: tuple[str, ...]


class Authorizer:
    def __init__(self, tokens: TokenStore) -> None:
        self._tokens = tokens

    def authenticate(self, request: Request) -> Principal:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthorizedError(
                "Missing bearer token. Send 'Authorization: Bearer <token>'; the corral CLI "
                "reads it from CORRAL_TOKEN or from the credentials file the server wrote."
            )
        owner = self._tokens.owner(token.strip())
        if owner is None:
            raise UnauthorizedError("The bearer token is unknown or revoked.")
        return Principal(owner.username, tuple(owner.roles))

    def check(self, principal: Principal, action: str, resource: str | None = None) -> None:
        """Raise 403 unless ``principal`` may do ``action`` on ``resource``."""
        if ADMIN_ROLE in principal.roles:
            return
        target = f" on {resource}" if resource else ""
        raise ForbiddenError(f"{principal.username} may not {action}{target}.")
