"""From a parsed workflow to the exact Kubernetes objects of each task group (pure).

The submission pipeline's pool-dependent steps, in OSMO's order
(docs/osmo-reference.md#submission-order): task-count limit, topology keys, platform per task, then
each task against its platform (static rules, platform security, node rules); then every group's
objects are rendered in creation order (group-template resources, secrets, PodGroup, Pods, headless
Service) and checked against the Kubernetes schemas. What this returns is what is stored, and what
a backend applies.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from corral.domain.configs.references import NO_PLATFORM_FIX
from corral.domain.configs.types import ConfigType
from corral.domain.formats.durations import parse_duration
from corral.domain.formats.kubernetes_names import label_value_problem
from corral.domain.labels import GROUP_UUID, PLATFORM
from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.labels import PRIORITY as PRIORITY_LABEL
from corral.domain.platform.manifests import (
    PodTask,
    build_pod,
    drop_imageless_control_container,
    render_group_templates,
    render_pod_template,
)
from corral.domain.platform.nodes import Node
from corral.domain.platform.resolved_pool import ResolvedPlatform, State, pool_of, resolve_platform
from corral.domain.platform.task_validation import TaskRequest, validate_task
from corral.domain.platform.variables import (
    GroupIdentity,
    ResourceRequest,
    TaskIdentity,
    container_name,
    group_variables,
    identity_variables,
    system_labels,
    task_variables,
)
from corral.domain.schemas.objects import manifest_problems
from corral.domain.topology.podgroup import (
    GangTask,
    PoolTopologyKey,
    build_pod_group,
    priority_class_name,
    queue_name,
    topology_crd_name,
    validate_requirements,
    validate_uniform_keys,
)
from corral.domain.workflows.spec import ExitAction, GroupSpec, ResourceSpec, TaskSpec, WorkflowSpec
from corral.domain.workflows.template import substitute_tokens
from corral.errors import UserError

PRIORITIES = ("HIGH", "NORMAL", "LOW")

#: Where task files are mounted from (one Secret per group, one key per file).
FILES_VOLUME = "corral-files"

NewId = Callable[[], str]


def random_id() -> str:
    """A new uuid for a workflow, group or task (32 hex digits)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Submitter:
    """Who submits what where: fixed before the plan is made."""

    workflow_id: str
    workflow_uuid: str
    user: str
    pool: str
    priority: str = "NORMAL"


@dataclass(frozen=True)
class PlannedTask:
    name: str
    uuid: str
    pod_name: str
    platform: str
    lead: bool
    exit_actions: tuple[ExitAction, ...] = ()


@dataclass(frozen=True)
class PlannedGroup:
    name: str
    uuid: str
    upstream: tuple[str, ...]
    tasks: tuple[PlannedTask, ...]
    #: Every object of the group, in creation order.
    manifests: tuple[dict[str, Any], ...]
    ignore_non_lead_status: bool = True

    @property
    def resource_kinds(self) -> list[tuple[str, str]]:
        """The distinct ``(apiVersion, kind)`` of the group's objects, for cleanup."""
        return list(dict.fromkeys((m["apiVersion"], m["kind"]) for m in self.manifests))


@dataclass(frozen=True)
class WorkflowPlan:
    submitter: Submitter
    namespace: str
    backend: str
    exec_timeout: timedelta
    queue_timeout: timedelta
    groups: tuple[PlannedGroup, ...]


# ----------------------------------------------------------------------------- checks


def check_pool_open(state: State, pool_name: str, *, is_admin: bool) -> None:
    """The pool exists and is not in maintenance (admins may still submit)."""
    pool = pool_of(state, pool_name)
    if pool.get("enable_maintenance") and not is_admin:
        raise UserError(
            f"Pool {pool_name} is undergoing maintenance. Users will have to wait until "
            "maintenance is completed before submission."
        )


def check_priority(priority: str) -> str:
    upper = priority.upper()
    if upper not in PRIORITIES:
        raise UserError(f"Priority {priority!r} is not one of {', '.join(PRIORITIES)}.")
    return upper


def check_task_count(state: State, spec: WorkflowSpec) -> None:
    limit = int(state.get(ConfigType.WORKFLOW, {}).get("max_num_tasks", 100))
    if len(spec.tasks()) > limit:
        raise UserError(
            f"Workflow cannot have more than {limit} tasks. This one has {len(spec.tasks())}; "
            "split it into several workflows or ask an admin to raise WORKFLOW max_num_tasks."
        )


def check_name_lengths(state: State, spec: WorkflowSpec) -> None:
    info = state.get(ConfigType.WORKFLOW, {}).get("workflow_info", {})
    limit = int(info.get("max_name_length", 64))
    names = [spec.name, *(g.name for g in spec.groups), *(t.name for t in spec.tasks())]
    for name in names:
        if len(name) > limit:
            raise UserError(f"Name {name} is too long. It must be {limit} characters or less.")


