"""Short-lived signed session tokens (HS256 JWTs) that a user gets for an API token.

The signing key comes from ``CORRAL_SESSION_KEY`` (at least 32 bytes) or, failing that, from the
file ``session.key`` in the server's data directory, created once with mode 0600. A server with
neither (tests, an in-process app) signs with a random key that lives as long as the process.
Changing the key ends every session.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jwt

from corral.errors import UnauthorizedError, UserError

SESSION_ISSUER = "corral"
SESSION_AUDIENCE = "corral-session"
SESSION_KEY_ENV = "CORRAL_SESSION_KEY"
SESSION_KEY_FILE = "session.key"
MIN_KEY_BYTES = 32
DEFAULT_TTL = timedelta(hours=1)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def load_session_key(data_dir: Path | None, environ: Mapping[str, str] = os.environ) -> bytes:
    """The signing key: the environment's, else the data directory's file, else a random one."""
    configured = environ.get(SESSION_KEY_ENV)
    if configured:
        key = configured.encode()
        if len(key) < MIN_KEY_BYTES:
            raise UserError(f"{SESSION_KEY_ENV} must be at least {MIN_KEY_BYTES} bytes long")
        return key
    if data_dir is None:
        return secrets.token_bytes(MIN_KEY_BYTES)
    return _key_file(data_dir / SESSION_KEY_FILE)


def _key_file(path: Path) -> bytes:
    """Read the key file, or create it (mode 0600) with a new random key."""
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    key = secrets.token_hex(MIN_KEY_BYTES).encode()
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another server process created it first
        return path.read_bytes().strip()
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(key)
    return key


@dataclass(frozen=True)
class Session:
    token: str
    username: str
    expires_at: datetime


@dataclass(frozen=True)
class SessionClaims:
    """Whom a verified session token names (the user's name and the id of that user), the
    session's own id and when it expires."""

    username: str
    user_id: str
    session_id: str = ""
    expires_at: datetime | None = None


@dataclass(frozen=True)
class SessionSigner:
    key: bytes
    ttl: timedelta = DEFAULT_TTL
    clock: Callable[[], datetime] = field(default=_utc_now)

    def mint(self, username: str, user_id: str = "") -> Session:
        """A session for the user ``username`` whose id is ``user_id``: it stops working when
        that user is deleted, even if a new user of the same name is created later."""
        now = self.clock()
        expires = now + self.ttl
        claims = {
            "iss": SESSION_ISSUER,
            "aud": SESSION_AUDIENCE,
            "sub": username,
            "name": username,  # OSMO's CLI greets its user by this claim
            "uid": user_id,
            "iat": int(now.timestamp()),
            "exp": int(expires.timestamp()),
            "jti": secrets.token_hex(16),
        }
        token = jwt.encode(claims, self.key, algorithm="HS256")
        return Session(token, username, expires)

    def verify(self, token: str) -> SessionClaims:
        """Whom a session token was issued to; 401 if expired, forged or malformed."""
        try:
            claims = jwt.decode(
                token,
                self.key,
                algorithms=["HS256"],
                issuer=SESSION_ISSUER,
                audience=SESSION_AUDIENCE,
                options={"require": ["exp", "iat", "sub", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise UnauthorizedError(
                "The session token has expired; get a new one with POST /api/auth/session."
            ) from None
        except jwt.InvalidSignatureError:
            raise UnauthorizedError(
                "The session token's signature is invalid: it was not signed with this "
                "server's session key (or the key has changed since)."
            ) from None
        except jwt.InvalidTokenError as err:
            raise UnauthorizedError(f"The session token is invalid: {err}.") from None
        return SessionClaims(
            str(claims["sub"]),
            str(claims.get("uid", "")),
            str(claims.get("jti", "")),
            datetime.fromtimestamp(int(claims["exp"]), UTC),
        )
