"""Users, their roles and tokens (``/api/auth/...``) and the caller's profile (``/api/profile``).

OSMO's action registry lists none of the ``/api/auth/user...`` admin endpoints, so they are
checked as the unregistered action that only a ``*:*`` policy (``osmo-admin``) grants. The
session exchange is OSMO's ``auth:Refresh`` (its ``/api/auth/jwt/access_token``); the profile is
``profile:Read`` / ``profile:Update``, which ``osmo-default`` grants everyone.
"""

from __future__ import annotations

import re
import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, status
from pydantic import Field, field_validator

from corral.api import responses as R
from corral.api import user_responses as U
from corral.api.auth import ADMIN_ONLY, Authorizer, Principal
from corral.api.deps import AuthorizerDep, Caller, ConfigsDep, TokensDep, User, UsersDep
from corral.api.schemas import StrictBody
from corral.domain.formats.names import CONFIG_NAME_PATTERN, MAX_NAME_LENGTH
from corral.domain.formats.wire_time import wire_time
from corral.errors import ConflictError, ForbiddenError, NotFoundError, UserError
from corral.services.config_service import ConfigService

USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,255}$")


#: A role or pool named in a body: a config item's name.
ItemName = Annotated[str, Field(pattern=CONFIG_NAME_PATTERN, max_length=MAX_NAME_LENGTH)]


class NewUser(StrictBody):
    """OSMO's ``{"id", "roles"}``, with corral's default pool."""

    id: Annotated[str, Field(json_schema_extra={"pattern": USERNAME.pattern})]
    roles: list[ItemName] = Field(default_factory=list)
    default_pool: ItemName | None = None

    @field_validator("id")
    @classmethod
    def _name(cls, value: str) -> str:
        if not USERNAME.fullmatch(value):
            raise ValueError(
                "a username is 1-256 letters, digits and . _ @ + -, starting with a letter or digit"
            )
        return value


class RoleBody(StrictBody):
    """OSMO's ``{"role_name": ...}``: one role to grant."""

    role_name: ItemName


class TokenBody(StrictBody):
    name: str | None = None


#: A notification setting: only "off" is accepted (declared so; ``true`` gets its own message).
NoNotification = Annotated[bool | None, Field(json_schema_extra={"enum": [False, None]})]


class ProfileBody(StrictBody):
    """OSMO's profile settings: the default ``pool`` (null clears it). corral sends no
    notifications, so turning one on is refused (docs/osmo-reference.md#wire-compatibility)."""

    pool: ItemName | None = None
    email_notification: NoNotification = None
    slack_notification: NoNotification = None


router = APIRouter(tags=["users"])


def admin(authorizer: Authorizer, caller: Principal, what: str) -> None:
    authorizer.check(caller, ADMIN_ONLY, what=what)


def known_roles(service: ConfigService, names: list[str], field: str = "roles") -> list[str]:
    defined = {role.name for role in service.state().roles}
    for name in names:
        if name not in defined:
            raise ConflictError(  # a body naming what does not exist (yet): the URL is fine
                f"Role {name} does not exist; define it first (corral config set ROLE ...).",
                path=(field,),
            )
    return names


def existing_pool(service: ConfigService, name: str | None, field: str) -> str | None:
    if name is not None and name not in service.state().pool_names():
        raise ConflictError(f"Pool {name} does not exist.", path=(field,))
    return name


@router.get(
    "/api/auth/login",
    response_model=U.LoginInfo,
    responses={
        404: {"model": R.ErrorBody, "description": "This server has no single sign-on."},
        503: {"model": R.ErrorBody, "description": "The identity provider cannot be reached."},
    },
)
def login_info(authorizer: AuthorizerDep) -> dict[str, Any]:
    """Where the CLI signs in (public: it asks before it has any token), as OSMO's CLI reads
    it: the provider's device and browser endpoints, the token endpoint and the CLI's client."""
    sso = authorizer.sso
    if sso is None:
        raise NotFoundError(
            "This server has no single sign-on (CORRAL_OIDC_CLIENT_ID is not set): log in "
            "with an API token, corral login --token."
        )
    endpoints = sso.provider.endpoints()
    client_id = sso.client.cli_client
    return {
        "issuer": sso.provider.issuer,
        "device_endpoint": endpoints.device,
        "device_client_id": client_id,
        "browser_endpoint": endpoints.authorization,
        "browser_client_id": client_id,
        "token_endpoint": endpoints.token,
        "scopes": " ".join(dict.fromkeys([*sso.client.scopes.split(), "offline_access"])),
    }


@router.post("/api/auth/session", response_model=U.SessionAnswer)
@router.post("/api/auth/jwt/access_token", response_model=U.SessionAnswer)
def session(authorizer: AuthorizerDep, users: UsersDep, caller: Caller) -> dict[str, Any]:
    """Exchange an API token (or a trusted issuer's token) for a short-lived session."""
    authorizer.check(caller, "auth:Refresh")
    if caller.method == "session":
        raise UserError("A session cannot be renewed with itself; use your API token.")
    minted = authorizer.sessions.mint(caller.username, users.require(caller.username).user_id)
    return {
        "token": minted.token,
        "token_type": "Bearer",
        "username": minted.username,
        "expires_at": wire_time(minted.expires_at),
    }


