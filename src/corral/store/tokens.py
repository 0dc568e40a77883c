"""API tokens: random secrets handed out once; only their SHA-256 is stored.

A token belongs to a user (:mod:`corral.store.users`); it carries no roles of its own: the owner's
roles are read when the token is presented, so a role removed from the user stops working at once.
The ``roles`` column keeps the roles asked for when the token was minted, for the record.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, bindparam, select, update

from corral.domain.access.tokens import TOKEN_PREFIX
from corral.store.database import autocommit, writing
from corral.store.tables import api_tokens, users
from corral.store.users import ensure_user

#: The owner of a live token by its hash: built once (every API call runs it).
_OWNER = (
    select(api_tokens, users.c.roles.label("user_roles"))
    .join(users, users.c.username == api_tokens.c.username)
    .where(api_tokens.c.token_hash == bindparam("hash"), api_tokens.c.revoked_at.is_(None))
)


@dataclass(frozen=True)
class TokenOwner:
    token_id: str
    name: str
    username: str
    roles: list[str]


def hash_token(token: str) -> str:
    # Tokens are 256-bit random values, so a fast hash is enough: no dictionary to guess from.
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self._engine = engine
        self._clock = clock

    def create(
        self, *, name: str, username: str, roles: list[str] | None = None, by: str = "system"
    ) -> str:
        """Mint a token for ``username`` and return it; it cannot be read back later.

        The user is created if missing and given any of ``roles`` they lack."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        roles = list(roles or [])
        with writing(self._engine) as connection:
            ensure_user(connection, username, roles, by, self._clock())
            connection.execute(
                api_tokens.insert().values(
                    id=secrets.token_hex(8),
                    name=name,
                    username=username,
                    roles=roles,
                    token_hash=hash_token(token),
                    created_at=self._clock(),
                )
            )
        return token

    def owner(self, token: str) -> TokenOwner | None:
        """Who a presented token belongs to, or None if it is unknown or revoked."""
        with autocommit(self._engine) as connection:
            row = connection.execute(_OWNER, {"hash": hash_token(token)}).mappings().first()
        if row is None:
            return None
        return TokenOwner(row["id"], row["name"], row["username"], sorted(row["user_roles"]))

    def revoke_named(self, name: str) -> None:
        with writing(self._engine) as connection:
            connection.execute(
                update(api_tokens)
                .where(api_tokens.c.name == name, api_tokens.c.revoked_at.is_(None))
                .values(revoked_at=self._clock())
            )
