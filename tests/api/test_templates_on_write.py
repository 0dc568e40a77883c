"""Templates are checked when they are written, and render bounded (issue 13, items 6, 7, 14).

A pod or group template that could never become a valid object, or a pool whose platforms do
not render with its default variables, is refused on write with a 4xx naming the template and
the field; before, every submission to the pool failed (some with a 500). Rendering runs in the
sandbox workers: a template that loops or builds huge strings is stopped, not the server."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conftest import Api

BURN = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"
DOUBLE = "{% set s = 'x' * 100000 %}" + "{% set s = s ~ s %}" * 14 + "{{ s | length }}"


def put(api: Api, path: str, configs: Any) -> tuple[int, Any]:
    return api.call("PUT", path, json={"configs": configs})


def use_in_pool(api: Api, template: str, pool: str = "default") -> tuple[int, Any]:
    return api.call(
        "PATCH",
        f"/api/configs/pool/{pool}",
        json={"configs_dict": {"common_pod_template": ["default_user", template]}},
    )


def test_a_pod_template_whose_containers_is_not_a_list_is_refused(examples: Api) -> None:
    status, body = put(examples, "/api/configs/pod_template/zero", {"spec": {"containers": 0}})
    assert (status, body["message"]) == (400, "spec.containers: must be a list, not 0")
    assert examples.call("GET", "/api/configs/pod_template/zero")[0] == 404


def test_a_container_that_is_not_a_mapping_is_no_500(examples: Api) -> None:
    # Found by test_fuzz.py: the render check read every container as a mapping.
    status, body = examples.call(
        "PUT",
        "/api/configs/pod_template/default_user",
        json={"configs_dict": {"spec": {"containers": [None]}}},
    )
    assert status < 500, body


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ({"spec": {"containres": []}}, "spec.containres: unknown field 'containres' (did you "
         "mean 'containers'?)."),
        ({"spec": {"hostNetwork": "{{ X }}", "priority": True}},
         "spec.priority: must be an integer, not True"),
        ({"metadata": {"labels": {"team": 7}}}, "metadata.labels.team: must be text, not 7"),
        ({"spec": {"tolerations": {"key": "a"}}}, "spec.tolerations: must be a list, not a "
         "mapping"),
    ],
)  # fmt: skip
def test_fields_of_a_pod_template_follow_the_pod_schema(
    examples: Api, template: Any, message: str
) -> None:
    status, body = put(examples, "/api/configs/pod_template/t", template)
    assert (status, body["message"]) == (400, message)


def test_a_group_template_follows_its_kinds_schema(examples: Api) -> None:
    template = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "cd-{{WF_GROUP_UUID}}"},
        "spec": {"numNodes": "{{ N }}", "channel": 3},
    }
    status, body = put(examples, "/api/configs/group_template/cd", template)
    assert (status, body["message"]) == (400, "spec.channel: must be a mapping, not 3")


def test_a_group_template_using_a_task_variable_is_refused_on_write(examples: Api) -> None:
    """Issue 14: it was accepted, and every submission to a pool using it failed."""
    template = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm-{{WF_GROUP_UUID}}"},
        "data": {"task": "{{ WF_TASK_NAME | upper }}"},
    }
    status, body = put(examples, "/api/configs/group_template/per-task", template)
    assert (status, body["message"]) == (
        400,
        "data.task: WF_TASK_NAME is a variable of one task, and a group template is rendered "
        "once for a whole task group; use a group variable instead (WF_GROUP_NAME, "
        "WF_GROUP_UUID, WF_ID, ...).",
    )
    assert examples.call("GET", "/api/configs/group_template/per-task")[0] == 404


def test_a_template_that_breaks_a_pool_is_refused_naming_the_pool(examples: Api) -> None:
    good = {"spec": {"priority": "{{ PRIO }}"}}
    status, body = put(examples, "/api/configs/pod_template/prio", good)
    assert status == 200, body
    status, body = use_in_pool(examples, "prio")
    assert (status, body["message"]) == (
        400,
        "platforms.default: Platform default does not render with the pool's default "
        "variables: pod template prio, field spec.priority: variable PRIO has no value (it is "
        "undefined or null); give it one in the task's resources, with --set, or as a default "
        "variable of the pool or platform",
    )
    status, body = examples.call(
        "PATCH",
        "/api/configs/pool/default",
        json={
            "configs_dict": {
                "common_pod_template": ["default_user", "prio"],
                "common_default_variables": {"PRIO": "5"},
            }
        },
    )
    assert status == 200, body
    status, body = put(examples, "/api/configs/pod_template/prio", {"spec": {"priority": "x"}})
    assert (status, body["message"]) == (
        400,
        "This change would break pool default (platforms.default): Platform default does not "
        "render with the pool's default variables into a valid Pod: spec.priority: 'x' is not "
        "of type 'integer', 'null' (pod template prio; see corral pool render default --platform "
        "default)",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BURN, "took longer than 0.5 s of CPU time; simplify the template"),
        (DOUBLE, "needed more than 100 MiB; simplify the template"),
    ],
)
def test_template_bombs_are_stopped_and_the_server_answers(
    examples: Api, text: str, message: str
) -> None:
    status, body = put(
        examples, "/api/configs/pod_template/bomb", {"metadata": {"annotations": {"a": text}}}
    )
    assert status == 200, body  # a template alone is not rendered
    started = time.monotonic()
    status, body = use_in_pool(examples, "bomb")
    assert status == 400, body
    assert message in body["message"], body
    assert time.monotonic() - started < 10
    assert examples.call("GET", "/health")[0] == 200
    status, body = examples.call("GET", "/api/configs/pool/default")
    assert status == 200 and "bomb" not in body["common_pod_template"]


def test_the_control_container_renders_with_the_tasks_variables(examples: Api) -> None:
    """OSMO's own templates mount ``gear/{{WF_SUBMITTED_BY}}`` into ``osmo-ctrl`` (item 14)."""
    control = {
        "spec": {
            "containers": [
                {
                    "name": "osmo-ctrl",
                    "resources": {"requests": {"cpu": "100m"}},
                    "volumeMounts": [
                        {
                            "name": "gear",
                            "mountPath": "/gear",
                            "subPath": "gear/{{WF_SUBMITTED_BY}}",
                        },
                        {"name": "gear", "mountPath": "/c", "subPath": "{{USER_CONTAINER_NAME}}"},
                    ],
                }
            ],
            "volumes": [{"name": "gear", "emptyDir": {}}],
        }
    }
    assert put(examples, "/api/configs/pod_template/ctrl", control)[0] == 200
    assert use_in_pool(examples, "ctrl")[0] == 200
    spec = "workflow:\n  name: ctrl\n  tasks:\n  - {name: main, image: busybox, command: [sh]}\n"
    status, body = examples.call(
        "POST", "/api/pool/default/workflow", params={"dry_run": "true"}, json={"file": spec}
    )
    assert status == 200, body
    [pod] = [m for m in body["groups"][0]["manifests"] if m["kind"] == "Pod"]
    # the user container is there; osmo-ctrl without an image is left out (no sidecar)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["main"]
