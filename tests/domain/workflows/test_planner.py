"""The pure planner (``workflows/planner.plan_workflow``) on the example configs and cluster,
without the server: the objects of a group in creation order, their identities, and refusals
made before anything is rendered."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from corral.domain.cluster.description import parse_cluster
from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.workflows.plan import Submitter
from corral.domain.workflows.planner import plan_workflow
from corral.domain.workflows.spec_parser import parse_workflow_spec
from corral.domain.workflows.template import render_workflow
from corral.errors import UserError
from corral.files import read_bundle_directory
from tests.conftest import REPO

EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def state() -> Configs:
    bundle = parse_bundle(read_bundle_directory(EXAMPLES / "configs")[0])
    found: dict[ConfigType, Any] = {ctype: bundle.items.get(ctype, {}) for ctype in ConfigType}
    found[ConfigType.WORKFLOW] = bundle.workflow or {}
    return Configs(found)


NODES = parse_cluster((EXAMPLES / "clusters" / "example.yaml").read_text()).nodes


def plan(state: dict[ConfigType, Any], example: str, pool: str, *sets: str) -> Any:
    text = (EXAMPLES / "workflows" / example).read_text()
    rendered = render_workflow(text, set_values=sets, source=example)
    spec = parse_workflow_spec(rendered.text, source=example, rendered=rendered.templated)
    ids = (f"{n:016x}" * 2 for n in itertools.count(1))  # pod names use the first 16
    submitter = Submitter(f"{spec.name}-1", "f" * 32, "alice", pool)
    return plan_workflow(state, spec, submitter, NODES, lambda: next(ids))


def test_a_compute_domain_group_is_planned_in_creation_order(state: dict[ConfigType, Any]) -> None:
    found = plan(state, "compute-domain.yaml", "nvl72", "trays=2")
    (group,) = found.groups
    kinds = [(m["apiVersion"], m["kind"]) for m in group.manifests]
    assert kinds == [
        ("resource.nvidia.com/v1beta1", "ComputeDomain"),
        ("scheduling.run.ai/v2alpha2", "PodGroup"),
        ("v1", "Pod"),
        ("v1", "Pod"),
        ("v1", "Service"),
    ]
    pods = [m for m in group.manifests if m["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == [t.pod_name for t in group.tasks]
    assert {p["metadata"]["labels"]["osmo.workflow_id"] for p in pods} == {"nvlink-allreduce-1"}
    assert {p["metadata"]["labels"]["osmo.pool"] for p in pods} == {"nvl72"}
    assert [t.lead for t in group.tasks] == [True, False]


def test_the_task_count_limit_is_checked_before_anything_is_rendered(
    state: dict[ConfigType, Any],
) -> None:
    limited = state.with_changes(
        {ConfigType.WORKFLOW: {"": {**state[ConfigType.WORKFLOW], "max_num_tasks": 1}}}
    )
    with pytest.raises(UserError) as refused:
        plan(limited, "compute-domain.yaml", "nvl72", "trays=2")
    assert refused.value.message == (
        "Workflow cannot have more than 1 tasks. This one has 2; split it into several workflows "
        "or ask an admin to raise WORKFLOW max_num_tasks."
    )


def test_a_pod_whose_node_affinity_the_api_server_would_refuse_is_refused(
    state: dict[ConfigType, Any],
) -> None:
    templates = dict(state[ConfigType.POD_TEMPLATE])
    bad = {"key": "nvidia.com/gpu.product", "operator": "Near", "values": ["GB200"]}
    templates["bad-affinity"] = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [bad]}]
                    }
                }
            }
        }
    }
    pools = dict(state[ConfigType.POOL])
    nvl72 = dict(pools["nvl72"])
    nvl72["common_pod_template"] = [*nvl72["common_pod_template"], "bad-affinity"]
    pools["nvl72"] = nvl72
    broken = Configs({**state, ConfigType.POD_TEMPLATE: templates, ConfigType.POOL: pools})
    with pytest.raises(UserError) as refused:
        plan(broken, "compute-domain.yaml", "nvl72", "trays=2")
    assert "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution." in (
        refused.value.message
    )
    assert refused.value.message.endswith(
        "nodeSelectorTerms[0].matchExpressions[0].operator must be one of In, NotIn, Exists, "
        "DoesNotExist, Gt, Lt, not 'Near'. Check the pool's pod and group templates (corral "
        "pool render) or the task's values."
    )


def test_a_tasks_stop_notice_is_an_annotation_of_its_pod(state: dict[ConfigType, Any]) -> None:
    text = (
        "workflow:\n  name: short\n  tasks:\n"
        "  - {name: quick, image: busybox, command: [sleep, '60'], stopNotice: 5s}\n"
        "  - {name: plain, image: busybox, command: [sleep, '60']}\n"
    )
    spec = parse_workflow_spec(text, source="short.yaml")
    ids = (f"{n:016x}" * 2 for n in itertools.count(1))
    found = plan_workflow(
        state, spec, Submitter("short-1", "f" * 32, "alice", "default"), NODES, lambda: next(ids)
    )
    pods = {
        m["metadata"]["labels"]["osmo.task_name"]: m["metadata"].get("annotations") or {}
        for group in found.groups
        for m in group.manifests
        if m["kind"] == "Pod"
    }
    assert pods["quick"]["corral.dev/stop-notice-seconds"] == "5"
    assert "corral.dev/stop-notice-seconds" not in pods["plain"]
