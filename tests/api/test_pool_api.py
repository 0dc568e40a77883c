"""``GET /api/pool/{pool}/render`` and the verbose pool view, on SQLite and on PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from corral.files import read_bundle_directory
from corral.services.config_service import ConfigService
from corral.services.config_writes import WriteMeta
from corral.services.runtime import utc_now
from corral.store.config_store import ConfigStore
from tests.conftest import REPO, Api

EXAMPLES = REPO / "examples" / "configs"
A100_TOLERATION = {
    "key": "nvidia.com/gpu.product",
    "operator": "Equal",
    "value": "NVIDIA-A100",
    "effect": "NoSchedule",
}
DEFAULT_RESOURCES = {"cpu": 1, "memory": "1Gi", "nvidia.com/gpu": 0, "ephemeral-storage": "1Gi"}


@pytest.fixture
def examples(api: Api) -> Api:
    """The API with every example config of ``examples/configs`` loaded."""
    bundle, _ = read_bundle_directory(EXAMPLES)
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status == 200, body
    return api


def render(api: Api, pool: str, **params: Any) -> tuple[int, Any]:
    return api.call("GET", f"/api/pool/{pool}/render", params=params)


def rendered(api: Api, pool: str, **params: Any) -> dict[str, Any]:
    status, body = render(api, pool, **params)
    assert status == 200, body
    assert isinstance(body, dict)
    return body


def user_container(body: dict[str, Any]) -> dict[str, Any]:
    containers = body["pod_template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == body["variables"]["USER_CONTAINER_NAME"])


def provenance(body: dict[str, Any], field: str) -> dict[str, Any]:
    return next(entry for entry in body["provenance"] if entry["field"] == field)


def add(api: Api, bundle: dict[str, Any]) -> None:
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status == 200, body


def add_unchecked(api: Api, bundle: dict[str, Any]) -> None:
    """Store ``bundle`` without rendering its pools first: a pool stored before corral checked
    templates on write (issue 13) is still there to be rendered."""
    store = ConfigStore(api.runtime.engine, utc_now)
    service = ConfigService(store, check_pools=lambda before, after, pools: [])
    service.apply(bundle, WriteMeta(username="admin"), dry_run=False)


def refused(api: Api, bundle: dict[str, Any]) -> str:
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status == 400, body
    return str(body["message"])


# -------------------------------------------------------------------------------- render


def test_render_a100_platform_of_the_heterogeneous_pool(examples: Api) -> None:
    body = rendered(examples, "heterogeneous_pool", platform="a100_platform")
    assert (body["pool"], body["platform"]) == ("heterogeneous_pool", "a100_platform")
    assert body["node_selector"] == {"nvidia.com/gpu.product": "NVIDIA-A100"}
    assert body["tolerations"] == [A100_TOLERATION]
    assert body["pod_template"]["spec"]["nodeSelector"] == body["node_selector"]
    assert body["default_variables"] == {
        "USER_CPU": 1,
        "USER_GPU": 0,
        "USER_MEMORY": "1Gi",
        "USER_STORAGE": "1Gi",
    }
    resources = user_container(body)["resources"]
    assert resources == {"requests": DEFAULT_RESOURCES, "limits": DEFAULT_RESOURCES}
    assert isinstance(resources["limits"]["cpu"], int)  # 1, not "1" nor 1.0
    assert isinstance(resources["limits"]["nvidia.com/gpu"], int)

    selector = provenance(body, 'spec.nodeSelector["nvidia.com/gpu.product"]')
    assert selector == {
        "field": 'spec.nodeSelector["nvidia.com/gpu.product"]',
        "path": ["spec", "nodeSelector", "nvidia.com/gpu.product"],
        "set_by": "a100",
        "overrode": [],
        "repeated_by": [],
        "value": "NVIDIA-A100",
    }
    cpu = provenance(body, "spec.containers[0].resources.limits.cpu")
    assert (cpu["set_by"], cpu["overrode"], cpu["value"]) == ("default_user", [], 1)
    assert provenance(body, "spec.tolerations[0].key")["set_by"] == "a100"
    assert provenance(body, "spec.containers[1].name")["set_by"] == "default_ctrl"

    assert [(r["set"], r["operator"]) for r in body["resource_validations"]] == [
        ("default_cpu", "LE"),
        ("default_cpu", "GT"),
        ("default_memory", "LE"),
        ("default_memory", "GT"),
        ("default_storage", "LT"),
        ("default_storage", "GT"),
    ]
    assert body["resource_validations"][0] == {
        "set": "default_cpu",
        "operator": "LE",
        "left_operand": "{{USER_CPU}}",
        "right_operand": "{{K8_CPU}}",
        "assert_message": "Value {{USER_CPU}} too high for CPU",
    }
    assert body["group_templates"] == []
    assert body["default_mounts"] == []


def test_default_platform_is_used_without_platform(examples: Api) -> None:
    body = rendered(examples, "heterogeneous_pool")
    assert body["platform"] == "l40s_platform"
    assert body["node_selector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    assert body["tolerations"] == []


def test_set_values_override_the_defaults(examples: Api) -> None:
    body = rendered(
        examples,
        "heterogeneous_pool",
        platform="a100_platform",
        set=["USER_GPU=8", "USER_MEMORY=64Gi", "USER_CPU=16"],
    )
    limits = user_container(body)["resources"]["limits"]
    assert limits == {"cpu": 16, "memory": "64Gi", "nvidia.com/gpu": 8, "ephemeral-storage": "1Gi"}
    assert body["variables"]["USER_MEMORY_Gi"] == 64
    # the defaults themselves are shown as configured
    assert body["default_variables"]["USER_GPU"] == 0


def test_explicit_zero_gpu_is_zero(examples: Api) -> None:
    add(
        examples,
        {
            "pools": {
                "gpu-default": {
                    "backend": "default",
                    "common_default_variables": {
                        "USER_CPU": 1,
                        "USER_GPU": 4,
                        "USER_MEMORY": "1Gi",
                        "USER_STORAGE": "1Gi",
                    },
                    "common_pod_template": ["default_user"],
                    "default_platform": "p",
                    "platforms": {"p": {}},
                }
            }
        },
    )
    default = rendered(examples, "gpu-default")
    assert user_container(default)["resources"]["limits"]["nvidia.com/gpu"] == 4
    zero = rendered(examples, "gpu-default", set="USER_GPU=0")
    assert user_container(zero)["resources"]["limits"]["nvidia.com/gpu"] == 0


def test_group_templates_are_rendered(examples: Api) -> None:
    body = rendered(examples, "nvl72")
    [template] = body["group_templates"]
    assert template["sources"] == ["compute-domain"]
    manifest = template["manifest"]
    group_uuid = body["variables"]["WF_GROUP_UUID"]
    assert manifest["metadata"]["name"] == f"compute-domain-{group_uuid}"
    assert manifest["metadata"]["labels"]["osmo.group_uuid"] == group_uuid
    assert manifest["spec"]["numNodes"] == 0


def test_repeated_toleration_is_shown_once(examples: Api) -> None:
    add(
        examples,
        {
            "pod_templates": {
                "a100_again": {"spec": {"tolerations": [A100_TOLERATION]}},
            },
            "pools": {
                "twice": {
                    "backend": "default",
                    "common_pod_template": ["a100"],
                    "default_platform": "gpu",
                    "platforms": {"gpu": {"override_pod_template": ["a100_again"]}},
                }
            },
        },
    )
    body = rendered(examples, "twice")
    assert body["tolerations"] == [A100_TOLERATION]
    key = provenance(body, "spec.tolerations[0].key")
    assert (key["set_by"], key["overrode"], key["repeated_by"]) == ("a100", [], ["a100_again"])
    _, pool = examples.call("GET", "/api/configs/pool/twice", params={"verbose": "true"})
    assert pool["platforms"]["gpu"]["tolerations"] == [A100_TOLERATION]


def test_a_selector_or_tolerations_of_another_shape_are_shown_empty(examples: Api) -> None:
    """The pod is shown as it rendered; the summary fields keep their types (they made the
    view answer 500: found by tests/api/test_fuzz.py, where ``?set=`` values rendered a pool
    that was valid with its defaults)."""
    add_unchecked(
        examples,
        {
            "pod_templates": {"odd": {"spec": {"nodeSelector": "{{X}}", "tolerations": "none"}}},
            "pools": {
                "odd": {
                    "backend": "default",
                    "common_pod_template": ["odd"],
                    "common_default_variables": {"X": "a"},
                    "default_platform": "p",
                    "platforms": {"p": {}},
                }
            },
        },
    )
    body = rendered(examples, "odd")
    assert body["pod_template"]["spec"]["tolerations"] == "none"
    assert (body["node_selector"], body["tolerations"]) == ({}, [])


# -------------------------------------------------------------------------------- errors


def test_unknown_pool_is_404(examples: Api) -> None:
    assert render(examples, "nowhere") == (
        404,
        {"message": "Pool nowhere not found.", "error_code": "NOT_FOUND"},
    )


def test_unknown_platform_is_404(examples: Api) -> None:
    assert render(examples, "heterogeneous_pool", platform="h100") == (
        404,
        {
            "message": "Platform h100 does not exist in pool heterogeneous_pool! Its platforms: "
            "l40s_platform, a100_platform",
            "error_code": "NOT_FOUND",
        },
    )


def test_malformed_set_is_400(examples: Api) -> None:
    assert render(examples, "heterogeneous_pool", set="bad") == (
        400,
        {
            "message": "--set 'bad' must look like NAME=VALUE, NAME being a variable name "
            "(letters, digits, '_')",
            "error_code": "USER",
        },
    )


def test_undefined_variable_names_variable_and_template(examples: Api) -> None:
    teamless = {
        "pod_templates": {
            "needs_team": {
                "spec": {
                    "containers": [
                        {
                            "name": "{{USER_CONTAINER_NAME}}",
                            "env": [{"name": "TEAM", "value": "{{TEAM_NAME}}"}],
                        }
                    ]
                }
            }
        },
        "pools": {
            "teamless": {
                "backend": "default",
                "common_pod_template": ["default_user", "needs_team"],
                "common_default_variables": {
                    "USER_CPU": 1,
                    "USER_GPU": 0,
                    "USER_MEMORY": "1Gi",
                    "USER_STORAGE": "1Gi",
                },
                "default_platform": "p",
                "platforms": {"p": {}},
            }
        },
    }
    message = (
        "pod template needs_team, field spec.containers[0].env[0].value: variable TEAM_NAME "
        "has no value (it is undefined or null); give it one in the task's resources, with "
        "--set, or as a default variable of the pool or platform"
    )
    # refused on write: every submission to the pool would fail (issue 13)
    assert refused(examples, teamless) == (
        "pools.teamless.platforms.p: Platform p does not render with the pool's default "
        f"variables: {message}"
    )
    add_unchecked(examples, teamless)  # stored before corral checked on write
    status, body = render(examples, "teamless")
    assert (status, body["error_code"]) == (400, "USER")
    assert body["message"] == message
    fixed = rendered(examples, "teamless", set="TEAM_NAME=vision")
    assert user_container(fixed)["env"] == [{"name": "TEAM", "value": "vision"}]


def test_null_default_is_an_error_not_none(examples: Api) -> None:
    no_gpu_default = {
        "pools": {
            "no-gpu-default": {
                "backend": "default",
                "common_pod_template": ["default_user"],
                "common_default_variables": {
                    "USER_CPU": 1,
                    "USER_GPU": None,
                    "USER_MEMORY": "1Gi",
                    "USER_STORAGE": "1Gi",
                },
                "default_platform": "p",
                "platforms": {"p": {}},
            }
        }
    }
    prefix = (
        'pod template default_user, field spec.containers[0].resources.requests["nvidia.com/gpu"]:'
        " variable USER_GPU has no value"
    )
    assert refused(examples, no_gpu_default).startswith(
        "pools.no-gpu-default.platforms.p: Platform p does not render with the pool's default "
        f"variables: {prefix}"
    )
    add_unchecked(examples, no_gpu_default)
    status, body = render(examples, "no-gpu-default")
    assert status == 400
    assert body["message"].startswith(prefix)


def test_render_needs_a_token(examples: Api) -> None:
    response = examples.client.get("/api/pool/heterogeneous_pool/render")
    assert response.status_code == 401


# ---------------------------------------------------------------------------- verbose view


def test_verbose_pool_view(examples: Api) -> None:
    status, pool = examples.call(
        "GET", "/api/configs/pool/heterogeneous_pool", params={"verbose": "true"}
    )
    assert status == 200, pool
    assert pool["name"] == "heterogeneous_pool"
    assert pool["status"] == "ONLINE"
    containers = pool["parsed_pod_template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["{{USER_CONTAINER_NAME}}", "osmo-ctrl"]
    assert [r["operator"] for r in pool["parsed_resource_validations"]] == [
        "LE",
        "GT",
        "LE",
        "GT",
        "LT",
        "GT",
    ]
    assert pool["parsed_group_templates"] == []
    a100 = pool["platforms"]["a100_platform"]
    assert a100["labels"] == {"nvidia.com/gpu.product": "NVIDIA-A100"}
    assert a100["tolerations"] == [A100_TOLERATION]
    assert a100["default_mounts"] == []
    assert a100["parsed_pod_template"]["spec"]["nodeSelector"] == a100["labels"]
    assert pool["platforms"]["l40s_platform"]["tolerations"] == []

    status, everything = examples.call("GET", "/api/configs/pool", params={"verbose": "true"})
    assert status == 200
    assert everything["pools"]["heterogeneous_pool"] == pool
    assert "parsed_pod_template" in everything["pools"]["nvl72"]
    assert everything["pools"]["nvl72"]["parsed_group_templates"][0]["kind"] == "ComputeDomain"

    # without verbose: the pool as stored
    _, plain = examples.call("GET", "/api/configs/pool/heterogeneous_pool")
    assert "parsed_pod_template" not in plain
    assert "labels" not in plain["platforms"]["a100_platform"]


# ------------------------------------------------------------------------------ topology


def test_topology_lists_the_pool_levels_coarsest_first(examples: Api) -> None:
    status, body = examples.call("GET", "/api/pool/nvl72/topology")
    assert (status, body) == (
        200,
        {
            "pool": "nvl72",
            "topology_keys": [
                {"level": 1, "key": "zone", "label": "topology.kubernetes.io/zone"},
                {"level": 2, "key": "spine", "label": "topology.kubernetes.io/spine"},
                {"level": 3, "key": "rack", "label": "topology.kubernetes.io/rack"},
                {"level": 4, "key": "gpu-clique", "label": "nvidia.com/gpu-clique"},
            ],
        },
    )
    assert examples.call("GET", "/api/pool/heterogeneous_pool/topology") == (
        200,
        {"pool": "heterogeneous_pool", "topology_keys": []},
    )
    assert examples.call("GET", "/api/pool/nope/topology") == (
        404,
        {"message": "Pool nope not found.", "error_code": "NOT_FOUND"},
    )
