"""OSMO's wire format on OSMO's paths (docs/osmo-reference.md#wire-compatibility): one test per
difference OSMO's own CLI tripped over, each checked against OSMO's client code where it has a
model or a parser (loaded from ../shared/osmo-cli, not copied)."""

from __future__ import annotations

import re
from datetime import datetime

import jwt

from corral import __version__
from tests.api.test_workflow_views import as_user, submit, user
from tests.conftest import Api
from tests.osmo_contract import osmo_module

#: The only time form OSMO's clients parse: naive UTC, as ``datetime.utcnow().isoformat()``.
NAIVE_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?$")

#: What OSMO's CLI reads of a workflow list item, and of a workflow.
LIST_ITEM = {
    "name",
    "user",
    "workflow_uuid",
    "submit_time",
    "start_time",
    "end_time",
    "queued_time",
    "status",
    "overview",
    "logs",
    "pool",
    "priority",
    "labels",
}
DETAIL = {"name", "uuid", "submitted_by", "submit_time", "overview", "status", "groups"}
RESOURCES_ENTRY = {
    "hostname",
    "exposed_fields",
    "allocatable_fields",
    "usage_fields",
    "non_workflow_usage_fields",
    "platform_allocatable_fields",
    "pool_platform_labels",
    "config_fields",
    "taints",
    "backend",
    "resource_type",
}


def test_1_login_sends_the_api_token_in_the_body(examples: Api) -> None:
    client = examples.client
    answer = client.post("/api/auth/jwt/access_token", json={"token": examples.token})
    assert answer.status_code == 200, answer.text
    token = answer.json()["token"]
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 3600 and claims["name"] == "admin"
    # the short-lived token is what OSMO's CLI sends from then on
    read = client.get("/api/profile/settings", headers={"Authorization": f"Bearer {token}"})
    assert (read.status_code, read.json()["profile"]["username"]) == (200, "admin")
    for body in ({}, {"token": ""}, {"token": 7}, []):
        refused = client.post("/api/auth/jwt/access_token", json=body)
        assert (refused.status_code, refused.json()["message"]) == (
            401,
            'Send your API token, as {"token": "<token>"} in the body of this request or as '
            "'Authorization: Bearer <token>'.",
        )
    unknown = client.post("/api/auth/jwt/access_token", json={"token": "corral_nope"})
    assert (unknown.status_code, unknown.json()["message"]) == (
        401,
        "The bearer token is unknown or revoked.",
    )
    # a body over 16 KiB is not read for a token
    huge = client.post("/api/auth/jwt/access_token", json={"token": "x" * 20_000})
    assert huge.status_code == 413


def test_2_workflow_objects_are_osmos(examples: Api) -> None:
    first = submit(examples)
    submit(examples)
    status, listed = examples.call("GET", "/api/workflow", params={"limit": 1})
    assert status == 200, listed
    (item,) = listed["workflows"]
    assert set(item) == LIST_ITEM and listed["more_entries"] is True
    assert (item["name"], item["user"], item["labels"]) == ("simulate-then-train-2", "admin", {})
    assert item["overview"] == "http://testserver/ui/workflows/simulate-then-train-2"
    assert item["logs"] == "http://testserver/api/workflow/simulate-then-train-2/logs"
    _, rest = examples.call("GET", "/api/workflow", params={"limit": 1, "offset": 1})
    assert [w["name"] for w in rest["workflows"]] == [first.workflow_id]
    assert rest["more_entries"] is False
    _, oldest = examples.call("GET", "/api/workflow", params={"order": "ASC", "name": "train-1"})
    assert [w["name"] for w in oldest["workflows"]] == [first.workflow_id]
    _, none = examples.call("GET", "/api/workflow", params={"statuses": ["RUNNING"]})
    assert none == {"workflows": [], "more_entries": False}
    labeled = examples.call("GET", "/api/workflow", params={"label": ["team=a"]})
    assert labeled == (
        400,
        {
            "message": "label: corral keeps no workflow labels; submit and list without "
            "--label (tell workflows apart by name and pool).",
            "error_code": "USER",
            "field": "label",
            "path": ["label"],
        },
    )

    status, detail = examples.call("GET", f"/api/workflow/{first.workflow_id}")
    assert status == 200 and set(detail) >= DETAIL
    task = detail["groups"][0]["tasks"][0]
    assert {"name", "retry_id", "start_time", "status"} <= set(task)
    assert examples.call("POST", f"/api/workflow/{first.workflow_id}/cancel")[1]["name"] == (
        first.workflow_id
    )


def test_3_profile_is_osmos(examples: Api) -> None:
    profile_model = osmo_module("api.profile").ProfileResponse
    status, body = examples.call("GET", "/api/profile/settings")
    assert status == 200
    parsed = profile_model.model_validate(body)  # extra fields forbidden: exactly OSMO's shape
    assert (parsed.profile.username, parsed.profile.pool, parsed.roles) == (
        "admin",
        None,
        ["osmo-admin"],
    )
    status, body = examples.call("POST", "/api/profile/settings", json={"pool": "nvl72"})
    assert (status, profile_model.model_validate(body).profile.pool) == (200, "nvl72")
    refused = examples.call("POST", "/api/profile/settings", json={"email_notification": True})
    assert refused == (
        400,
        {
            "message": "email_notification: corral sends no notifications; watch a workflow "
            "with corral workflow logs --follow or the dashboard instead.",
            "error_code": "USER",
            "field": "email_notification",
            "path": ["email_notification"],
        },
    )


