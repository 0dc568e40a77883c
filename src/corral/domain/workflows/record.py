"""What a workflow is while it lives: its groups and tasks as the controller, the scheduler,
the API and the dashboard read them, the changes the controller makes to them, and how a record
reads once those changes apply. The store maps these to rows and back
(``store/workflows/records.py``); nothing here touches a database.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from corral.domain.workflows.events import GangEvicted, GangStopped, NodeFaulted
from corral.domain.workflows.spec import ExitAction, TaskFileContents
from corral.domain.workflows.statuses import TaskStatus, WorkflowStatus
from corral.errors import NotFoundError


@dataclass(frozen=True)
class SharedReason:
    """Why the waiting groups of one shape wait, written for the pods ``pod_names``."""

    reason: str
    pod_names: tuple[str, ...]


@dataclass
class Changes:
    """Column updates by primary key, written together by :meth:`WorkflowStore.commit`."""

    workflows: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (task uuid, retry id) -> what the attempt printed, kept in the database.
    logs: dict[tuple[str, int], str] = field(default_factory=dict)
    #: Shape -> why its groups wait (``pending_shapes``).
    shapes: dict[str, SharedReason] = field(default_factory=dict)
    #: Inbox rows the controller has read and acted on.
    inbox_done: list[int] = field(default_factory=list)
    #: Gangs evicted by the scheduler.
    preemptions: list[GangEvicted] = field(default_factory=list)
    #: Groups a failed node ended or requeued.
    node_faults: list[NodeFaulted] = field(default_factory=list)
    #: Gangs a preemption, a reclaim or a drain stopped.
    eviction_stops: list[GangStopped] = field(default_factory=list)
    #: Attempts that ended while their task went on (``task_attempts``).
    attempts: list[TaskAttempt] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.workflows
            or self.groups
            or self.tasks
            or self.logs
            or self.shapes
            or self.inbox_done
            or self.preemptions
            or self.node_faults
            or self.eviction_stops
            or self.attempts
        )

    def merge(self, other: Changes) -> None:
        """Add ``other``'s changes (a later one wins per column)."""
        for mine, theirs in (
            (self.workflows, other.workflows),
            (self.groups, other.groups),
            (self.tasks, other.tasks),
        ):
            for key, values in theirs.items():
                mine.setdefault(key, {}).update(values)
        self.logs.update(other.logs)
        self.shapes.update(other.shapes)
        self.inbox_done.extend(other.inbox_done)
        self.preemptions.extend(other.preemptions)
        self.node_faults.extend(other.node_faults)
        self.eviction_stops.extend(other.eviction_stops)
        self.attempts.extend(other.attempts)

    def workflow(self, workflow_id: str, **values: Any) -> None:
        self.workflows.setdefault(workflow_id, {}).update(values)

    def group(self, group_uuid: str, **values: Any) -> None:
        self.groups.setdefault(group_uuid, {}).update(values)

    def task(self, task_uuid: str, **values: Any) -> None:
        self.tasks.setdefault(task_uuid, {}).update(values)


@dataclass(frozen=True)
class TaskAttempt:
    """An attempt of a task that ended while the task went on (docs/lifecycle.md#attempts):
    where and when it ran, its exit code and why it stopped."""

    task_uuid: str
    retry_id: int
    node: str | None
    started_at: datetime | None
    ended_at: datetime
    exit_code: int | None
    message: str | None


@dataclass(frozen=True)
class StoredTask:
    name: str
    uuid: str
    pod_name: str
    platform: str
    lead: bool
    status: TaskStatus
    retry_id: int
    node: str | None = None
    exit_code: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    message: str | None = None
    exit_actions: tuple[ExitAction, ...] = ()
    #: Its last committed checkpoint, as it reported it (None: never).
    checkpoint_at: datetime | None = None
    checkpoint_step: int | None = None
    checkpoint_note: str | None = None
    #: When it said it was ready to stop, after a notice (None: it did not).
    ready_at: datetime | None = None
    #: Its attempts before the current one, oldest first (read for the API and the pages only:
    #: the controller's records hold none).
    attempts: tuple[TaskAttempt, ...] = ()