def pool_topology_keys(pool: Mapping[str, Any]) -> list[PoolTopologyKey]:
    return [PoolTopologyKey(k["key"], k["label"]) for k in pool.get("topology_keys", [])]


def check_topology(state: State, pool_name: str, spec: WorkflowSpec) -> None:
    """Every key is one of the pool's, and every task with requirements uses the same keys."""
    keys = pool_topology_keys(pool_of(state, pool_name))
    for name, resource in spec.resources.items():
        validate_requirements(name, resource.topology, keys, pool_name)
    validate_uniform_keys(
        GangTask(task.name, task.name, spec.resource_of(task).topology) for task in spec.tasks()
    )


def resource_platforms(state: State, pool_name: str, spec: WorkflowSpec) -> dict[str, str]:
    """The platform of every named resource spec: its own, else the pool's default."""
    pool = pool_of(state, pool_name)
    platforms: Mapping[str, Any] = pool.get("platforms", {})
    if not platforms:
        raise UserError(
            f"Pool {pool_name} has no platforms, so no task can run in it. An admin must add "
            f"one: {NO_PLATFORM_FIX}"
        )
    chosen: dict[str, str] = {}
    for name, resource in spec.resources.items():
        platform = resource.platform or pool.get("default_platform")
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


class _Platforms:
    """Resolved platforms of one pool, each resolved once per submission."""

    def __init__(self, state: State, pool_name: str) -> None:
        self._state = state
        self._pool = pool_name
        self._resolved: dict[str, ResolvedPlatform] = {}

    def get(self, platform: str) -> ResolvedPlatform:
        if platform not in self._resolved:
            self._resolved[platform] = resolve_platform(self._state, self._pool, platform)
        return self._resolved[platform]


