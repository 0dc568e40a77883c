"""``POST /api/pool/{pool}/workflow``: the example workflows' objects (``osmo-topology.md`` A8 with
the A9 fixes), storage and ids, and every rejection path of the pipeline, on both databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, Api
from tests.k8s_schemas import manifest_problems

WORKFLOWS = REPO / "examples" / "workflows"
T = "osmo-pool-default-nvl72-topology"
Q = "osmo-pool-default-nvl72"
ZONE = "topology.kubernetes.io/zone"
SPINE = "topology.kubernetes.io/spine"
RACK = "topology.kubernetes.io/rack"
CLIQUE = "nvidia.com/gpu-clique"


def post(
    api: Api, pool: str, text: str, *, token: str | None = None, **params: Any
) -> tuple[int, Any]:
    body = {
        "file": text,
        "set_variables": params.pop("set", []),
        "set_string_variables": params.pop("set_string", []),
        "source": params.pop("source", "wf.yaml"),
    }
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return api.call("POST", f"/api/pool/{pool}/workflow", json=body, params=params, headers=headers)


def dry_run(api: Api, example: str, pool: str = "nvl72", **params: Any) -> dict[str, Any]:
    status, body = post(api, pool, (WORKFLOWS / example).read_text(), dry_run="true", **params)
    assert status == 200, body
    assert isinstance(body, dict)
    return body


def of_kind(group: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [m for m in group["manifests"] if m["kind"] == kind]


def constraint(required: str | None = None, preferred: str | None = None) -> dict[str, str]:
    found = {"topology": T}
    if required:
        found["requiredTopologyLevel"] = required
    if preferred:
        found["preferredTopologyLevel"] = preferred
    return found


def subgroup_of_pods(group: dict[str, Any]) -> dict[str, str | None]:
    return {
        pod["metadata"]["labels"]["osmo.task_name"]: pod["metadata"]["labels"].get(
            "kai.scheduler/subgroup-name"
        )
        for pod in of_kind(group, "Pod")
    }


# ------------------------------------------------------------- examples (A8 with the A9 fixes)

PODGROUP_SPECS: dict[str, dict[str, Any]] = {
    # UC1: one clique required for all four shards; no subgroups.
    "nvl72-single-rack.yaml": {
        "minMember": 4,
        "topologyConstraint": constraint(required=CLIQUE),
    },
    # UC2: each instance in its own clique; no top-level constraint.
    "nvl72-two-instances.yaml": {
        "subGroups": [
            {"name": "model-1-group", "minMember": 4, "topologyConstraint": constraint(CLIQUE)},
            {"name": "model-2-group", "minMember": 4, "topologyConstraint": constraint(CLIQUE)},
        ],
    },
    # UC3: zone on the PodGroup, a clique per instance.
    "nvl72-one-zone.yaml": {
        "topologyConstraint": constraint(required=ZONE),
        "subGroups": [
            {
                "name": "workflow-group-model-1-group",
                "minMember": 4,
                "topologyConstraint": constraint(required=CLIQUE),
            },
            {
                "name": "workflow-group-model-2-group",
                "minMember": 4,
                "topologyConstraint": constraint(required=CLIQUE),
            },
        ],
    },
    # UC4: preferred spine for all, preferred rack per instance.
    "nvl72-best-effort.yaml": {
        "topologyConstraint": constraint(preferred=SPINE),
        "subGroups": [
            {
                "name": "workflow-group-model-1-group",
                "minMember": 4,
                "topologyConstraint": constraint(preferred=RACK),
            },
            {
                "name": "workflow-group-model-2-group",
                "minMember": 4,
                "topologyConstraint": constraint(preferred=RACK),
            },
        ],
    },
}


@pytest.mark.parametrize("example", sorted(PODGROUP_SPECS))
def test_dry_run_of_each_topology_example_gives_the_podgroup_of_the_reference(
    examples: Api, example: str
) -> None:
    body = dry_run(examples, example)
    [group] = body["groups"]
    [pod_group] = of_kind(group, "PodGroup")
    expected = {"queue": Q, "priorityClassName": "osmo-normal", **PODGROUP_SPECS[example]}
    assert pod_group["spec"] == expected
    assert pod_group["metadata"]["name"] == group["uuid"]
    assert pod_group["metadata"]["labels"]["kai.scheduler/queue"] == Q
    for manifest in group["manifests"]:
        assert manifest_problems(manifest) == [], manifest["kind"]


def test_pods_carry_their_leaf_subgroup_scheduler_and_pod_group(examples: Api) -> None:
    [group] = dry_run(examples, "nvl72-one-zone.yaml")["groups"]
    assert subgroup_of_pods(group) == {
        **{f"model1-shard{i}": "workflow-group-model-1-group" for i in range(1, 5)},
        **{f"model2-shard{i}": "workflow-group-model-2-group" for i in range(1, 5)},
    }
    for pod in of_kind(group, "Pod"):
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["metadata"]["annotations"] == {"pod-group-name": group["uuid"]}
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == Q
    [single] = dry_run(examples, "nvl72-single-rack.yaml")["groups"]
    assert set(subgroup_of_pods(single).values()) == {None}


def test_objects_come_in_creation_order_with_the_compute_domain_first(examples: Api) -> None:
    [group] = dry_run(examples, "compute-domain.yaml", set=["trays=3"])["groups"]
    kinds = [m["kind"] for m in group["manifests"]]
    assert kinds == ["ComputeDomain", "PodGroup", "Pod", "Pod", "Pod", "Service"]
    [domain] = of_kind(group, "ComputeDomain")
    assert domain["metadata"]["name"] == f"compute-domain-{group['uuid']}"
    assert domain["metadata"]["labels"]["osmo.group_uuid"] == group["uuid"]
    rct = f"compute-domain-{group['uuid']}-rct"
    assert domain["spec"]["channel"]["resourceClaimTemplate"]["name"] == rct
    for pod in of_kind(group, "Pod"):
        assert pod["spec"]["resourceClaims"] == [
            {"name": "compute-domain-channel", "resourceClaimTemplateName": rct}
        ]


def test_host_tokens_resolve_to_the_pod_dns_names_of_the_headless_service(examples: Api) -> None:
    body = dry_run(examples, "compute-domain.yaml")
    [group] = body["groups"]
    [service] = of_kind(group, "Service")
    worker0 = next(t for t in group["tasks"] if t["name"] == "worker-0")
    host = f"{worker0['uuid']}.{service['metadata']['name']}.default.svc.cluster.local"
    pods = of_kind(group, "Pod")
    assert pods[1]["spec"]["containers"][0]["args"] == [f"echo worker 1 of 2 joins {host}; sleep 5"]
    assert pods[0]["spec"]["hostname"] == worker0["uuid"]
    assert pods[0]["spec"]["subdomain"] == service["metadata"]["name"]
    assert service["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {"osmo.group_uuid": group["uuid"]},
    }


def test_heterogeneous_workflow_places_each_group_on_its_platform(examples: Api) -> None:
    body = dry_run(examples, "heterogeneous.yaml", pool="heterogeneous_pool")
    simulate, train = body["groups"]
    assert (simulate["name"], train["name"], train["upstream"]) == (
        "simulate",
        "train",
        ["simulate"],
    )
    [sim_pod] = of_kind(simulate, "Pod")
    [train_pod] = of_kind(train, "Pod")
    assert sim_pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    assert train_pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100"}
    assert train_pod["spec"]["tolerations"] == [
        {
            "key": "nvidia.com/gpu.product",
            "operator": "Equal",
            "value": "NVIDIA-A100",
            "effect": "NoSchedule",
        }
    ]
    limits = train_pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": 8, "memory": "64Gi", "nvidia.com/gpu": 4, "ephemeral-storage": "20Gi"}
    assert train_pod["spec"]["containers"][0]["args"] == [
        "echo training on /osmo/data/input/0; sleep 5"
    ]
    assert (body["exec_timeout_s"], body["queue_timeout_s"]) == (7200.0, 1800.0)
    # The pool name is not a valid object name: the queue gets a valid one.
    [pod_group] = of_kind(simulate, "PodGroup")
    assert pod_group["spec"]["queue"].startswith("osmo-pool-default-heterogeneous-pool-")


def test_dry_run_stores_nothing_and_submit_numbers_workflows_per_name(examples: Api) -> None:
    text = (WORKFLOWS / "nvl72-single-rack.yaml").read_text()
    assert dry_run(examples, "nvl72-single-rack.yaml")["name"] == "single-nvl72-rack-1"
    ids = []
    for _ in range(3):
        status, body = post(examples, "nvl72", text)
        assert status == 200, body
        ids.append(body["name"])
    assert ids == ["single-nvl72-rack-1", "single-nvl72-rack-2", "single-nvl72-rack-3"]
    status, listed = examples.call("GET", "/api/workflow")
    assert status == 200
    assert [w["name"] for w in listed["workflows"]] == ids[::-1]


def test_stored_workflow_holds_exactly_the_validated_objects(examples: Api) -> None:
    text = (WORKFLOWS / "nvl72-two-instances.yaml").read_text()
    status, body = post(examples, "nvl72", text)
    assert status == 200, body
    status, found = examples.call("GET", f"/api/workflow/{body['name']}", params={"verbose": True})
    assert status == 200, found
    assert (found["status"], found["pool"], found["submitted_by"]) == ("PENDING", "nvl72", "admin")
    [group] = found["groups"]
    assert group["status"] == "SUBMITTING"
    assert [t["status"] for t in group["tasks"]] == ["WAITING"] * 8
    assert [t["lead"] for t in group["tasks"]] == [True] + [False] * 7
    assert group["resource_kinds"] == [
        ["resource.nvidia.com/v1beta1", "ComputeDomain"],
        ["scheduling.run.ai/v2alpha2", "PodGroup"],
        ["v1", "Pod"],
        ["v1", "Service"],
    ]
    pods = [m for m in group["manifests"] if m["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == [t["pod_name"] for t in group["tasks"]]
    assert "default-values" not in found["spec"] and "model2-shard4" in found["spec"]
    status, brief = examples.call("GET", f"/api/workflow/{body['name']}")
    assert "manifests" not in brief["groups"][0]


def test_validation_only_checks_everything_and_stores_nothing(examples: Api) -> None:
    text = (WORKFLOWS / "nvl72-single-rack.yaml").read_text()
    status, body = post(examples, "nvl72", text, validation_only="true")
    assert (status, body) == (
        200,
        {"name": "single-nvl72-rack-1", "logs": "Workflow validation succeeded.", "warnings": []},
    )
    assert examples.call("GET", "/api/workflow")[1] == {"workflows": [], "more_entries": False}


def test_unknown_workflow_is_404(examples: Api) -> None:
    assert examples.call("GET", "/api/workflow/nope-1") == (
        404,
        {"message": "Workflow nope-1 not found.", "error_code": "NOT_FOUND"},
    )


# ---------------------------------------------------------------------------- rejections

SIMPLE = """\
workflow:
  name: simple
  resources:
    default: {{cpu: 1, gpu: {gpu}{extra}}}
  tasks:
  - name: main
    image: busybox
    command: [sh, -c, "true"]{task_extra}
