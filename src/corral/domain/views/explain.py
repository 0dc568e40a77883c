"""Why each group of a workflow is where it is, in the user's terms (``corral workflow explain``).

Pure: it reads a workflow (anything shaped like
``corral.domain.workflows.record.StoredWorkflow``, as the protocols below say) and the current
time.
Statuses are OSMO's (docs/osmo-reference.md#workflow-statuses); a status corral does not know is
shown as is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from corral.domain.views.node_ranges import node_ranges
from corral.domain.views.start_forecast import GroupForecast, forecast_text
from corral.domain.views.stop_cost import StopCost
from corral.domain.workflows.statuses import TaskStatus, WorkflowStatus


class TaskView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def node(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def retry_id(self) -> int: ...
    @property
    def message(self) -> str | None: ...


class GroupView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def uuid(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def upstream(self) -> Sequence[str]: ...
    @property
    def tasks(self) -> Sequence[TaskView]: ...
    @property
    def scheduling_at(self) -> datetime | None: ...
    @property
    def started_at(self) -> datetime | None: ...
    @property
    def domains(self) -> Mapping[str, str] | None: ...
    @property
    def pending_reason(self) -> str | None: ...
    @property
    def preempted_by(self) -> str | None: ...
    @property
    def fault(self) -> str | None: ...


class WorkflowView(Protocol):
    @property
    def workflow_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def pool(self) -> str: ...
    @property
    def exec_timeout_s(self) -> float: ...
    @property
    def queue_timeout_s(self) -> float: ...
    @property
    def cancel_requested_by(self) -> str | None: ...
    @property
    def message(self) -> str | None: ...
    @property
    def groups(self) -> Sequence[GroupView]: ...


@dataclass(frozen=True)
class GroupExplanation:
    name: str
    status: str
    reason: str
    #: Where each task is, when ``reason`` sums a large group up ("" each: not summed up).
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkflowExplanation:
    workflow_id: str
    status: str
    summary: str
    groups: tuple[GroupExplanation, ...]


SCHEDULER_PENDING = "waiting for the scheduler"
#: A group of more tasks than this is summed up in its line, its tasks listed apart.
SUMMED_UP_ABOVE = 4

E = TypeVar("E", TaskStatus, WorkflowStatus)

_HEADLINES = {
    TaskStatus.COMPLETED: "completed",
    TaskStatus.FAILED: "failed",
    TaskStatus.FAILED_PREEMPTED: "preempted by higher-priority work",
    TaskStatus.FAILED_EVICTED: "evicted from its node",
    TaskStatus.FAILED_IMAGE_PULL: "an image could not be pulled",
    TaskStatus.FAILED_START_ERROR: "a task could not start",
    TaskStatus.FAILED_START_TIMEOUT: "a task did not start in time",
    TaskStatus.FAILED_BACKEND_ERROR: "the backend failed",
    TaskStatus.FAILED_SERVER_ERROR: "the server failed",
}


def explain_workflow(
    workflow: WorkflowView,
    now: datetime,
    *,
    pool_in_maintenance: bool = False,
    forecasts: Mapping[str, GroupForecast] | None = None,
    stops: Mapping[str, StopCost] | None = None,
) -> WorkflowExplanation:
    """One line per group; ``pool_in_maintenance`` is noted on groups that wait to start, a
    waiting group's forecast (by group uuid) is added to its line, and so is what its latest
    stop by a preemption, a reclaim or a drain cost (``stops``, by group uuid)."""
    by_name = {group.name: group for group in workflow.groups}
    groups = tuple(
        GroupExplanation(
            group.name,
            group.status,
            _with_stop(
                _with_forecast(
                    _group_reason(workflow, group, by_name, now, pool_in_maintenance),
                    group,
                    (forecasts or {}).get(group.uuid),
                    now,
                ),
                (stops or {}).get(group.uuid),
            ),
            _details(group),
        )
        for group in workflow.groups
    )
    return WorkflowExplanation(workflow.workflow_id, workflow.status, _summary(workflow), groups)


def _with_stop(reason: str, stop: StopCost | None) -> str:
    return reason if stop is None else f"{reason}; {stop.text()}"


def _with_forecast(
    reason: str, group: GroupView, forecast: GroupForecast | None, now: datetime
) -> str:
    if forecast is None or group.status != TaskStatus.SCHEDULING.value:
        return reason
    return f"{reason}; {forecast_text(forecast, now)}"


def _summary(workflow: WorkflowView) -> str:
    status = _known(WorkflowStatus, workflow.status)
    if status is None:
        text = f"status {workflow.status}"
    elif status.alive and workflow.cancel_requested_by:
        text = f"cancel requested by {workflow.cancel_requested_by}; its groups are being stopped"
    elif status is WorkflowStatus.PENDING and (back := _back_in_queue(workflow)):
        text = back
    elif status is WorkflowStatus.PENDING:
        text = "no group is running yet"
    elif status is WorkflowStatus.RUNNING:
        text = "running"
    elif status is WorkflowStatus.WAITING:
        text = "started; nothing is running right now"
    elif status is WorkflowStatus.COMPLETED:
        text = "completed"
    elif status is WorkflowStatus.FAILED_CANCELED and workflow.cancel_requested_by:
        text = f"canceled by {workflow.cancel_requested_by}"
    else:
        text = f"ended {status.value}"
    return f"{text}: {workflow.message}" if workflow.message else text


def _back_in_queue(workflow: WorkflowView) -> str:
    """What a pending workflow whose groups ran before says: which were put back, and why
    (a fault, a drain, a preemption); "" when none ran."""
    back = [
        group
        for group in workflow.groups
        if group.status == TaskStatus.SCHEDULING.value
        and any(task.retry_id for task in group.tasks)
    ]
    if not back:
        return ""
    group = back[0]
    retry = max(task.retry_id for task in group.tasks)
    why = group.fault or _stopped_by(group.preempted_by)
    cause = f" after {why}" if why else ""
    return f"group {group.name} ran before and is back in the queue{cause}; retry {retry} waits"


def _stopped_by(preempted_by: str | None) -> str:
    """Who stopped a group: a drain names itself ("the drain of node N by alice"), anything
    else preempted it."""
    if not preempted_by:
        return ""
    if preempted_by.startswith("the drain of"):
        return preempted_by
    return f"it was preempted by {preempted_by}"


def _group_reason(
    workflow: WorkflowView,
    group: GroupView,
    by_name: Mapping[str, GroupView],
    now: datetime,
    maintenance: bool,
) -> str:
    status = _known(TaskStatus, group.status)
    if status is None:
        return f"status {group.status}"
    if status.prescheduling:
        return _before_scheduling(workflow, group, status, by_name, maintenance)
    if status is TaskStatus.SCHEDULING:
        reason = group.pending_reason or SCHEDULER_PENDING
        if group.fault:
            reason = f"{reason}; back in the queue after {group.fault}"
        elif group.preempted_by:
            reason = f"{reason}; back in the queue after {_stopped_by(group.preempted_by)}"
        queued = f"queued for {_elapsed(now, group.scheduling_at)}" if group.scheduling_at else ""
        limit = f"the {_span(workflow.queue_timeout_s)} queue timeout"
        return f"{reason}; {queued} of {limit}" if queued else f"{reason}; {limit} applies"
    if status in (TaskStatus.INITIALIZING, TaskStatus.RUNNING):
        return _where_it_runs(workflow, group, status, now)
    return _how_it_ended(workflow, group, status, by_name)


def _before_scheduling(
    workflow: WorkflowView,
    group: GroupView,
    status: TaskStatus,
    by_name: Mapping[str, GroupView],
    maintenance: bool,
) -> str:
    upstream = [by_name[name] for name in group.upstream if name in by_name]
    failed = [u.name for u in upstream if _failed(u.status)]
    if failed:
        return f"will not run: upstream {_groups(failed)} failed"
    waiting = [u.name for u in upstream if u.status != TaskStatus.COMPLETED.value]
    if waiting:
        return f"waiting for upstream {_groups(waiting)}"
    if status is TaskStatus.PROCESSING:
        return "its pods are being created"
    if maintenance:
        return f"waiting to start; pool {workflow.pool} is in maintenance"
    return "waiting to start"


def _details(group: GroupView) -> tuple[str, ...]:
    """Each task's place, when the group's line sums its tasks up."""
    status = _known(TaskStatus, group.status)
    if status not in (TaskStatus.INITIALIZING, TaskStatus.RUNNING):
        return ()
    if len(group.tasks) <= SUMMED_UP_ABOVE:
        return ()
    return tuple(_task_place(task) for task in group.tasks)


def _tasks_text(tasks: Sequence[TaskView]) -> str:
    """Where the tasks are, each (a few), or summed up: ``16 tasks on`` and their nodes'
    runs (``node_ranges``) ``(retry 1)``, then those waiting or ended."""
    if len(tasks) <= SUMMED_UP_ABOVE:
        return ", ".join(_task_place(task) for task in tasks)
    placed = [t for t in tasks if t.node and not _ended(t)]
    parts = []
    if placed:
        retries = {t.retry_id for t in placed}
        retry = f" (retry {retries.pop()})" if len(retries) == 1 and 0 not in retries else ""
        many = "s" if len(placed) != 1 else ""
        nodes = node_ranges([t.node for t in placed if t.node])
        parts.append(f"{len(placed)} task{many} on {nodes}{retry}")
    waiting = [t for t in tasks if not t.node and not _ended(t)]
    if waiting:
        parts.append(f"{len(waiting)} waiting for a node")
    ended = [_task_outcome(t) for t in tasks if _ended(t)]
    if ended:
        shown = ", ".join(ended[:3]) + (f" and {len(ended) - 3} more" if len(ended) > 3 else "")
        parts.append(f"{len(ended)} ended: {shown}")
    return "; ".join(parts)


def _ended(task: TaskView) -> bool:
    status = _known(TaskStatus, task.status)
    return status is not None and status.finished


def _where_it_runs(
    workflow: WorkflowView, group: GroupView, status: TaskStatus, now: datetime
) -> str:
    verb = "running" if status is TaskStatus.RUNNING else "initializing"
    tasks = _tasks_text(group.tasks)
    text = f"{verb}{_domains(group.domains)}; {tasks}"
    if status is TaskStatus.RUNNING and group.started_at is not None:
        text += (
            f"; for {_elapsed(now, group.started_at)} of the "
            f"{_span(workflow.exec_timeout_s)} exec timeout"
        )
    return text


def _how_it_ended(
    workflow: WorkflowView,
    group: GroupView,
    status: TaskStatus,
    by_name: Mapping[str, GroupView],
) -> str:
    if status is TaskStatus.FAILED_UPSTREAM:
        failed = [n for n in group.upstream if n in by_name and _failed(by_name[n].status)]
        if not failed:
            return "did not run: an upstream group failed"
        return f"did not run: upstream {_groups(failed)} failed"
    details = [_task_outcome(task) for task in group.tasks if _has_outcome(task)]
    if status is TaskStatus.FAILED_QUEUE_TIMEOUT:
        headline = f"not scheduled within the {_span(workflow.queue_timeout_s)} queue timeout"
        details = [f"last scheduler reason: {group.pending_reason}"] if group.pending_reason else []
    elif status is TaskStatus.FAILED_EXEC_TIMEOUT:
        headline = f"still running after the {_span(workflow.exec_timeout_s)} exec timeout"
    elif status is TaskStatus.FAILED_CANCELED:
        by = workflow.cancel_requested_by
        headline = f"canceled by {by}" if by else "canceled"
    elif status is TaskStatus.FAILED_PREEMPTED and group.preempted_by:
        headline = f"preempted by {group.preempted_by}"
        details = []  # every task says the same
    elif status in _HEADLINES:
        headline = _HEADLINES[status]
    else:
        headline = f"ended {status.value}"
    return f"{headline}: {', '.join(details)}" if details else headline


def _task_place(task: TaskView) -> str:
    retry = f" (retry {task.retry_id})" if task.retry_id else ""
    status = _known(TaskStatus, task.status)
    if status is not None and status.finished:
        return _task_outcome(task) + retry
    if task.node:
        return f"{task.name} on {task.node}{retry}"
    return f"{task.name} waiting for a node{retry}"


def _has_outcome(task: TaskView) -> bool:
    return task.exit_code is not None or bool(task.message)


def _task_outcome(task: TaskView) -> str:
    text = task.name
    text += f" exited {task.exit_code}" if task.exit_code is not None else f" {task.status}"
    return f"{text} ({task.message})" if task.message else text


def _domains(domains: Mapping[str, str] | None) -> str:
    """`` in domain D (set in D1, ...)``; "" is the group's own set."""
    if not domains:
        return ""
    own = domains.get("")
    subsets = [f"{name} in {domains[name]}" for name in sorted(domains) if name]
    text = f" in domain {own}" if own else ""
    if subsets:
        text += f" ({', '.join(subsets)})"
    return text


def _groups(names: Sequence[str]) -> str:
    return f"group {names[0]}" if len(names) == 1 else f"groups {', '.join(names)}"


def _failed(status: str) -> bool:
    return status.startswith(TaskStatus.FAILED)  # FAILED and every FAILED_*


def _known(kind: type[E], value: str) -> E | None:
    try:
        return kind(value)
    except ValueError:
        return None


def _elapsed(now: datetime, since: datetime | None) -> str:
    """How long since ``since``: seconds under a minute, else minutes (no seconds)."""
    seconds = max(0.0, (now - since).total_seconds()) if since else 0.0
    if seconds < 60:
        return f"{int(seconds)}s"
    return _span(seconds - seconds % 60)


def _span(seconds: float) -> str:
    """``1h 30m``, ``45s``, ``2d``: the nonzero units, largest first."""
    left = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts) or "0s"
