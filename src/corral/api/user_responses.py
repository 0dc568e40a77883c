"""The answers of the user, token, session and profile routes (``api/user_routes.py``)."""

from __future__ import annotations

from corral.api.responses import Answer


class RoleAssignment(Answer):
    role_name: str
    assigned_by: str
    assigned_at: str


class UserView(Answer):
    """OSMO's user, with corral's default pool."""

    id: str
    created_at: str
    created_by: str
    roles: list[RoleAssignment]
    default_pool: str | None


class UserList(Answer):
    users: list[UserView]
    total_results: int
    start_index: int
    items_per_page: int


class NewToken(Answer):
    token: str
    name: str
    username: str


class SessionAnswer(Answer):
    token: str
    token_type: str
    username: str
    expires_at: str


class LoginInfo(Answer):
    """How to sign in (OSMO's ``GET /api/auth/login``): the provider's endpoints and the CLI's
    client."""

    issuer: str
    device_endpoint: str | None
    device_client_id: str
    browser_endpoint: str
    browser_client_id: str
    token_endpoint: str
    scopes: str


class ProfileSettings(Answer):
    username: str
    email_notification: bool
    slack_notification: bool
    pool: str | None


class Profile(Answer):
    """OSMO's profile answer: the settings, the caller's roles and the pools they may use."""

    profile: ProfileSettings
    roles: list[str]
    pools: list[str]
