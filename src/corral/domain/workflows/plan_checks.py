"""The submission's pool-dependent checks, in OSMO's order
(docs/osmo-reference.md#submission-order): pool open, priority, task count, name lengths,
topology keys, a platform per resource, each task against its platform, timeouts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

from corral.domain.configs.models import Pool
from corral.domain.configs.references import NO_PLATFORM_FIX
from corral.domain.configs.snapshot import Configs
from corral.domain.formats.durations import parse_duration
from corral.domain.platform.nodes import Node
from corral.domain.platform.resolved_pool import ResolvedPlatform, pool_of, resolve_platform
from corral.domain.platform.task_validation import TaskRequest, validate_task
from corral.domain.platform.variables import (
    GroupIdentity,
    ResourceRequest,
    TaskIdentity,
    identity_variables,
)
from corral.domain.topology.podgroup import (
    GangTask,
    PoolTopologyKey,
    validate_requirements,
    validate_uniform_keys,
)
from corral.domain.workflows.plan import PRIORITIES, NewId, Submitter
from corral.domain.workflows.spec import ResourceSpec, TaskSpec, WorkflowSpec
from corral.errors import UserError

# ----------------------------------------------------------------------------- checks


def check_pool_open(configs: Configs, pool_name: str, *, is_admin: bool) -> None:
    """The pool exists and is not in maintenance (admins may still submit)."""
    pool = pool_of(configs, pool_name)
    if pool.enable_maintenance and not is_admin:
        raise UserError(
            f"Pool {pool_name} is undergoing maintenance. Users will have to wait until "
            "maintenance is completed before submission."
        )


def check_priority(priority: str) -> str:
    upper = priority.upper()
    if upper not in PRIORITIES:
        raise UserError(f"Priority {priority!r} is not one of {', '.join(PRIORITIES)}.")
    return upper


def check_task_count(configs: Configs, spec: WorkflowSpec) -> None:
    limit = configs.workflow.max_num_tasks
    if len(spec.tasks()) > limit:
        raise UserError(
            f"Workflow cannot have more than {limit} tasks. This one has {len(spec.tasks())}; "
            "split it into several workflows or ask an admin to raise WORKFLOW max_num_tasks."
        )


def check_name_lengths(configs: Configs, spec: WorkflowSpec) -> None:
    limit = configs.workflow.workflow_info.max_name_length
    names = [spec.name, *(g.name for g in spec.groups), *(t.name for t in spec.tasks())]
    for name in names:
        if len(name) > limit:
            raise UserError(f"Name {name} is too long. It must be {limit} characters or less.")


def pool_topology_keys(pool: Pool) -> list[PoolTopologyKey]:
    return [PoolTopologyKey(k.key, k.label) for k in pool.topology_keys]


def check_topology(configs: Configs, pool_name: str, spec: WorkflowSpec) -> None:
    """Every key is one of the pool's, and every task with requirements uses the same keys."""
    keys = pool_topology_keys(pool_of(configs, pool_name))
    for name, resource in spec.resources.items():
        validate_requirements(name, resource.topology, keys, pool_name)
    validate_uniform_keys(
        GangTask(task.name, task.name, spec.resource_of(task).topology) for task in spec.tasks()
    )


def resource_platforms(configs: Configs, pool_name: str, spec: WorkflowSpec) -> dict[str, str]:
    """The platform of every named resource spec: its own, else the pool's default."""
    pool = pool_of(configs, pool_name)
    if not pool.platforms:
        raise UserError(
            f"Pool {pool_name} has no platforms, so no task can run in it. An admin must add "
            f"one: {NO_PLATFORM_FIX}"
        )
    chosen: dict[str, str] = {}
    for name, resource in spec.resources.items():
        platform = resource.platform or pool.default_platform
        platforms = pool.platforms
        if not platform:
            raise UserError(
                f"Resource {name} does not have a platform! Pool {pool_name} has no default "
                f"platform; set resources.{name}.platform to one of: "
                f"{', '.join(platforms) or 'none defined'}."
            )
        if platform not in platforms:
            raise UserError(
                f"Platform {platform} does not exist in pool {pool_name}! "
                f"Its platforms: {', '.join(platforms) or 'none'}."
            )
        chosen[name] = platform
    return chosen


def resource_request(resource: ResourceSpec, task: TaskSpec) -> ResourceRequest:
    return ResourceRequest(
        cpu=resource.cpu,
        gpu=resource.gpu,
        memory=resource.memory,
        storage=resource.storage,
        nodes_excluded=resource.nodes_excluded,
        cache_size=task.cache_size,
    )


