"""Every route checks the action OSMO's registry resolves for its path (or a listed exception)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from corral.domain.access.actions import resolve
from corral.errors import ForbiddenError
from tests.conftest import Api

#: Routes that check something other than the registry's action, and why (docs/access.md).
EXCEPTIONS: dict[tuple[str, str], str] = {
    # OSMO's registry lists neither; corral lets config:Update do them instead of *:* only
    ("DELETE", "/api/configs/{segment}/{name}"): "config:Update",
    ("POST", "/api/configs/backend/{name}"): "config:Update",
    # a backend item's generic methods, documented under OSMO's backend path too (openapi.py)
    ("DELETE", "/api/configs/backend/{name}"): "config:Update",
    # corral's name for OSMO's /api/auth/jwt/access_token (auth:Refresh)
    ("POST", "/api/auth/session"): "auth:Refresh",
    # OSMO updates the profile with POST; corral accepts PUT as well
    ("PUT", "/api/profile/settings"): "profile:Update",
}
#: Not authorized by action: public probes, and the schema any authenticated caller may read.
UNCHECKED = {
    ("GET", "/health"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/api/version"),  # public, as OSMO's: its CLI asks before logging in
    ("GET", "/api/auth/login"),  # public: how to log in is asked before there is a token
}

#: Routes whose check comes after a body or a lookup the sample request does not satisfy; the
#: workflow tests check their actions (workflow:Create on pool/<p>, workflow:Read on its pool).
#: Routes that answer 404 for the sample workflow before they check access (their access is
#: tested with a real workflow in test_workflow_views.py / test_workflow_submit.py).
NOT_REACHED = {
    ("POST", "/api/pool/{pool}/workflow"),
    ("POST", "/api/pool/{pool}/workflow/{workflow_id}/restart"),
    ("GET", "/api/workflow/{workflow_id}"),
    ("POST", "/api/workflow/{workflow_id}/cancel"),
    ("GET", "/api/workflow/{workflow_id}/logs"),
    ("GET", "/api/workflow/{workflow_id}/explain"),
    # its access: tests/services/lifecycle/test_checkpoint_preemption.py
    ("POST", "/api/workflow/{workflow_id}/task/{task_name}/checkpoint"),
    ("GET", "/api/workflow/{workflow_id}/task/{task_name}/notice"),
    ("POST", "/api/workflow/{workflow_id}/task/{task_name}/ready"),
    # node:Update is checked on the pools the node serves, once the node is found
    # (tests/services/lifecycle/test_node_health.py)
    ("POST", "/api/nodes/{node}/cordon"),
    ("POST", "/api/nodes/{node}/drain"),
    ("POST", "/api/nodes/{node}/uncordon"),
    ("POST", "/api/nodes/{node}/fail"),
    ("POST", "/api/nodes/{node}/heal"),
}

SAMPLE = {
    "workflow_id": "wf-1",
    "segment": "pool",
    "name": "p1",
    "pool": "p1",
    "username": "alice",
    "role": "r1",
    "revision": "1",
    "node": "n1",
    "task_name": "t0",
}
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/api/configs/history/rollback"): {"config_type": "POOL", "revision": 1},
    ("POST", "/api/configs/apply"): {"bundle": {}},
    ("POST", "/api/configs/history/{segment}/revision/{revision}/tags"): {},
    ("POST", "/api/configs/backend/{name}"): {"configs": {}},
    ("POST", "/api/auth/user"): {"id": "alice"},
    ("POST", "/api/auth/user/{username}/roles"): {"role_name": "osmo-user"},
    ("POST", "/api/profile/settings"): {"pool": None},
    ("PUT", "/api/profile/settings"): {"pool": None},
}


class Stop(ForbiddenError):
    pass


def routes(api: Api) -> list[tuple[str, str]]:
    """Every (method, path template) the app serves, from its OpenAPI schema."""
    paths = api.client.app.openapi()["paths"]  # type: ignore[attr-defined]
    found = [(method.upper(), path) for path, item in paths.items() for method in item]
    return [r for r in found if r not in UNCHECKED]


def first_check(
    api: Api, monkeypatch: pytest.MonkeyPatch, method: str, template: str
) -> str | None:
    seen: list[str] = []

    def spy(principal: Any, action: str, *_: Any, **__: Any) -> None:
        seen.append(action)
        raise Stop("stop")

    authorizer = api.client.app.state.authorizer  # type: ignore[attr-defined]
    monkeypatch.setattr(authorizer, "check", spy)
    monkeypatch.setattr(authorizer, "check_any", spy)
    path = re.sub(r"\{(\w+)\}", lambda m: SAMPLE[m.group(1)], template)
    path += "?config_type=POOL" if template == "/api/configs/diff" else ""
    body = BODIES.get((method, template), {"configs": {}} if method in ("PUT", "PATCH") else None)
    status, answer = api.call(method, path, **({} if body is None else {"json": body}))
    if (method, template) in NOT_REACHED and not seen:
        return None
    assert seen, f"{method} {template} answered {status} {answer} without a check"
    return seen[0]


def test_every_route_checks_the_registrys_action(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    checked = routes(api)
    assert len(checked) >= 25
    for method, template in checked:
        action = first_check(api, monkeypatch, method, template)
        if action is None:
            continue
        concrete = re.sub(r"\{(\w+)\}", lambda m: SAMPLE[m.group(1)], template)
        resolved = resolve(method, concrete)
        expected = EXCEPTIONS.get((method, template), resolved.action if resolved else "")
        assert action == expected, f"{method} {template}"
        if (method, template) in EXCEPTIONS:
            assert (resolved.action if resolved else "") != expected  # a real exception
