"""Checking one task against its pool's platform before anything is created
(docs/resource_validation.md).

Order as OSMO: static rules once per task, then the platform's security rules, then node
rules, which pass when at least one node of the platform fits all of them. Nodes the task
excludes (``nodesExcluded``) do not count, and a node's capacity is its allocatable minus what
the platform's control container requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from corral.domain.formats.json_paths import Path, format_path
from corral.domain.jinja.rendering import render_tree
from corral.domain.labels import CONTROL_CONTAINER
from corral.domain.platform.nodes import (
    Node,
    NodeCapacity,
    Resources,
    belongs_to,
    control_requests,
    validation_capacity,
)
from corral.domain.platform.resolved_pool import ResolvedPlatform
from corral.domain.platform.resource_rules import check_node_rules, check_static_rules
from corral.domain.platform.security import check_task_security
from corral.domain.platform.variables import ResourceRequest, resource_variables


@dataclass(frozen=True)
class TaskRequest:
    """What validation needs to know about a task."""

    name: str
    resources: ResourceRequest
    privileged: bool = False
    host_network: bool = False
    volume_mounts: tuple[str, ...] = ()


def platform_nodes(resolved: ResolvedPlatform, nodes: Sequence[Node]) -> list[Node]:
    """The nodes that carry the platform's labels and whose taints it tolerates."""
    selector, tolerations = resolved.node_selector, resolved.tolerations
    return [node for node in nodes if belongs_to(node, selector, tolerations)]


def node_capacities(
    resolved: ResolvedPlatform,
    nodes: Sequence[Node],
    variables: Mapping[str, Any],
    excluded: Sequence[str] = (),
) -> Sequence[NodeCapacity]:
    """Per platform node, what one task may use on it when it is otherwise empty."""
    control = control_requests(_control_template(resolved, variables))
    capacities = _capacities(resolved, nodes, control)
    if not excluded:
        return capacities  # shared with the cache: read only
    names = set(excluded)
    return [capacity for capacity in capacities if capacity.name not in names]


#: (id of the nodes, the platform's selector and tolerations, the control container's
#: requests) -> (those nodes, their capacities). Every task of a platform, and every submission
#: while the nodes do not change (a sandbox worker keeps them), has the same: 5,000 nodes took
#: 10 ms per task to read.
_CAPACITIES: dict[tuple[Any, ...], tuple[Sequence[Node], tuple[NodeCapacity, ...]]] = {}
_CAPACITIES_KEPT = 16


def _capacities(
    resolved: ResolvedPlatform, nodes: Sequence[Node], control: Resources
) -> Sequence[NodeCapacity]:
    key = (
        id(nodes),
        json.dumps(resolved.node_selector, sort_keys=True),
        json.dumps(resolved.tolerations, sort_keys=True, default=str),
        control,
    )
    found = _CAPACITIES.get(key)
    if found is not None and found[0] is nodes:
        return found[1]
    capacities = tuple(
        validation_capacity(node, control) for node in platform_nodes(resolved, nodes)
    )
    if len(_CAPACITIES) >= _CAPACITIES_KEPT:
        _CAPACITIES.pop(next(iter(_CAPACITIES)))
    _CAPACITIES[key] = (nodes, capacities)  # the nodes are held: their id is not reused
    return capacities


def validate_task(
    resolved: ResolvedPlatform,
    task: TaskRequest,
    nodes: Sequence[Node],
    identity: Mapping[str, Any] | None = None,
) -> list[tuple[str, str]]:
    """Raise a UserError if ``task`` cannot run on its platform; return its host mounts.

    ``identity`` holds the task's ``WF_*`` variables: the control container is rendered with
    them, as it is in the task's pod (resource rules see the resource variables only)."""
    variables = resource_variables(task.resources, resolved.default_variables)
    check_static_rules(task.name, resolved.rules, variables)
    mounts = check_task_security(
        task.name,
        resolved.platform_name,
        resolved.platform,
        privileged=task.privileged,
        host_network=task.host_network,
        volume_mounts=task.volume_mounts,
        provided_mounts=resolved.default_mounts,
    )
    capacities = node_capacities(
        resolved, nodes, {**variables, **(identity or {})}, task.resources.nodes_excluded
    )
    check_node_rules(
        task.name, resolved.pool_name, resolved.platform_name, resolved.rules, variables, capacities
    )
    return mounts


def _control_template(resolved: ResolvedPlatform, variables: Mapping[str, Any]) -> dict[str, Any]:
    """Only the control container of the platform template, rendered (its requests may use
    variables); the rest of the template needs per-task values that do not exist yet."""
    containers = resolved.pod_template.value.get("spec", {}).get("containers", [])
    if not isinstance(containers, list):
        return {}
    for index, container in enumerate(containers):
        if isinstance(container, dict) and container.get("name") == CONTROL_CONTAINER:
            describe = partial(_describe_control_field, ("spec", "containers", index))
            rendered = render_tree(container, variables, describe=describe, type_of=_text)
            return {"spec": {"containers": [rendered]}}
    return {}


def _describe_control_field(container: Path, relative: Path) -> str:
    return f"control container, field {format_path((*container, *relative))}"


def _text(path: Path) -> None:
    return None