@dataclass(frozen=True)
class StoredGroup:
    name: str
    uuid: str
    status: TaskStatus
    upstream: list[str]
    resource_kinds: list[list[str]]
    manifests: list[dict[str, Any]]
    tasks: list[StoredTask]
    ignore_non_lead: bool = True
    scheduling_at: datetime | None = None
    #: When it first waited for a scheduler: its place in the admission order.
    admitted_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    domains: dict[str, str] | None = None
    pending_reason: str | None = None
    cleaned: bool = False
    #: While it waits for corral's scheduler: the shape whose reason it shares.
    pending_shape: str | None = None
    #: Evicted by the scheduler: the next step stops its tasks and ends or requeues it.
    evict: bool = False
    #: Why it was last evicted.
    preempted_by: str | None = None
    #: Set with ``evict`` when a node under it failed: which, when and why.
    fault: str | None = None
    #: Set with ``evict`` by a drain: the grace period its tasks get to stop.
    stop_grace_s: float | None = None
    #: Set with ``evict`` once its tasks were given notice of the stop, and its deadline.
    notice_at: datetime | None = None
    notice_deadline: datetime | None = None


@dataclass(frozen=True)
class StoredWorkflow:
    workflow_id: str
    name: str
    uuid: str
    pool: str
    backend: str
    namespace: str
    status: WorkflowStatus
    priority: str
    submitted_by: str
    submitted_at: datetime
    exec_timeout_s: float
    queue_timeout_s: float
    spec: str
    template: str | None
    groups: list[StoredGroup]
    started_at: datetime | None = None
    ended_at: datetime | None = None
    cancel_requested_by: str | None = None
    message: str | None = None
    local_files: Mapping[str, TaskFileContents] = field(default_factory=dict)
    restarted_from: str | None = None
    #: Set by the controller when the workflow's stored state could not be read: it ends
    #: FAILED_SERVER_ERROR with this message (docs/lifecycle.md#a-workflow-that-cannot-be-read).
    failure: str | None = None


def with_changes(workflow: StoredWorkflow, changes: Changes) -> StoredWorkflow:
    """``workflow`` as it reads once ``changes`` are written (the controller's memory follows
    the database this way instead of reading the workflow again)."""
    groups = []
    for group in workflow.groups:
        changed = [task.uuid in changes.tasks for task in group.tasks]
        values = changes.groups.get(group.uuid, {})
        if any(changed):
            tasks = [
                _updated(task, changes.tasks[task.uuid]) if hit else task
                for task, hit in zip(group.tasks, changed, strict=True)
            ]
            values = {**values, "tasks": tasks}
        groups.append(_updated(group, values) if values else group)
    return _updated(workflow, {**changes.workflows.get(workflow.workflow_id, {}), "groups": groups})


_Record = TypeVar("_Record", StoredTask, StoredGroup, StoredWorkflow)


def _updated(record: _Record, values: Mapping[str, Any]) -> _Record:
    """``dataclasses.replace`` for these plain records, without its per-call introspection (a
    tick updates thousands of tasks in memory)."""
    unknown = set(values) - _FIELDS[type(record)]
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {sorted(unknown)}")
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__)
    new.__dict__.update(values)
    if "status" in values:  # a change may name it by its string, the record holds the enum
        new.__dict__["status"] = _STATUS[type(record)](values["status"])
    return new


_FIELDS = {
    kind: {f.name for f in dataclasses.fields(kind)}
    for kind in (StoredTask, StoredGroup, StoredWorkflow)
}
_STATUS: dict[type[Any], type[TaskStatus] | type[WorkflowStatus]] = {
    StoredTask: TaskStatus,
    StoredGroup: TaskStatus,
    StoredWorkflow: WorkflowStatus,
}


def pod_of(workflow: StoredWorkflow, task: StoredTask) -> dict[str, Any]:
    """The stored Pod manifest of ``task``."""
    for group in workflow.groups:
        for manifest in group.manifests:
            if manifest["kind"] == "Pod" and manifest["metadata"]["name"] == task.pod_name:
                return manifest
    raise LookupError(f"task {task.name} of {workflow.workflow_id} has no stored pod")


def attempt_of(task: StoredTask, retry_id: int | None) -> StoredTask:
    """``task`` as its attempt ``retry_id`` was (None: the current one); 404 naming the
    retries it has."""
    if retry_id is None or retry_id == task.retry_id:
        return task
    for attempt in task.attempts:
        if attempt.retry_id == retry_id:
            return dataclasses.replace(
                task,
                retry_id=attempt.retry_id,
                node=attempt.node,
                started_at=attempt.started_at,
                ended_at=attempt.ended_at,
                exit_code=attempt.exit_code,
                message=attempt.message,
            )
    known = [*(a.retry_id for a in task.attempts), task.retry_id]
    raise NotFoundError(
        f"Task {task.name} has no retry {retry_id}; its retries: "
        f"{', '.join(str(r) for r in known)}."
    )
