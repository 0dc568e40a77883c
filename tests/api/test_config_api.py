"""The config REST API end to end (in-process), on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
import structlog
from fastapi.testclient import TestClient

from corral.domain.configs.types import ConfigType, parse_items
from corral.services.runtime import Runtime
from corral.services.workers.server_logs import LogLevel, configure_logging
from corral.web.app import create_server_app
from tests.conftest import REPO, Api

EXAMPLES = REPO / "examples" / "configs"
BUNDLE_FILES = {
    "backends.json": ConfigType.BACKEND,
    "pod_templates.json": ConfigType.POD_TEMPLATE,
    "group_templates.json": ConfigType.GROUP_TEMPLATE,
    "resource_validations.json": ConfigType.RESOURCE_VALIDATION,
    "roles.json": ConfigType.ROLE,
    "pools.json": ConfigType.POOL,  # last: it refers to all the others
}


def example(name: str) -> Any:
    return json.loads((EXAMPLES / name).read_text())


def is_deep_subset(given: Any, shown: Any) -> bool:
    """Everything the user wrote is shown back unchanged (defaults may be added)."""
    if isinstance(given, dict):
        return isinstance(shown, dict) and all(
            key in shown and is_deep_subset(value, shown[key]) for key, value in given.items()
        )
    return bool(given == shown)


def shown_items(api: Api, ctype: ConfigType) -> dict[str, Any]:
    status, body = api.call("GET", f"/api/configs/{ctype.url_segment}")
    assert status == 200
    if ctype is ConfigType.POOL:
        return dict(body["pools"])
    if ctype is ConfigType.ROLE:
        return {role["name"]: role for role in body}
    if ctype is ConfigType.BACKEND:
        return {backend["name"]: backend for backend in body["backends"]}
    return dict(body)


def test_every_example_round_trips(api: Api) -> None:
    for filename, ctype in BUNDLE_FILES.items():
        document = example(filename)
        status, body = api.call(
            "PUT", f"/api/configs/{ctype.url_segment}", json={"configs": document}
        )
        assert status == 200, (filename, body)
        given, _ = parse_items(ctype, document)
        raw_items = document.get(ctype.bundle_key, document)
        shown = shown_items(api, ctype)
        for name, item in given.items():
            assert parse_items(ctype, {name: shown[name]})[0][name] == item
            raw = (
                raw_items[name]
                if isinstance(raw_items, dict)
                else next(r for r in raw_items if r["name"] == name)
            )
            assert is_deep_subset(raw, shown[name]), name
    status, body = api.call(
        "PUT", "/api/configs/workflow", json={"configs": example("workflow.json")}
    )
    assert status == 200, body
    status, shown = api.call("GET", "/api/configs/workflow")
    assert is_deep_subset(example("workflow.json"), shown)


def test_history_lists_revisions_and_rollback_restores(api: Api) -> None:
    _, before = api.call("GET", "/api/configs/pool")
    pool = {"backend": "default", "description": "first"}
    assert api.call("PUT", "/api/configs/pool/team-a", json={"configs": pool})[0] == 200
    pool["description"] = "second"
    status, body = api.call(
        "PUT",
        "/api/configs/pool/team-a",
        json={"configs": pool, "description": "edit", "tags": ["t1"]},
    )
    assert status == 200
    assert [r["revision"] for r in body["revisions"]] == [3]

    status, history = api.call(
        "GET", "/api/configs/history", params={"config_types": "POOL", "omit_data": "true"}
    )
    assert status == 200
    rows = [
        (r["revision"], r["name"], r["username"], r["description"], r["tags"])
        for r in history["configs"]
    ]
    assert rows == [
        (1, "", "system", "Initial configuration", ["initial-config"]),
        (2, "team-a", "admin", "Put complete pool team-a", []),
        (3, "team-a", "admin", "edit", ["t1"]),
    ]

    status, body = api.call(
        "POST", "/api/configs/history/rollback", json={"config_type": "POOL", "revision": 2}
    )
    assert status == 200
    assert body["revisions"][0]["revision"] == 4
    assert body["revisions"][0]["description"] == "Roll back POOL to r2: Put complete pool team-a"
    actions = {(i["name"], i["action"]) for i in body["items"]}
    assert actions == {("default", "unchanged"), ("team-a", "updated")}
    _, now = api.call("GET", "/api/configs/pool/team-a")
    assert now["description"] == "first"
    _, r2 = api.call("GET", "/api/configs/history", params={"config_types": "POOL", "revision": 2})
    _, current = api.call("GET", "/api/configs/pool")
    assert current == r2["configs"][0]["data"]
    # The untouched pool is byte-for-byte what it was before the edits.
    assert current["pools"]["default"] == before["pools"]["default"]


def test_rollback_to_revision_whose_references_are_gone_is_refused(api: Api) -> None:
    template = {"spec": {"nodeSelector": {"a": "b"}}}
    assert api.call("PUT", "/api/configs/pod_template/extra", json={"configs": template})[0] == 200
    pool = {"backend": "default", "common_pod_template": ["extra"]}
    assert api.call("PUT", "/api/configs/pool/p", json={"configs": pool})[0] == 200
    assert api.call("DELETE", "/api/configs/pool/p")[0] == 200
    assert api.call("DELETE", "/api/configs/pod_template/extra")[0] == 200
    status, body = api.call(
        "POST", "/api/configs/history/rollback", json={"config_type": "POOL", "revision": 2}
    )
    assert status == 409  # the revision is fine; what is stored now conflicts with it
    assert body["message"] == (
        "Cannot roll back POOL to r2: p.common_pod_template.0: Pod template extra does not "
        "exist! Create it first (corral config update POD_TEMPLATE extra --file ...) or fix "
        "the name."
    )


def test_diff_between_two_revisions(api: Api) -> None:
    api.call("PUT", "/api/configs/pool/p", json={"configs": {"backend": "default"}})
    api.call(
        "PATCH",
        "/api/configs/pool/p",
        json={"configs_dict": {"description": "gpu", "enable_maintenance": True}},
    )
    status, body = api.call(
        "GET",
        "/api/configs/diff",
        params={"config_type": "POOL", "first_revision": 2, "second_revision": 3},
    )
    assert status == 200
    assert body["changes"] == [
        {"path": ["p", "description"], "kind": "changed", "before": "", "after": "gpu"},
        {"path": ["p", "enable_maintenance"], "kind": "changed", "before": False, "after": True},
    ]
    assert body["first_data"]["p"]["description"] == ""
    status, body = api.call(
        "GET", "/api/configs/diff", params={"config_type": "POOL", "first_revision": 1}
    )
    assert [c["path"] for c in body["changes"]] == [["p"]]
    assert body["changes"][0]["kind"] == "added"


def test_tags_and_soft_deleted_revisions(api: Api) -> None:
    api.call("PUT", "/api/configs/pool/p", json={"configs": {"backend": "default"}})
    status, body = api.call(
        "POST", "/api/configs/history/pool/revision/2/tags", json={"set_tags": ["good", "prod"]}
    )
    assert (status, body["tags"]) == (200, ["good", "prod"])
    status, body = api.call(
        "POST", "/api/configs/history/pool/revision/2/tags", json={"delete_tags": ["prod"]}
    )
    assert body["tags"] == ["good"]
    _, found = api.call("GET", "/api/configs/history", params={"tags": "good"})
    assert [(r["config_type"], r["revision"]) for r in found["configs"]] == [("POOL", 2)]

    status, body = api.call("DELETE", "/api/configs/history/pool/revision/2")
    assert (status, body["message"]) == (
        409,
        "Cannot delete the current revision 2 for config type POOL",
    )
    api.call("PUT", "/api/configs/pool/q", json={"configs": {"backend": "default"}})
    assert api.call("DELETE", "/api/configs/history/pool/revision/2")[0] == 200
    _, found = api.call("GET", "/api/configs/history", params={"config_types": "POOL"})
    assert [r["revision"] for r in found["configs"]] == [1, 3]
    status, body = api.call(
        "POST", "/api/configs/history/rollback", json={"config_type": "POOL", "revision": 2}
    )
    assert (status, body["message"]) == (
        409,
        "Cannot roll back to revision 2 for config type POOL as it was deleted by admin",
    )
    status, body = api.call(
        "GET", "/api/configs/diff", params={"config_type": "POOL", "first_revision": 2}
    )
    assert (status, body["message"]) == (
        404,
        "No config history entry found for type POOL at revision 2",
    )


def test_history_paging_order_and_time_filters(api: Api) -> None:
    for index in range(5):
        api.call(
            "PUT",
            "/api/configs/pool/p",
            json={"configs": {"backend": "default", "description": str(index)}},
        )
    _, page = api.call(
        "GET", "/api/configs/history", params={"config_types": "POOL", "limit": 2, "order": "DESC"}
    )
    assert [r["revision"] for r in page["configs"]] == [6, 5]
    _, page = api.call(
        "GET", "/api/configs/history", params={"config_types": "POOL", "limit": 2, "offset": 2}
    )
    assert [r["revision"] for r in page["configs"]] == [3, 4]
    _, everything = api.call("GET", "/api/configs/history", params={"omit_data": "true"})
    assert "data" not in everything["configs"][0]
    third = next(
        r for r in everything["configs"] if r["config_type"] == "POOL" and r["revision"] == 3
    )
    _, at = api.call("GET", "/api/configs/history", params={"at_timestamp": third["created_at"]})
    assert {(r["config_type"], r["revision"]) for r in at["configs"]} >= {("POOL", 3)}
    assert all(r["revision"] == 1 for r in at["configs"] if r["config_type"] != "POOL")


def test_base_revision_conflict_and_no_lost_update(api: Api) -> None:
    _, _ = api.call("GET", "/api/configs/pool")
    status, _ = api.call(
        "PUT", "/api/configs/pool/p", json={"configs": {"backend": "default"}, "base_revision": 1}
    )
    assert status == 200
    status, body = api.call(
        "PUT", "/api/configs/pool/q", json={"configs": {"backend": "default"}, "base_revision": 1}
    )
    assert (status, body["error_code"]) == (409, "CONFLICT")
    assert body["message"] == (
        "POOL changed since revision 1: it is now at revision 2. "
        "Fetch it again and re-apply your change."
    )
    _, pools = api.call("GET", "/api/configs/pool")
    assert sorted(pools["pools"]) == ["default", "p"]


def test_revision_header_and_item_views(api: Api) -> None:
    response = api.client.get("/api/configs/pool", headers={"Authorization": f"Bearer {api.token}"})
    assert response.headers["X-Corral-Revision"] == "1"
    status, body = api.call("GET", "/api/configs/pool/nope")
    assert (status, body) == (
        404,
        {"message": "Pool nope does not exist.", "error_code": "NOT_FOUND"},
    )
    status, roles = api.call("GET", "/api/configs/role")
    assert sorted(r["name"] for r in roles) == ["osmo-admin", "osmo-default", "osmo-user"]
    status, backends = api.call("GET", "/api/configs/backend")
    assert [b["name"] for b in backends["backends"]] == ["default"]


def test_identical_write_records_no_revision(api: Api) -> None:
    _, pool = api.call("GET", "/api/configs/pool/default")
    status, body = api.call("PUT", "/api/configs/pool/default", json={"configs": pool})
    assert (status, body["changed"], body["revisions"]) == (200, False, [])


def test_strategic_merge_patch_on_pool(api: Api) -> None:
    api.call(
        "PUT",
        "/api/configs/pool/p",
        json={
            "configs": {
                "backend": "default",
                "description": "x",
                "topology_keys": [{"key": "zone", "label": "topology.kubernetes.io/zone"}],
                "common_default_variables": {"USER_CPU": 1, "USER_GPU": 0},
            }
        },
    )
    status, body = api.call(
        "PATCH",
        "/api/configs/pool/p",
        json={
            "configs_dict": {
                "description": {"$action": "delete"},
                "common_default_variables": {"USER_GPU": 8},
                "topology_keys": [
                    {"$index": 0, "key": "az"},
                    {"key": "rack", "label": "topology.kubernetes.io/rack"},
                ],
            }
        },
    )
    assert status == 200, body
    _, pool = api.call("GET", "/api/configs/pool/p")
    assert pool["description"] == ""
    assert pool["common_default_variables"] == {"USER_CPU": 1, "USER_GPU": 8}
    assert pool["topology_keys"] == [
        {"key": "az", "label": "topology.kubernetes.io/zone"},
        {"key": "rack", "label": "topology.kubernetes.io/rack"},
    ]


def test_workflow_config_put_and_patch(api: Api) -> None:
    status, body = api.call(
        "PATCH", "/api/configs/workflow", json={"configs_dict": {"max_num_tasks": 5}}
    )
    assert status == 200, body
    _, config = api.call("GET", "/api/configs/workflow")
    assert config["max_num_tasks"] == 5
    status, body = api.call(
        "PATCH", "/api/configs/workflow", json={"configs_dict": {"default_exec_timeout": "90d"}}
    )
    assert (status, body["message"]) == (
        400,
        "default_exec_timeout: default_exec_timeout 90d is longer than max_exec_timeout 30d",
    )


def test_osmo_backend_update_by_post(api: Api) -> None:
    status, body = api.call(
        "POST",
        "/api/configs/backend/default",
        json={"configs": {"description": "embedded cluster"}},
    )
    assert status == 200, body
    _, backend = api.call("GET", "/api/configs/backend/default")
    assert backend["description"] == "embedded cluster"
    assert backend["scheduler_settings"]["scheduler_type"] == "kai"


def test_apply_bundle_atomically_and_dry_run(api: Api) -> None:
    bundle = {
        "pod_templates": {"rack": {"spec": {"nodeSelector": {"rack": "a"}}}},
        "pools": {"racked": {"backend": "default", "common_pod_template": ["rack"]}},
    }
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle, "dry_run": True})
    assert status == 200
    assert (body["dry_run"], body["changed"], body["revisions"]) == (True, False, [])
    created = sorted(
        (i["config_type"], i["name"]) for i in body["items"] if i["action"] == "created"
    )
    assert created == [("POD_TEMPLATE", "rack"), ("POOL", "racked")]
    assert api.call("GET", "/api/configs/pool/racked")[0] == 404

    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status == 200
    assert sorted((r["config_type"], r["revision"]) for r in body["revisions"]) == [
        ("POD_TEMPLATE", 2),
        ("POOL", 2),
    ]
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert (status, body["changed"]) == (200, False)

    broken = {
        "pod_templates": {"other": {"spec": {}}},
        "pools": {"bad": {"backend": "default", "common_pod_template": ["missing"]}},
    }
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": broken})
    assert (status, body["path"]) == (400, ["pools", "bad", "common_pod_template", 0])
    assert api.call("GET", "/api/configs/pod_template/other")[0] == 404


def test_helm_camel_case_bundle_keys(api: Api) -> None:
    bundle = {
        "podTemplates": {"x": {"spec": {}}},
        "resourceValidations": {
            "v": [
                {
                    "operator": "NE",
                    "left_operand": "{{USER_GPU}}",
                    "right_operand": "3",
                    "assert_message": "no",
                }
            ]
        },
    }
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status == 200, body
    assert api.call("GET", "/api/configs/resource_validation/v")[1][0]["operator"] == "NE"


@pytest.mark.parametrize(
    "path", ["/api/configs", "/api/configs/pool", "/api/configs/history", "/openapi.json"]
)
def test_every_config_endpoint_needs_a_token(api: Api, path: str) -> None:
    assert api.client.get(path).status_code == 401
    response = api.client.get(path, headers={"Authorization": "Bearer corral_wrong"})
    assert response.status_code == 401
    assert response.json() == {
        "message": "The bearer token is unknown or revoked.",
        "error_code": "UNAUTHORIZED",
    }


def test_non_admin_token_is_forbidden(api: Api) -> None:
    token = api.runtime.tokens.create(name="u", username="alice", roles=["osmo-user"])
    response = api.client.get("/api/configs/pool", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 403
    assert response.json()["message"] == (
        "alice may not config:Read on config/pool: denied: no policy of osmo-user, "
        "osmo-default allows config:Read on config/pool."
    )


def test_health_and_metrics(api: Api) -> None:
    assert api.client.get("/health").json()["status"] == "ok"
    api.call("GET", "/api/configs/pool")
    text = api.client.get("/metrics").text
    assert (
        'corral_http_requests_total{method="GET",route="/api/configs/{segment}",status="200"} 1.0'
    ) in text


def test_openapi_schema_for_authenticated_callers(api: Api) -> None:
    status, schema = api.call("GET", "/openapi.json")
    assert status == 200
    assert "/api/configs/{segment}/{name}" in schema["paths"]
    assert api.call("GET", "/docs")[0] == 404  # no docs UI (anonymous callers get 401 first)


def test_requests_are_logged_with_the_access_log_only(
    runtime: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log line per request was the default; it is ``corral server --access-log`` now."""
    configure_logging(LogLevel.INFO)  # as corral server does
    try:
        for access_log, lines in ((False, 0), (True, 1)):
            client = TestClient(create_server_app(runtime, access_log=access_log))
            capsys.readouterr()
            assert client.get("/health").status_code == 200
            logged = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
            found = [entry for entry in logged if entry.get("event") == "request"]
            assert len(found) == lines
            if lines:
                assert {k: found[0][k] for k in ("method", "route", "status")} == {
                    "method": "GET",
                    "route": "/health",
                    "status": 200,
                }
    finally:
        structlog.reset_defaults()
