"""Rendering a task group's objects from the example configs, validated against real schemas."""

from __future__ import annotations

from typing import Any

import pytest

from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.platform.manifests import (
    PodTask,
    build_pod,
    render_group_templates,
    render_pod_template,
)
from corral.domain.platform.resolved_pool import merged_group_templates, resolve_platform
from corral.domain.platform.variables import (
    GroupIdentity,
    ResourceRequest,
    TaskIdentity,
    group_variables,
    task_variables,
)
from corral.files import read_bundle_directory
from tests.conftest import REPO
from tests.k8s_schemas import assert_valid_manifest

GROUP = GroupIdentity(
    workflow_id="nccl-test-7",
    workflow_uuid="5f0c2b0e9a0d4c35b1a8e7f6d5c4b3a2",
    group_name="nccl",
    group_uuid="9e8d7c6b5a4f4e3d2c1b0a9f8e7d6c5b",
    submitted_by="jane@example.com",
    pool="nvl72",
)


@pytest.fixture(scope="module")
def state() -> Configs:
    bundle = parse_bundle(read_bundle_directory(REPO / "examples" / "configs")[0])
    return Configs(bundle.items)


def test_compute_domain_group_template_and_pod_point_at_the_same_claim(
    state: dict[ConfigType, Any],
) -> None:
    resolved = resolve_platform(state, "nvl72")
    [domain] = render_group_templates(
        resolved.group_templates,
        group_variables(GROUP, resolved.default_variables),
        GROUP,
        workflow_labels={"team": "robotics", "osmo.group_uuid": "forged"},
    )
    uuid = GROUP.group_uuid
    assert domain == {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {
            "name": f"compute-domain-{uuid}",
            "labels": {
                "team": "robotics",
                "osmo.workflow_id": "nccl-test-7",
                "osmo.workflow_uuid": GROUP.workflow_uuid,
                "osmo.group_name": "nccl",
                "osmo.group_uuid": uuid,  # system labels win over workflow labels
                "osmo.submitted_by": "jane",
            },
        },
        "spec": {
            "numNodes": 0,
            "channel": {"resourceClaimTemplate": {"name": f"compute-domain-{uuid}-rct"}},
        },
    }
    assert_valid_manifest(domain)

    task = TaskIdentity(name="rank0", uuid="0" * 32, platform=resolved.platform_name, lead=True)
    variables = task_variables(ResourceRequest(gpu=4), resolved.default_variables, GROUP, task)
    template = render_pod_template(resolved.pod_template, variables)
    pod = build_pod(
        PodTask(
            identity=task,
            image="nvcr.io/nvidia/pytorch:24.08-py3",
            command=("bash", "-c", "nvidia-smi"),
            gpu_requested=True,
        ),
        GROUP,
        template,
    )
    assert pod["spec"]["resourceClaims"] == [
        {
            "name": "compute-domain-channel",
            "resourceClaimTemplateName": f"compute-domain-{uuid}-rct",
        }
    ]
    user = pod["spec"]["containers"][0]
    assert user["name"] == "rank0"
    assert user["resources"]["claims"] == [{"name": "compute-domain-channel"}]
    assert user["resources"]["limits"] == {
        "cpu": 16,
        "memory": "256Gi",
        "nvidia.com/gpu": 4,
        "ephemeral-storage": "100Gi",
    }
    assert pod["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-GB200",
        "kubernetes.io/arch": "arm64",
    }
    assert pod["metadata"]["labels"]["osmo.group_uuid"] == uuid
    assert_valid_manifest(pod)


def test_group_templates_with_the_same_kind_and_name_merge_in_order() -> None:
    base = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg-{{WF_GROUP_UUID}}", "namespace": "team-a", "labels": {"a": "1"}},
        "data": {"x": "1", "pool": "{{WF_POOL}}"},
    }
    override = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg-{{WF_GROUP_UUID}}"},
        "data": {"x": "2", "priority": "{{WF_PRIORITY}}", "gpus": "{{USER_GPU}}"},
    }
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}, "data": {}}
    state = Configs(
        {ConfigType.GROUP_TEMPLATE: {"base": base, "other": other, "override": override}}
    )
    templates = merged_group_templates(state, ["base", "other", "override"])
    assert [t.sources for t in templates] == [("base", "override"), ("other",)]
    first, second = render_group_templates(
        templates, group_variables(GROUP, {"USER_GPU": 4}), GROUP
    )
    assert first["metadata"]["name"] == f"cfg-{GROUP.group_uuid}"
    assert "namespace" not in first["metadata"]
    assert first["metadata"]["labels"]["a"] == "1"
    assert first["data"] == {"x": "2", "pool": "nvl72", "priority": "normal", "gpus": "4"}
    assert second["metadata"]["name"] == "other"
    assert_valid_manifest(first)


def test_a_group_template_using_a_task_variable_names_it() -> None:
    from corral.domain.jinja.rendering import MissingVariableError

    template = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"task": "{{WF_TASK_NAME}}"},
    }
    state = Configs({ConfigType.GROUP_TEMPLATE: {"per-task": template}})
    with pytest.raises(MissingVariableError) as raised:
        render_group_templates(
            merged_group_templates(state, ["per-task"]), group_variables(GROUP, {}), GROUP
        )
    assert raised.value.message.startswith(
        "group template per-task, field data.task: variable WF_TASK_NAME has no value"
    )


def _platforms(state: dict[ConfigType, Any]) -> list[tuple[str, str]]:
    pools = state[ConfigType.POOL]
    return [(pool, platform) for pool in pools for platform in pools[pool]["platforms"]]


def test_every_example_platform_renders_a_valid_pod(state: dict[ConfigType, Any]) -> None:
    platforms = _platforms(state)
    assert len(platforms) >= 10
    for pool, platform in platforms:
        resolved = resolve_platform(state, pool, platform)
        group = GroupIdentity(**{**GROUP.__dict__, "pool": pool})
        task = TaskIdentity(name="main", uuid="1" * 32, platform=platform, lead=True)
        variables = task_variables(ResourceRequest(), resolved.default_variables, group, task)
        pod = build_pod(
            PodTask(identity=task, image="busybox", command=("true",)),
            group,
            render_pod_template(resolved.pod_template, variables),
        )
        assert_valid_manifest(pod)
        for manifest in render_group_templates(
            resolved.group_templates, group_variables(group, resolved.default_variables), group
        ):
            assert_valid_manifest(manifest)