@router.post("/api/auth/user", response_model=U.UserView)
def create_user(
    authorizer: AuthorizerDep, service: ConfigsDep, users: UsersDep, caller: Caller, body: NewUser
) -> dict[str, Any]:
    """A new user (200, as OSMO answers: its CLI reports any other status as an error)."""
    admin(authorizer, caller, "create users")
    user = users.create(
        body.id,
        roles=known_roles(service, body.roles),
        default_pool=existing_pool(service, body.default_pool, "default_pool"),
        by=caller.username,
    )
    return user_json(user)


@router.get("/api/auth/user", response_model=U.UserList)
def list_users(
    authorizer: AuthorizerDep,
    users: UsersDep,
    caller: Caller,
    id_prefix: Annotated[str, Query(max_length=256)] = "",
    roles: Annotated[list[str], Query()] = [],  # noqa: B006 - FastAPI query list
    count: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """Users by name, OSMO's page of them: those whose name starts with ``id_prefix``
    and (with ``roles``) who hold any of ``roles``."""
    admin(authorizer, caller, "list users")
    matching = [
        user
        for user in users.all()
        if user.username.startswith(id_prefix) and (not roles or set(roles) & set(user.roles))
    ]
    return {
        "users": [user_json(user) for user in matching[offset : offset + count]],
        "total_results": len(matching),
        "start_index": offset,
        "items_per_page": count,
    }


@router.get("/api/auth/user/{username}", response_model=U.UserView)
def get_user(
    authorizer: AuthorizerDep, users: UsersDep, caller: Caller, username: str
) -> dict[str, Any]:
    admin(authorizer, caller, f"read user {username}")
    return user_json(users.require(username))


@router.delete("/api/auth/user/{username}", response_model=R.Message)
def delete_user(
    authorizer: AuthorizerDep, users: UsersDep, caller: Caller, username: str
) -> dict[str, Any]:
    admin(authorizer, caller, f"delete user {username}")
    revoked = users.delete(username, authorizer.grants_admin)
    plural = "" if revoked == 1 else "s"
    return {"message": f"Deleted user {username} and revoked {revoked} token{plural}."}


@router.post("/api/auth/user/{username}/roles", response_model=U.UserView)
def add_role(
    authorizer: AuthorizerDep,
    service: ConfigsDep,
    users: UsersDep,
    caller: Caller,
    username: str,
    body: RoleBody,
) -> dict[str, Any]:
    admin(authorizer, caller, f"assign roles to {username}")
    users.require(username)
    granted = known_roles(service, [body.role_name], "role_name")
    return user_json(users.add_roles(username, granted, by=caller.username))


@router.delete("/api/auth/user/{username}/roles/{role}", response_model=U.UserView)
def remove_role(
    authorizer: AuthorizerDep, users: UsersDep, caller: Caller, username: str, role: str
) -> dict[str, Any]:
    admin(authorizer, caller, f"remove roles from {username}")
    return user_json(users.remove_role(username, role, authorizer.grants_admin, by=caller.username))


@router.post(
    "/api/auth/user/{username}/token",
    status_code=status.HTTP_201_CREATED,
    response_model=U.NewToken,
)
def mint_token(
    authorizer: AuthorizerDep,
    tokens: TokensDep,
    users: UsersDep,
    caller: Caller,
    username: str,
    body: Annotated[TokenBody | None, Body()] = None,
) -> dict[str, Any]:
    """A new API token for ``username``, returned once (only its hash is kept)."""
    admin(authorizer, caller, f"create tokens for {username}")
    users.require(username)
    name = (body.name if body else None) or f"{username}-{secrets.token_hex(4)}"
    token = tokens.create(name=name, username=username, by=caller.username)
    return {"token": token, "name": name, "username": username}


def profile(
    authorizer: Authorizer, service: ConfigService, users: UsersDep, caller: Principal
) -> dict[str, Any]:
    """OSMO's ``{profile, roles, pools}``: the pools are those the caller may submit to."""
    user = users.require(caller.username)
    pools = service.state().pool_names()
    return {
        "profile": {
            "username": user.username,
            "email_notification": False,
            "slack_notification": False,
            "pool": user.default_pool,
        },
        "roles": list(user.roles),
        "pools": authorizer.allowed_pools(caller, pools),
    }


@router.get("/api/profile/settings", response_model=U.Profile)
def read_profile(
    authorizer: AuthorizerDep, service: ConfigsDep, users: UsersDep, caller: Caller
) -> dict[str, Any]:
    authorizer.check(caller, "profile:Read")
    return profile(authorizer, service, users, caller)


@router.post("/api/profile/settings", response_model=U.Profile)
@router.put("/api/profile/settings", response_model=U.Profile)
def update_profile(
    authorizer: AuthorizerDep,
    service: ConfigsDep,
    users: UsersDep,
    caller: Caller,
    body: ProfileBody,
) -> dict[str, Any]:
    """Set the caller's default pool: one they may submit to (or null to clear it)."""
    authorizer.check(caller, "profile:Update")
    for wanted in ("email_notification", "slack_notification"):
        if getattr(body, wanted):
            raise UserError(
                "corral sends no notifications; watch a workflow with corral workflow "
                "logs --follow or the dashboard instead.",
                path=(wanted,),
            )
    pool = existing_pool(service, body.pool, "pool")
    if pool is not None and not authorizer.allows(caller, "workflow:Create", f"pool/{pool}"):
        raise ForbiddenError(
            f"{caller.username} may not use pool {pool}: no role grants workflow:Create "
            f"on pool/{pool}."
        )
    users.set_default_pool(caller.username, pool)
    return profile(authorizer, service, users, caller)


def user_json(user: User) -> dict[str, Any]:
    return user.to_dict()
