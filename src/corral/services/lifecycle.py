"""The lifecycle controller: moves stored workflows through OSMO's statuses on the embedded
cluster (``osmo-workflow.md`` §4, docs/lifecycle.md).

Each :meth:`LifecycleController.tick` reads everything it needs from the database and writes
each step's result in one transaction, so the server may die at any moment: the next tick (after
a restart) sees either the state before a step or after it, never half of it. Steps that touch
the cluster are idempotent — applying an object that exists does nothing, starting a started
task does nothing, deleting what is gone does nothing — so redoing a step is always safe.

A tick, in order:

1. per alive workflow: cancel and exec timeout; queue timeouts; start bound tasks, collect exit
   codes (exit actions, lead rules), aggregate group statuses; FAILED_UPSTREAM downstream of a
   failure; create the objects of groups whose upstream groups completed (group templates first,
   in stored order) and hand them to the scheduler; aggregate the workflow status;
2. one scheduling pass over every waiting group (fair share, ``services/placement.py``);
3. delete every object of finished groups, by the ``(apiVersion, kind)`` recorded on the group
   and the group's label — so a pool template changed or removed meanwhile changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog

from corral.backends.execution import TaskExecutor, TaskRun
from corral.domain.config_types import ConfigType
from corral.domain.exit_actions import exit_outcome, pool_exit_actions
from corral.domain.group_order import GroupState, failed_downstream, ready_groups
from corral.domain.statuses import TaskState, TaskStatus, group_status, workflow_status
from corral.scheduler import Placement
from corral.services.placement import SchedulingPass, WaitingGroup, pool_queues
from corral.store.cluster_objects import GROUP_LABEL, ClusterObjectStore
from corral.store.workflows import (
    Changes,
    StoredGroup,
    StoredTask,
    StoredWorkflow,
    WorkflowStore,
    pod_of,
)

log = structlog.get_logger("corral.lifecycle")

UPSTREAM_FAILED_CODE = 3000
#: Statuses a task or group ends in; cleanup runs for groups in one of them.
FINISHED = tuple(s.value for s in TaskStatus if s.group_finished)
#: A task in one of these holds a node (and may have a process to stop).
_RUNNING_STATES = (TaskStatus.INITIALIZING, TaskStatus.RUNNING)


@dataclass
class TickReport:
    """What one tick did, for logs and tests."""

    created_groups: int = 0
    placed_groups: int = 0
    finished_tasks: int = 0
    cleaned_groups: int = 0
    finished_workflows: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Waiting:
    """A group for the scheduling pass, with the workflow and group it belongs to."""

    candidate: WaitingGroup
    workflow: StoredWorkflow
    group: StoredGroup


class LifecycleController:
    def __init__(
        self,
        *,
        workflows: WorkflowStore,
        objects: ClusterObjectStore,
        state: Callable[[], Mapping[ConfigType, Any]],
        nodes: Callable[[], Sequence[Any]],
        executor: Callable[[str], TaskExecutor],
        clock: Callable[[], datetime],
    ) -> None:
        self.workflows = workflows
        self.objects = objects
        self.state = state
        self.nodes = nodes
        self.executor_for = executor
        self.clock = clock

    def tick(self) -> TickReport:
        report = TickReport()
        state = self.state()
        executors: dict[str, TaskExecutor] = {}  # one per backend and tick: settings read once
        waiting: list[Waiting] = []
        for workflow_id in self.workflows.alive_ids():
            workflow = self.workflows.get(workflow_id)
            if workflow.backend not in executors:
                executors[workflow.backend] = self.executor_for(workflow.backend)
            advance = _Advance(self, workflow, state, report, executors[workflow.backend])
            advance.run()
            waiting.extend(advance.waiting(_levels(state, workflow.pool)))
        self._schedule(state, waiting, report)
        self._clean_up(report)
        return report

    # -- scheduling -------------------------------------------------------------------------

    def _schedule(
        self, state: Mapping[ConfigType, Any], waiting: Sequence[Waiting], report: TickReport
    ) -> None:
        if not waiting:
            return
        owners = {entry.candidate.key: entry for entry in waiting}
        scheduling = SchedulingPass(self.nodes(), self.objects.bound_pods(), pool_queues(state))
        for candidate in scheduling.order([entry.candidate for entry in waiting]):
            workflow, group = owners[candidate.key].workflow, owners[candidate.key].group
            result = scheduling.place(candidate)
            changes = Changes()
            if isinstance(result, Placement):
                self._bind(workflow, group, result, changes)
                report.placed_groups += 1
            elif result.reason != group.pending_reason:
                changes.group(group.uuid, pending_reason=result.reason)
                self.workflows.commit(changes)

    def _bind(
        self, workflow: StoredWorkflow, group: StoredGroup, placed: Placement, changes: Changes
    ) -> None:
        nodes = placed.nodes()
        changes.group(
            group.uuid,
            status=TaskStatus.INITIALIZING.value,
            domains=dict(placed.domains),
            pending_reason=None,
        )
        for task in group.tasks:
            if task.pod_name in nodes:
                changes.task(
                    task.uuid, status=TaskStatus.INITIALIZING.value, node=nodes[task.pod_name]
                )
        self.workflows.commit(
            changes,
            also=lambda connection: ClusterObjectStore.bind(
                connection, workflow.backend, workflow.namespace, nodes
            ),
        )

    # -- cleanup ----------------------------------------------------------------------------

    def _clean_up(self, report: TickReport) -> None:
        for group in self.workflows.uncleaned_groups(FINISHED):
            for api_version, kind in deletion_order(group.kinds):
                self.objects.delete_collection(
                    group.backend, api_version, kind, group.namespace, {GROUP_LABEL: group.uuid}
                )
            changes = Changes()
            changes.group(group.uuid, cleaned=True)
            self.workflows.commit(changes)
            report.cleaned_groups += 1


def run_until_stopped(
    controller: LifecycleController, interval: float, stop: threading.Event
) -> None:
    """Tick every ``interval`` seconds until ``stop`` is set (the server's background thread).

    A failing tick is logged and retried on the next one: the database holds the truth, so
    nothing is lost by trying again."""
    while not stop.is_set():
        try:
            report = controller.tick()
        except Exception:
            log.exception("lifecycle tick failed; retrying")
        else:
            for workflow_id in report.finished_workflows:
                log.info("workflow finished", workflow_id=workflow_id)
        stop.wait(interval)


def deletion_order(kinds: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """Pods first (nothing keeps running on a deleted ComputeDomain), then the other kinds in
    reverse creation order."""
    ordered = [(str(api), str(kind)) for api, kind in reversed(kinds)]
    return sorted(ordered, key=lambda pair: pair != ("v1", "Pod"))


def _levels(state: Mapping[ConfigType, Any], pool: str) -> tuple[str, ...]:
    keys = (state.get(ConfigType.POOL, {}).get(pool) or {}).get("topology_keys") or []
    return tuple(str(key["label"]) for key in keys)


class _Advance:
    """Step 1 of a tick for one workflow (module docstring)."""

    def __init__(
        self,
        controller: LifecycleController,
        workflow: StoredWorkflow,
        state: Mapping[ConfigType, Any],
        report: TickReport,
        executor: TaskExecutor,
    ) -> None:
        self.c = controller
        self.workflow = workflow
        self.report = report
        self.now = controller.clock()
        self.pool: Mapping[str, Any] = state.get(ConfigType.POOL, {}).get(workflow.pool) or {}
        self.pool_actions = pool_exit_actions(self.pool.get("default_exit_actions") or {})
        self.max_retry = int(state.get(ConfigType.WORKFLOW, {}).get("max_retry_per_task", 0))
        self.executor = executor
        self.changes = Changes()
        self.group_status = {g.name: TaskStatus(g.status) for g in workflow.groups}
        self.task_status = {t.uuid: TaskStatus(t.status) for g in workflow.groups for t in g.tasks}

    def run(self) -> None:
        canceled = self.workflow.cancel_requested_by is not None
        for group in self.workflow.groups:
            if canceled:
                message = f"Canceled by {self.workflow.cancel_requested_by}."
                self._end_group(group, TaskStatus.FAILED_CANCELED, message)
            elif self._timed_out(group, TaskStatus.SCHEDULING, self.workflow.queue_timeout_s):
                self._end_group(group, TaskStatus.FAILED_QUEUE_TIMEOUT, "Queue timeout.")
            elif self._timed_out(group, TaskStatus.RUNNING, self.workflow.exec_timeout_s):
                self._end_group(group, TaskStatus.FAILED_EXEC_TIMEOUT, "Exec timeout.")
            elif self.group_status[group.name] in _RUNNING_STATES:
                self._follow_tasks(group)
        self._fail_downstream()
        self._start_ready_groups()
        self._aggregate()
        self.c.workflows.commit(self.changes)

    def waiting(self, levels: tuple[str, ...]) -> list[Waiting]:
        """The workflow's groups in SCHEDULING after this step, for the scheduling pass."""
        if self.workflow.cancel_requested_by is not None:
            return []
        found = []
        for position, group in enumerate(self.workflow.groups):
            if self.group_status[group.name] is TaskStatus.SCHEDULING:
                since = group.scheduling_at or self.now  # created in this step
                age = (since, self.workflow.submitted_at, self.workflow.workflow_id, position)
                candidate = WaitingGroup(
                    group.uuid, levels, self.workflow.priority, age, group.manifests
                )
                found.append(Waiting(candidate, self.workflow, group))
        return found

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
        self, task: StoredTask, status: TaskStatus, *, message: str = "", code: int | None = None
    ) -> None:
        if self.task_status[task.uuid].group_finished:
            return
        if self.task_status[task.uuid] in _RUNNING_STATES:
            self.executor.stop(self._run(task))  # idempotent, also for a never-started attempt
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

    # -- running tasks ----------------------------------------------------------------------

    def _run(self, task: StoredTask, started_at: datetime | None = None) -> TaskRun:
        when = started_at or task.started_at or self.now
        return TaskRun(task.uuid, task.retry_id, pod_of(self.workflow, task), when)

    def _follow_tasks(self, group: StoredGroup) -> None:
        for task in group.tasks:
            status = self.task_status[task.uuid]
            if status is TaskStatus.INITIALIZING:
                self.executor.start(self._run(task, self.now))
                self.task_status[task.uuid] = TaskStatus.RUNNING
                self.changes.task(task.uuid, status="RUNNING", started_at=self.now)
            elif status is TaskStatus.RUNNING:
                self._collect_exit(group, task)
        states = [TaskState(self.task_status[t.uuid], t.lead) for t in group.tasks]
        self._set_group(group, group_status(states, ignore_non_lead_status=group.ignore_non_lead))

    def _collect_exit(self, group: StoredGroup, task: StoredTask) -> None:
        ended = self.executor.poll(self._run(task), self.now)
        if ended is None:
            return
        outcome = exit_outcome(
            ended.code,
            task.exit_actions,
            self.pool_actions,
            retry_id=task.retry_id,
            max_retry=self.max_retry,
        )
        message = " ".join(part for part in (ended.message, outcome.message) if part)
        if outcome.status is TaskStatus.RESCHEDULED:
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
            return
        self._end_task(task, outcome.status, message=message, code=ended.code)
        self._apply_sibling_rules(group, task, outcome.status)

    def _apply_sibling_rules(
        self, group: StoredGroup, task: StoredTask, status: TaskStatus
    ) -> None:
        """OSMO §4.3: the lead's end is every task's end; a non-lead failure ends the group
        unless ``ignoreNonleadStatus``."""
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
            if group.name not in ready:
                if status is TaskStatus.SUBMITTING:
                    self._set_group(group, TaskStatus.WAITING)
                continue
            if self.pool.get("enable_maintenance"):
                if status is TaskStatus.SUBMITTING:
                    self._set_group(group, TaskStatus.WAITING)
                continue
            self._create_group(group)

    def _create_group(self, group: StoredGroup) -> None:
        """Apply the group's objects in their stored order (group templates first), then hand
        the group to the scheduler. A crash in between re-applies: existing objects stay."""
        for manifest in group.manifests:
            self.c.objects.apply(self.workflow.backend, manifest, self.workflow.namespace)
        self.group_status[group.name] = TaskStatus.SCHEDULING
        self.changes.group(group.uuid, status=TaskStatus.SCHEDULING.value, scheduling_at=self.now)
        for task in group.tasks:
            self.task_status[task.uuid] = TaskStatus.SCHEDULING
            self.changes.task(task.uuid, status=TaskStatus.SCHEDULING.value)
        self.report.created_groups += 1

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
