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

from typing import Any

from corral.backends.port import BackendError
from corral.domain.workflows.exit_actions import exit_outcome
from corral.domain.workflows.group_order import GroupState, failed_downstream, ready_groups
from corral.domain.workflows.record import (
    StoredGroup,
    StoredTask,
)
from corral.domain.workflows.statuses import (
    TaskState,
    TaskStatus,
    WorkflowStatus,
    group_status,
    workflow_status,
)
from corral.services.auth.task_tokens import group_tokens
from corral.services.lifecycle.creation_errors import (
    creation_failure,
    permission_message,
    priority_class_message,
    priority_classes,
)
from corral.services.lifecycle.effects import (
    CreateGroup,
    NotifyTask,
    StartTask,
    StopTask,
)
from corral.services.lifecycle.evicted_step import EvictedGroups
from corral.services.lifecycle.notices import (
    keep_checkpoints,
    relayed_checkpoint,
)
from corral.services.lifecycle.step_base import RUNNING_STATES

UPSTREAM_FAILED_CODE = 3000


class WorkflowStep(EvictedGroups):
    """Step 1 of a tick for one workflow (``services/lifecycle/controller.py``)."""

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
            elif self.group_status[group.name] in RUNNING_STATES:
                self._follow_tasks(group)
        self._fail_downstream()
        self._start_ready_groups()

    # -- applying ---------------------------------------------------------------------------

    def apply(self) -> None:
        """Apply the effects in decision order; ``changes`` then holds what to write."""
        for effect in self.effects:
            self.context.check_leading()
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
            minted = self.context.task_tokens if self.backend.takes_task_tokens else None
            tokens = group_tokens(minted, self.workflow.workflow_id, group)
            self.backend.apply_all(group.manifests, self.workflow.namespace, tokens)
        except BackendError as err:
            self._creation_failed(group, err)
            return
        self.context.create_failures.pop(group.uuid, None)
        self.group_status[group.name] = TaskStatus.SCHEDULING
        admitted = {} if group.admitted_at is not None else {"admitted_at": self.now}
        self.changes.group(
            group.uuid, status=TaskStatus.SCHEDULING.value, scheduling_at=self.now, **admitted
        )
        for task in group.tasks:
            self.task_status[task.uuid] = TaskStatus.SCHEDULING
            self.changes.task(task.uuid, status=TaskStatus.SCHEDULING.value)
        self.report.created_groups += 1

    # -- running tasks ----------------------------------------------------------------------

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
                self.changes.task(task.uuid, status=TaskStatus.RUNNING, started_at=self.now)
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
        notice, backend = self.context.nodes_under_notice, self.workflow.backend
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
            self._end_attempt(task, ended.code, message)
            self.task_status[task.uuid] = TaskStatus.INITIALIZING
            self.changes.task(
                task.uuid,
                status=TaskStatus.INITIALIZING.value,
                retry_id=task.retry_id + 1,
                exit_code=None,
                message=f"Attempt {task.retry_id} exited {ended.code}: {message}",
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
        message = creation_failure(self.context.create_failures, group.uuid, err)
        if message is not None:
            self._end_group(group, TaskStatus.FAILED_BACKEND_ERROR, message)
        elif self.group_status[group.name] is TaskStatus.SUBMITTING:
            self._set_group(group, TaskStatus.WAITING)

    # -- the workflow -----------------------------------------------------------------------

    def _aggregate(self) -> None:
        status = workflow_status(list(self.group_status.values()))
        values: dict[str, Any] = {}
        if status != self.workflow.status:
            values["status"] = status
        if status is WorkflowStatus.RUNNING and self.workflow.started_at is None:
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