"""


def simple(gpu: int = 1, extra: str = "", task_extra: str = "") -> str:
    return SIMPLE.format(gpu=gpu, extra=extra, task_extra=task_extra)


def add(api: Api, bundle: dict[str, Any]) -> None:
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status == 200, body


def rejected(api: Api, pool: str, text: str, **params: Any) -> tuple[int, str]:
    status, body = post(api, pool, text, **params)
    assert status >= 400, body
    assert examples_untouched(api)
    return status, body["message"]


def examples_untouched(api: Api) -> bool:
    return api.call("GET", "/api/workflow", params={"all_users": True})[1] == {
        "workflows": [],
        "more_entries": False,
    }


def test_unknown_pool(examples: Api) -> None:
    assert rejected(examples, "nope", simple()) == (404, "Pool nope not found.")


def test_pool_in_maintenance_refuses_users_but_not_admins(examples: Api) -> None:
    status, body = examples.call(
        "PATCH",
        "/api/configs/pool/nvl72",
        json={"configs_dict": {"enable_maintenance": True}},
    )
    assert status == 200, body
    user = examples.runtime.tokens.create(name="u", username="bob", roles=["osmo-admin-lite"])
    add(
        examples,
        {
            "roles": {
                "osmo-admin-lite": {
                    "name": "osmo-admin-lite",
                    "policies": [{"actions": ["*:*"], "resources": ["*"]}],
                }
            }
        },
    )
    assert rejected(examples, "nvl72", simple(gpu=4), token=user) == (
        400,
        "Pool nvl72 is undergoing maintenance. Users will have to wait until maintenance is "
        "completed before submission.",
    )
    status, body = post(examples, "nvl72", simple(gpu=4), validation_only="true")
    assert status == 200, body


def test_no_access_to_the_pool_is_403(examples: Api) -> None:
    user = examples.runtime.tokens.create(name="u", username="carol", roles=["osmo-user"])
    status, message = rejected(examples, "nvl72", simple(gpu=4), token=user)
    assert status == 403
    assert message.startswith("carol may not workflow:Create on pool/nvl72")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("workflow: [", "wf.yaml:1:12: invalid YAML: expected the node content"),
        ("resources: {}\n", 'Unknown top-level key "resources" found in the workflow spec.'),
        (simple(task_extra="\n    colour: red"), "wf.yaml:9:5: "),
        (
            "workflow:\n  name: x\n  tasks:\n  - name: a\n    image: b\n    command: []\n",
            "Container a should have at least one command.",
        ),
        ("workflow:\n  name: '{{ nope }}'\n  tasks: []\n", "nope"),
    ],
)
def test_spec_errors_name_the_line(examples: Api, text: str, message: str) -> None:
    status, found = rejected(examples, "nvl72", text)
    assert status == 400
    assert message in found


def test_task_count_limit(examples: Api) -> None:
    add(examples, {"workflow": {"max_num_tasks": 2}})
    tasks = "".join(f"  - name: t{i}\n    image: busybox\n    command: [sh]\n" for i in range(3))
    text = f"workflow:\n  name: many\n  resources:\n    default: {{gpu: 4}}\n  tasks:\n{tasks}"
    status, message = rejected(examples, "nvl72", text)
    assert status == 400
    assert message.startswith("Workflow cannot have more than 2 tasks.")


@pytest.mark.parametrize(
    ("key", "hint"), [("row", ""), ("rak", ' Did you mean "rack"?')], ids=["unknown", "misspelled"]
)
def test_topology_key_missing_from_the_pool(examples: Api, key: str, hint: str) -> None:
    """OSMO's message, at the key's line and column (issue 14), with a did-you-mean."""
    text = simple(gpu=4, extra=f", topology: [{{key: {key}}}]")
    assert rejected(examples, "nvl72", text) == (
        400,
        "wf.yaml:4:43: workflow.resources.default.topology[0].key: "
        f'Topology key "{key}" in resource "default" is not available in pool "nvl72".{hint} '
        "Available topology keys: ['gpu-clique', 'rack', 'spine', 'zone']",
    )


def test_topology_keys_must_be_the_same_for_every_task(examples: Api) -> None:
    text = """\
