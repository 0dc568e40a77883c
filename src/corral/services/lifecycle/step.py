"""One workflow's step of a lifecycle tick (docs/lifecycle.md#a-workflows-step): decide, then
commit.

:meth:`WorkflowStep.decide` only reads — the stored workflow, the exits and logs of its tasks,
whether corral may create a group's kinds — and records each decision: the database changes, and
the effects on the cluster (tasks to start or stop, groups whose objects to apply), in the order
they were taken. Nothing on the cluster changes while deciding.

:meth:`WorkflowStep.apply` applies the effects in that order, folds what creating each group
answered into the decisions (scheduling, a retry, or a failure) and aggregates the workflow's
status; the controller then writes every step's changes in one transaction. A start or stop
that fails drops the step's changes (a later tick decides it again). Every effect is
idempotent, so redoing one after a crash is safe.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog

from corral.backends.execution import TaskExecutor, TaskRun
from corral.backends.port import BackendError, ClusterBackend
from corral.domain.configs.snapshot import Configs
from corral.domain.workflows.exit_actions import exit_outcome, pool_exit_actions
from corral.domain.workflows.group_order import GroupState, failed_downstream, ready_groups
from corral.domain.workflows.record import Changes, StoredGroup, StoredTask, StoredWorkflow, pod_of
from corral.domain.workflows.statuses import TaskState, TaskStatus, group_status, workflow_status
from corral.services.lifecycle.creation_errors import (
    creation_failure,
    permission_message,
    priority_class_message,
    priority_classes,
)
from corral.services.lifecycle.effects import (
    CreateGroup,
    Effect,
    NotifyTask,
    StartTask,
    StopTask,
)
from corral.services.lifecycle.evictions import eviction_of
from corral.services.lifecycle.notices import (
    Answers,
    answers,
    eviction_stop,
    keep_checkpoints,
    notice_of,
    relayed_checkpoint,
    stop_due,
)
from corral.services.lifecycle.tick_report import TickReport
from corral.services.task_tokens import TaskTokens, group_tokens

log = structlog.get_logger("corral.lifecycle")

UPSTREAM_FAILED_CODE = 3000
#: A task in one of these holds a node (and may have a process to stop).
_RUNNING_STATES = (TaskStatus.INITIALIZING, TaskStatus.RUNNING)


class Controller(Protocol):
    """What a step needs of the lifecycle controller."""

    #: Group uuid -> ticks its objects failed to be created with a transient error.
    create_failures: dict[str, int]
    task_tokens: TaskTokens | None  # mints the tasks' own tokens (None: none are given)
    nodes_under_notice: frozenset[tuple[str, str]]  # (backend, node): a victim still stops

    def check_leading(self) -> None: ...


class WorkflowStep:
    """Step 1 of a tick for one workflow (``services/lifecycle/controller.py``)."""

    def __init__(
        self,
        controller: Controller,
        workflow: StoredWorkflow,
        configs: Configs,
        report: TickReport,
        backend: ClusterBackend,
        executor: TaskExecutor,
        now: datetime,
    ) -> None:
        self.controller = controller
        self.backend = backend
        self.workflow = workflow
        self.report = report
        self.now = now
        pool = configs.find_pool(workflow.pool)  # None: deleted while the workflow runs
        self.pool_actions = pool_exit_actions(pool.default_exit_actions if pool else {})
        self.in_maintenance = pool is not None and pool.enable_maintenance
        self.grace_seconds = pool.preemption.grace_seconds() if pool else 0.0
        self.notice_seconds = pool.preemption.notice_seconds() if pool else 0.0
        self.notice_signal = pool.preemption.notice_signal if pool else ""
        self.levels = tuple(key.label for key in pool.topology_keys) if pool else ()
        self.max_retry = configs.workflow.max_retry_per_task
        self.executor = executor
        self.changes = Changes()
        self.effects: list[Effect] = []
        self.group_status = {g.name: TaskStatus(g.status) for g in workflow.groups}
        self.task_status = {t.uuid: TaskStatus(t.status) for g in workflow.groups for t in g.tasks}

    # -- deciding ---------------------------------------------------------------------------

    def decide(self) -> None:
        canceled = self.workflow.cancel_requested_by is not None
        for group in self.workflow.groups:
            if self.workflow.failure:  # its stored state could not be read
                self._end_group(group, TaskStatus.FAILED_SERVER_ERROR, self.workflow.failure)
            elif canceled:
                message = " ".join(
                    part
                    for part in (
                        f"Canceled by {self.workflow.cancel_requested_by}.",
                        self.workflow.message,
                    )
                    if part
                )
                self._end_group(group, TaskStatus.FAILED_CANCELED, message)
            elif self._timed_out(group, TaskStatus.SCHEDULING, self.workflow.queue_timeout_s):
                self._end_group(group, TaskStatus.FAILED_QUEUE_TIMEOUT, "Queue timeout.")
            elif group.evict:
                self._evicted(group)
            elif self._timed_out(group, TaskStatus.RUNNING, self.workflow.exec_timeout_s):
                self._end_group(group, TaskStatus.FAILED_EXEC_TIMEOUT, "Exec timeout.")
            elif self.group_status[group.name] in _RUNNING_STATES:
                self._follow_tasks(group)
        self._fail_downstream()
        self._start_ready_groups()

    # -- applying ---------------------------------------------------------------------------

    def apply(self) -> None:
        """Apply the effects in decision order; ``changes`` then holds what to write."""
        for effect in self.effects:
            self.controller.check_leading()
            if isinstance(effect, StartTask):
                self.executor.start(effect.run)
            elif isinstance(effect, StopTask):
                # idempotent, also for a never-started attempt
                self.executor.stop(effect.run, effect.grace_seconds)
            elif isinstance(effect, NotifyTask):
                self.executor.notify(effect.run, effect.notice)
            else:
                self._apply_group(effect.group)
        self._aggregate()

    def _apply_group(self, group: StoredGroup) -> None:
        """Apply the group's objects in their stored order (group templates first), then hand
        it to the scheduler. An error in between re-applies: existing objects stay as they
        are."""
        try:
            minted = self.controller.task_tokens if self.backend.takes_task_tokens else None
            tokens = group_tokens(minted, self.workflow.workflow_id, group)
            self.backend.apply_all(group.manifests, self.workflow.namespace, tokens)
        except BackendError as err:
            self._creation_failed(group, err)
            return
        self.controller.create_failures.pop(group.uuid, None)
        self.group_status[group.name] = TaskStatus.SCHEDULING
        self.changes.group(group.uuid, status=TaskStatus.SCHEDULING.value, scheduling_at=self.now)
        for task in group.tasks:
            self.task_status[task.uuid] = TaskStatus.SCHEDULING
            self.changes.task(task.uuid, status=TaskStatus.SCHEDULING.value)
        self.report.created_groups += 1

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
        if stop and self.task_status[task.uuid] in _RUNNING_STATES:
            run = self._run(task)
            self._keep_log(task, run)  # before stopping: a stopped pod takes its log with it
            self.effects.append(StopTask(run, grace_s))
        self.task_status[task.uuid] = status
        values: dict[str, Any] = {"status": status.value, "ended_at": self.now}
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
        values: dict[str, Any] = {"status": status.value}
        if status.group_finished:
            values["ended_at"] = self.now
        elif status is TaskStatus.RUNNING and group.started_at is None:
            values["started_at"] = self.now
        self.changes.group(group.uuid, **values)

    # -- evicted --------------------------------------------------------------------------

    def _evicted(self, group: StoredGroup) -> None:
        """The group was evicted (its pods are unbound already) by the scheduler, a drain, or
        a node that failed under it: stop its tasks; each ends as its exit code says (3006
        preempted, 3001 backend error for a node fault: the task's exit actions, then the
        pool's). When every task would be RESCHEDULED, the group goes back to the queue
        instead (its tasks' next attempts); otherwise every task ends. Unless a node failed,
        the tasks first get notice (``notices.py``), and stop at once when it ends."""
        if self.group_status[group.name] not in _RUNNING_STATES:
            self.changes.group(group.uuid, evict=False)
            return  # it ended in this tick already
        eviction = eviction_of(
            group, self.pool_actions, max_retry=self.max_retry, pool_grace_s=self.grace_seconds
        )
        if eviction.grace_s is not None:  # not a node fault
            said = self._after_notice(group)
            if said is None:
                return  # noticed: it stops at the first of every task ready or the deadline
            eviction = dataclasses.replace(eviction, grace_s=0.0)
            self.changes.eviction_stops.append(eviction_stop(self.workflow, group, said, self.now))
        self.changes.group(group.uuid, evict=False)
        outcomes = {task.uuid: eviction.outcome(task) for task in group.tasks}
        requeue = not self.backend.schedules_itself and all(
            outcome.status is TaskStatus.RESCHEDULED for outcome in outcomes.values()
        )
        for task in group.tasks:
            outcome = outcomes[task.uuid]
            note = " ".join(part for part in (eviction.message, outcome.message) if part)
            if requeue:
                self._requeue_task(task, note, eviction.code, eviction.grace_s)
            else:  # a gang is requeued whole or not at all
                status = outcome.status
                if status is TaskStatus.RESCHEDULED:
                    status = eviction.failed
                self._end_task(
                    task, status, message=note, code=eviction.code, grace_s=eviction.grace_s
                )
        if requeue:
            self.group_status[group.name] = TaskStatus.SCHEDULING
            self.changes.group(
                group.uuid,
                status=TaskStatus.SCHEDULING.value,
                scheduling_at=self.now,
                started_at=None,
                domains=None,
                pending_reason=None,
            )
        else:
            states = [TaskState(self.task_status[t.uuid], t.lead) for t in group.tasks]
            self._set_group(
                group, group_status(states, ignore_non_lead_status=group.ignore_non_lead)
            )

    def _after_notice(self, group: StoredGroup) -> Answers | None:
        """The running tasks' answers once the group is to stop now; None while its notice
        runs (given now, the first time)."""
        runs = [
            (task, self._run(task))
            for task in group.tasks
            if self.task_status[task.uuid] in _RUNNING_STATES
        ]
        if group.notice_deadline is None:
            notice = notice_of(
                self.workflow, group, self.notice_seconds, self.notice_signal, self.now
            )
            if runs and notice.deadline > self.now:
                self.changes.group(group.uuid, notice_at=self.now, notice_deadline=notice.deadline)
                self.effects.extend(NotifyTask(run, notice) for _, run in runs)
                return None
        said = answers(runs, self.executor, self.now)
        keep_checkpoints(self.changes, said.checkpoints)
        return said if stop_due(group, said, self.now) else None

    def _requeue_task(
        self, task: StoredTask, message: str, code: int, grace_s: float | None
    ) -> None:
        """Stop the attempt; the next one waits for the scheduler with the group."""
        if self.task_status[task.uuid] in _RUNNING_STATES:
            run = self._run(task)
            self._keep_log(task, run)
            self.effects.append(StopTask(run, grace_s))
        self.task_status[task.uuid] = TaskStatus.SCHEDULING
        self.changes.task(
            task.uuid,
            status=TaskStatus.SCHEDULING.value,
            retry_id=task.retry_id + 1,
            exit_code=code,
            message=message,
            started_at=None,
            node=None,
        )

    # -- running tasks ----------------------------------------------------------------------

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

    def _follow_tasks(self, group: StoredGroup) -> None:
        """Start bound tasks and collect every task's own exit first; only then apply the lead
        rules, so a task that ended in the same tick as its lead keeps its own exit code."""
        ended: list[tuple[StoredTask, TaskStatus]] = []
        held = self._held_for_notice(group)
        for task in group.tasks:
            status = self.task_status[task.uuid]
            if status is TaskStatus.INITIALIZING:
                if held:
                    continue
                self.effects.append(StartTask(self._run(task, self.now)))
                self.task_status[task.uuid] = TaskStatus.RUNNING
                self.changes.task(task.uuid, status="RUNNING", started_at=self.now)
            elif status is TaskStatus.RUNNING:
                outcome = self._collect_exit(task)
                if outcome is not None:
                    ended.append((task, outcome))
        for task, outcome in ended:
            self._apply_sibling_rules(group, task, outcome)
        states = [TaskState(self.task_status[t.uuid], t.lead) for t in group.tasks]
        self._set_group(group, group_status(states, ignore_non_lead_status=group.ignore_non_lead))

    def _held_for_notice(self, group: StoredGroup) -> bool:
        """Whether a task of ``group`` to start is bound where a victim under notice still
        runs: then none starts before it ends (a gang starts whole)."""
        notice, backend = self.controller.nodes_under_notice, self.workflow.backend
        starting = (t for t in group.tasks if self.task_status[t.uuid] is TaskStatus.INITIALIZING)
        return any((backend, task.node) in notice for task in starting)

    def _collect_exit(self, task: StoredTask) -> TaskStatus | None:
        """The status the task ended in by itself, or None while it runs (or is rescheduled)."""
        run = self._run(task)
        ended = self.executor.poll(run, self.now)
        if ended is None:
            keep_checkpoints(self.changes, relayed_checkpoint(task, run, self.executor, self.now))
            return None
        outcome = exit_outcome(
            ended.code,
            task.exit_actions,
            self.pool_actions,
            retry_id=task.retry_id,
            max_retry=self.max_retry,
        )
        message = " ".join(part for part in (ended.message, outcome.message) if part)
        status = outcome.status
        if status is TaskStatus.RESCHEDULED and self.backend.schedules_itself:
            status = TaskStatus.FAILED  # docs/kubernetes.md#not-yet
            message = f"{message} RESCHEDULE is not supported on Kubernetes backends yet.".strip()
        self._keep_log(task, run)
        if status is TaskStatus.RESCHEDULED:
            # Runs again on the node it holds: the group keeps its placement.
            self.task_status[task.uuid] = TaskStatus.INITIALIZING
            self.changes.task(
                task.uuid,
                status=TaskStatus.INITIALIZING.value,
                retry_id=task.retry_id + 1,
                exit_code=ended.code,
                message=message,
                started_at=None,
            )
            return None
        # It ended by itself: nothing to stop (on Kubernetes, stopping deletes the pod).
        self._end_task(task, status, message=message, code=ended.code, stop=False)
        return status

    def _apply_sibling_rules(
        self, group: StoredGroup, task: StoredTask, status: TaskStatus
    ) -> None:
        """OSMO's lead rule (docs/osmo-reference.md#workflow-statuses): the lead's end is every
        task's end; a non-lead failure ends the group unless ``ignoreNonleadStatus``. Tasks
        that already ended keep their own status."""
        if task.lead:
            follow = TaskStatus.FAILED if status.failed else status
            reason = f"Lead task {task.name} ended {status.value}."
        elif status.failed and not group.ignore_non_lead:
            follow = TaskStatus.FAILED
            reason = f"Task {task.name} of the group failed."
        else:
            return
        for sibling in group.tasks:
            if sibling.uuid != task.uuid:
                self._end_task(sibling, follow, message=reason)

    # -- starting groups --------------------------------------------------------------------

    def _fail_downstream(self) -> None:
        for name in failed_downstream(self._group_states()):
            group = self._group(name)
            culprits = [up for up in group.upstream if self.group_status[up].failed]
            message = f"Upstream group {', '.join(culprits)} failed."
            for task in group.tasks:
                self._end_task(
                    task, TaskStatus.FAILED_UPSTREAM, message=message, code=UPSTREAM_FAILED_CODE
                )
            self._set_group(group, TaskStatus.FAILED_UPSTREAM)

    def _start_ready_groups(self) -> None:
        ready = set(ready_groups(self._group_states()))
        for group in self.workflow.groups:
            status = self.group_status[group.name]
            if group.name not in ready or self.in_maintenance:
                if status is TaskStatus.SUBMITTING:
                    self._set_group(group, TaskStatus.WAITING)
                continue
            self._decide_creation(group)

    def _decide_creation(self, group: StoredGroup) -> None:
        """Create the group at commit if corral may manage its kinds and the cluster has the
        PriorityClasses it names; otherwise it fails now."""
        namespace = self.workflow.namespace
        try:
            missing = self.backend.missing_rules(group.resource_kinds, namespace)
            names = priority_classes(group.manifests)
            absent = [] if missing else self.backend.missing_priority_classes(names)
        except BackendError as err:
            self._creation_failed(group, err)
            return
        if missing:
            message = permission_message(self.backend.name, namespace, missing)
            self._end_group(group, TaskStatus.FAILED_BACKEND_ERROR, message)
        elif absent:
            message = priority_class_message(self.backend.name, absent)
            self._end_group(group, TaskStatus.FAILED_BACKEND_ERROR, message)
        else:
            self.effects.append(CreateGroup(group))

    def _creation_failed(self, group: StoredGroup, err: BackendError) -> None:
        """Retry a transient error on the next ticks; fail the group on any other, or when
        retries are used up (cleanup then deletes whatever was made)."""
        message = creation_failure(self.controller.create_failures, group.uuid, err)
        if message is not None:
            self._end_group(group, TaskStatus.FAILED_BACKEND_ERROR, message)
        elif self.group_status[group.name] is TaskStatus.SUBMITTING:
            self._set_group(group, TaskStatus.WAITING)

    # -- the workflow -----------------------------------------------------------------------

    def _aggregate(self) -> None:
        status = workflow_status(list(self.group_status.values()))
        values: dict[str, Any] = {}
        if status.value != self.workflow.status:
            values["status"] = status.value
        if status.value == "RUNNING" and self.workflow.started_at is None:
            values["started_at"] = self.now
        if not status.alive:
            values["ended_at"] = self.now
            self.report.finished_workflows.append(self.workflow.workflow_id)
        if values:
            self.changes.workflow(self.workflow.workflow_id, **values)

    def _group_states(self) -> dict[str, GroupState]:
        return {
            g.name: GroupState(self.group_status[g.name], tuple(g.upstream))
            for g in self.workflow.groups
        }

    def _group(self, name: str) -> StoredGroup:
        return next(g for g in self.workflow.groups if g.name == name)
