"""OSMO's status names for workflows, groups and tasks, and how they aggregate
(docs/osmo-reference.md#workflow-statuses). The exact strings are part of the user-facing
contract."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class WorkflowStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    WAITING = "WAITING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FAILED_SUBMISSION = "FAILED_SUBMISSION"
    FAILED_SERVER_ERROR = "FAILED_SERVER_ERROR"
    FAILED_EXEC_TIMEOUT = "FAILED_EXEC_TIMEOUT"
    FAILED_QUEUE_TIMEOUT = "FAILED_QUEUE_TIMEOUT"
    FAILED_CANCELED = "FAILED_CANCELED"
    FAILED_BACKEND_ERROR = "FAILED_BACKEND_ERROR"
    FAILED_IMAGE_PULL = "FAILED_IMAGE_PULL"
    FAILED_EVICTED = "FAILED_EVICTED"
    FAILED_START_ERROR = "FAILED_START_ERROR"
    FAILED_START_TIMEOUT = "FAILED_START_TIMEOUT"
    FAILED_PREEMPTED = "FAILED_PREEMPTED"

    @property
    def alive(self) -> bool:
        return self in (WorkflowStatus.PENDING, WorkflowStatus.RUNNING, WorkflowStatus.WAITING)

    @property
    def failed(self) -> bool:
        return self.value.startswith("FAILED")


class TaskStatus(StrEnum):
    """Statuses of tasks and of task groups (``RESCHEDULED`` is for tasks only)."""

    SUBMITTING = "SUBMITTING"
    WAITING = "WAITING"
    PROCESSING = "PROCESSING"
    SCHEDULING = "SCHEDULING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    RESCHEDULED = "RESCHEDULED"
    FAILED = "FAILED"
    FAILED_CANCELED = "FAILED_CANCELED"
    FAILED_SERVER_ERROR = "FAILED_SERVER_ERROR"
    FAILED_BACKEND_ERROR = "FAILED_BACKEND_ERROR"
    FAILED_EXEC_TIMEOUT = "FAILED_EXEC_TIMEOUT"
    FAILED_QUEUE_TIMEOUT = "FAILED_QUEUE_TIMEOUT"
    FAILED_IMAGE_PULL = "FAILED_IMAGE_PULL"
    FAILED_UPSTREAM = "FAILED_UPSTREAM"
    FAILED_EVICTED = "FAILED_EVICTED"
    FAILED_START_ERROR = "FAILED_START_ERROR"
    FAILED_START_TIMEOUT = "FAILED_START_TIMEOUT"
    FAILED_PREEMPTED = "FAILED_PREEMPTED"

    @property
    def failed(self) -> bool:
        return self.value.startswith("FAILED")

    @property
    def finished(self) -> bool:
        """A task is done with this attempt (a rescheduled task will run again)."""
        return self in (TaskStatus.COMPLETED, TaskStatus.RESCHEDULED) or self.failed

    @property
    def group_finished(self) -> bool:
        """Done for good: RESCHEDULED is not, the task runs again."""
        return self is TaskStatus.COMPLETED or self.failed

    @property
    def prescheduling(self) -> bool:
        return self in (TaskStatus.SUBMITTING, TaskStatus.WAITING, TaskStatus.PROCESSING)

    @property
    def in_queue(self) -> bool:
        return self.prescheduling or self is TaskStatus.SCHEDULING

    @property
    def prerunning(self) -> bool:
        return self.in_queue or self is TaskStatus.INITIALIZING

    @property
    def canceled(self) -> bool:
        return self in (
            TaskStatus.FAILED_CANCELED,
            TaskStatus.FAILED_EXEC_TIMEOUT,
            TaskStatus.FAILED_QUEUE_TIMEOUT,
        )

    @property
    def holds_nodes(self) -> bool:
        """Bound: its pods hold their nodes' resources (a group or a task)."""
        return self in (TaskStatus.INITIALIZING, TaskStatus.RUNNING)


#: Workflow statuses the controller still works on (in order: a query names them).
ALIVE = tuple(status for status in WorkflowStatus if status.alive)
#: Alive workflows none of whose groups started yet.
QUEUED = tuple(status for status in ALIVE if status is not WorkflowStatus.RUNNING)
#: Groups and tasks whose pods hold their nodes.
HOLDS_NODES = frozenset(status for status in TaskStatus if status.holds_nodes)
#: Groups and tasks not placed yet: before a scheduler, or waiting for one.
IN_QUEUE = frozenset(status for status in TaskStatus if status.in_queue)
#: Statuses at acceptance (OSMO: workflow PENDING, groups SUBMITTING, tasks WAITING).
WORKFLOW_ACCEPTED = WorkflowStatus.PENDING
GROUP_ACCEPTED = TaskStatus.SUBMITTING
TASK_ACCEPTED = TaskStatus.WAITING


@dataclass(frozen=True)
class TaskState:
    """The latest attempt of a task, as group aggregation sees it."""

    status: TaskStatus
    lead: bool = False


def group_status(tasks: Sequence[TaskState], *, ignore_non_lead_status: bool) -> TaskStatus:
    """A group's status from its tasks' (OSMO's ``TaskGroup._aggregate_status``).

    With ``ignore_non_lead_status`` only the lead decides how a finished group ended; upstream
    failures, server errors and preemptions of any task always count.
    """
    considered = [t for t in tasks if t.lead] if ignore_non_lead_status else list(tasks)
    statuses = [t.status for t in tasks]
    if not all(status.group_finished for status in statuses):
        running = any(s is TaskStatus.RUNNING or s.finished for s in statuses)
        return TaskStatus.RUNNING if running else TaskStatus.INITIALIZING
    for overriding in (
        TaskStatus.FAILED_UPSTREAM,
        TaskStatus.FAILED_SERVER_ERROR,
        TaskStatus.FAILED_PREEMPTED,
    ):
        if overriding in statuses:
            return overriding
    decisive = [t.status for t in considered]
    if TaskStatus.FAILED_EVICTED in decisive:
        return TaskStatus.FAILED_EVICTED
    if any(status.failed for status in decisive):
        return TaskStatus.FAILED
    if decisive and all(status is TaskStatus.COMPLETED for status in decisive):
        return TaskStatus.COMPLETED
    return TaskStatus.RUNNING


_WORKFLOW_OVERRIDES = (
    TaskStatus.FAILED_CANCELED,
    TaskStatus.FAILED_SERVER_ERROR,
    TaskStatus.FAILED_EXEC_TIMEOUT,
    TaskStatus.FAILED_QUEUE_TIMEOUT,
)


def workflow_status(groups: Sequence[TaskStatus]) -> WorkflowStatus:
    """A workflow's status from its groups' (OSMO's ``Workflow._aggregate_status``; a group left
    RESCHEDULED counts as finished there, and keeps the workflow RUNNING)."""
    if not all(status.finished for status in groups):
        return WorkflowStatus.RUNNING if TaskStatus.RUNNING in groups else WorkflowStatus.PENDING
    for overriding in _WORKFLOW_OVERRIDES:
        if overriding in groups:
            return WorkflowStatus(overriding.value)
    failed = [status for status in groups if status.failed]
    if failed:
        own = {status for status in failed if status is not TaskStatus.FAILED_UPSTREAM}
        if len(own) == 1:
            only = own.pop().value
            if only in WorkflowStatus.__members__:
                return WorkflowStatus(only)
        return WorkflowStatus.FAILED
    if all(status is TaskStatus.COMPLETED for status in groups):
        return WorkflowStatus.COMPLETED
    return WorkflowStatus.RUNNING
