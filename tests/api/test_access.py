"""The access matrix through the real HTTP API: users x roles x pools x actions.

The world (``tests/api/access_world.py``): pools default, other, team-a, team-b, teamx; the
generated prefix role ``osmo-team`` (``workflow:*`` on ``pool/team*``), a Deny role for team-b,
config reader/editor roles, a Deny-all-config role, and users holding combinations of them.
Every case asserts the exact status and, for refusals, the exact message.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest

from corral.api.auth import Authorizer, Principal
from corral.services.auth.sessions import SessionSigner
from corral.store.database import scratch_postgres_database
from tests.api.access_world import (
    POOLS,
    USERS,
    World,
    WorldTemplate,
    allow,
    build_template,
    world_from,
)
from tests.conftest import POSTGRES_ENV

ALL = POOLS
TEAM = ["team-a", "team-b", "teamx"]
REFUSED = "The bearer token is unknown or revoked."


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world_template(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorldTemplate]:
    """The world, built once per database for this module."""
    if request.param == "sqlite":
        yield build_template(f"sqlite:///{tmp_path_factory.mktemp('world') / 'template.db'}")
        return
    admin_url = os.environ.get(POSTGRES_ENV)
    if not admin_url:
        pytest.skip(f"PostgreSQL not configured: set {POSTGRES_ENV} (./scripts/test does)")
    with scratch_postgres_database(admin_url, "corral_world") as url:
        yield build_template(url)


@pytest.fixture
def world(world_template: WorldTemplate, tmp_path: Path) -> Iterator[World]:
    """A fresh copy of the world for each test: tests may change it."""
    with world_from(world_template, tmp_path) as found:
        yield found


def authorizer(world: World) -> Authorizer:
    found: Authorizer = world.api.client.app.state.authorizer  # type: ignore[attr-defined]
    return found


def nobody(user: str, action: str, roles: str) -> str:
    return f"{user} may not {action}: denied: no policy of {roles} allows {action}."


def admin_only(user: str, what: str, roles: str) -> str:
    return f"{user} may not {what}: denied: no policy of {roles} allows an unregistered request."


ALICE = "osmo-user, osmo-default, osmo-team"
BOB = "osmo-user, osmo-default"
CAROL = "osmo-default, osmo-team, deny-team-b, lister"
DAVE = "osmo-default"
ERIN = "osmo-default, config-reader"
FRANK = "osmo-default, pool-editor"
GINA_DENY = "denied by role 'deny-config' policy 1: Deny config:* on *"


#: corral sends no notifications: every profile says so.
NO_NOTIFICATIONS = {"email_notification": False, "slack_notification": False}


@dataclass(frozen=True)
class Case:
    user: str | None
    method: str
    path: str
    status: int
    expect: Any = None  # refusal: the exact message; GET /api/pool: the pool names; else subset
    body: Any = None

    @property
    def id(self) -> str:
        return f"{self.user}-{self.method}-{self.path}-{self.status}"


MATRIX: list[Case] = [
    # --- pool visibility: pool:List, then workflow:Create on pool/<name> per pool
    Case("admin", "GET", "/api/pool", 200, ALL),
    Case("alice", "GET", "/api/pool", 200, ["default", *TEAM]),  # osmo-user + prefix role
    Case("bob", "GET", "/api/pool", 200, ["default"]),
    Case("carol", "GET", "/api/pool", 200, ["team-a", "teamx"]),  # Deny in another role wins
    Case("dave", "GET", "/api/pool", 403, nobody("dave", "pool:List", DAVE)),
    Case("erin", "GET", "/api/pool", 403, nobody("erin", "pool:List", ERIN)),
    Case("gina", "GET", "/api/pool", 200, ALL),  # admin: the config Deny does not touch pools
    Case("alice", "GET", "/api/pool/team-a/topology", 200, {"pool": "team-a"}),
    Case("carol", "GET", "/api/pool/team-b/topology", 200, {"pool": "team-b"}),
    Case("dave", "GET", "/api/pool/default/topology", 403, nobody("dave", "pool:List", DAVE)),
    Case("alice", "GET", "/api/pool/team-a/shapes", 200, {"pool": "team-a"}),
    Case(
        "carol",
        "GET",
        "/api/pool/default/shapes",
        404,
        "Pool default does not exist, or you may not use it: `corral pool list` shows yours.",
    ),
    # --- config read vs update
    Case(
        "alice",
        "GET",
        "/api/configs/pool",
        403,
        "alice may not config:Read on config/pool: "
        f"denied: no policy of {ALICE} allows config:Read on config/pool.",
    ),
    Case(
        "bob",
        "GET",
        "/api/configs",
        403,
        "bob may not config:Read on any config type (config/pool, config/pod_template, "
        "config/group_template, config/resource_validation, config/role, config/backend, "
        "config/workflow): no policy of theirs allows it.",
    ),
    Case("erin", "GET", "/api/configs/pool", 200, {}),
    Case("erin", "GET", "/api/configs/role", 200),
    Case("erin", "GET", "/api/configs", 200),
    Case("erin", "GET", "/api/configs/history?config_types=POOL", 200),
    Case("erin", "GET", "/api/pool/default/render", 200, {"pool": "default"}),
    Case(
        "erin",
        "PUT",
        "/api/configs/pool/other",
        403,
        "erin may not config:Update on config/pool: denied: no policy of "
        f"{ERIN} allows config:Update on config/pool.",
        {"configs": {"backend": "default"}},
    ),
    Case(
        "erin",
        "PATCH",
        "/api/configs/workflow",
        403,
        "erin may not config:Update on config/workflow: denied: no policy of "
        f"{ERIN} allows config:Update on config/workflow.",
        {"configs": {}},
    ),
    Case("frank", "GET", "/api/configs/pool", 200),
    Case(
        "frank",
        "GET",
        "/api/configs/role",
        403,
        "frank may not config:Read on config/role: "
        f"denied: no policy of {FRANK} allows config:Read on config/role.",
    ),
    Case(
        "frank",
        "PATCH",
        "/api/configs/pool/other",
        200,
        {"changed": True},
        {"configs": {"description": "edited"}},
    ),
    Case(
        "frank",
        "PUT",
        "/api/configs/role/sneaky",
        403,
        "frank may not config:Update on config/role: denied: no policy of "
        f"{FRANK} allows config:Update on config/role.",
        {"configs": {"name": "sneaky", "description": "", "policies": []}},
    ),
    Case(
        "frank",
        "POST",
        "/api/configs/apply",
        403,
        "frank may not config:Update on config/role: denied: no policy of "
        f"{FRANK} allows config:Update on config/role.",
        {"bundle": {"roles": {"sneaky": {"description": "", "policies": []}}}},
    ),
    Case("frank", "DELETE", "/api/configs/pool/other", 200, {"changed": True}),
    Case(
        "frank",
        "DELETE",
        "/api/configs/role/lister",
        403,
        "frank may not config:Update on config/role: denied: no policy of "
        f"{FRANK} allows config:Update on config/role.",
    ),
    Case(
        "alice",
        "GET",
        "/api/pool/default/render",
        403,
        "alice may not config:Read on config/pool: denied: no policy of "
        f"{ALICE} allows config:Read on config/pool.",
    ),
    # the verbose pool view and render show the pool's templates: reading pools is not enough
    Case("frank", "GET", "/api/configs/pool/default", 200, {"name": "default"}),
    Case(
        "frank",
        "GET",
        "/api/configs/pool/default?verbose=true",
        403,
        "frank may not config:Read on config/pod_template: denied: no policy of "
        f"{FRANK} allows config:Read on config/pod_template.",
    ),
    Case(
        "frank",
        "GET",
        "/api/configs/pool?verbose=true",
        403,
        "frank may not config:Read on config/pod_template: denied: no policy of "
        f"{FRANK} allows config:Read on config/pod_template.",
    ),
    Case(
        "frank",
        "GET",
        "/api/pool/default/render",
        403,
        "frank may not config:Read on config/pod_template: denied: no policy of "
        f"{FRANK} allows config:Read on config/pod_template.",
    ),
    Case("erin", "GET", "/api/configs/pool/default?verbose=true", 200, {"name": "default"}),
    Case(
        "gina",
        "GET",
        "/api/configs/pool",
        403,
        f"gina may not config:Read on config/pool: {GINA_DENY}.",
    ),
    Case(
        "gina",
        "PUT",
        "/api/configs/pool/other",
        403,
        f"gina may not config:Update on config/pool: {GINA_DENY}.",
        {"configs": {"backend": "default"}},
    ),
    Case("admin", "GET", "/api/configs/role", 200),
    # --- user management: admin only (OSMO's registry lists none of these endpoints)
    Case("alice", "GET", "/api/auth/user", 403, admin_only("alice", "list users", ALICE)),
    Case(
        "alice",
        "POST",
        "/api/auth/user",
        403,
        admin_only("alice", "create users", ALICE),
        {"id": "mallory", "roles": ["osmo-admin"]},
    ),
    Case("alice", "GET", "/api/auth/user/bob", 403, admin_only("alice", "read user bob", ALICE)),
    Case(
        "alice", "DELETE", "/api/auth/user/bob", 403, admin_only("alice", "delete user bob", ALICE)
    ),
    Case(
        "alice",
        "POST",
        "/api/auth/user/alice/roles",
        403,
        admin_only("alice", "assign roles to alice", ALICE),
        {"role_name": "osmo-admin"},
    ),
    Case(
        "alice",
        "DELETE",
        "/api/auth/user/bob/roles/osmo-user",
        403,
        admin_only("alice", "remove roles from bob", ALICE),
    ),
    Case(
        "alice",
        "POST",
        "/api/auth/user/alice/token",
        403,
        admin_only("alice", "create tokens for alice", ALICE),
        {},
    ),
    Case("dave", "GET", "/api/auth/user", 403, admin_only("dave", "list users", DAVE)),
    Case(
        "erin",
        "POST",
        "/api/auth/user/erin/roles",
        403,
        admin_only("erin", "assign roles to erin", ERIN),
        {"role_name": "osmo-admin"},
    ),
    Case("gina", "GET", "/api/auth/user/alice", 200, {"id": "alice", "created_by": "admin"}),
    Case(
        "admin",
        "POST",
        "/api/auth/user/alice/roles",
        409,
        "role_name: Role osmo-nope does not exist; define it first (corral config set ROLE ...).",
        {"role_name": "osmo-nope"},
    ),
    Case("admin", "POST", "/api/auth/user", 409, "User alice already exists.", {"id": "alice"}),
    Case(
        "admin",
        "POST",
        "/api/auth/user",
        400,
        "id: a username is 1-256 letters, digits and . _ @ + -, starting with a letter or digit",
        {"id": "no spaces"},
    ),
    Case("admin", "GET", "/api/auth/user/zed", 404, "User zed does not exist."),
    Case(
        "admin",
        "DELETE",
        "/api/auth/user/bob/roles/lister",
        404,
        "User bob does not have role lister.",
    ),
    # --- profile: osmo-default grants profile:* to everyone
    Case(
        "dave",
        "GET",
        "/api/profile/settings",
        200,
        {
            "profile": {
                "username": "dave",
                "email_notification": False,
                "slack_notification": False,
                "pool": None,
            },
            "roles": [],
            "pools": [],
        },
    ),
    Case("alice", "GET", "/api/profile/settings", 200, {"pools": ["default", *TEAM]}),
    Case("carol", "GET", "/api/profile/settings", 200, {"pools": ["team-a", "teamx"]}),
    Case(
        "alice",
        "PUT",
        "/api/profile/settings",
        200,
        {"profile": {**NO_NOTIFICATIONS, "username": "alice", "pool": "teamx"}},
        {"pool": "teamx"},
    ),
    Case(
        "alice",
        "POST",
        "/api/profile/settings",
        403,
        "alice may not use pool other: no role grants workflow:Create on pool/other.",
        {"pool": "other"},
    ),
    Case(
        "carol",
        "PUT",
        "/api/profile/settings",
        403,
        "carol may not use pool team-b: no role grants workflow:Create on pool/team-b.",
        {"pool": "team-b"},
    ),
    Case(
        "bob",
        "PUT",
        "/api/profile/settings",
        409,
        "pool: Pool nope does not exist.",
        {"pool": "nope"},
    ),
    # --- authentication
    Case(
        None,
        "GET",
        "/api/pool",
        401,
        "Missing bearer token. Send 'Authorization: Bearer "
        "<token>'; the corral CLI reads it from CORRAL_TOKEN or from the credentials file the "
        "server wrote.",
    ),
    Case("unknown", "GET", "/api/pool", 401, REFUSED),
    Case("dave", "POST", "/api/auth/session", 200, {"username": "dave", "token_type": "Bearer"}),
]


def send(world: World, case: Case) -> tuple[int, Any]:
    if case.user == "unknown":
        world.tokens["unknown"] = "corral_not-a-real-token"
    kwargs = {} if case.body is None else {"json": case.body}
    return world.call(case.user, case.method, case.path, **kwargs)


def check(case: Case, status: int, body: Any) -> None:
    assert status == case.status, body
    if status >= 400:
        codes = {400: "USER", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND"}
        assert (body["message"], body["error_code"]) == (
            case.expect,
            codes.get(status, "CONFLICT"),
        )
        return
    if isinstance(case.expect, list):
        assert list(body["pools"]) == case.expect
    elif isinstance(case.expect, dict):
        assert {key: body[key] for key in case.expect} == case.expect


def test_matrix_is_large_and_covers_every_user() -> None:
    assert len(MATRIX) >= 40
    assert set(USERS) <= {case.user for case in MATRIX}
    assert {case.status for case in MATRIX} == {200, 400, 401, 403, 404, 409}


@pytest.mark.parametrize("case", MATRIX, ids=[case.id for case in MATRIX])
def test_access_matrix(world: World, case: Case) -> None:
    status, body = send(world, case)
    check(case, status, body)


# ------------------------------------------------------------------ workflow:Create per pool

SUBMIT: dict[str, list[str]] = {
    "admin": ALL,
    "alice": ["default", *TEAM],
    "bob": ["default"],
    "carol": ["team-a", "teamx"],
    "dave": [],
    "erin": [],
    "frank": [],
    "gina": ALL,
}


@pytest.mark.parametrize("user", list(SUBMIT))
def test_workflow_create_per_pool(world: World, user: str) -> None:
    """``Authorizer.allows(..., "workflow:Create", "pool/<p>")`` agrees with ``allowed_pools``
    and with what ``GET /api/profile/settings`` shows."""
    roles = ("osmo-admin",) if user == "admin" else tuple(USERS[user])
    principal = Principal(user, roles)
    auth = authorizer(world)
    allowed = [p for p in POOLS if auth.allows(principal, "workflow:Create", f"pool/{p}")]
    assert allowed == SUBMIT[user]
    assert auth.allowed_pools(principal, POOLS) == SUBMIT[user]
    assert auth.is_admin(principal) is (user in ("admin", "gina"))
    if user != "admin":
        assert world.call(user, "GET", "/api/profile/settings")[1]["pools"] == SUBMIT[user]


SPEC = "workflow:\n  name: probe\n  tasks:\n  - {name: main, image: busybox, command: [sh]}\n"


@pytest.mark.parametrize("user", list(SUBMIT))
def test_submitting_through_http_follows_pool_access(world: World, user: str) -> None:
    """``POST /api/pool/<p>/workflow`` (dry run) for every pool: 200 exactly where the user may
    submit, else 403 naming the user, the action and the pool (40 HTTP cases)."""
    for pool in POOLS:
        status, body = world.call(
            user,
            "POST",
            f"/api/pool/{pool}/workflow",
            params={"dry_run": "true"},
            json={"file": SPEC},
        )
        if pool in SUBMIT[user]:
            assert (status, body["name"]) == (200, "probe-1"), body
            continue
        assert status == 403, body
        assert body["message"].startswith(f"{user} may not workflow:Create on pool/{pool}: ")


def test_listing_all_users_workflows_shows_only_readable_pools(world: World) -> None:
    reader = allow(["workflow:List", "workflow:Read"], ["pool/team-a"])
    world.ok("PUT", "/api/configs/role/team-a-reader", json={"configs": {"policies": [reader]}})
    world.ok("POST", "/api/auth/user", json={"id": "hank", "roles": ["team-a-reader"]})
    world.tokens["hank"] = world.ok("POST", "/api/auth/user/hank/token", json={})["token"]
    for user, pool in (("admin", "other"), ("admin", "team-a"), ("alice", "team-b")):
        status, body = world.call(user, "POST", f"/api/pool/{pool}/workflow", json={"file": SPEC})
        assert status == 200, body
    status, body = world.call("hank", "GET", "/api/workflow", params={"all_users": "true"})
    assert (status, [(w["user"], w["pool"]) for w in body["workflows"]]) == (
        200,
        [("admin", "team-a")],
    )
    status, body = world.call(
        "hank", "GET", "/api/workflow", params={"all_users": "true", "pools": "other"}
    )
    assert (status, body["workflows"]) == (200, [])
    status, body = world.call("admin", "GET", "/api/workflow", params={"all_users": "true"})
    assert sorted(w["pool"] for w in body["workflows"]) == ["other", "team-a", "team-b"]


def test_unknown_pool_prefix_role_reaches_only_its_prefix(world: World) -> None:
    auth = authorizer(world)
    alice = Principal("alice", tuple(USERS["alice"]))
    assert auth.allows(alice, "workflow:Create", "pool/team-new")  # a pool made later
    assert not auth.allows(alice, "workflow:Create", "pool/tea")
    assert auth.allows(alice, "workflow:Cancel", "pool/team-a")
    decision = auth.decide(
        Principal("carol", tuple(USERS["carol"])), "workflow:Create", "pool/team-b"
    )
    assert decision.reason == (
        "denied by role 'deny-team-b' policy 1: Deny workflow:* on pool/team-b"
    )


# ------------------------------------------------------------------------- changes take effect


def test_removing_a_role_takes_effect_on_the_next_request(world: World) -> None:
    assert world.call("alice", "GET", "/api/pool")[0] == 200
    world.ok("DELETE", "/api/auth/user/alice/roles/osmo-user")
    status, body = world.call("alice", "GET", "/api/pool")
    assert (status, body["message"]) == (
        403,
        nobody("alice", "pool:List", "osmo-default, osmo-team"),
    )
    world.ok("POST", "/api/auth/user/alice/roles", json={"role_name": "osmo-user"})
    assert world.call("alice", "GET", "/api/pool")[0] == 200


def test_editing_a_role_config_takes_effect_on_the_next_request(world: World) -> None:
    assert world.call("dave", "GET", "/api/pool")[0] == 403
    role = {
        "name": "osmo-default",
        "description": "everyone",
        "policies": [
            {"effect": "Allow", "actions": ["pool:List", "profile:*", "auth:*"], "resources": ["*"]}
        ],
    }
    world.ok("PUT", "/api/configs/role/osmo-default", json={"configs": role})
    assert world.call("dave", "GET", "/api/pool") == (
        200,
        {"pools": {}, "page": {"offset": 0, "limit": 50, "total": 0, "next_offset": None}},
    )


def test_deleting_a_user_revokes_their_tokens(world: World) -> None:
    second = world.ok("POST", "/api/auth/user/bob/token", json={"name": "laptop"})
    assert second["name"] == "laptop"
    assert world.ok("DELETE", "/api/auth/user/bob") == {
        "message": "Deleted user bob and revoked 2 tokens."
    }
    for token in (world.tokens["bob"], second["token"]):
        world.tokens["bob"] = token
        assert world.call("bob", "GET", "/api/pool") == (
            401,
            {"message": REFUSED, "error_code": "UNAUTHORIZED"},
        )
    # a user made again with the same name does not get the old tokens back
    world.ok("POST", "/api/auth/user", json={"id": "bob", "roles": ["osmo-user"]})
    assert world.call("bob", "GET", "/api/pool")[0] == 401


def test_a_role_that_is_later_deleted_is_ignored(world: World) -> None:
    assert world.call("carol", "GET", "/api/pool")[0] == 200
    world.ok("DELETE", "/api/configs/role/lister")
    status, body = world.call("carol", "GET", "/api/pool")
    assert (status, body["message"]) == (
        403,
        nobody("carol", "pool:List", "osmo-default, osmo-team, deny-team-b"),
    )


# ------------------------------------------------------------------------------ sessions


def session_for(world: World, user: str) -> str:
    status, body = world.call(user, "POST", "/api/auth/session")
    assert status == 200, body
    return str(body["token"])


def as_bearer(world: World, token: str, path: str = "/api/pool") -> tuple[int, Any]:
    response = world.api.client.get(path, headers={"Authorization": f"Bearer {token}"})
    return response.status_code, response.json()


def test_a_session_acts_with_the_users_current_roles(world: World) -> None:
    token = session_for(world, "alice")
    claims = jwt.decode(token, options={"verify_signature": False})
    assert (claims["sub"], claims["iss"]) == ("alice", "corral")
    assert claims["exp"] - claims["iat"] == 3600
    status, body = as_bearer(world, token)
    assert (status, list(body["pools"])) == (200, ["default", *TEAM])
    world.ok("DELETE", "/api/auth/user/alice/roles/osmo-team")
    assert list(as_bearer(world, token)[1]["pools"]) == ["default"]


def test_the_jwt_access_token_path_also_mints_sessions(world: World) -> None:
    status, body = world.call("bob", "POST", "/api/auth/jwt/access_token")
    assert status == 200 and body["username"] == "bob"


def test_a_session_cannot_renew_itself(world: World) -> None:
    token = session_for(world, "bob")
    response = world.api.client.post(
        "/api/auth/session", headers={"Authorization": f"Bearer {token}"}
    )
    assert (response.status_code, response.json()["message"]) == (
        400,
        "A session cannot be renewed with itself; use your API token.",
    )


def test_an_expired_session_is_refused(world: World) -> None:
    signer = authorizer(world).sessions
    past = dataclasses.replace(signer, clock=lambda: datetime.now(UTC) - timedelta(hours=2))
    assert as_bearer(world, past.mint("alice").token) == (
        401,
        {
            "message": "The session token has expired; get a new one with POST /api/auth/session.",
            "error_code": "UNAUTHORIZED",
        },
    )


def test_a_session_signed_with_another_key_is_refused(world: World) -> None:
    forged = SessionSigner(b"x" * 32).mint("admin").token
    assert as_bearer(world, forged)[0] == 401
    assert as_bearer(world, forged)[1]["message"] == (
        "The session token's signature is invalid: it was not signed with this server's "
        "session key (or the key has changed since)."
    )


def test_a_session_of_a_deleted_user_is_refused(world: World) -> None:
    token = session_for(world, "bob")
    world.ok("DELETE", "/api/auth/user/bob")
    assert as_bearer(world, token)[1]["message"] == "The session's user bob no longer exists."


def test_a_session_of_a_deleted_user_does_not_work_for_a_new_user_of_that_name(
    world: World,
) -> None:
    token = session_for(world, "bob")
    world.ok("DELETE", "/api/auth/user/bob")
    world.ok("POST", "/api/auth/user", json={"id": "bob", "roles": ["osmo-admin"]})
    assert as_bearer(world, token) == (
        401,
        {
            "message": "The session was issued to an earlier user named bob, deleted since; "
            "get a new session with POST /api/auth/session.",
            "error_code": "UNAUTHORIZED",
        },
    )


def test_a_jwt_from_an_untrusted_issuer_is_refused_without_oidc(world: World) -> None:
    token = jwt.encode({"iss": "https://idp.example", "sub": "x"}, "k" * 32, algorithm="HS256")
    assert as_bearer(world, token)[1]["message"] == (
        "The bearer token was issued by 'https://idp.example', but this server trusts no OIDC "
        "issuer (set CORRAL_OIDC_ISSUER)."
    )


def test_a_garbage_jwt_is_refused(world: World) -> None:
    assert as_bearer(world, "a.b.c") == (401, {"message": REFUSED, "error_code": "UNAUTHORIZED"})


def test_the_last_admin_can_neither_delete_itself_nor_lose_its_admin_role(world: World) -> None:
    world.ok("DELETE", "/api/auth/user/gina")  # another admin: admin is left
    last = (
        "would leave no user who may administer corral: admin is the last one, and every "
        "admin token would stop working. Give another user an admin role first (corral user "
        "roles add NAME osmo-admin)."
    )
    status, body = world.call("admin", "DELETE", "/api/auth/user/admin/roles/osmo-admin")
    assert (status, body) == (
        409,
        {"message": f"Taking osmo-admin from admin {last}", "error_code": "CONFLICT"},
    )
    status, body = world.call("admin", "DELETE", "/api/auth/user/admin")
    assert (status, body) == (409, {"message": f"Deleting admin {last}", "error_code": "CONFLICT"})
    admin = world.call("admin", "GET", "/api/auth/user/admin")[1]
    assert [role["role_name"] for role in admin["roles"]] == ["osmo-admin"]
    # With a second admin, the first may go.
    world.ok("POST", "/api/auth/user/bob/roles", json={"role_name": "osmo-admin"})
    world.ok("DELETE", "/api/auth/user/admin/roles/osmo-admin")
    assert world.call("bob", "DELETE", "/api/auth/user/bob")[0] == 409
