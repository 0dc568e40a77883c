"""Rendering one task group into its objects, in creation order: group-template resources, the
files Secret, the PodGroup, the Pods and the headless Service."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from corral.domain.configs.backend_models import Backend
from corral.domain.configs.models import Pool
from corral.domain.formats.kubernetes_names import label_value_problem
from corral.domain.jinja.compiled_tree import RenderMemo
from corral.domain.labels import GROUP_UUID, PLATFORM, STOP_NOTICE_SECONDS, STOP_NOTICE_SIGNAL
from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.labels import PRIORITY as PRIORITY_LABEL
from corral.domain.platform.manifests import (
    PodTask,
    build_pod,
    drop_imageless_control_container,
    render_group_templates,
    render_pod_template,
)
from corral.domain.platform.node_affinity import read_node_affinity
from corral.domain.platform.variables import (
    GroupIdentity,
    ResourceRequest,
    TaskIdentity,
    container_name,
    group_variables,
    identity_variables,
    resource_variables,
    system_labels,
)
from corral.domain.schemas.objects import manifest_problems
from corral.domain.topology.podgroup import (
    GangTask,
    build_pod_group,
    priority_class_name,
    queue_name,
    topology_crd_name,
)
from corral.domain.workflows.plan import FILES_VOLUME, PlannedGroup, PlannedTask, Submitter
from corral.domain.workflows.plan_checks import (
    Identities,
    Platforms,
    pool_topology_keys,
    resource_request,
)
from corral.domain.workflows.spec import GroupSpec, TaskSpec, WorkflowSpec
from corral.domain.workflows.template import substitute_tokens
from corral.errors import UserError

# ---------------------------------------------------------------------------- rendering


class GroupRenderer:
    """Renders the objects of one task group."""

    def __init__(
        self,
        *,
        spec: WorkflowSpec,
        submitter: Submitter,
        backend: Backend,
        pool: Pool,
        platform_of: Mapping[str, str],
        platforms: Platforms,
        host_mounts: Mapping[str, list[tuple[str, str]]],
        identities: Identities,
    ) -> None:
        self.spec = spec
        self.submitter = submitter
        self.namespace = backend.k8s_namespace
        self.scheduler = backend.scheduler_settings
        self.pool = pool
        self.platform_of = platform_of
        self.platforms = platforms
        self.host_mounts = host_mounts
        self.identities = identities
        self._memo = RenderMemo()  # template values read alike by many tasks render once
        self._resource_variables: dict[tuple[str, ResourceRequest], dict[str, Any]] = {}

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
        variables = {
            **self._variables_of(task_identity.platform, request),
            **identity_variables(identity, task_identity),
        }
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
        rendered = render_pod_template(resolved.pod_template, variables, self._memo)
        pod = build_pod(pod_task, identity, rendered, self.spec.labels)
        drop_imageless_control_container(pod)
        metadata = pod["metadata"]
        metadata["namespace"] = self.namespace
        metadata["labels"].update(self._pod_labels(task_identity))
        if task.stop_notice is not None:  # read back when the gang gets notice
            seconds = f"{task.stop_notice.total_seconds():g}"
            metadata.setdefault("annotations", {})[STOP_NOTICE_SECONDS] = seconds
        if task.notice_signal is not None:
            metadata.setdefault("annotations", {})[STOP_NOTICE_SIGNAL] = task.notice_signal
        self._mount_host_paths(pod, task)
        self._mount_files(pod, task, task_identity)
        if multi_task:
            pod["spec"]["hostname"] = task_identity.uuid
            pod["spec"]["subdomain"] = _service_name(identity)
        return pod

    def _variables_of(self, platform: str, request: ResourceRequest) -> dict[str, Any]:
        """The ``USER_*`` variables of ``request`` on ``platform`` (tasks of a group mostly
        ask alike, and deriving every unit of the memory and storage is not free)."""
        key = (platform, request)
        if key not in self._resource_variables:
            defaults = self.platforms.get(platform).default_variables
            self._resource_variables[key] = resource_variables(request, defaults)
        return self._resource_variables[key]

    def _pod_labels(self, task: TaskIdentity) -> dict[str, str]:
        labels = {
            POOL_LABEL: self.submitter.pool,
            PLATFORM: task.platform,
            PRIORITY_LABEL: self.submitter.priority.lower(),
        }
        return {k: v for k, v in labels.items() if label_value_problem(v) is None}

    def _hosts(self, identity: GroupIdentity, tasks: Sequence[TaskIdentity]) -> dict[str, str]:
        """``{{host:<task>}}`` of every task of a multi-task group: its pod's DNS name."""
        domain = f"{_service_name(identity)}.{self.namespace}.svc.cluster.local"
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
                    "namespace": self.namespace,
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
        if self.scheduler.scheduler_type != "kai":
            return [], pods
        gang = [
            GangTask(task.name, pod["metadata"]["name"], self.spec.resource_of(task).topology)
            for task, pod in zip(group.tasks, pods, strict=True)
        ]
        queue = queue_name(self.namespace, self.submitter.pool)
        plan = build_pod_group(
            group_uuid=identity.group_uuid,
            namespace=self.namespace,
            queue=queue,
            priority_class=priority_class_name(self.submitter.priority),
            pool_keys=pool_topology_keys(self.pool),
            tasks=gang,
            topology_name=topology_crd_name(self.namespace, self.submitter.pool),
            labels=system_labels(identity),
        )
        for task, pod in zip(group.tasks, pods, strict=True):
            metadata = pod["metadata"]
            metadata["labels"].update(plan.pod_labels[task.name])
            metadata.setdefault("annotations", {}).update(plan.pod_annotations[task.name])
            pod["spec"]["schedulerName"] = self.scheduler.scheduler_name
        return [plan.manifest], pods

    def _service(self, identity: GroupIdentity) -> dict[str, Any]:
        """Headless: gives each pod of the group the DNS name ``{{host:<task>}}`` resolves to."""
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": _service_name(identity),
                "namespace": self.namespace,
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
            problems = manifest_problems(manifest) or _affinity_problems(manifest)
            if problems:
                name = manifest.get("metadata", {}).get("name", "?")
                listed = "; ".join(problems[:5])
                raise UserError(
                    f"Group {group.name}: the {manifest.get('kind')} {name} rendered from the "
                    f"pool's templates is not valid Kubernetes: {listed}. Check the pool's pod "
                    "and group templates (corral pool render) or the task's values."
                )


def _affinity_problems(manifest: Mapping[str, Any]) -> list[str]:
    """What the API server's validation (beyond the schema) refuses in a Pod's node affinity:
    unknown operators, values that do not suit the operator, weights outside 1..100."""
    spec = manifest.get("spec")
    if manifest.get("kind") != "Pod" or not isinstance(spec, Mapping):
        return []
    try:
        read_node_affinity(spec)
    except UserError as err:
        return [err.message]
    return []