workflow:
  name: mixed
  resources:
    a: {gpu: 4, topology: [{key: rack}]}
    b: {gpu: 4, topology: [{key: zone}]}
  tasks:
  - {name: one, image: x, command: [sh], resource: a}
  - {name: two, image: x, command: [sh], resource: b}
"""
    status, message = rejected(examples, "nvl72", text)
    assert status == 400
    assert message.startswith(
        "Topology validation failed: All tasks must use the same topology keys."
    )


def test_platform_not_in_the_pool(examples: Api) -> None:
    assert rejected(examples, "nvl72", simple(gpu=4, extra=", platform: h100")) == (
        400,
        "Platform h100 does not exist in pool nvl72! Its platforms: gb200.",
    )


def test_a_pool_without_platforms_says_so_and_how_to_fix_it(examples: Api) -> None:
    """Issue 14: it answered "set resources.default.platform to one of: none defined"."""
    bare = {"backend": "default"}
    assert examples.call("PUT", "/api/configs/pool/bare", json={"configs": bare})[0] == 200
    assert rejected(examples, "bare", simple(gpu=4)) == (
        400,
        "Pool bare has no platforms, so no task can run in it. An admin must add one: give "
        "the pool a platforms entry (for example platforms: {default: {}}) and set "
        "default_platform to it (docs/configs/pool.md).",
    )


def test_node_rule_fails_on_every_node(examples: Api) -> None:
    status, message = rejected(examples, "nvl72", simple(gpu=8))
    assert status == 400
    assert message.startswith("Resource validation failed for task: main")
    assert "GPU value 8 too high for GPU" in message


def test_static_rule_fails(examples: Api) -> None:
    add(
        examples,
        {
            "resource_validations": {
                "even_gpus": [
                    {
                        "operator": "EQ",
                        "left_operand": "{{USER_GPU % 2}}",
                        "right_operand": "0",
                        "assert_message": "ask for an even number of GPUs, not {{USER_GPU}}",
                    }
                ]
            }
        },
    )
    status, body = examples.call(
        "PATCH",
        "/api/configs/pool/nvl72",
        json={"configs_dict": {"common_resource_validations": ["default_cpu", "even_gpus"]}},
    )
    assert status == 200, body
    assert rejected(examples, "nvl72", simple(gpu=3)) == (
        400,
        "Resource validation failed for task: main\n"
        "Assertion failed for task main: ask for an even number of GPUs, not 3",
    )


def test_privileged_task_on_a_platform_that_forbids_it(examples: Api) -> None:
    assert rejected(examples, "nvl72", simple(gpu=4, task_extra="\n    privileged: true")) == (
        400,
        "Task with platform: gb200 does not have privileged flag enabled. Task main",
    )


def test_credentials_are_refused_until_corral_has_a_credential_store(examples: Api) -> None:
    status, message = rejected(
        examples, "nvl72", simple(gpu=4, task_extra="\n    credentials: {registry: /creds}")
    )
    assert status == 400
    assert message.startswith("Task main uses credential registry, but corral has no credential")


def test_pool_template_that_renders_an_invalid_pod_is_refused(examples: Api) -> None:
    # A field that is wrong as written is refused when the template is written (issue 13)...
    status, body = examples.call(
        "POST",
        "/api/configs/apply",
        json={
            "bundle": {
                "pod_templates": {
                    "bad": {
                        "spec": {
                            "containers": [
                                {"name": "{{USER_CONTAINER_NAME}}", "imagePullPolicy": 7}
                            ]
                        }
                    }
                }
            }
        },
    )
    assert (status, body["message"]) == (
        400,
        "pod_templates.bad.spec.containers.0.imagePullPolicy: must be text, not 7",
    )
    # ... one that goes wrong only with the task's own values is refused at submission.
    add(
        examples,
        {
            "pod_templates": {
                "bad": {"spec": {"priority": "{% if USER_GPU < 4 %}high{% else %}1{% endif %}"}}
            }
        },
    )
    status, body = examples.call(
        "PATCH",
        "/api/configs/pool/nvl72",
        json={
            "configs_dict": {
                "platforms": {
                    "gb200": {"override_pod_template": ["training_gb200_template", "bad"]}
                }
            }
        },
    )
    assert status == 200, body
    status, message = rejected(examples, "nvl72", simple(gpu=2))  # the pool's default is 4
    assert status == 400
    assert message.startswith("Group main-group: the Pod ")
    assert "spec.priority: 'high' is not of type 'integer'" in message


def test_undefined_variable_in_a_pool_template_names_the_template(examples: Api) -> None:
    add(examples, {"pod_templates": {"needs-x": {"metadata": {"labels": {"x": "{{ X_VALUE }}"}}}}})
    status, body = examples.call(
        "PATCH",
        "/api/configs/pool/nvl72",
        json={"configs_dict": {"common_pod_template": ["default_user", "needs-x"]}},
    )
    # refused when the pool is written: no submission could render it (issue 13)
    assert (status, body["message"]) == (
        400,
        "platforms.gb200: Platform gb200 does not render with the pool's default variables: "
        "pod template needs-x, field metadata.labels.x: variable X_VALUE has no value (it is "
        "undefined or null); give it one in the task's resources, with --set, or as a default "
        "variable of the pool or platform",
    )


def test_bad_priority(examples: Api) -> None:
    assert rejected(examples, "nvl72", simple(gpu=4), priority="urgent") == (
        400,
        "Priority 'urgent' is not one of HIGH, NORMAL, LOW.",
    )


def test_name_too_long(examples: Api) -> None:
    add(examples, {"workflow": {"workflow_info": {"max_name_length": 5}}})
    assert rejected(examples, "nvl72", simple(gpu=4)) == (
        400,
        "Name simple is too long. It must be 5 characters or less.",
    )


def test_missing_body_field_is_400(examples: Api) -> None:
    status, body = examples.call("POST", "/api/pool/nvl72/workflow", json={})
    assert (status, body["message"]) == (400, "file: Required field is missing")


def test_example_files_exist() -> None:
    assert {p.name for p in WORKFLOWS.glob("*.yaml")} == {
        *PODGROUP_SPECS,
        "compute-domain.yaml",
        "heterogeneous.yaml",
        "checkpoint-on-notice.yaml",
    }
    assert Path(WORKFLOWS / "README.md").is_file()


EXAMPLE_POOLS = {
    **dict.fromkeys(PODGROUP_SPECS, "nvl72"),
    "compute-domain.yaml": "nvl72",
    "heterogeneous.yaml": "heterogeneous_pool",
    "checkpoint-on-notice.yaml": "default",
}


@pytest.mark.parametrize("example", sorted(EXAMPLE_POOLS))
def test_every_object_of_every_example_is_schema_valid(examples: Api, example: str) -> None:
    body = dry_run(examples, example, pool=EXAMPLE_POOLS[example])
    objects = [manifest for group in body["groups"] for manifest in group["manifests"]]
    assert objects
    assert {m["kind"] for m in objects} >= {"PodGroup", "Pod"}
    for manifest in objects:
        assert manifest_problems(manifest) == [], (manifest["kind"], manifest["metadata"])


def test_tokens_are_filled_in_per_task(examples: Api) -> None:
    text = simple(gpu=4, task_extra='\n    args: ["{{workflow_id}}", "{{uuid}}", "{{ output }}"]')
    status, body = post(examples, "nvl72", text, dry_run="true")
    assert status == 200, body
    [group] = body["groups"]
    [task] = group["tasks"]
    [pod] = of_kind(group, "Pod")
    assert pod["spec"]["containers"][0]["args"] == ["simple-1", task["uuid"], "/osmo/data/output"]


def test_gpus_from_the_pool_default_stay_visible(examples: Api) -> None:
    """nvl72 gives USER_GPU 4 by default: a task without `gpu` gets 4 GPUs, and must see them."""
    text = "workflow:\n  name: d\n  tasks:\n  - {name: main, image: busybox, command: [sh]}\n"
    status, body = post(examples, "nvl72", text, dry_run="true")
    assert status == 200, body
    [pod] = of_kind(body["groups"][0], "Pod")
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert "NVIDIA_VISIBLE_DEVICES" not in {env["name"] for env in container["env"]}
    status, body = post(examples, "default", text, dry_run="true")
    [pod] = of_kind(body["groups"][0], "Pod")
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""} in pod["spec"]["containers"][0]["env"]


def test_an_explicit_zero_is_zero_not_the_pools_default(examples: Api) -> None:
    """``gpu: 0`` where the pool's default ``USER_GPU`` is 1: the pod, the rules and the
    environment all see 0 (issue 13; OSMO would use the default)."""
    text = (
        "workflow:\n  name: zero\n  resources:\n    default: {cpu: 1, gpu: 0}\n"
        "  tasks:\n  - {name: main, image: busybox, command: [sh]}\n"
    )
    assert rejected(examples, "robotics-simulation", text) == (
        400,
        "Resource validation failed for task: main\nAssertion failed for task main: "
        "Simulation tasks need a GPU for rendering; got 0",
    )
    status, body = examples.call(
        "PATCH",
        "/api/configs/pool/default",
        json={"configs_dict": {"common_default_variables": {"USER_GPU": 1}}},
    )
    assert status == 200, body
    status, body = post(examples, "default", text, dry_run=True)
    assert status == 200, body
    [pod] = [m for m in body["groups"][0]["manifests"] if m["kind"] == "Pod"]
    [main] = [c for c in pod["spec"]["containers"] if c["name"] == "main"]
    assert main["resources"]["requests"]["nvidia.com/gpu"] == 0
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""} in main["env"]
