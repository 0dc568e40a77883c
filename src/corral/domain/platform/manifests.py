"""Rendering the Kubernetes objects of a task group from a pool's templates.

Order of layers for a pod (docs/templates.md#merging-pod-templates): corral's base pod, then the
platform's merged pod template rendered with the task's variables (the template wins), then the
system labels again (templates cannot change ``osmo.*``). Group templates
(docs/templates.md#group-templates) are rendered once per group, lose any namespace, and get labels
workflow < template < system.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from corral.domain.formats.json_paths import Path, format_path
from corral.domain.jinja.compiled_tree import RenderMemo
from corral.domain.jinja.rendering import render_tree
from corral.domain.labels import CONTROL_CONTAINER, RETRY_ID, TASK_NAME, TASK_UUID
from corral.domain.platform.resolved_pool import GroupTemplate
from corral.domain.platform.template_merge import MergedTemplate, merge_given
from corral.domain.platform.variables import (
    GroupIdentity,
    TaskIdentity,
    container_name,
    system_labels,
)
from corral.domain.schemas.field_types import FieldType, expected_type

#: OSMO's control sidecar; pool templates set its requests (docs/templates.md).


def render_pod_template(
    merged: MergedTemplate, variables: Mapping[str, Any], memo: RenderMemo | None = None
) -> dict[str, Any]:
    """The merged pod template with its variables rendered; errors name the template. The
    pods of one submission share a ``memo`` (``compiled_tree.py``)."""

    def describe(path: Path) -> str:
        writers = merged.writers.get(path, [])
        names = ", ".join(dict.fromkeys(name for name, _ in writers)) or "?"
        return f"pod template {names}, field {format_path(path)}"

    return merged.compiled.render(variables, describe=describe, type_of=_pod_type, memo=memo)


def render_group_templates(
    templates: Sequence[GroupTemplate],
    variables: Mapping[str, Any],
    group: GroupIdentity,
    workflow_labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The group's extra objects, in creation order, ready for the group's namespace."""
    return [
        _render_group_template(template, variables, group, workflow_labels or {})
        for template in templates
    ]


def _render_group_template(
    template: GroupTemplate,
    variables: Mapping[str, Any],
    group: GroupIdentity,
    workflow_labels: Mapping[str, str],
) -> dict[str, Any]:
    manifest = copy.deepcopy(template.manifest)
    manifest.get("metadata", {}).pop("namespace", None)
    api_version, kind = manifest["apiVersion"], manifest["kind"]

    def describe(path: Path) -> str:
        return f"group template {', '.join(template.sources)}, field {format_path(path)}"

    def type_of(path: Path) -> FieldType | None:
        return expected_type(api_version, kind, path)

    rendered: dict[str, Any] = render_tree(manifest, variables, describe=describe, type_of=type_of)
    metadata = rendered.setdefault("metadata", {})
    own_labels = metadata.get("labels") or {}
    metadata["labels"] = {**workflow_labels, **own_labels, **system_labels(group)}
    return rendered


@dataclass(frozen=True)
class PodTask:
    """The parts of a task that shape its pod (the workflow spec fills these in)."""

    identity: TaskIdentity
    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    privileged: bool = False
    host_network: bool = False
    gpu_requested: bool = False


def task_labels(group: GroupIdentity, task: TaskIdentity) -> dict[str, str]:
    return {
        **system_labels(group),
        TASK_NAME: container_name(task.name),
        TASK_UUID: task.uuid,
        RETRY_ID: str(task.retry_id),
    }


def build_pod(
    task: PodTask,
    group: GroupIdentity,
    rendered_template: dict[str, Any],
    workflow_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The task's Pod: base pod, then the rendered template on top, then system labels. The
    rendered template is given away: its parts become the pod's."""
    labels = task_labels(group, task.identity)
    environment = dict(task.environment)
    if not task.gpu_requested:  # without GPUs requested, see none (as OSMO)
        environment["NVIDIA_VISIBLE_DEVICES"] = ""
    container: dict[str, Any] = {
        "name": container_name(task.identity.name),
        "image": task.image,
        "env": [{"name": key, "value": value} for key, value in environment.items()],
    }
    if task.command:
        container["command"] = list(task.command)
    if task.args:
        container["args"] = list(task.args)
    if task.privileged:
        container["securityContext"] = {"privileged": True}
    base = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group.workflow_uuid[:16]}-{task.identity.uuid[:16]}",
            "labels": {**(workflow_labels or {}), **labels},
        },
        "spec": {
            "restartPolicy": "Never",
            "hostNetwork": task.host_network,
            "containers": [container],
        },
    }
    pod = merge_given(base, rendered_template)
    own = pod["metadata"].get("labels")
    pod["metadata"]["labels"] = {**(own if isinstance(own, dict) else {}), **labels}
    return pod


def drop_imageless_control_container(pod: dict[str, Any]) -> None:
    """OSMO injects its own ``osmo-ctrl`` sidecar image; pool templates only give its requests.
    corral has no sidecar: a control container without an image is left out of the pod (its
    requests still count in node capacity, see task_validation), one with an image is kept."""
    containers = pod["spec"].get("containers")
    if not isinstance(containers, list):
        return  # the schema check reports it
    pod["spec"]["containers"] = [c for c in containers if not _imageless_control(c)]


def _imageless_control(container: object) -> bool:
    """Whether ``container`` is the control container without an image (anything that is not
    a mapping stays, for the schema check to report)."""
    return (
        isinstance(container, dict)
        and container.get("name") == CONTROL_CONTAINER
        and not container.get("image")
    )


@lru_cache(maxsize=4096)  # every pod of a template asks for the same fields
def _pod_type(path: Path) -> FieldType | None:
    return expected_type("v1", "Pod", path)
