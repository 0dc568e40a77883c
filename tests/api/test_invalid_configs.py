"""Every kind of bad config gets a 4xx naming the field, never a 500, and changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import Api


@dataclass(frozen=True)
class Case:
    id: str
    method: str
    path: str
    body: Any
    status: int
    message: str  # the exact error message
    raw: bytes | None = None  # send these bytes instead of JSON


POOL = "/api/configs/pool/p"


def pool(**fields: Any) -> dict[str, Any]:
    return {"configs": {"backend": "default", **fields}}


def rule(**fields: Any) -> dict[str, Any]:
    base = {
        "operator": "GT",
        "left_operand": "{{USER_CPU}}",
        "right_operand": "0",
        "assert_message": "m",
    }
    return {"configs": [{**base, **fields}]}


def missing(kind: str, name: str) -> str:
    return (
        f"{kind} {name} does not exist! Create it first (corral config update "
        f"{kind.upper().replace(' ', '_')} {name} --file ...) or fix the name."
    )


NAME_RULE = (
    "is not valid! Name must start with a letter, end with a letter or digit, and "
    "contain only letters, digits, dash, underscore or dot."
)

CASES = [
    # --- malformed requests
    Case(
        "bad-json",
        "PUT",
        POOL,
        None,
        400,
        "request body:1:29: invalid JSON: Expecting ',' delimiter",
        raw=b'{"configs": {"backend": "x" "y"}}',
    ),
    Case(
        "bad-json-bracket",
        "PUT",
        "/api/configs/pod_template/a100",
        None,
        400,
        "request body:1:47: invalid JSON: Expecting ',' delimiter",
        raw=b'{"configs": {"spec": {"tolerations": [{"k": 1}}}}',
    ),
    Case(
        "infinity",
        "PUT",
        POOL,
        None,
        400,
        "common_default_variables.X: Infinity is not a JSON number; write a finite number or "
        "a string",
        raw=b'{"configs": {"backend": "default", "common_default_variables": {"X": Infinity}}}',
    ),
    Case(
        "nan-in-template",
        "PUT",
        "/api/configs/pod_template/t",
        None,
        400,
        "spec.priority: NaN is not a JSON number; write a finite number or a string",
        raw=b'{"configs": {"spec": {"priority": NaN}}}',
    ),
    Case(
        "nul-description",
        "PUT",
        POOL,
        {**pool(), "description": "a\x00b"},
        400,
        "description: text must not contain NUL characters (\\u0000)",
    ),
    Case(
        "nul-key",
        "PUT",
        "/api/configs/pod_template/t",
        {"configs": {"spec": {"a\x00": 1}}},
        400,
        "spec: text must not contain NUL characters (\\u0000)",
    ),
    Case(
        "no-configs",
        "PUT",
        POOL,
        {"description": "x"},
        400,
        "configs: the request body needs 'configs' (or 'configs_dict')",
    ),
    Case(
        "unknown-body-key",
        "PUT",
        POOL,
        {"configs": {}, "descripton": "x"},
        400,
        "descripton: Unknown key 'descripton' in the request",
    ),
    Case(
        "negative-base-revision",
        "PUT",
        POOL,
        {**pool(), "base_revision": -1},
        400,
        "base_revision: Input should be greater than or equal to 0",
    ),
    Case(
        "unknown-type",
        "GET",
        "/api/configs/cluster",
        None,
        404,
        "/api/configs/cluster is not a path of this API; GET /openapi.json lists them "
        "(docs/api.md). Config types: pool, pod_template, group_template, resource_validation, "
        "role, backend, workflow.",
    ),
    # --- names
    Case(
        "pool-name-space",
        "PUT",
        "/api/configs/pool/bad%20name",
        pool(),
        400,
        f'Pool name "bad name" {NAME_RULE}',
    ),
    Case(
        "pool-name-digit",
        "PUT",
        "/api/configs/pool/1pool",
        pool(),
        400,
        f'Pool name "1pool" {NAME_RULE}',
    ),
    Case(
        "pool-name-trailing-dash",
        "PUT",
        "/api/configs/pool/pool-",
        pool(),
        400,
        f'Pool name "pool-" {NAME_RULE}',
    ),
    Case(
        "pool-name-too-long",
        "PUT",
        "/api/configs/pool/" + "a" * 65,
        pool(),
        400,
        f'Pool name "{"a" * 65}" is too long (65 characters); the limit is 64.',
    ),
    Case(
        "platform-name",
        "PUT",
        POOL,
        pool(platforms={"a b": {}}),
        400,
        f'platforms.a b: Platform name "a b" {NAME_RULE}',
    ),
    Case(
        "template-name",
        "PUT",
        "/api/configs/pod_template",
        {"configs": {"x/y": {}}},
        400,
        f'x/y: Pod template name "x/y" {NAME_RULE}',
    ),
    Case(
        "body-name-mismatch",
        "PUT",
        POOL,
        pool(name="other"),
        400,
        'name: Pool name "other" in the body does not match "p", the name it is written '
        "under. Make them equal or drop the name field.",
    ),
    # --- unknown keys (OSMO drops them silently)
    Case(
        "override-resource-validations",
        "PUT",
        POOL,
        pool(platforms={"a": {"override_resource_validations": ["default_cpu"]}}),
        400,
        "platforms.a.override_resource_validations: unknown field "
        "'override_resource_validations' (did you mean 'resource_validations'?); the fields "
        "here are description, host_network_allowed, privileged_allowed, allowed_mounts, "
        "default_variables, resource_validations, override_pod_template.",
    ),
    Case(
        "pool-typo",
        "PUT",
        POOL,
        pool(common_pod_templates=[]),
        400,
        "common_pod_templates: unknown field 'common_pod_templates' (did you mean "
        "'common_pod_template'?); the fields here are name, description, backend, "
        "default_platform, enable_maintenance, download_type, default_exec_timeout, "
        "default_queue_timeout, max_exec_timeout, max_queue_timeout, default_exit_actions, "
        "resources, preemption, fabric, topology_keys, common_default_variables, "
        "common_resource_validations, common_pod_template, common_group_templates, platforms.",
    ),
    Case(
        "quota-cpu",
        "PUT",
        POOL,
        pool(resources={"cpu": {"guarantee": 1}}),
        400,
        "resources.cpu: unknown field 'cpu'; the fields here are gpu.",
    ),
    Case(
        "role-singular-keys",
        "PUT",
        "/api/configs/role/r",
        {
            "configs": {
                "description": "d",
                "policies": [{"action": ["workflow:Create"], "resource": ["pool/a"]}],
            }
        },
        400,
        "policies.0.action: unknown field 'action' (did you mean 'actions'?); the fields here "
        "are effect, actions, resources.",
    ),
    Case(
        "action-permissions",
        "PUT",
        POOL,
        pool(action_permissions={"cancel": "POOL"}),
        400,
        "action_permissions: action_permissions was removed in OSMO 6.2; grant workflow:Exec, "
        "workflow:PortForward, workflow:Cancel or workflow:Rsync through ROLE policies",
    ),
    Case(
        "pod-template-top-key",
        "PUT",
        "/api/configs/pod_template/t",
        {"configs": {"sepc": {}}},
        400,
        "sepc: unknown field 'sepc' (did you mean 'spec'?); the fields here are metadata, spec.",
    ),
    Case(
        "workflow-unknown",
        "PUT",
        "/api/configs/workflow",
        {"configs": {"max_tasks": 3}},
        400,
        "max_tasks: unknown field 'max_tasks' (did you mean 'max_num_tasks'?); the fields here "
        "are max_num_tasks, max_num_ports_per_task, max_retry_per_task, max_retry_per_job, "
        "default_schedule_timeout, default_exec_timeout, default_queue_timeout, "
        "max_exec_timeout, max_queue_timeout, force_cleanup_delay, max_log_lines, "
        "max_task_log_lines, max_error_log_lines, max_event_log_lines, task_heartbeat_frequency, "
        "workflow_info, user_workflow_limits, workflow_data, backend_images, credential_config, "
        "plugins_config, labels_config, workflow_alerts, workflow_log, workflow_app.",
    ),
    # --- wrong types
    Case(
        "backend-int",
        "PUT",
        POOL,
        {"configs": {"backend": 5}},
        400,
        "backend: Input should be a valid string (got int 5).",
    ),
    Case(
        "maintenance-string",
        "PUT",
        POOL,
        pool(enable_maintenance="yes"),
        400,
        "enable_maintenance: Input should be a valid boolean (got str 'yes').",
    ),
    Case(
        "templates-not-list",
        "PUT",
        POOL,
        pool(common_pod_template="default_user"),
        400,
        "common_pod_template: Input should be a valid list (got str 'default_user').",
    ),
    Case(
        "pool-not-object",
        "PUT",
        POOL,
        {"configs": ["default"]},
        400,
        "Input should be an object (got list ['default']).",
    ),
    Case(
        "quota-float",
        "PUT",
        POOL,
        pool(resources={"gpu": {"guarantee": 1.5}}),
        400,
        "resources.gpu.guarantee: Input should be a valid integer (got float 1.5).",
    ),
    Case(
        "rules-not-list",
        "PUT",
        "/api/configs/resource_validation/v",
        {"configs": {"operator": "GT"}},
        400,
        "a resource validation is a list of rules",
    ),
    Case(
        "missing-backend",
        "PUT",
        POOL,
        {"configs": {"description": "x"}},
        400,
        "backend: Required key 'backend' is missing.",
    ),
    # --- dangling references
    Case(
        "unknown-backend",
        "PUT",
        POOL,
        {"configs": {"backend": "nowhere"}},
        400,
        "backend: " + missing("Backend", "nowhere"),
    ),
    Case(
        "unknown-pod-template",
        "PUT",
        POOL,
        pool(common_pod_template=["default_user", "x"]),
        400,
        "common_pod_template.1: " + missing("Pod template", "x"),
    ),
    Case(
        "unknown-platform-template",
        "PUT",
        POOL,
        pool(platforms={"a": {"override_pod_template": ["gone"]}}),
        400,
        "platforms.a.override_pod_template.0: " + missing("Pod template", "gone"),
    ),
    Case(
        "unknown-validation",
        "PUT",
        POOL,
        pool(common_resource_validations=["nope"]),
        400,
        "common_resource_validations.0: " + missing("Resource validation", "nope"),
    ),
    Case(
        "unknown-platform-validation",
        "PUT",
        POOL,
        pool(platforms={"a": {"resource_validations": ["nope"]}}),
        400,
        "platforms.a.resource_validations.0: " + missing("Resource validation", "nope"),
    ),
    Case(
        "unknown-group-template",
        "PUT",
        POOL,
        pool(common_group_templates=["cd"]),
        400,
        "common_group_templates.0: " + missing("Group template", "cd"),
    ),
    Case(
        "default-platform",
        "PUT",
        POOL,
        pool(default_platform="a100"),
        400,
        "default_platform: Default platform a100 not in platforms (none defined)",
    ),
    Case(
        "delete-used-template",
        "DELETE",
        "/api/configs/pod_template/default_ctrl",
        None,
        409,
        "Pod template default_ctrl is used in pools default; remove it from those pools first.",
    ),
    Case(
        "delete-used-validation",
        "DELETE",
        "/api/configs/resource_validation/default_cpu",
        None,
        409,
        "Resource validation default_cpu is used in pools default; remove it from "
        "those pools first.",
    ),
    Case(
        "delete-used-backend",
        "DELETE",
        "/api/configs/backend/default",
        None,
        409,
        "Backend default is used in pools default; remove it from those pools first.",
    ),
    Case(
        "delete-missing",
        "DELETE",
        "/api/configs/pool/ghost",
        None,
        404,
        "Pool ghost does not exist.",
    ),
    # --- group templates
    Case(
        "group-namespace",
        "PUT",
        "/api/configs/group_template/cd",
        {
            "configs": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "x", "namespace": "team"},
            }
        },
        400,
        'metadata.namespace: Group template must not have "metadata.namespace" set. The '
        "namespace is assigned by corral at runtime.",
    ),
    Case(
        "group-no-kind",
        "PUT",
        "/api/configs/group_template/cd",
        {"configs": {"apiVersion": "v1", "metadata": {"name": "x"}}},
        400,
        'kind: Group template must have "kind" field (a non-empty string).',
    ),
    Case(
        "group-no-name",
        "PUT",
        "/api/configs/group_template/cd",
        {"configs": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}},
        400,
        'metadata.name: Group template must have "metadata.name" field.',
    ),
    Case(
        "group-bad-jinja",
        "PUT",
        "/api/configs/group_template/cd",
        {
            "configs": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm-{{WF_GROUP_UUID}"},
            }
        },
        400,
        "metadata.name: Invalid template expression 'cm-{{WF_GROUP_UUID}': unexpected '}' "
        "(line 1 of the value)",
    ),
    # --- topology keys
    Case(
        "duplicate-topology-label",
        "PUT",
        POOL,
        pool(
            topology_keys=[
                {"key": "rack", "label": "topology.kubernetes.io/rack"},
                {"key": "clique", "label": "topology.kubernetes.io/rack"},
            ]
        ),
        400,
        "topology_keys.1.label: label 'topology.kubernetes.io/rack' appears more than once; "
        "each topology level needs its own label",
    ),
    Case(
        "duplicate-topology-key",
        "PUT",
        POOL,
        pool(
            topology_keys=[{"key": "rack", "label": "a/rack"}, {"key": "rack", "label": "b/rack"}]
        ),
        400,
        "topology_keys.1.key: key 'rack' appears more than once; each topology level needs "
        "its own key",
    ),
    Case(
        "bad-topology-label",
        "PUT",
        POOL,
        pool(topology_keys=[{"key": "rack", "label": "Topology/rack name"}]),
        400,
        "topology_keys.0.label: 'Topology/rack name' is not a valid Kubernetes label key: "
        "prefix 'Topology' is not a DNS subdomain (lowercase letters, digits, '-', '.')",
    ),
    Case(
        "topology-default-scheduler",
        "PUT",
        "/api/configs/backend/default",
        {"configs": {"scheduler_settings": {"scheduler_type": "default"}}},
        400,
        None,
    ),  # filled below: the pool that would break is named
    # --- resource validation rules
    Case(
        "unknown-operator",
        "PUT",
        "/api/configs/resource_validation/v",
        rule(operator="GTE"),
        400,
        "0.operator: Input should be 'GT', 'GE', 'LT', 'LE', 'EQ' or 'NE' (got str 'GTE').",
    ),
    Case(
        "rule-missing-message",
        "PUT",
        "/api/configs/resource_validation/v",
        {"configs": [{"operator": "NE", "left_operand": "1", "right_operand": "2"}]},
        400,
        "0.assert_message: Required key 'assert_message' is missing.",
    ),
    Case(
        "rule-bad-jinja",
        "PUT",
        "/api/configs/resource_validation/v",
        rule(left_operand="{{USER_CPU"),
        400,
        "0.left_operand: Invalid template expression '{{USER_CPU': unexpected end of "
        "template, expected 'end of print statement'. (line 1 of the value)",
    ),
    Case(
        "rule-extra-key",
        "PUT",
        "/api/configs/resource_validation/v",
        rule(severity="high"),
        400,
        "0.severity: unknown field 'severity'; the fields here are operator, left_operand, "
        "right_operand, assert_message.",
    ),
    # --- values
    Case(
        "bad-timeout",
        "PUT",
        POOL,
        pool(default_exec_timeout="1.5h"),
        400,
        "default_exec_timeout: Cannot recognize duration: 1.5h. Only support ISO 8601 (e.g. "
        "PT10S) or xd, xh, xm, xs, xms, xus",
    ),
    Case(
        "default-over-max",
        "PUT",
        POOL,
        pool(default_exec_timeout="2d", max_exec_timeout="1d"),
        400,
        "default_exec_timeout: default_exec_timeout 2d is longer than max_exec_timeout 1d",
    ),
    Case(
        "bad-exit-action",
        "PUT",
        POOL,
        pool(default_exit_actions={"RETRY": "1"}),
        400,
        "default_exit_actions: exit action 'RETRY' is not one of COMPLETE, FAIL, RESCHEDULE",
    ),
    Case(
        "bad-exit-codes",
        "PUT",
        POOL,
        pool(default_exit_actions={"FAIL": "1-"}),
        400,
        "default_exit_actions: exit codes '1-' for FAIL must look like '1,3-5' (numbers and "
        "ranges separated by commas)",
    ),
    Case(
        "quota-guarantee-over-max",
        "PUT",
        POOL,
        pool(resources={"gpu": {"guarantee": 16, "maximum": 8}}),
        400,
        "resources.gpu.guarantee: guarantee 16 is larger than maximum 8",
    ),
    Case(
        "bad-legacy-action",
        "PUT",
        "/api/configs/role/r",
        {
            "configs": {
                "description": "d",
                "actions": [{"base": "ftp", "path": "/api/pool/*", "method": "post"}],
            }
        },
        400,
        "actions.0.base: Input should be 'http' (got str 'ftp').",
    ),
    Case(
        "bad-semantic-action",
        "PUT",
        "/api/configs/role/r",
        {"configs": {"description": "d", "policies": [{"actions": ["Workflow:create"]}]}},
        400,
        "policies.0.actions: Invalid action format: Workflow:create. Expected format: "
        '"resource:Action" (e.g., "workflow:Create", "*:*")',
    ),
    Case(
        "bad-namespace",
        "PUT",
        "/api/configs/backend/b",
        {"configs": {"k8s_namespace": "Ns_1"}},
        400,
        "k8s_namespace: 'Ns_1' is not a valid Kubernetes namespace name",
    ),
    Case(
        "conflict",
        "PUT",
        POOL,
        {**pool(), "base_revision": 0},
        409,
        "POOL changed since revision 0: it is now at revision 1. Fetch it again and re-apply "
        "your change.",
    ),
    Case(
        "rollback-missing",
        "POST",
        "/api/configs/history/rollback",
        {"config_type": "POOL", "revision": 99},
        404,
        "No config history entry found for type POOL at revision 99",
    ),
    Case(
        "rollback-zero",
        "POST",
        "/api/configs/history/rollback",
        {"config_type": "POOL", "revision": 0},
        400,
        "revision: Input should be greater than 0",
    ),
    Case(
        "workflow-delete",
        "DELETE",
        "/api/configs/workflow/x",
        None,
        404,
        "WORKFLOW is one config, not a list of named items: it cannot be deleted; update it at "
        "/api/configs/workflow",
    ),
    Case(
        "bundle-unknown-section",
        "POST",
        "/api/configs/apply",
        {"bundle": {"pool": {}}},
        400,
        "pool: Unknown bundle section 'pool' (did you mean 'pools'?). Sections: pools, "
        "pod_templates, group_templates, resource_validations, roles, backends, workflow.",
    ),
]


def _topology_case_setup(api: Api) -> None:
    status, _ = api.call(
        "PUT",
        POOL,
        json=pool(topology_keys=[{"key": "rack", "label": "topology.kubernetes.io/rack"}]),
    )
    assert status == 200


CASES = [
    case
    if case.message is not None
    else Case(
        case.id,
        case.method,
        case.path,
        case.body,
        case.status,
        "This change would break pool p (topology_keys): Topology keys cannot be set for pool "
        '"p" because backend "default" uses scheduler "default" which does not support '
        "topology constraints",
    )
    for case in CASES
]


def test_there_are_at_least_forty_cases() -> None:
    assert len(CASES) >= 40
    assert len({case.id for case in CASES}) == len(CASES)


def everything_stored(api: Api) -> Any:
    """The whole store as the API shows it: every revision of every type, with data."""
    status, body = api.call("GET", "/api/configs/history", params={"limit": 1000})
    assert status == 200
    return body["configs"]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_invalid_config_is_rejected_and_nothing_changes(api: Api, case: Case) -> None:
    if case.id == "topology-default-scheduler":
        _topology_case_setup(api)
    before = everything_stored(api)
    if case.raw is not None:
        status, body = api.call(
            case.method, case.path, content=case.raw, headers={"Content-Type": "application/json"}
        )
    else:
        status, body = api.call(case.method, case.path, json=case.body)
    assert status == case.status, body
    assert body["message"].startswith(case.message), body["message"]
    assert body["error_code"] in ("USER", "NOT_FOUND", "CONFLICT")
    assert everything_stored(api) == before
