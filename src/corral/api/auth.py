"""Authentication (API tokens, session tokens, OIDC tokens) and authorization by role policies.

Every endpoint authenticates its caller (:meth:`Authorizer.authenticate`) and then checks one
semantic action (``config:Read`` on ``config/pool``) with :meth:`Authorizer.check`. A check
evaluates the caller's roles as they are now — the user's role names from the user store, the
ROLE configs currently stored, plus ``osmo-default`` — with
:func:`corral.domain.access.policies.evaluate`: a Deny in any role wins, otherwise one Allow
suffices, otherwise 403 naming who, what, on what and why. Requests OSMO's action registry does
not know (user management) are checked as the unregistered action, which only a ``*:*`` policy
grants.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal, Protocol

import jwt
from fastapi import Request

from corral.domain.access.policies import (
    UNREGISTERED,
    Decision,
    allowed_pools,
    evaluate,
    roles_for_groups,
    roles_for_request,
)
from corral.domain.access.tokens import TOKEN_PREFIX
from corral.domain.configs.role_models import Role
from corral.errors import ForbiddenError, UnauthorizedError, UserError
from corral.services.auth.oidc import (
    JsonFetcher,
    OidcIdentity,
    OidcSettings,
    OidcVerifier,
    http_fetch,
)
from corral.services.auth.oidc_login import OidcClient, Provider, SingleSignOn
from corral.services.auth.sessions import (
    DEFAULT_TTL,
    SESSION_ISSUER,
    SessionSigner,
    load_session_key,
)
from corral.services.auth.task_tokens import TASK_ISSUER, TaskScope, TaskTokens, refused_path
from corral.services.config_service import ConfigService
from corral.services.workflow_names import WorkflowNamer

ADMIN_ROLE = "osmo-admin"
ADMIN_ONLY = UNREGISTERED  # the action of requests OSMO's registry does not list

RoleSource = Callable[[], Sequence[Role]]
Method = Literal["token", "session", "oidc", "task"]


@dataclass(frozen=True)
class Principal:
    username: str
    roles: tuple[str, ...]
    method: Method = "token"
    #: A task's own token: the one task it speaks for (``task_tokens.py``).
    task: TaskScope | None = None


@dataclass(frozen=True)
class AuthSettings:
    """How the server signs sessions and which OIDC issuer (if any) it trusts."""

    session_key: bytes
    session_ttl: timedelta = DEFAULT_TTL
    oidc: OidcSettings | None = None
    #: corral as a client of the issuer: people sign in through it (docs/access.md).
    oidc_client: OidcClient | None = None
    jwks_fetch: JsonFetcher = http_fetch

    @classmethod
    def from_env(
        cls, data_dir: Path | None = None, environ: Mapping[str, str] = os.environ
    ) -> AuthSettings:
        seconds = int(environ.get("CORRAL_SESSION_TTL", "0") or 0)
        return cls(
            session_key=load_session_key(data_dir, environ),
            session_ttl=timedelta(seconds=seconds) if seconds > 0 else DEFAULT_TTL,
            oidc=OidcSettings.from_env(environ),
            oidc_client=OidcClient.from_env(environ),
        )


def config_roles(service: ConfigService) -> RoleSource:
    """The ROLE configs as stored now (read per check: a role edit applies to the next request)."""

    def roles() -> Sequence[Role]:
        return service.state().roles

    return roles


def describe(action: str, resource: str | None, what: str | None = None) -> str:
    """``config:Update on config/pool``, or the given plain description of the request."""
    if what is not None:
        return what
    name = action or "make this admin-only request"
    return f"{name} on {resource}" if resource else name


def bearer_token(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError(
            "Missing bearer token. Send 'Authorization: Bearer <token>'; the corral CLI "
            "reads it from CORRAL_TOKEN or from the credentials file the server wrote."
        )
    return token.strip()


class Holder(Protocol):
    """Who holds an API token, or a stored user: a name and the roles granted."""

    @property
    def username(self) -> str: ...

    @property
    def roles(self) -> Sequence[str]: ...


class StoredUser(Holder, Protocol):
    @property
    def user_id(self) -> str: ...


class TokenOwners(Protocol):
    """The API tokens (``store/tokens.py``): who holds one, if anyone does."""

    def owner(self, token: str) -> Holder | None: ...


class Users(Protocol):
    """The users (``store/users.py``) as authentication reads and syncs them."""

    def get(self, username: str) -> StoredUser | None: ...

    def set_roles(self, username: str, roles: Iterable[str]) -> StoredUser: ...


class RevokedSessionIds(Protocol):
    """The ended sessions that every server sharing the database refuses
    (``store/revoked_sessions.py``)."""

    def revoke(self, session_id: str, expires_at: datetime) -> None: ...

    def first_use(self, once_id: str, expires_at: datetime) -> bool: ...

    def is_revoked(self, session_id: str) -> bool: ...


class Authorizer:
    def __init__(
        self,
        tokens: TokenOwners,
        users: Users,
        roles: RoleSource,
        settings: AuthSettings,
        revoked: RevokedSessionIds | None = None,
    ) -> None:
        self._tokens = tokens
        self._users = users
        self._revoked = revoked
        self._roles = roles
        self.sessions = SessionSigner(settings.session_key, settings.session_ttl)
        self.task_tokens = TaskTokens(settings.session_key)
        self._oidc = OidcVerifier(settings.oidc, settings.jwks_fetch) if settings.oidc else None
        self._oidc_issuer = settings.oidc.issuer if settings.oidc else None
        self.sso = _single_sign_on(settings, self._oidc, revoked)
        self._audience = _api_audience(settings)

    @property
    def oidc_issuer(self) -> str | None:
        """The OIDC issuer whose tokens are trusted, if one is configured."""
        return self._oidc_issuer

    # ----------------------------------------------------------------- authentication

    def authenticate(self, request: Request) -> Principal:
        """Who is calling: an API token, a session token, a trusted issuer's token (401), or
        a task's own token on a task's endpoint (403 on any other)."""
        return self._holder(bearer_token(request), request.scope["path"])

    def authenticate_token(self, token: str) -> Principal:
        """Who holds ``token``: an API token, a session token or a trusted issuer's (401). A
        task's token is refused here: it is no login, and no exchange turns it into one."""
        return self._holder(token, None)

    def _holder(self, token: str, path: str | None) -> Principal:
        """Who holds ``token``; a task's token only as the bearer of a request of ``path``."""
        if not token.startswith(TOKEN_PREFIX) and token.count(".") == 2:
            return self._signed(token, path)
        owner = self._tokens.owner(token)
        if owner is None:
            raise UnauthorizedError("The bearer token is unknown or revoked.")
        return Principal(owner.username, tuple(owner.roles), "token")

    def _signed(self, token: str, path: str | None) -> Principal:
        try:
            issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
        except jwt.InvalidTokenError:
            raise UnauthorizedError("The bearer token is unknown or revoked.") from None
        if issuer == SESSION_ISSUER:
            return self._session(token)
        if issuer == TASK_ISSUER:
            return self._task(token, path)
        if self._oidc is None:
            raise UnauthorizedError(
                f"The bearer token was issued by {issuer!r}, but this server trusts no OIDC "
                "issuer (set CORRAL_OIDC_ISSUER)."
            )
        return self._identity(token, self._oidc)

    def _task(self, token: str, path: str | None) -> Principal:
        if path is None:
            raise UnauthorizedError(
                "A task's token is accepted only as the bearer token of that task's notice, "
                "checkpoint and ready endpoints."
            )
        scope = self.task_tokens.verify(token)
        refusal = refused_path(scope, path)
        if refusal is not None:
            raise ForbiddenError(refusal)
        return Principal(scope.label, (), "task", scope)

    def _session(self, token: str) -> Principal:
        claims = self.sessions.verify(token)
        if self._revoked is not None and self._revoked.is_revoked(claims.session_id):
            raise UnauthorizedError("The session was ended by a log-out; log in again.")
        user = self._users.get(claims.username)
        if user is None:
            raise UnauthorizedError(f"The session's user {claims.username} no longer exists.")
        if user.user_id != claims.user_id:
            raise UnauthorizedError(
                f"The session was issued to an earlier user named {claims.username}, deleted "
                "since; get a new session with POST /api/auth/session."
            )
        return Principal(claims.username, tuple(user.roles), "session")

    def _identity(self, token: str, verifier: OidcVerifier) -> Principal:
        """Verify the issuer's token, then sync the user's roles from its groups
        (docs/access.md)."""
        return self.sign_in(verifier.identity(verifier.claims(token, self._audience)))

    def sign_in(self, identity: OidcIdentity) -> Principal:
        """The issuer's user, with the roles their groups map to (created on first sight)."""
        user = self._users.get(identity.username)
        current = user.roles if user else []
        synced = roles_for_groups(self._roles(), identity.groups, current)
        if user is None or synced != current:
            user = self._users.set_roles(identity.username, synced)
        return Principal(identity.username, tuple(user.roles), "oidc")

    def end_session(self, token: str) -> None:
        """Revoke a session token on every server sharing this database (a log-out)."""
        claims = self.sessions.verify(token)
        if self._revoked is not None and claims.expires_at is not None:
            self._revoked.revoke(claims.session_id, claims.expires_at)

    # ------------------------------------------------------------------ authorization

    def roles_of(self, principal: Principal) -> list[Role]:
        """The roles a request of ``principal`` acts with (defined ones + ``osmo-default``); a
        task's token acts with none."""
        if principal.task is not None:
            return []
        return roles_for_request(self._roles(), principal.roles)

    def decide(self, principal: Principal, action: str, resource: str | None = None) -> Decision:
        return evaluate(self.roles_of(principal), action, resource)

    def allows(self, principal: Principal, action: str, resource: str | None = None) -> bool:
        return self.decide(principal, action, resource).allowed

    def check(
        self,
        principal: Principal,
        action: str,
        resource: str | None = None,
        *,
        what: str | None = None,
    ) -> None:
        """Raise 403 unless ``principal`` may do ``action`` on ``resource``; ``what`` names an
        admin-only request in the message."""
        decision = self.decide(principal, action, resource)
        if not decision.allowed:
            raise ForbiddenError(
                f"{principal.username} may not {describe(action, resource, what)}: "
                f"{decision.reason}."
            )

    def check_any(
        self, principal: Principal, action: str, resources: Sequence[str], what: str
    ) -> list[str]:
        """The ``resources`` ``principal`` may do ``action`` on, each asked for by name (a
        request never names a pattern); 403 naming ``what`` when there is none."""
        allowed = [found for found in resources if self.allows(principal, action, found)]
        if not allowed:
            raise ForbiddenError(
                f"{principal.username} may not {action} on {what} ({', '.join(resources)}): "
                "no policy of theirs allows it."
            )
        return allowed

    def workflow_namer(self, principal: Principal) -> WorkflowNamer:
        """How ``principal`` reads the names of workflows other views mention: by id in the
        pools it may ``workflow:Read`` and for its own, else by opaque tag."""
        return WorkflowNamer(
            self.sessions.key,
            principal.username,
            lambda pool: self.allows(principal, "workflow:Read", f"pool/{pool}"),
        )

    def allowed_pools(self, principal: Principal, pool_names: Sequence[str]) -> list[str]:
        """The pools ``principal`` may submit to (``workflow:Create`` on ``pool/<name>``)."""
        return allowed_pools(self.roles_of(principal), pool_names)

    def grants_admin(self, role_names: Sequence[str]) -> bool:
        """Whether a user holding ``role_names`` may administer corral (users, roles: the
        admin-only requests), as the roles are defined now."""
        return evaluate(roles_for_request(self._roles(), role_names), ADMIN_ONLY).allowed

    def is_admin(self, principal: Principal) -> bool:
        """Whether the caller holds ``osmo-admin`` (e.g. to submit to a pool in maintenance)."""
        return ADMIN_ROLE in principal.roles


def _single_sign_on(
    settings: AuthSettings, verifier: OidcVerifier | None, revoked: RevokedSessionIds | None
) -> SingleSignOn | None:
    """Sign-in through the issuer, when corral is configured as its client."""
    client = settings.oidc_client
    if client is None:
        return None
    if settings.oidc is None or verifier is None:
        raise UserError("CORRAL_OIDC_CLIENT_ID is set without CORRAL_OIDC_ISSUER: set both.")
    used: set[str] = set()

    def first_use_here(once_id: str, expires_at: datetime) -> bool:
        """Without a database (an app made in-process): one-time within this process."""
        fresh = once_id not in used
        used.add(once_id)
        return fresh

    first_use = revoked.first_use if revoked is not None else first_use_here
    provider = Provider(settings.oidc.issuer, settings.jwks_fetch)
    return SingleSignOn(client, provider, verifier, settings.session_key, first_use)


def _api_audience(settings: AuthSettings) -> str | list[str] | None:
    """What the API requires of an issuer's token's audience: the configured one, else one of
    corral's clients when it has any, else nothing."""
    if settings.oidc is not None and settings.oidc.audience:
        return settings.oidc.audience
    return settings.oidc_client.audiences if settings.oidc_client else None
