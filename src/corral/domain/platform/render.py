"""``corral pool render``: what a pool's platform turns a request into, and why.

Renders the platform's merged pod template and the pool's group templates for a sample task
of a sample group, with the default variables and any ``--set`` values, and attributes every
field of the pod template to the template that set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.domain.configs.snapshot import Configs
from corral.domain.formats.json_paths import get_path
from corral.domain.platform.manifests import render_group_templates, render_pod_template
from corral.domain.platform.resolved_pool import pool_of, resolve_platform, spec_field
from corral.domain.platform.variables import (
    GroupIdentity,
    TaskIdentity,
    group_variables,
    request_from_variables,
    task_variables,
)

SAMPLE_WORKFLOW_UUID = "0123456789abcdef0123456789abcdef"
SAMPLE_GROUP_UUID = "fedcba9876543210fedcba9876543210"
SAMPLE_TASK_UUID = "00112233445566778899aabbccddeeff"


def render_pool(
    configs: Configs,
    pool_name: str,
    *,
    platform: str | None = None,
    set_values: Mapping[str, Any] | None = None,
    user: str = "admin",
) -> dict[str, Any]:
    """The admin view of one platform of a pool, rendered for a sample task."""
    resolved = resolve_platform(configs, pool_name, platform)
    request, overrides = request_from_variables(set_values or {})
    group, task = sample_identities(pool_name, resolved.platform_name, user)
    defaults = resolved.default_variables
    variables = {**task_variables(request, defaults, group, task), **overrides}
    pod_template = render_pod_template(resolved.pod_template, variables)
    group_templates = render_group_templates(
        resolved.group_templates, {**group_variables(group, defaults), **overrides}, group
    )
    return {
        "pool": pool_name,
        "platform": resolved.platform_name,
        "default_variables": defaults,
        "variables": dict(sorted(variables.items())),
        "pod_template": pod_template,
        "provenance": [
            {**entry, "value": _value_at(pod_template, entry["path"])}
            for entry in resolved.pod_template.provenance()
        ],
        "node_selector": spec_field(pod_template, "nodeSelector", dict),
        "tolerations": spec_field(pod_template, "tolerations", list),
        "default_mounts": resolved.default_mounts,
        "resource_validations": [
            {"set": rule.set_name, **rule.rule.model_dump()} for rule in resolved.rules
        ],
        "group_templates": [
            {"sources": list(template.sources), "manifest": manifest}
            for template, manifest in zip(resolved.group_templates, group_templates, strict=True)
        ],
    }


def sample_identities(
    pool_name: str, platform: str, user: str = "admin"
) -> tuple[GroupIdentity, TaskIdentity]:
    """The group and (lead) task a pool is rendered for when no workflow is at hand."""
    group = GroupIdentity(
        workflow_id="render-1",
        workflow_uuid=SAMPLE_WORKFLOW_UUID,
        group_name="render-group",
        group_uuid=SAMPLE_GROUP_UUID,
        submitted_by=user,
        pool=pool_name,
    )
    task = TaskIdentity(name="render-task", uuid=SAMPLE_TASK_UUID, platform=platform, lead=True)
    return group, task


def _value_at(tree: Any, path: list[str | int]) -> Any:
    try:
        return get_path(tree, tuple(path))
    except (KeyError, IndexError, TypeError):
        return None


def pool_topology(configs: Configs, pool_name: str) -> dict[str, Any]:
    """The pool's topology keys, coarsest level first, as workflows name them."""
    keys = pool_of(configs, pool_name).topology_keys
    return {
        "pool": pool_name,
        "topology_keys": [
            {"level": level, "key": entry.key, "label": entry.label}
            for level, entry in enumerate(keys, start=1)
        ],
    }
