"""Authorization domain: the action registry, policy evaluation, pool access, IdP role sync."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.access.actions import (
    REGISTRY,
    ResolvedAction,
    legacy_grants,
    legacy_to_semantic,
    registered_actions,
    resolve,
)
from corral.domain.access.policies import (
    DEFAULT_ROLE_NAMES,
    Decision,
    allowed_pools,
    default_roles,
    evaluate,
    roles_for_groups,
    roles_for_request,
)
from corral.domain.configs.role_models import LegacyAction, Role, RolePolicy

ADMIN, USER, DEFAULT = default_roles()


def _role(name: str, *policies: RolePolicy, actions: list[LegacyAction] | None = None) -> Role:
    return Role(name=name, description=name, policies=list(policies), actions=actions)


def _allow(*actions: str, on: tuple[str, ...] = ("*",)) -> RolePolicy:
    return RolePolicy(effect="Allow", actions=list(actions), resources=list(on))


def _deny(*actions: str, on: tuple[str, ...] = ("*",)) -> RolePolicy:
    return RolePolicy(effect="Deny", actions=list(actions), resources=list(on))


def _legacy(path: str, method: str) -> LegacyAction:
    return LegacyAction(base="http", path=path, method=method)


TEAM_A = _role("osmo-team-a", _allow("workflow:*", on=("pool/team-a*",)))
NO_SECRET = _role("no-secret", _deny("workflow:*", on=("pool/secret",)))
NO_TEAM_AB = _role("no-team-ab", _deny("workflow:Create", on=("pool/team-ab",)))
UNSCOPED = _role("unscoped", RolePolicy(effect="Allow", actions=["workflow:*"]))
READER = _role("reader", _allow("*:Read"))
SEED_004 = _role(
    "osmo-shared",
    actions=[
        _legacy("/api/pool/shared_simulation_training_pool*", "post"),
        _legacy("http:/api/profile/*", "*"),
    ],
)
LEGACY_POLICY = _role(
    "legacy-team-b", RolePolicy(actions=[_legacy("/api/pool/*", "*")], resources=["pool/team-b"])
)
POOL_EDITOR = _role("pool-editor", _allow("config:Update", "config:Read", on=("config/pool",)))

USERS: dict[str, list[Role]] = {
    "alice": [USER, DEFAULT],
    "bob": [USER, TEAM_A, DEFAULT],
    "carol": [ADMIN, NO_SECRET],
    "dave": [],
    "erin": [UNSCOPED],
    "frank": [READER, NO_SECRET],
    "gina": [SEED_004, DEFAULT],
    "hank": [LEGACY_POLICY],
    "ivy": [TEAM_A, NO_TEAM_AB],
    "judy": [POOL_EDITOR, DEFAULT],
}

# ------------------------------------------------------------------------- access matrix

MATRIX: list[tuple[str, str, str | None, bool, str]] = [
    (
        "alice",
        "workflow:Create",
        "pool/default",
        True,
        "allowed by role 'osmo-user' policy 2: Allow workflow:* on pool/default",
    ),
    (
        "alice",
        "workflow:Create",
        "pool/team-a-gpu",
        False,
        "denied: no policy of osmo-user, osmo-default allows workflow:Create on pool/team-a-gpu",
    ),
    (
        "alice",
        "workflow:Cancel",
        "pool/default",
        True,
        "allowed by role 'osmo-user' policy 2: Allow workflow:* on pool/default",
    ),
    (
        "alice",
        "workflow:Read",
        "pool/secret",
        True,
        "allowed by role 'osmo-user' policy 1: Allow workflow:Read on *",
    ),
    (
        "alice",
        "workflow:List",
        None,
        True,
        "allowed by role 'osmo-user' policy 1: Allow workflow:List (global action)",
    ),
    (
        "alice",
        "pool:List",
        None,
        True,
        "allowed by role 'osmo-user' policy 1: Allow pool:List (global action)",
    ),
    (
        "alice",
        "config:Read",
        "config/pool",
        False,
        "denied: no policy of osmo-user, osmo-default allows config:Read on config/pool",
    ),
    (
        "alice",
        "config:Update",
        "config/pool",
        False,
        "denied: no policy of osmo-user, osmo-default allows config:Update on config/pool",
    ),
    (
        "alice",
        "system:Health",
        None,
        True,
        "allowed by role 'osmo-default' policy 1: Allow system:Health (global action)",
    ),
    (
        "alice",
        "profile:Update",
        None,
        True,
        "allowed by role 'osmo-user' policy 1: Allow profile:Update (global action)",
    ),
    (
        "alice",
        "",
        None,
        False,
        "denied: no policy of osmo-user, osmo-default allows an unregistered request",
    ),
    (
        "bob",
        "workflow:Create",
        "pool/team-a-gpu",
        True,
        "allowed by role 'osmo-team-a' policy 1: Allow workflow:* on pool/team-a*",
    ),
    (
        "bob",
        "workflow:Create",
        "pool/team-ab",
        True,
        "allowed by role 'osmo-team-a' policy 1: Allow workflow:* on pool/team-a*",
    ),
    (
        "bob",
        "workflow:Create",
        "pool/team-b",
        False,
        "denied: no policy of osmo-user, osmo-team-a, osmo-default allows workflow:Create on "
        "pool/team-b",
    ),
    (
        "bob",
        "workflow:Exec",
        "pool/team-a",
        True,
        "allowed by role 'osmo-team-a' policy 1: Allow workflow:* on pool/team-a*",
    ),
    (
        "bob",
        "workflow:Create",
        "pool/default",
        True,
        "allowed by role 'osmo-user' policy 2: Allow workflow:* on pool/default",
    ),
    (
        "bob",
        "workflow:Create",
        "pool/*",
        False,
        "denied: pool/* is a pattern; a request names one resource",
    ),
    (
        "carol",
        "workflow:Create",
        "pool/default",
        True,
        "allowed by role 'osmo-admin' policy 1: Allow *:* on *",
    ),
    (
        "carol",
        "workflow:Create",
        "pool/secret",
        False,
        "denied by role 'no-secret' policy 1: Deny workflow:* on pool/secret",
    ),
    (
        "carol",
        "workflow:Delete",
        "pool/secret",
        False,
        "denied by role 'no-secret' policy 1: Deny workflow:* on pool/secret",
    ),
    (
        "carol",
        "config:Update",
        "config/role",
        True,
        "allowed by role 'osmo-admin' policy 1: Allow *:* on *",
    ),
    ("carol", "", None, True, "allowed by role 'osmo-admin' policy 1: Allow *:* (global action)"),
    ("carol", "", "pool/x", True, "allowed by role 'osmo-admin' policy 1: Allow *:* on *"),
    (
        "carol",
        "internal:Operator",
        "backend/b1",
        True,
        "allowed by role 'osmo-admin' policy 1: Allow *:* on *",
    ),
    (
        "dave",
        "workflow:Create",
        "pool/default",
        False,
        "denied: no roles, so nothing allows workflow:Create on pool/default",
    ),
    ("dave", "system:Health", None, False, "denied: no roles, so nothing allows system:Health"),
    (
        "erin",
        "workflow:List",
        None,
        True,
        "allowed by role 'unscoped' policy 1: Allow workflow:* (global action)",
    ),
    (
        "erin",
        "workflow:Create",
        "pool/default",
        False,
        "denied: no policy of unscoped allows workflow:Create on pool/default",
    ),
    (
        "erin",
        "workflow:Create",
        "*",
        False,
        "denied: * is a pattern; a request names one resource",
    ),
    (
        "frank",
        "workflow:Read",
        "pool/*",
        False,
        "denied: pool/* is a pattern; a request names one resource",
    ),
    (
        "frank",
        "workflow:Read",
        "pool/team-b",
        True,
        "allowed by role 'reader' policy 1: Allow *:Read on *",
    ),
    (
        "frank",
        "workflow:Read",
        "pool/secret",
        False,
        "denied by role 'no-secret' policy 1: Deny workflow:* on pool/secret",
    ),
    (
        "frank",
        "config:Read",
        "config/pool",
        True,
        "allowed by role 'reader' policy 1: Allow *:Read on *",
    ),
    (
        "frank",
        "config:Update",
        "config/pool",
        False,
        "denied: no policy of reader, no-secret allows config:Update on config/pool",
    ),
    (
        "frank",
        "resources:Read",
        None,
        True,
        "allowed by role 'reader' policy 1: Allow *:Read (global action)",
    ),
    (
        "gina",
        "workflow:Create",
        "pool/shared_simulation_training_pool",
        True,
        "allowed by role 'osmo-shared' action 1 legacy post "
        "/api/pool/shared_simulation_training_pool*: "
        "Allow workflow:Create on pool/shared_simulation_training_pool*",
    ),
    (
        "gina",
        "workflow:Create",
        "pool/shared_simulation_training_pool_2",
        True,
        "allowed by role 'osmo-shared' action 1 legacy post "
        "/api/pool/shared_simulation_training_pool*: "
        "Allow workflow:Create on pool/shared_simulation_training_pool*",
    ),
    (
        "gina",
        "workflow:Create",
        "pool/shared",
        False,
        "denied: no policy of osmo-shared, osmo-default allows workflow:Create on pool/shared",
    ),
    (
        "gina",
        "profile:Read",
        None,
        True,
        "allowed by role 'osmo-shared' action 2 legacy * http:/api/profile/*: Allow profile:Read "
        "(global action)",
    ),
    (
        "gina",
        "workflow:Cancel",
        "pool/shared_simulation_training_pool",
        False,
        "denied: no policy of osmo-shared, osmo-default allows workflow:Cancel on "
        "pool/shared_simulation_training_pool",
    ),
    (
        "hank",
        "workflow:Create",
        "pool/team-b",
        True,
        "allowed by role 'legacy-team-b' policy 1 legacy * /api/pool/*: Allow workflow:Create on "
        "pool/team-b",
    ),
    (
        "hank",
        "workflow:Create",
        "pool/team-a-gpu",
        False,
        "denied: no policy of legacy-team-b allows workflow:Create on pool/team-a-gpu",
    ),
    (
        "hank",
        "pool:List",
        None,
        True,
        "allowed by role 'legacy-team-b' policy 1 legacy * /api/pool/*: Allow pool:List (global "
        "action)",
    ),
    (
        "hank",
        "config:Read",
        "config/pool",
        False,
        "denied: no policy of legacy-team-b allows config:Read on config/pool",
    ),
    (
        "ivy",
        "workflow:Create",
        "pool/team-a-gpu",
        True,
        "allowed by role 'osmo-team-a' policy 1: Allow workflow:* on pool/team-a*",
    ),
    (
        "ivy",
        "workflow:Create",
        "pool/team-ab",
        False,
        "denied by role 'no-team-ab' policy 1: Deny workflow:Create on pool/team-ab",
    ),
    (
        "ivy",
        "workflow:Read",
        "pool/team-ab",
        True,
        "allowed by role 'osmo-team-a' policy 1: Allow workflow:* on pool/team-a*",
    ),
    (
        "judy",
        "config:Update",
        "config/pool",
        True,
        "allowed by role 'pool-editor' policy 1: Allow config:Update on config/pool",
    ),
    (
        "judy",
        "config:Update",
        "config/role",
        False,
        "denied: no policy of pool-editor, osmo-default allows config:Update on config/role",
    ),
    (
        "judy",
        "config:Read",
        "config/*",
        False,
        "denied: config/* is a pattern; a request names one resource",
    ),
    (
        "judy",
        "workflow:Create",
        "pool/default",
        False,
        "denied: no policy of pool-editor, osmo-default allows workflow:Create on pool/default",
    ),
]


@pytest.mark.parametrize(("user", "action", "resource", "allowed", "reason"), MATRIX)
def test_access_matrix(
    user: str, action: str, resource: str | None, allowed: bool, reason: str
) -> None:
    assert evaluate(USERS[user], action, resource) == Decision(allowed, reason)


def test_matrix_size_and_roles() -> None:
    assert len(MATRIX) >= 45
    assert DEFAULT_ROLE_NAMES == ("osmo-admin", "osmo-user", "osmo-default")
    assert [role.name for role in default_roles()] == list(DEFAULT_ROLE_NAMES)


def test_deny_in_any_role_wins_whatever_the_order() -> None:
    expected = Decision(
        False, "denied by role 'no-secret' policy 1: Deny workflow:* on pool/secret"
    )
    assert evaluate([ADMIN, NO_SECRET], "workflow:Create", "pool/secret") == expected
    assert evaluate([NO_SECRET, ADMIN], "workflow:Create", "pool/secret") == expected


def test_within_a_role_deny_beats_an_earlier_allow() -> None:
    role = _role("mixed", _allow("workflow:*"), _deny("workflow:Delete", on=("pool/prod",)))
    assert evaluate([role], "workflow:Delete", "pool/prod") == Decision(
        False, "denied by role 'mixed' policy 2: Deny workflow:Delete on pool/prod"
    )
    assert evaluate([role], "workflow:Delete", "pool/dev") == Decision(
        True, "allowed by role 'mixed' policy 1: Allow workflow:* on *"
    )


@pytest.mark.parametrize(
    ("pattern", "resource", "allowed"),
    [
        ("*", "pool/a", True),
        ("pool/a", "pool/a", True),
        ("pool/a", "pool/ab", False),
        ("pool/*", "pool/a", True),
        ("pool/*", "config/pool", False),
        ("pool/team*", "pool/team-x", True),
        ("pool/team*", "pool/tea", False),
        ("config/pool", "config/POOL", False),  # case-sensitive (reference §13 item 10)
        # A request names one resource: OSMO matched ``pool/*`` against any pattern under
        # ``pool/``, so node:Update on one pool passed a check on every pool.
        ("pool/a", "pool/*", False),
        ("*", "pool/*", False),
        ("pool/*", "pool/*", False),
        ("config/pool", "pool/*", False),
    ],
)
def test_resource_patterns(pattern: str, resource: str, allowed: bool) -> None:
    role = _role("r", _allow("workflow:Read", on=(pattern,)))
    assert evaluate([role], "workflow:Read", resource).allowed is allowed


@pytest.mark.parametrize(
    ("pattern", "action", "allowed"),
    [
        ("*:*", "pool:List", True),
        ("*:*", "config:Update", True),
        ("workflow:*", "workflow:Rsync", True),
        ("workflow:*", "pool:List", False),
        ("*:List", "pool:List", True),
        ("*:List", "pool:Read", False),
        ("pool:List", "pool:List", True),
        ("pool:List", "pool:Lists", False),
        ("workflow:*", "", False),  # unregistered requests need *:*
        ("*:*", "", True),
    ],
)
def test_action_patterns(pattern: str, action: str, allowed: bool) -> None:
    assert evaluate([_role("r", _allow(pattern))], action, None).allowed is allowed


# ---------------------------------------------------------------------------- pool access

POOLS = ["default", "team-a-gpu", "team-ab", "team-b", "secret", "shared_simulation_training_pool"]


@pytest.mark.parametrize(
    ("user", "pools"),
    [
        ("alice", ["default"]),
        ("bob", ["default", "team-a-gpu", "team-ab"]),
        (
            "carol",
            ["default", "team-a-gpu", "team-ab", "team-b", "shared_simulation_training_pool"],
        ),
        ("dave", []),
        ("erin", []),
        ("frank", []),
        ("gina", ["shared_simulation_training_pool"]),
        ("hank", ["team-b"]),
        ("ivy", ["team-a-gpu"]),  # team-ab is denied by another role, so it is hidden too
        ("judy", []),
    ],
)
def test_allowed_pools(user: str, pools: list[str]) -> None:
    assert allowed_pools(USERS[user], POOLS) == pools


# ------------------------------------------------------------------------------- registry

REGISTERED: list[tuple[str, str, ResolvedAction]] = [
    (
        "POST",
        "/api/pool/p1/workflow",
        ResolvedAction("workflow:Create", "pool/p1", "/api/pool/*/workflow"),
    ),
    (
        "POST",
        "/api/pool/p1/workflow/w",
        ResolvedAction("workflow:Create", "pool/p1", "/api/pool/*/workflow/*"),
    ),
    ("GET", "/api/workflow", ResolvedAction("workflow:List", None, "/api/workflow")),
    ("GET", "/api/task", ResolvedAction("workflow:List", None, "/api/task")),
    ("GET", "/api/tag", ResolvedAction("workflow:List", None, "/api/tag")),
    ("GET", "/api/queue", ResolvedAction("workflow:List", None, "/api/queue")),
    ("GET", "/api/workflow/w1", ResolvedAction("workflow:Read", "pool/*", "/api/workflow/*", "w1")),
    (
        "PATCH",
        "/api/workflow/w1",
        ResolvedAction("workflow:Update", "pool/*", "/api/workflow/*", "w1"),
    ),
    (
        "DELETE",
        "/api/workflow/w1",
        ResolvedAction("workflow:Delete", "pool/*", "/api/workflow/*", "w1"),
    ),
    (
        "POST",
        "/api/workflow/w1/cancel",
        ResolvedAction("workflow:Cancel", "pool/*", "/api/workflow/*/cancel", "w1"),
    ),
    (
        "POST",
        "/api/workflow/w1/task/t0/checkpoint",
        ResolvedAction("workflow:Update", "pool/*", "/api/workflow/*/task/*/checkpoint", "w1"),
    ),
    (
        "POST",
        "/api/workflow/w1/task/t0/ready",
        ResolvedAction("workflow:Update", "pool/*", "/api/workflow/*/task/*/ready", "w1"),
    ),
    (
        "POST",
        "/api/workflow/w1/exec",
        ResolvedAction("workflow:Exec", "pool/*", "/api/workflow/*/exec", "w1"),
    ),
    (
        "WEBSOCKET",
        "/api/workflow/w1/exec/t",
        ResolvedAction("workflow:Exec", "pool/*", "/api/workflow/*/exec/*", "w1"),
    ),
    (
        "GET",
        "/api/router/exec/w1/client/k",
        ResolvedAction("workflow:Exec", "pool/*", "/api/router/exec/*/client/*", "w1"),
    ),
    (
        "GET",
        "/api/workflow/w1/portforward/t",
        ResolvedAction("workflow:PortForward", "pool/*", "/api/workflow/*/portforward/*", "w1"),
    ),
    (
        "GET",
        "/api/workflow/w1/webserver/t",
        ResolvedAction("workflow:PortForward", "pool/*", "/api/workflow/*/webserver/*", "w1"),
    ),
    (
        "POST",
        "/api/router/portforward/w1/client/k",
        ResolvedAction(
            "workflow:PortForward", "pool/*", "/api/router/portforward/*/client/*", "w1"
        ),
    ),
    (
        "GET",
        "/api/router/webserver/k",
        ResolvedAction("workflow:PortForward", None, "/api/router/webserver/*"),
    ),
    ("GET", "/api/plugins/configs", ResolvedAction("workflow:Rsync", None, "/api/plugins/configs")),
    (
        "POST",
        "/api/workflow/w1/rsync",
        ResolvedAction("workflow:Rsync", "pool/*", "/api/workflow/*/rsync", "w1"),
    ),
    (
        "POST",
        "/api/workflow/w1/rsync/t",
        ResolvedAction("workflow:Rsync", "pool/*", "/api/workflow/*/rsync/*", "w1"),
    ),
    (
        "GET",
        "/api/router/rsync/w1/client/k",
        ResolvedAction("workflow:Rsync", "pool/*", "/api/router/rsync/*/client/*", "w1"),
    ),
    ("GET", "/api/pool", ResolvedAction("pool:List", None, "/api/pool")),
    ("GET", "/api/pool_quota", ResolvedAction("pool:List", None, "/api/pool_quota")),
    ("POST", "/api/credentials", ResolvedAction("credentials:Create", None, "/api/credentials")),
    (
        "POST",
        "/api/credentials/c",
        ResolvedAction("credentials:Create", None, "/api/credentials/*"),
    ),
    ("GET", "/api/credentials", ResolvedAction("credentials:Read", None, "/api/credentials")),
    ("GET", "/api/credentials/c", ResolvedAction("credentials:Read", None, "/api/credentials/*")),
    ("PUT", "/api/credentials", ResolvedAction("credentials:Update", None, "/api/credentials")),
    (
        "PATCH",
        "/api/credentials/c",
        ResolvedAction("credentials:Update", None, "/api/credentials/*"),
    ),
    ("DELETE", "/api/credentials", ResolvedAction("credentials:Delete", None, "/api/credentials")),
    (
        "DELETE",
        "/api/credentials/c",
        ResolvedAction("credentials:Delete", None, "/api/credentials/*"),
    ),
    ("GET", "/api/profile/settings", ResolvedAction("profile:Read", None, "/api/profile/settings")),
    (
        "POST",
        "/api/profile/settings",
        ResolvedAction("profile:Update", None, "/api/profile/settings"),
    ),
    ("GET", "/api/users", ResolvedAction("user:List", None, "/api/users")),
    ("POST", "/api/app", ResolvedAction("app:Create", None, "/api/app")),
    ("POST", "/api/app/a", ResolvedAction("app:Create", None, "/api/app/*")),
    ("GET", "/api/app", ResolvedAction("app:Read", None, "/api/app")),
    ("GET", "/api/app/a", ResolvedAction("app:Read", None, "/api/app/*")),
    ("PUT", "/api/app", ResolvedAction("app:Update", None, "/api/app")),
    ("PATCH", "/api/app/a", ResolvedAction("app:Update", None, "/api/app/*")),
    ("DELETE", "/api/app", ResolvedAction("app:Delete", None, "/api/app")),
    ("DELETE", "/api/app/a", ResolvedAction("app:Delete", None, "/api/app/*")),
    ("GET", "/api/resources", ResolvedAction("resources:Read", None, "/api/resources")),
    ("GET", "/api/resources/n1", ResolvedAction("resources:Read", None, "/api/resources/*")),
    ("POST", "/api/nodes/n1/cordon", ResolvedAction("node:Update", None, "/api/nodes/*/cordon")),
    ("POST", "/api/nodes/n1/drain", ResolvedAction("node:Update", None, "/api/nodes/*/drain")),
    (
        "POST",
        "/api/nodes/n1/uncordon",
        ResolvedAction("node:Update", None, "/api/nodes/*/uncordon"),
    ),
    ("POST", "/api/nodes/n1/fail", ResolvedAction("node:Update", None, "/api/nodes/*/fail")),
    ("POST", "/api/nodes/n1/heal", ResolvedAction("node:Update", None, "/api/nodes/*/heal")),
    (
        "GET",
        "/api/nodes/n1/history",
        ResolvedAction("resources:Read", None, "/api/nodes/*/history"),
    ),
    ("GET", "/api/configs", ResolvedAction("config:Read", "config/*", "/api/configs")),
    ("GET", "/api/configs/POOL/p1", ResolvedAction("config:Read", "config/pool", "/api/configs/*")),
    (
        "PUT",
        "/api/configs/role/r",
        ResolvedAction("config:Update", "config/role", "/api/configs/*"),
    ),
    (
        "PATCH",
        "/api/configs/workflow",
        ResolvedAction("config:Update", "config/workflow", "/api/configs/*"),
    ),
    (
        "GET",
        "/api/configs/history",
        ResolvedAction("config:Read", "config/*", "/api/configs/history"),
    ),
    (
        "POST",
        "/api/configs/history/rollback",
        ResolvedAction("config:Update", "config/*", "/api/configs/history/rollback"),
    ),
    (
        "DELETE",
        "/api/configs/history/POOL/revision/3",
        ResolvedAction("config:Update", "config/pool", "/api/configs/history/*/revision/*"),
    ),
    (
        "POST",
        "/api/configs/history/role/revision/3/tags",
        ResolvedAction("config:Update", "config/role", "/api/configs/history/*/revision/*/tags"),
    ),
    ("GET", "/api/configs/diff", ResolvedAction("config:Read", "config/*", "/api/configs/diff")),
    (
        "POST",
        "/api/configs/apply",
        ResolvedAction("config:Update", "config/*", "/api/configs/apply"),
    ),
    (
        "GET",
        "/api/pool/p1/render",
        ResolvedAction("config:Read", "config/pool", "/api/pool/*/render"),
    ),
    (
        "GET",
        "/api/pool/p1/topology",
        ResolvedAction("pool:List", None, "/api/pool/*/topology"),
    ),
    (
        "GET",
        "/api/pool/p1/shapes",
        ResolvedAction("pool:List", None, "/api/pool/*/shapes"),
    ),
    ("GET", "/api/auth/login", ResolvedAction("auth:Login", None, "/api/auth/login")),
    ("GET", "/api/auth/keys", ResolvedAction("auth:Login", None, "/api/auth/keys")),
    (
        "POST",
        "/api/auth/jwt/refresh_token",
        ResolvedAction("auth:Refresh", None, "/api/auth/jwt/refresh_token"),
    ),
    (
        "GET",
        "/api/auth/jwt/access_token",
        ResolvedAction("auth:Refresh", None, "/api/auth/jwt/access_token"),
    ),
    (
        "POST",
        "/api/auth/access_token",
        ResolvedAction("auth:Token", None, "/api/auth/access_token"),
    ),
    (
        "DELETE",
        "/api/auth/access_token/t1",
        ResolvedAction("auth:Token", None, "/api/auth/access_token/*"),
    ),
    (
        "POST",
        "/api/auth/user/u1/access_token",
        ResolvedAction("auth:Token", "user/u1", "/api/auth/user/*/access_token"),
    ),
    (
        "DELETE",
        "/api/auth/user/u1/access_token/t1",
        ResolvedAction("auth:Token", "user/u1", "/api/auth/user/*/access_token/*"),
    ),
    ("DELETE", "/mcp", ResolvedAction("mcp:Access", None, "/mcp")),
    ("GET", "/health", ResolvedAction("system:Health", None, "/health")),
    ("GET", "/api/version", ResolvedAction("system:Version", None, "/api/version")),
    ("GET", "/api/router/version", ResolvedAction("system:Version", None, "/api/router/version")),
    ("GET", "/client/version", ResolvedAction("system:Version", None, "/client/version")),
    (
        "POST",
        "/api/agent/listener/node/backend/gpu-1",
        ResolvedAction("internal:Operator", "backend/gpu-1", "/api/agent/listener/*"),
    ),
    (
        "GET",
        "/api/agent/worker/x",
        ResolvedAction("internal:Operator", "backend/worker", "/api/agent/worker/*"),
    ),
    (
        "POST",
        "/api/logger/workflow/w1/osmo_ctrl/t",
        ResolvedAction("internal:Logger", "backend/workflow", "/api/logger/workflow/*/osmo_ctrl/*"),
    ),
    (
        "GET",
        "/api/router/session/k/backend/x",
        ResolvedAction("internal:Router", "backend/session", "/api/router/*/*/backend/*"),
    ),
]


@pytest.mark.parametrize(("method", "path", "expected"), REGISTERED)
def test_resolve_every_registered_endpoint(
    method: str, path: str, expected: ResolvedAction
) -> None:
    assert resolve(method, path) == expected


def test_registry_table_is_fully_exercised() -> None:
    covered = {(r.action, r.endpoint) for _, _, r in REGISTERED}
    assert covered == {(e.action, e.path) for e in REGISTRY}
    assert len(registered_actions()) == 34


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/api/configs/pool"),
        ("POST", "/api/configs/backend/b1"),
        ("GET", "/api/auth/user"),
        ("POST", "/api/workflow"),
        ("GET", "/api/pool/p1/workflow"),
        ("GET", "/api/nothing"),
    ],
)
def test_unregistered_requests_resolve_to_none(method: str, path: str) -> None:
    assert resolve(method, path) is None


def test_resolve_ignores_query_trailing_slash_and_method_case() -> None:
    expected = ResolvedAction("workflow:Create", "pool/p1", "/api/pool/*/workflow")
    assert resolve("post", "/api/pool/p1/workflow/?dry_run=true") == expected


# ------------------------------------------------------------------------- legacy actions


@pytest.mark.parametrize(
    ("path", "method", "actions"),
    [
        ("/api/pool/*", "*", ["config:Read", "pool:List", "workflow:Create"]),
        ("/api/pool/shared_simulation_training_pool*", "post", ["workflow:Create"]),
        ("http:/api/profile/*", "*", ["profile:Read", "profile:Update"]),
        ("*", "*", ["*:*"]),
        ("/api/workflow/*", "get", ["workflow:List", "workflow:PortForward", "workflow:Read"]),
        ("/api/workflow/*/cancel", "POST", ["workflow:Cancel"]),
        ("/api/configs/*", "put", ["config:Update"]),
        ("/api/credentials", "delete", ["credentials:Delete"]),
        ("!/api/pool/*", "*", []),
        ("/api/unknown/*", "*", []),
    ],
)
def test_legacy_to_semantic(path: str, method: str, actions: list[str]) -> None:
    assert legacy_to_semantic(_legacy(path, method)) == actions


def test_legacy_grants_keep_the_scope_the_path_names() -> None:
    assert legacy_grants(_legacy("/api/pool/*", "*")) == [
        ("config:Read", "config/pool"),
        ("pool:List", "*"),
        ("workflow:Create", "pool/*"),
    ]
    assert legacy_grants(_legacy("/api/pool/team-c*/workflow", "post")) == [
        ("workflow:Create", "pool/team-c*")
    ]
    assert legacy_grants(_legacy("/api/configs/ROLE", "get")) == [("config:Read", "config/role")]


def test_legacy_deny_policy_converts_too() -> None:
    role = _role(
        "no-configs",
        _allow("*:*"),
        RolePolicy(effect="Deny", actions=[_legacy("/api/configs/*", "put")]),
    )
    assert evaluate([role], "config:Update", "config/pool") == Decision(
        False,
        "denied by role 'no-configs' policy 2 legacy put /api/configs/*: Deny config:Update on "
        "config/*",
    )


# ------------------------------------------------------------------- external role sync

IMPORTED = Role(name="osmo-team-a", external_roles=["team-a", "team-a-admins"])
FORCED = Role(name="osmo-team-b", sync_mode="force", external_roles=["team-b"])
IGNORED = Role(name="osmo-team-c", sync_mode="ignore", external_roles=["team-c"])
IDENTITY = Role(name="osmo-user", sync_mode="force")  # external_roles None: its own name
UNMAPPED = Role(name="osmo-ops", sync_mode="force", external_roles=[])
SYNCED = [IMPORTED, FORCED, IGNORED, IDENTITY, UNMAPPED]


@pytest.mark.parametrize(
    ("groups", "current", "expected"),
    [
        ([], [], []),
        (["team-a"], [], ["osmo-team-a"]),
        (["team-a-admins"], [], ["osmo-team-a"]),
        ([], ["osmo-team-a"], ["osmo-team-a"]),  # import never removes
        (["team-b"], [], ["osmo-team-b"]),
        ([], ["osmo-team-b"], []),  # force removes when absent
        (["team-c"], [], []),  # ignore never adds
        ([], ["osmo-team-c"], ["osmo-team-c"]),  # ignore never removes
        (["osmo-user"], [], ["osmo-user"]),  # None: identity mapping
        ([], ["osmo-user"], []),
        (["osmo-ops"], [], []),  # []: no group maps, so ...
        ([], ["osmo-ops"], []),  # ... a force role is always removed
        (["osmo-team-a"], [], []),  # an explicit list replaces the identity mapping
        (["team-a", "team-b"], ["legacy-role"], ["legacy-role", "osmo-team-a", "osmo-team-b"]),
    ],
)
def test_roles_for_groups(groups: list[str], current: list[str], expected: list[str]) -> None:
    assert roles_for_groups(SYNCED, groups, current) == expected


def test_roles_for_request_adds_osmo_default_and_ignores_unknown_names() -> None:
    defined = [ADMIN, USER, DEFAULT, TEAM_A]
    assert roles_for_request(defined, ["osmo-team-a", "nope"]) == [DEFAULT, TEAM_A]


# ------------------------------------------------------------------------------ properties

_ACTIONS = ["workflow:Create", "workflow:Read", "pool:List", "config:Update", "config:Read"]
_RESOURCES = ["pool/a", "pool/ab", "pool/b", "config/pool", "config/role", "pool/*"]
_action_patterns = st.sampled_from(["*:*", "workflow:*", "*:Read", "config:*", *_ACTIONS])
_resource_patterns = st.lists(
    st.sampled_from(["*", "pool/*", "pool/a*", "pool/a", "config/pool", "config/*"]), max_size=2
)
_policies = st.builds(
    lambda effect, actions, resources: RolePolicy(
        effect=effect, actions=actions, resources=resources
    ),
    st.sampled_from(["Allow", "Deny"]),
    st.lists(_action_patterns, min_size=1, max_size=2),
    _resource_patterns,
)
_roles = st.lists(
    st.builds(lambda p: Role(name="r", policies=p), st.lists(_policies, max_size=3)), max_size=3
)
_requests = st.tuples(st.sampled_from(_ACTIONS), st.sampled_from([None, *_RESOURCES]))


def _extend(roles: list[Role], index: int, policy: RolePolicy) -> list[Role]:
    if not roles:
        return [Role(name="added", policies=[policy])]
    i = index % len(roles)
    grown = roles[i].model_copy(update={"policies": [*roles[i].policies, policy]})
    return [*roles[:i], grown, *roles[i + 1 :]]


@given(_roles, _policies, st.integers(0, 5), _requests)
def test_adding_a_deny_never_allows_and_an_allow_never_denies(
    roles: list[Role], policy: RolePolicy, index: int, request: tuple[str, str | None]
) -> None:
    before = evaluate(roles, *request).allowed
    after = evaluate(_extend(roles, index, policy), *request).allowed
    if policy.effect == "Deny":
        assert not (after and not before)
    else:
        assert not (before and not after)


@given(_roles, st.lists(st.sampled_from(["a", "ab", "b", "*", "a*", "c"]), max_size=6))
def test_allowed_pools_are_those_evaluate_allows(roles: list[Role], names: list[str]) -> None:
    expected = [n for n in names if evaluate(roles, "workflow:Create", f"pool/{n}").allowed]
    assert allowed_pools(roles, names) == expected
