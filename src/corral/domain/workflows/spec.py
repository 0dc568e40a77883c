"""The workflow file (OSMO spec version 2) as a normalised, validated model.

The readers are ``spec_reader`` (positions and shapes), ``spec_parser`` (the top level and
groups), ``spec_tasks`` (tasks) and ``spec_resources`` (resource specs, timeouts);
``spec_parser.parse_workflow_spec`` is the entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from corral.domain.topology.podgroup import TopologyRequirement

# ----------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class ResourceSpec:
    """A named entry of ``workflow.resources``."""

    cpu: int | None = None
    gpu: int | None = None
    memory: str | None = None
    storage: str | None = None
    platform: str | None = None
    nodes_excluded: tuple[str, ...] = ()
    topology: tuple[TopologyRequirement, ...] = ()


@dataclass(frozen=True)
class TaskInput:
    """``{task: name | <workflow_id>:name}`` or ``{url: ...}``, with an optional regex."""

    task: str | None = None
    url: str | None = None
    regex: str | None = None


@dataclass(frozen=True)
class TaskOutput:
    url: str
    regex: str | None = None


@dataclass(frozen=True)
class TaskFile:
    path: str
    contents: str
    base64: bool = False


@dataclass(frozen=True)
class TaskFileContents:
    """A local file the CLI read for ``files[].localpath``: text, or base64 for binary."""

    contents: str
    base64: bool = False


@dataclass(frozen=True)
class ExitAction:
    """``COMPLETE``, ``FAIL`` or ``RESCHEDULE`` for the inclusive exit-code ``ranges``."""

    action: str
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    lead: bool = False
    environment: Mapping[str, str] = field(default_factory=dict)
    credentials: Mapping[str, str | Mapping[str, str]] = field(default_factory=dict)
    inputs: tuple[TaskInput, ...] = ()
    outputs: tuple[TaskOutput, ...] = ()
    files: tuple[TaskFile, ...] = ()
    volume_mounts: tuple[str, ...] = ()
    privileged: bool = False
    host_network: bool = False
    resource: str = "default"
    exit_actions: tuple[ExitAction, ...] = ()
    cache_size: str | None = None
    #: corral only: at most this much notice before a preemption, a reclaim or a drain stops
    #: the task (shorter than the pool's; docs/checkpoints.md#the-notice). None: the pool's.
    stop_notice: timedelta | None = None
    #: corral only: the signal a local task gets with that notice (``SIGUSR1``...; "" for none).
    #: None: the pool's ``preemption.notice_signal``, by default none.
    notice_signal: str | None = None
    #: Accepted but not interpreted here (``checkpoint``, ``downloadType``, ``kpis``), verbatim.
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupSpec:
    name: str
    tasks: tuple[TaskSpec, ...]
    barrier: bool = True
    ignore_non_lead_status: bool = True
    #: Groups whose tasks this group's tasks take as input, in declaration order.
    upstream: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timeouts:
    exec_timeout: timedelta | None = None
    queue_timeout: timedelta | None = None


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    groups: tuple[GroupSpec, ...]
    resources: Mapping[str, ResourceSpec]
    labels: Mapping[str, str]
    timeout: Timeouts
    uses_groups: bool

    def tasks(self) -> list[TaskSpec]:
        """Every task, group by group, in declaration order."""
        return [task for group in self.groups for task in group.tasks]

    def resource_of(self, task: TaskSpec) -> ResourceSpec:
        """The resource spec ``task`` uses (parsing checked that it exists)."""
        return self.resources[task.resource]


@dataclass(frozen=True)
class PreviousInput:
    """An input ``{task: "<workflow_id>:<task>"}``: a task of an earlier workflow."""

    workflow_id: str
    task: str
    #: Where the input's ``task`` field is in the workflow document.
    path: tuple[str | int, ...]

    @property
    def reference(self) -> str:
        return f"{self.workflow_id}:{self.task}"


def previous_inputs(spec: WorkflowSpec) -> list[PreviousInput]:
    """Every input of ``spec`` that names a task of an earlier workflow, with its place."""
    found = []
    flat = 0
    for group_index, group in enumerate(spec.groups):
        for task_index, task in enumerate(group.tasks):
            where: tuple[str | int, ...] = (
                ("workflow", "groups", group_index, "tasks", task_index)
                if spec.uses_groups
                else ("workflow", "tasks", flat)
            )
            flat += 1
            for input_index, item in enumerate(task.inputs):
                if item.task is not None and ":" in item.task:
                    workflow_id, _, name = item.task.partition(":")
                    path = (*where, "inputs", input_index, "task")
                    found.append(PreviousInput(workflow_id.strip(), name.strip(), path))
    return found
