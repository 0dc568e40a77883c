"""From a parsed workflow to the exact Kubernetes objects of each task group (pure).

The submission pipeline's pool-dependent steps, in OSMO's order
(docs/osmo-reference.md#submission-order): task-count limit, topology keys, platform per task, then
each task against its platform (static rules, platform security, node rules); then every group's
objects are rendered in creation order (group-template resources, secrets, PodGroup, Pods, headless
Service) and checked against the Kubernetes schemas. What this returns is what is stored, and what
a backend applies.
"""

from __future__ import annotations

from collections.abc import Sequence

from corral.domain.configs.snapshot import Configs
from corral.domain.platform.nodes import Node
from corral.domain.platform.resolved_pool import pool_of
from corral.domain.workflows.group_renderer import GroupRenderer, check_manifests
from corral.domain.workflows.plan import NewId, Submitter, WorkflowPlan
from corral.domain.workflows.plan_checks import (
    Identities,
    Platforms,
    check_files_placeable,
    check_name_lengths,
    check_task_count,
    check_tasks,
    check_topology,
    resource_platforms,
    timeouts,
)
from corral.domain.workflows.spec import WorkflowSpec

# ------------------------------------------------------------------------------- the plan


def plan_workflow(
    configs: Configs,
    spec: WorkflowSpec,
    submitter: Submitter,
    nodes: Sequence[Node],
    new_id: NewId,
) -> WorkflowPlan:
    """Run the pool-dependent checks in order and render every group's objects."""
    pool_name = submitter.pool
    pool = pool_of(configs, pool_name)
    check_name_lengths(configs, spec)
    check_task_count(configs, spec)
    check_topology(configs, pool_name, spec)
    platform_of = resource_platforms(configs, pool_name, spec)
    platforms = Platforms(configs, pool_name)
    identities = Identities(spec, submitter, platform_of, new_id)
    host_mounts = check_tasks(spec, platform_of, platforms, nodes, identities)
    check_files_placeable(configs, pool_name, spec)
    exec_timeout, queue_timeout = timeouts(configs, pool_name, spec)
    backend = configs.backend(pool.backend)
    renderer = GroupRenderer(
        spec=spec,
        submitter=submitter,
        backend=backend,
        pool=pool,
        platform_of=platform_of,
        platforms=platforms,
        host_mounts=host_mounts,
        identities=identities,
    )
    groups = tuple(renderer.render(group) for group in spec.groups)
    check_manifests(groups)
    return WorkflowPlan(
        submitter=submitter,
        namespace=backend.k8s_namespace,
        backend=pool.backend,
        exec_timeout=exec_timeout,
        queue_timeout=queue_timeout,
        groups=groups,
    )