def check_tasks(
    spec: WorkflowSpec,
    platform_of: Mapping[str, str],
    platforms: _Platforms,
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


def timeouts(state: State, pool_name: str, spec: WorkflowSpec) -> tuple[timedelta, timedelta]:
    """Exec and queue timeouts: the spec's, else the pool's, else the WORKFLOW config's default;
    capped by the pool's maximum, else the WORKFLOW config's."""
    pool = pool_of(state, pool_name)
    workflow: Mapping[str, Any] = state.get(ConfigType.WORKFLOW, {})

    def setting(kind: str, given: timedelta | None) -> timedelta:
        default = pool.get(f"default_{kind}_timeout") or workflow.get(f"default_{kind}_timeout")
        maximum = pool.get(f"max_{kind}_timeout") or workflow.get(f"max_{kind}_timeout")
        value = given if given is not None else parse_duration(str(default or "60d"))
        return min(value, parse_duration(str(maximum or "60d")))

    return setting("exec", spec.timeout.exec_timeout), setting("queue", spec.timeout.queue_timeout)


# ---------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class _Backend:
    namespace: str
    scheduler_type: str
    scheduler_name: str


def _backend(state: State, pool: Mapping[str, Any]) -> _Backend:
    backends: Mapping[str, Any] = state.get(ConfigType.BACKEND, {})
    backend = backends.get(pool.get("backend", ""), {})
    settings = backend.get("scheduler_settings", {})
    return _Backend(
        namespace=backend.get("k8s_namespace", "default"),
        scheduler_type=settings.get("scheduler_type", "kai"),
        scheduler_name=settings.get("scheduler_name", "kai-scheduler"),
    )


class _GroupRenderer:
    """Renders the objects of one task group."""

    def __init__(
        self,
        *,
        spec: WorkflowSpec,
        submitter: Submitter,
        backend: _Backend,
        pool: Mapping[str, Any],
        platform_of: Mapping[str, str],
        platforms: _Platforms,
        host_mounts: Mapping[str, list[tuple[str, str]]],
        identities: Identities,
    ) -> None:
        self.spec = spec
        self.submitter = submitter
        self.backend = backend
        self.pool = pool
        self.platform_of = platform_of
        self.platforms = platforms
        self.host_mounts = host_mounts
        self.identities = identities

    def render(self, group: GroupSpec) -> PlannedGroup:
        identity = self.identities.groups[group.name]
        tasks = [self.identities.tasks[task.name] for task in group.tasks]
        hosts = self._hosts(identity, tasks) if len(group.tasks) > 1 else {}
        pods = [
            self._pod(task, identity, task_identity, hosts, multi_task=len(group.tasks) > 1)
            for task, task_identity in zip(group.tasks, tasks, strict=True)
        ]
        secrets = self._file_secret(group, identity, tasks)
        pod_group, pods = self._schedule(group, identity, pods)
        manifests = [*self._group_resources(group, identity), *secrets, *pod_group, *pods]
        if len(group.tasks) > 1:
            manifests.append(self._service(identity))
        planned_tasks = tuple(
            PlannedTask(
                t.name, t.uuid, pod["metadata"]["name"], t.platform, t.lead, spec.exit_actions
            )
            for t, spec, pod in zip(tasks, group.tasks, pods, strict=True)
        )
        return PlannedGroup(
            name=group.name,
            uuid=identity.group_uuid,
            upstream=group.upstream,
            tasks=planned_tasks,
            manifests=tuple(manifests),
            ignore_non_lead_status=group.ignore_non_lead_status,
        )

    # -- objects

    def _group_resources(self, group: GroupSpec, identity: GroupIdentity) -> list[dict[str, Any]]:
        lead = next(task for task in group.tasks if task.lead)
        resolved = self.platforms.get(self.platform_of[lead.resource])
        variables = group_variables(identity, resolved.default_variables)
        return render_group_templates(
            resolved.group_templates, variables, identity, self.spec.labels
        )

    def _pod(
        self,
        task: TaskSpec,
        identity: GroupIdentity,
        task_identity: TaskIdentity,
        hosts: Mapping[str, str],
        *,
        multi_task: bool,
    ) -> dict[str, Any]:
        resource = self.spec.resource_of(task)
        resolved = self.platforms.get(task_identity.platform)
        request = resource_request(resource, task)
        variables = task_variables(request, resolved.default_variables, identity, task_identity)
        task = substitute_tokens(
            task,
            workflow_id=self.submitter.workflow_id,
            hosts=hosts,
            task_uuid=task_identity.uuid,
        )
        pod_task = PodTask(
            identity=task_identity,
            image=task.image,
            command=task.command,
            args=task.args,
            environment=task.environment,
            privileged=task.privileged,
            host_network=task.host_network,
            gpu_requested=_asks_for_gpus(variables.get("USER_GPU")),
        )
        rendered = render_pod_template(resolved.pod_template, variables)
        pod = build_pod(pod_task, identity, rendered, self.spec.labels)
        drop_imageless_control_container(pod)
        metadata = pod["metadata"]
        metadata["namespace"] = self.backend.namespace
        metadata["labels"].update(self._pod_labels(task_identity))
        self._mount_host_paths(pod, task)
        self._mount_files(pod, task, task_identity)
        if multi_task:
            pod["spec"]["hostname"] = task_identity.uuid
            pod["spec"]["subdomain"] = _service_name(identity)
        return pod

    def _pod_labels(self, task: TaskIdentity) -> dict[str, str]:
        labels = {
            POOL_LABEL: self.submitter.pool,
            PLATFORM: task.platform,
            PRIORITY_LABEL: self.submitter.priority.lower(),
        }
        return {k: v for k, v in labels.items() if label_value_problem(v) is None}

    def _hosts(self, identity: GroupIdentity, tasks: Sequence[TaskIdentity]) -> dict[str, str]:
        """``{{host:<task>}}`` of every task of a multi-task group: its pod's DNS name."""
        domain = f"{_service_name(identity)}.{self.backend.namespace}.svc.cluster.local"
        return {task.name: f"{task.uuid}.{domain}" for task in tasks}

    def _mount_host_paths(self, pod: dict[str, Any], task: TaskSpec) -> None:
        mounts = self.host_mounts.get(task.name, [])
        if not mounts:
            return
        container = _user_container(pod, task)
        volumes = pod["spec"].setdefault("volumes", [])
        for index, (source, destination) in enumerate(mounts):
            name = f"host-mount-{index}"
            volumes.append({"name": name, "hostPath": {"path": source}})
            container.setdefault("volumeMounts", []).append(
                {"name": name, "mountPath": destination}
            )

    def _mount_files(self, pod: dict[str, Any], task: TaskSpec, identity: TaskIdentity) -> None:
        if not task.files:
            return
        container = _user_container(pod, task)
        volumes = pod["spec"].setdefault("volumes", [])
        items = []
        for index, file in enumerate(task.files):
            key = _file_key(identity, index)
            items.append({"key": key, "path": key})
            container.setdefault("volumeMounts", []).append(
                {
                    "name": FILES_VOLUME,
                    "mountPath": "/" + file.path.lstrip("/"),
                    "subPath": key,
                    "readOnly": True,
                }
            )
        secret_name = _files_secret_name(pod["metadata"]["labels"][GROUP_UUID])
        volumes.append(
            {"name": FILES_VOLUME, "secret": {"secretName": secret_name, "items": items}}
        )

    def _file_secret(
        self, group: GroupSpec, identity: GroupIdentity, tasks: Sequence[TaskIdentity]
    ) -> list[dict[str, Any]]:
        data: dict[str, str] = {}
        for task, task_identity in zip(group.tasks, tasks, strict=True):
            for index, file in enumerate(task.files):
                encoded = file.contents if file.base64 else _base64(file.contents)
                data[_file_key(task_identity, index)] = encoded
        if not data:
            return []
        return [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": _files_secret_name(identity.group_uuid),
                    "namespace": self.backend.namespace,
                    "labels": system_labels(identity),
                },
                "type": "Opaque",
                "data": data,
            }
        ]

    def _schedule(
        self, group: GroupSpec, identity: GroupIdentity, pods: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The PodGroup (KAI only) and the pods carrying its labels and scheduler name."""
        if self.backend.scheduler_type != "kai":
            return [], pods
        gang = [
            GangTask(task.name, pod["metadata"]["name"], self.spec.resource_of(task).topology)
            for task, pod in zip(group.tasks, pods, strict=True)
        ]
        queue = queue_name(self.backend.namespace, self.submitter.pool)
        plan = build_pod_group(
            group_uuid=identity.group_uuid,
            namespace=self.backend.namespace,
            queue=queue,
            priority_class=priority_class_name(self.submitter.priority),
            pool_keys=pool_topology_keys(self.pool),
            tasks=gang,
            topology_name=topology_crd_name(self.backend.namespace, self.submitter.pool),
            labels=system_labels(identity),
        )
        for task, pod in zip(group.tasks, pods, strict=True):
            metadata = pod["metadata"]
            metadata["labels"].update(plan.pod_labels[task.name])
            metadata.setdefault("annotations", {}).update(plan.pod_annotations[task.name])
            pod["spec"]["schedulerName"] = self.backend.scheduler_name
        return [plan.manifest], pods

    def _service(self, identity: GroupIdentity) -> dict[str, Any]:
        """Headless: gives each pod of the group the DNS name ``{{host:<task>}}`` resolves to."""
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": _service_name(identity),
                "namespace": self.backend.namespace,
                "labels": system_labels(identity),
            },
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {GROUP_UUID: identity.group_uuid},
            },
        }


def _asks_for_gpus(user_gpu: Any) -> bool:
    """Whether the task gets GPUs: its own count, else the pool's default ``USER_GPU``."""
    try:
        return float(str(user_gpu)) > 0
    except ValueError:
        return False


def _service_name(identity: GroupIdentity) -> str:
    return f"osmo-{identity.group_uuid}"


def _files_secret_name(group_uuid: str) -> str:
    return f"{group_uuid}-files"


def _file_key(task: TaskIdentity, index: int) -> str:
    return f"{task.uuid}-{index}"


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _user_container(pod: dict[str, Any], task: TaskSpec) -> dict[str, Any]:
    name = container_name(task.name)
    return next(c for c in pod["spec"]["containers"] if c.get("name") == name)


def check_manifests(groups: Sequence[PlannedGroup]) -> None:
    """Refuse the workflow if the API server would refuse any of its objects."""
    for group in groups:
        for manifest in group.manifests:
            problems = manifest_problems(manifest)
            if problems:
                name = manifest.get("metadata", {}).get("name", "?")
                listed = "; ".join(problems[:5])
                raise UserError(
                    f"Group {group.name}: the {manifest.get('kind')} {name} rendered from the "
                    f"pool's templates is not valid Kubernetes: {listed}. Check the pool's pod "
                    "and group templates (corral pool render) or the task's values."
                )


# ------------------------------------------------------------------------------- the plan


def plan_workflow(
    state: State,
    spec: WorkflowSpec,
    submitter: Submitter,
    nodes: Sequence[Node],
    new_id: NewId,
) -> WorkflowPlan:
    """Run the pool-dependent checks in order and render every group's objects."""
    pool_name = submitter.pool
    pool = pool_of(state, pool_name)
    check_name_lengths(state, spec)
    check_task_count(state, spec)
    check_topology(state, pool_name, spec)
    platform_of = resource_platforms(state, pool_name, spec)
    platforms = _Platforms(state, pool_name)
    identities = Identities(spec, submitter, platform_of, new_id)
    host_mounts = check_tasks(spec, platform_of, platforms, nodes, identities)
    exec_timeout, queue_timeout = timeouts(state, pool_name, spec)
    backend = _backend(state, pool)
    renderer = _GroupRenderer(
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
        namespace=backend.namespace,
        backend=str(pool.get("backend", "")),
        exec_timeout=exec_timeout,
        queue_timeout=queue_timeout,
        groups=groups,
    )