def test_4_users_are_osmos(examples: Api) -> None:
    status, made = examples.call("POST", "/api/auth/user", json={"id": "ann", "roles": []})
    assert status == 200, made
    status, granted = examples.call(
        "POST", "/api/auth/user/ann/roles", json={"role_name": "osmo-user"}
    )
    assert status == 200, granted
    (role,) = granted["roles"]
    assert (granted["id"], granted["created_by"], role["role_name"], role["assigned_by"]) == (
        "ann",
        "admin",
        "osmo-user",
        "admin",
    )
    assert NAIVE_UTC.match(role["assigned_at"]) and NAIVE_UTC.match(granted["created_at"])
    status, page = examples.call("GET", "/api/auth/user", params={"count": 1, "id_prefix": "a"})
    assert (status, set(page), page["total_results"], page["items_per_page"]) == (
        200,
        {"users", "total_results", "start_index", "items_per_page"},
        2,
        1,
    )
    assert [u["id"] for u in page["users"]] == ["admin"]
    _, holders = examples.call("GET", "/api/auth/user", params={"roles": ["osmo-user"]})
    assert [u["id"] for u in holders["users"]] == ["ann"]


def test_5_pools_and_resources_are_osmos(examples: Api) -> None:
    status, pools = examples.call("GET", "/api/pool", params={"pools": ["nvl72"]})
    assert status == 200 and list(pools["pools"]) == ["nvl72"]
    nvl72 = pools["pools"]["nvl72"]
    assert (nvl72["name"], nvl72["default_platform"], list(nvl72["platforms"])) == (
        "nvl72",
        "gb200",
        ["gb200"],
    )
    assert nvl72["platforms"]["gb200"]["privileged_allowed"] is False
    quantities = osmo_module("utils.resource_quantities")
    _, listed = examples.call("GET", "/api/resources", params={"pools": ["nvl72"]})
    entry = listed["resources"][0]
    assert set(entry) >= RESOURCES_ENTRY
    assert entry["exposed_fields"]["pool/platform"] == ["nvl72/gb200"]
    # OSMO's CLI turns the fields into its table's numbers: GPUs, and memory in Gi
    normalized = quantities.normalize_resource_quantities(entry, "nvl72", "gb200")
    assert (normalized["gpu"]["capacity"], normalized["memory"]["capacity"]) == (4, 850)
    status, info = examples.call("GET", f"/api/resources/{entry['hostname']}")
    assert status == 200 and set(info["resources"][0]) >= RESOURCES_ENTRY
    selected = info["resources"][0]["config_fields"]["nvl72"]["gb200"]
    assert set(selected) == {"host_network", "privileged", "default_mounts", "allowed_mounts"}


def test_6_every_time_is_naive_utc(examples: Api) -> None:
    workflow = submit(examples)
    times: list[str] = []
    _, listed = examples.call("GET", "/api/workflow")
    times.append(listed["workflows"][0]["submit_time"])
    _, detail = examples.call("GET", f"/api/workflow/{workflow.workflow_id}")
    times.append(detail["submit_time"])
    _, history = examples.call("GET", "/api/configs/history", params={"limit": 1})
    times.append(history["configs"][0]["created_at"])
    _, users = examples.call("GET", "/api/auth/user")
    times.append(users["users"][0]["created_at"])
    _, session = examples.call("POST", "/api/auth/session")
    times.append(session["expires_at"])
    for moment in times:
        assert NAIVE_UTC.match(moment), moment
        # the parse OSMO's CLI does (common.convert_utc_datetime_to_user_zone)
        datetime.strptime(moment.replace("T", " "), "%Y-%m-%d %H:%M:%S.%f")


def test_7_history_filters_may_name_every_osmo_type(examples: Api) -> None:
    for only_osmos in (["BACKEND_TEST"], ["SERVICE", "DATASET"]):
        answer = examples.call("GET", "/api/configs/history", params={"config_types": only_osmos})
        assert answer == (200, {"configs": []})
    status, mixed = examples.call(
        "GET", "/api/configs/history", params={"config_types": ["BACKEND_TEST", "POOL"]}
    )
    assert status == 200 and {c["config_type"] for c in mixed["configs"]} == {"POOL"}
    status, body = examples.call("GET", "/api/configs/history", params={"config_types": ["NOPE"]})
    assert status == 400 and body["message"].startswith("query.config_types.0: Unknown config")


def test_8_version_answers_without_a_login(examples: Api) -> None:
    answer = examples.client.get("/api/version")
    assert answer.status_code == 200
    version = osmo_module("utils.version").Version.from_dict(answer.json())
    assert str(version) == __version__


def test_9_double_slashes_are_merged(examples: Api) -> None:
    # in full: a bare "//api/pool" is a network-path reference to httpx (host "api")
    base = "http://testserver/"
    plain = examples.call("GET", "/api/pool")
    assert examples.call("GET", f"{base}/api/pool") == plain
    assert examples.call("GET", f"{base}/api//profile/settings")[0] == 200
    bob = user(examples, "bob")
    assert examples.call("GET", f"{base}/api/auth/user", **as_user(bob))[0] == 403
