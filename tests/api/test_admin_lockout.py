"""No role write leaves corral without an administrator (docs/access.md#differences-from-osmo),
and a write refuses a query parameter it does not take (docs/api.md#query-parameters).

``PUT /api/configs/role/osmo-admin`` with no policies, or its ``DELETE``, answered 200, and the
admin got 403 everywhere from then on; ``?dry_run=true`` on that PUT was ignored and the write
applied."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api

LOCKOUT = (
    "This change to the roles would leave no user who may administer corral: admin would lose "
    "it, and every admin token would stop working. Keep a role that allows *:* (osmo-admin's "
    "policy), or give a user such a role first (corral user roles add NAME osmo-admin)."
)
EVERYTHING = {"actions": ["*:*"], "resources": ["*"]}


def role_revision(api: Api) -> int:
    status, body = api.call("GET", "/api/configs")
    assert status == 200, body
    return next(int(c["revision"]) for c in body["configs"] if c["config_type"] == "ROLE")


def still_admin(api: Api) -> None:
    status, body = api.call("GET", "/api/auth/user")
    assert status == 200, body


def refused(api: Api, method: str, path: str, **kwargs: Any) -> None:
    before = role_revision(api)
    status, body = api.call(method, path, **kwargs)
    assert (status, body["message"]) == (409, LOCKOUT), body
    assert role_revision(api) == before
    still_admin(api)


def test_emptying_or_deleting_the_admin_role_is_refused(api: Api) -> None:
    path = "/api/configs/role/osmo-admin"
    refused(api, "PUT", path, json={"configs_dict": {"description": "x", "policies": []}})
    deny = {"effect": "Deny", "actions": ["*:*"], "resources": ["*"]}
    refused(api, "PUT", path, json={"configs_dict": {"policies": [EVERYTHING, deny]}})
    refused(api, "DELETE", path)
    refused(api, "PATCH", path, json={"configs_dict": {"policies": []}})
    bundle = {"roles": {"osmo-admin": {"description": "x", "policies": []}}}
    refused(api, "POST", "/api/configs/apply", json={"bundle": bundle})
    refused(api, "POST", "/api/configs/apply", json={"bundle": bundle, "dry_run": True})
    status, body = api.call(
        "PUT", path, json={"configs_dict": {"description": "admins", "policies": [EVERYTHING]}}
    )
    assert status == 200, body


def test_a_rollback_to_roles_that_leave_no_admin_is_refused(api: Api) -> None:
    """The admin holds only ``root`` (added later): rolling ROLE back to before ``root`` would
    leave the admin's role undefined."""
    first = role_revision(api)
    status, body = api.call(
        "PUT",
        "/api/configs/role/root",
        json={"configs_dict": {"description": "everything", "policies": [EVERYTHING]}},
    )
    assert status == 200, body
    status, body = api.call("POST", "/api/auth/user/admin/roles", json={"role_name": "root"})
    assert status == 200, body
    status, body = api.call("DELETE", "/api/auth/user/admin/roles/osmo-admin")
    assert status == 200, body
    refused(
        api,
        "POST",
        "/api/configs/history/rollback",
        json={"config_type": "ROLE", "revision": first},
    )
    refused(api, "DELETE", "/api/configs/role/root")
    status, body = api.call("DELETE", "/api/configs/role/osmo-admin")  # nobody holds it now
    assert status == 200, body


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/api/configs/role/osmo-admin", {"configs_dict": {"policies": []}}),
        ("DELETE", "/api/configs/role/osmo-user", None),
        ("POST", "/api/configs/apply", {"bundle": {}}),
    ],
)
def test_a_write_refuses_a_query_parameter_it_does_not_take(
    api: Api, method: str, path: str, body: Any
) -> None:
    before = role_revision(api)
    status, answer = api.call(
        method, f"{path}?dry_run=true", **({} if body is None else {"json": body})
    )
    assert status == 400, answer
    assert answer["field"] == "dry_run"
    assert answer["message"].startswith(
        f"dry_run: Unknown query parameter 'dry_run' on {method} /api/configs/"
    )
    assert answer["message"].endswith("Nothing was written.")
    assert role_revision(api) == before
