"""What every part of a workflow's step shares (``step.py``, ``evicted_step.py``): the
workflow, its pool's settings, the statuses it moves, the changes and effects it records, and
how a task or a group ends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from corral.backends.execution import TaskExecutor, TaskRun
from corral.backends.port import BackendError, ClusterBackend
from corral.domain.configs.snapshot import Configs
from corral.domain.workflows.exit_actions import pool_exit_actions
from corral.domain.workflows.record import (
    Changes,
    StoredGroup,
    StoredTask,
    StoredWorkflow,
    TaskAttempt,
    pod_of,
)
from corral.domain.workflows.statuses import TaskStatus
from corral.services.auth.task_tokens import TaskTokens
from corral.services.lifecycle.effects import Effect, StopTask
from corral.services.lifecycle.tick_report import TickReport

log = structlog.get_logger("corral.lifecycle")

#: A task in one of these holds a node (and may have a process to stop).
RUNNING_STATES = (TaskStatus.INITIALIZING, TaskStatus.RUNNING)


@dataclass(frozen=True)
class StepContext:
    """What a workflow's step reads besides its workflow, the same for every step of a tick."""

    configs: Configs
    now: datetime
    backend: ClusterBackend  # the workflow's, with the tick's cluster writes
    executor: TaskExecutor
    report: TickReport
    task_tokens: TaskTokens | None  # mints the tasks' own tokens (None: none are given)
    nodes_under_notice: frozenset[tuple[str, str]]  # (backend, node): a victim still stops
    #: Group uuid -> ticks its objects failed to be created with a transient error (the
    #: working set's: a step counts them).
    create_failures: dict[str, int]
    #: Raises ``LostLease`` unless the controller may still act (before any effect).
    check_leading: Callable[[], None]


class StepBase:
    """The state of one workflow's step and the moves every part of it makes."""

    def __init__(self, context: StepContext, workflow: StoredWorkflow) -> None:
        self.context = context
        self.backend = context.backend
        self.workflow = workflow
        self.report = context.report
        self.now = context.now
        configs = context.configs
        pool = configs.find_pool(workflow.pool)  # None: deleted while the workflow runs
        self.pool_actions = pool_exit_actions(pool.default_exit_actions if pool else {})
        self.in_maintenance = pool is not None and pool.enable_maintenance
        self.grace_seconds = pool.preemption.grace_seconds() if pool else 0.0
        self.notice_seconds = pool.preemption.notice_seconds() if pool else 0.0
        self.notice_signal = pool.preemption.notice_signal if pool else ""
        self.levels = tuple(key.label for key in pool.topology_keys) if pool else ()
        self.max_retry = configs.workflow.max_retry_per_task
        self.executor = context.executor
        self.changes = Changes()
        self.effects: list[Effect] = []
        self.group_status = {g.name: TaskStatus(g.status) for g in workflow.groups}
        self.task_status = {t.uuid: TaskStatus(t.status) for g in workflow.groups for t in g.tasks}

    # -- ending -----------------------------------------------------------------------------

    def _timed_out(self, group: StoredGroup, status: TaskStatus, limit_s: float) -> bool:
        """Whether ``group`` has been in ``status`` (queued: since SCHEDULING; running: since
        RUNNING) for longer than ``limit_s`` seconds."""
        if self.group_status[group.name] is not status:
            return False
        since = group.scheduling_at if status is TaskStatus.SCHEDULING else group.started_at
        return since is not None and self.now - since > timedelta(seconds=limit_s)

    def _end_group(self, group: StoredGroup, status: TaskStatus, message: str = "") -> None:
        """Stop whatever of ``group`` still runs; every unfinished task and the group end as
        ``status``."""
        if self.group_status[group.name].group_finished:
            return
        for task in group.tasks:
            self._end_task(task, status, message=message)
        self._set_group(group, status)

    def _end_task(
        self,
        task: StoredTask,
        status: TaskStatus,
        *,
        message: str = "",
        code: int | None = None,
        stop: bool = True,
        grace_s: float | None = None,
    ) -> None:
        if self.task_status[task.uuid].group_finished:
            return
        if stop and self.task_status[task.uuid] in RUNNING_STATES:
            run = self._run(task)
            self._keep_log(task, run)  # before stopping: a stopped pod takes its log with it
            self.effects.append(StopTask(run, grace_s))
        self.task_status[task.uuid] = status
        values: dict[str, Any] = {"status": status, "ended_at": self.now}
        if message:
            values["message"] = message
        if code is not None:
            values["exit_code"] = code
        self.changes.task(task.uuid, **values)
        self.report.finished_tasks += 1

    def _set_group(self, group: StoredGroup, status: TaskStatus) -> None:
        if self.group_status[group.name] is status:
            return
        self.group_status[group.name] = status
        values: dict[str, Any] = {"status": status}
        if status.group_finished:
            values["ended_at"] = self.now
        elif status is TaskStatus.RUNNING and group.started_at is None:
            values["started_at"] = self.now
        self.changes.group(group.uuid, **values)

    def _end_attempt(self, task: StoredTask, code: int | None, message: str) -> None:
        """Keep the attempt of ``task`` that ends now while the task goes on."""
        self.changes.attempts.append(
            TaskAttempt(
                task.uuid, task.retry_id, task.node, task.started_at, self.now, code, message
            )
        )

    # -- a task's attempt ------------------------------------------------------------------

    def _keep_log(self, task: StoredTask, run: TaskRun) -> None:
        """Keep an ending attempt's log in the database when the backend's copy goes away
        with its objects (a Kubernetes pod); a log that cannot be read now is not kept."""
        if self.executor.keeps_logs or task.started_at is None:
            return
        try:
            text = self.executor.logs(run)
        except BackendError as err:
            log.warning("could not keep a task's log", task_uuid=task.uuid, error=err.message)
            return
        self.changes.logs[(task.uuid, task.retry_id)] = text

    def _run(self, task: StoredTask, started_at: datetime | None = None) -> TaskRun:
        when = started_at or task.started_at or self.now
        return TaskRun(task.uuid, task.retry_id, pod_of(self.workflow, task), when)