class Identities:
    """Every group's and task's identity (names, uuids, platform, lead), fixed before any check
    so that checks and rendering see the same ``WF_*`` values."""

    def __init__(
        self,
        spec: WorkflowSpec,
        submitter: Submitter,
        platform_of: Mapping[str, str],
        new_id: NewId,
    ) -> None:
        self.groups: dict[str, GroupIdentity] = {}
        self.tasks: dict[str, TaskIdentity] = {}
        self._group_of: dict[str, str] = {}
        for group in spec.groups:
            self.groups[group.name] = GroupIdentity(
                workflow_id=submitter.workflow_id,
                workflow_uuid=submitter.workflow_uuid,
                group_name=group.name,
                group_uuid=new_id(),
                submitted_by=submitter.user,
                pool=submitter.pool,
                priority=submitter.priority,
            )
            for task in group.tasks:
                self.tasks[task.name] = TaskIdentity(
                    name=task.name,
                    uuid=new_id(),
                    platform=platform_of[task.resource],
                    lead=task.lead,
                )
                self._group_of[task.name] = group.name

    def of(self, task: str) -> tuple[GroupIdentity, TaskIdentity]:
        return self.groups[self._group_of[task]], self.tasks[task]


class Platforms:
    """Resolved platforms of one pool, each resolved once per configuration snapshot (a
    sandbox worker keeps the snapshot from one submission to the next; merging the pod
    templates anew was a twentieth of planning one)."""

    def __init__(self, configs: Configs, pool_name: str) -> None:
        self._state = configs
        self._pool = pool_name

    def get(self, platform: str) -> ResolvedPlatform:
        key = (id(self._state), self._pool, platform)
        found = _RESOLVED.get(key)
        if found is not None and found[0] is self._state:
            return found[1]
        resolved = resolve_platform(self._state, self._pool, platform)
        if len(_RESOLVED) >= _RESOLVED_KEPT:
            _RESOLVED.pop(next(iter(_RESOLVED)))
        _RESOLVED[key] = (self._state, resolved)  # the snapshot is held: its id is not reused
        return resolved


#: (id of a configuration snapshot, pool, platform) -> (the snapshot, the platform resolved).
_RESOLVED: dict[tuple[int, str, str], tuple[Configs, ResolvedPlatform]] = {}
_RESOLVED_KEPT = 32


def check_tasks(
    spec: WorkflowSpec,
    platform_of: Mapping[str, str],
    platforms: Platforms,
    nodes: Sequence[Node],
    identities: Identities,
) -> dict[str, list[tuple[str, str]]]:
    """Each task against its platform in OSMO's order (static rules, platform security, node
    rules); returns each task's host mounts. Tasks asking for the same thing on the same
    platform are checked once (as OSMO caches per identical resource spec)."""
    mounts: dict[str, list[tuple[str, str]]] = {}
    passed: dict[tuple[str, TaskRequest], list[tuple[str, str]]] = {}
    for task in spec.tasks():
        if task.credentials:
            raise UserError(
                f"Task {task.name} uses credential {next(iter(task.credentials))}, but corral has "
                "no credential store yet; remove `credentials` from the task and pass what it "
                "needs another way."
            )
        request = TaskRequest(
            name=task.name,
            resources=resource_request(spec.resource_of(task), task),
            privileged=task.privileged,
            host_network=task.host_network,
            volume_mounts=task.volume_mounts,
        )
        key = (platform_of[task.resource], replace(request, name=""))
        if key not in passed:
            identity = identity_variables(*identities.of(task.name))
            passed[key] = validate_task(platforms.get(key[0]), request, nodes, identity)
        mounts[task.name] = passed[key]
    return mounts


def check_files_placeable(configs: Configs, pool_name: str, spec: WorkflowSpec) -> None:
    """A task's ``files`` need a pod to mount them in: a pool whose backend runs tasks as
    local processes cannot place them, and used to drop them silently."""
    pool = pool_of(configs, pool_name)
    backend = configs.backend(pool.backend)
    if backend.kubernetes is not None or backend.execution.mode != "local_processes":
        return
    for task in spec.tasks():
        if task.files:
            raise UserError(
                f"Task {task.name} has files ({task.files[0].path} ...), which pool "
                f"{pool_name} cannot place: its backend {pool.backend} runs tasks as local "
                "processes on the server's machine, without a pod to mount them in. Write "
                "them from the task's command (it starts in a home of its own, also its "
                "TMPDIR), or submit to a pool on a Kubernetes backend."
            )


def timeouts(configs: Configs, pool_name: str, spec: WorkflowSpec) -> tuple[timedelta, timedelta]:
    """Exec and queue timeouts: the spec's, else the pool's, else the WORKFLOW config's default;
    capped by the pool's maximum, else the WORKFLOW config's."""
    pool = pool_of(configs, pool_name)
    workflow = configs.workflow

    def setting(kind: str, given: timedelta | None) -> timedelta:
        default = getattr(pool, f"default_{kind}_timeout") or getattr(
            workflow, f"default_{kind}_timeout"
        )
        maximum = getattr(pool, f"max_{kind}_timeout") or getattr(workflow, f"max_{kind}_timeout")
        value = given if given is not None else parse_duration(default)
        return min(value, parse_duration(maximum))

    return setting("exec", spec.timeout.exec_timeout), setting("queue", spec.timeout.queue_timeout)
