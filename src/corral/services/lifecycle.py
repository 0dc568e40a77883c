"""The lifecycle controller: moves stored workflows through OSMO's statuses on the embedded
cluster (docs/osmo-reference.md#group-order, docs/lifecycle.md).

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

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog

from corral.backends.execution import TaskExecutor, TaskRun
from corral.backends.port import BackendError, ClusterBackend, Rule, extra_rbac_rules_yaml
from corral.backends.registry import Backends
from corral.domain.configs.types import ConfigType
from corral.domain.labels import GROUP_UUID as GROUP_LABEL
from corral.domain.labels import WORKFLOW_UUID as WORKFLOW_LABEL
from corral.domain.topology.kai_objects import queue_manifests, topology_manifests
from corral.domain.workflows.exit_actions import exit_outcome, pool_exit_actions
from corral.domain.workflows.group_order import GroupState, failed_downstream, ready_groups
from corral.domain.workflows.statuses import TaskState, TaskStatus, group_status, workflow_status
from corral.scheduler import Placement
from corral.services.leadership import Leadership
from corral.services.placement import SchedulingPass, WaitingGroup, pool_queues
from corral.store.cluster_objects import ClusterObjectStore
from corral.store.lease import LostLease
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
#: Ticks in a row a transient error may stop a group's objects from being created before the
#: group fails (a restart starts counting again).
MAX_CREATE_ATTEMPTS = 5
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
    backend: ClusterBackend


class LifecycleController:
    def __init__(
        self,
        *,
        workflows: WorkflowStore,
        objects: ClusterObjectStore,
        state: Callable[[], Mapping[ConfigType, Any]],
        nodes: Callable[[], Sequence[Any]],
        backends: Backends,
        clock: Callable[[], datetime],
        leadership: Leadership | None = None,
    ) -> None:
        self.workflows = workflows
        #: When set, the controller acts only while it holds the lease, and every write is
        #: fenced by it (services/leadership.py); None: the only controller (tests, tools).
        self.leadership = leadership
        self.objects = objects
        self.state = state
        self.nodes = nodes
        self.backends = backends
        self.clock = clock
        #: Group uuid -> ticks its objects failed to be created with a transient error.
        self.create_failures: dict[str, int] = {}

    def check_leading(self) -> None:
        """LostLease unless this controller may act (before any effect on a cluster)."""
        if self.leadership is not None:
            self.leadership.check()

    def commit(self, changes: Changes, also: Callable[[Any], None] | None = None) -> None:
        """Write ``changes`` in one transaction, fenced by the lease."""
        fence = self.leadership.fence() if self.leadership is not None else None
        self.workflows.commit(changes, also=also, fence=fence)

    def tick(self) -> TickReport:
        self.check_leading()
        report = TickReport()
        state = self.state()
        self._sync_scheduler_objects(state)
        backends: dict[str, tuple[ClusterBackend, TaskExecutor]] = {}  # one per tick
        waiting: list[Waiting] = []
        for workflow_id in self.workflows.alive_ids():
            workflow = self.workflows.get(workflow_id)
            try:
                if workflow.backend not in backends:
                    backend = self.backends.get(workflow.backend, state)
                    backends[workflow.backend] = (backend, backend.executor())
                backend, executor = backends[workflow.backend]
                advance = _Advance(self, workflow, state, report, backend, executor)
                advance.run()
            except BackendError as err:
                # The database still holds the step's start: the next tick does it again.
                log.warning("backend step failed", workflow_id=workflow_id, error=err.message)
                continue
            waiting.extend(advance.waiting(_levels(state, workflow.pool)))
        self._schedule(state, waiting, report)
        self._clean_up(report)
        return report

    def _sync_scheduler_objects(self, state: Mapping[ConfigType, Any]) -> None:
        """Each Kubernetes backend's KAI Queues and Topologies, as the pools say now."""
        for backend in self.backends.kubernetes(state):
            desired = [
                *queue_manifests(state, backend.name),
                *topology_manifests(state, backend.name),
            ]
            try:
                backend.sync_scheduler_objects(desired)
            except BackendError as err:
                log.warning("queue sync failed", backend=backend.name, error=err.message)

    # -- scheduling -------------------------------------------------------------------------

    def _schedule(
        self, state: Mapping[ConfigType, Any], waiting: Sequence[Waiting], report: TickReport
    ) -> None:
        embedded = [entry for entry in waiting if not entry.backend.schedules_itself]
        for entry in waiting:
            if entry.backend.schedules_itself:
                self._observe(entry, entry.backend, report)
        if not embedded:
            return
        owners = {entry.candidate.key: entry for entry in embedded}
        scheduling = SchedulingPass(self.nodes(), self.objects.bound_pods(), pool_queues(state))
        for candidate in scheduling.order([entry.candidate for entry in embedded]):
            workflow, group = owners[candidate.key].workflow, owners[candidate.key].group
            result = scheduling.place(candidate)
            if isinstance(result, Placement):
                nodes = result.nodes()
                bind = functools.partial(
                    ClusterObjectStore.bind,
                    backend=workflow.backend,
                    namespace=workflow.namespace,
                    nodes=nodes,
                )
                self._bind(group, nodes, dict(result.domains), also=bind)
                report.placed_groups += 1
            else:
                self._wait(group, result.reason)

    def _observe(self, entry: Waiting, backend: ClusterBackend, report: TickReport) -> None:
        """A group KAI places: bound once every pod has a node; else KAI's reason."""
        group = entry.group
        pod_group = _pod_group_name(group.manifests)
        pods = [task.pod_name for task in group.tasks]
        result = backend.placement(entry.workflow.namespace, pods, pod_group)
        if isinstance(result, dict):
            self._bind(group, result, {})
            report.placed_groups += 1
        elif result is not None:
            self._wait(group, result)

    def _wait(self, group: StoredGroup, reason: str) -> None:
        if reason != group.pending_reason:
            changes = Changes()
            changes.group(group.uuid, pending_reason=reason)
            self.commit(changes)

    def _bind(
        self,
        group: StoredGroup,
        nodes: Mapping[str, str],
        domains: dict[str, str],
        also: Callable[[Any], None] | None = None,
    ) -> None:
        changes = Changes()
        changes.group(
            group.uuid,
            status=TaskStatus.INITIALIZING.value,
            domains=domains,
            pending_reason=None,
        )
        for task in group.tasks:
            if task.pod_name in nodes:
                changes.task(
                    task.uuid, status=TaskStatus.INITIALIZING.value, node=nodes[task.pod_name]
                )
        self.commit(changes, also=also)

    # -- cleanup ----------------------------------------------------------------------------

    def _clean_up(self, report: TickReport) -> None:
        for group in self.workflows.uncleaned_groups(FINISHED):
            labels = {WORKFLOW_LABEL: group.workflow_uuid, GROUP_LABEL: group.uuid}
            try:
                self.check_leading()
                backend = self.backends.get(group.backend)
                for api_version, kind in deletion_order(group.kinds):
                    backend.delete_collection(api_version, kind, group.namespace, labels)
            except BackendError as err:
                log.warning("cleanup failed; retrying", group_uuid=group.uuid, error=err.message)
                continue
            self.create_failures.pop(group.uuid, None)
            changes = Changes()
            changes.group(group.uuid, cleaned=True)
            self.commit(changes)
            report.cleaned_groups += 1


def run_until_stopped(
    controller: LifecycleController, interval: float, stop: threading.Event
) -> None:
    """Tick every ``interval`` seconds until ``stop`` is set (the server's background thread),
    while this server holds the controller lease (if it takes part in one).

    A failing tick is logged and retried on the next one: the database holds the truth, so
    nothing is lost by trying again."""
    while not stop.is_set():
        leadership = controller.leadership
        if leadership is None or leadership.held():
            _tick_once(controller)
        stop.wait(interval)


def _tick_once(controller: LifecycleController) -> None:
    try:
        report = controller.tick()
    except LostLease as err:
        log.warning("controller stopped: the lease moved on", reason=str(err))
    except Exception:
        log.exception("lifecycle tick failed; retrying")
    else:
        for workflow_id in report.finished_workflows:
            log.info("workflow finished", workflow_id=workflow_id)


def deletion_order(kinds: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """Pods first (nothing keeps running on a deleted ComputeDomain), then the other kinds in
    reverse creation order."""
    ordered = [(str(api), str(kind)) for api, kind in reversed(kinds)]
    return sorted(ordered, key=lambda pair: pair != ("v1", "Pod"))


def permission_message(backend: str, namespace: str, missing: Sequence[Rule]) -> str:
    """The error for missing RBAC permissions, with the rules to add
    (docs/osmo-reference.md#osmos-rbac-rules-for-extra-kinds)."""
    kinds = ", ".join(
        f"{'/'.join(r.api_groups) or 'core'} {'/'.join(r.resources)}" for r in missing
    )
    return (
        f"corral's service account on backend {backend} may not create, delete, list and "
        f"patch {kinds} in namespace {namespace}. Add these rules to its Role "
        f"(extraRBACRules; see docs/deploy.md#permissions):\n"
        f"{extra_rbac_rules_yaml(missing)}"
    )


def priority_class_message(backend: str, missing: Sequence[str]) -> str:
    """The error for PriorityClasses the cluster lacks (KAI would ignore the priority)."""
    names = ", ".join(missing)
    return (
        f"PriorityClass {names} does not exist on backend {backend}: KAI would schedule the "
        "group without its priority. Create corral's PriorityClasses: kubectl apply -f "
        "deploy/kubernetes/base/priorityclasses.yaml (docs/deploy.md#priority-classes)."
    )


def _priority_classes(manifests: Sequence[Mapping[str, Any]]) -> list[str]:
    """The PriorityClasses the group's PodGroup and Pods name."""
    names = [
        str(manifest.get("spec", {}).get("priorityClassName") or "")
        for manifest in manifests
        if manifest["kind"] in ("PodGroup", "Pod")
    ]
    return sorted({name for name in names if name})


def _pod_group_name(manifests: Sequence[Mapping[str, Any]]) -> str | None:
    for manifest in manifests:
        if manifest["kind"] == "PodGroup":
            return str(manifest["metadata"]["name"])
    return None


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
        backend: ClusterBackend,
        executor: TaskExecutor,
    ) -> None:
        self.c = controller
        self.backend = backend
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
        self.c.commit(self.changes)

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
                found.append(Waiting(candidate, self.workflow, group, self.backend))
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
        self,
        task: StoredTask,
        status: TaskStatus,
        *,
        message: str = "",
        code: int | None = None,
        stop: bool = True,
    ) -> None:
        if self.task_status[task.uuid].group_finished:
            return
        if stop and self.task_status[task.uuid] in _RUNNING_STATES:
            run = self._run(task)
            self.keep_log(task, run)  # before stopping: a stopped pod takes its log with it
            self.executor.stop(run)  # idempotent, also for a never-started attempt
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

    def keep_log(self, task: StoredTask, run: TaskRun) -> None:
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
        for task in group.tasks:
            status = self.task_status[task.uuid]
            if status is TaskStatus.INITIALIZING:
                self.c.check_leading()
                self.executor.start(self._run(task, self.now))
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

    def _collect_exit(self, task: StoredTask) -> TaskStatus | None:
        """The status the task ended in by itself, or None while it runs (or is rescheduled)."""
        run = self._run(task)
        ended = self.executor.poll(run, self.now)
        if ended is None:
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
        self.keep_log(task, run)
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
        task's end; a non-lead failure ends the group
        unless ``ignoreNonleadStatus``. Tasks that already ended keep their own status."""
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
        """Check corral may manage the group's kinds, apply the group's objects in their stored
        order (group templates first), then hand the group to the scheduler. A crash or an
        error in between re-applies: existing objects stay as they are."""
        namespace = self.workflow.namespace
        try:
            missing = self.backend.missing_rules(group.resource_kinds, namespace)
            if missing:
                message = permission_message(self.backend.name, namespace, missing)
                self._end_group(group, TaskStatus.FAILED_BACKEND_ERROR, message)
                return
            absent = self.backend.missing_priority_classes(_priority_classes(group.manifests))
            if absent:
                message = priority_class_message(self.backend.name, absent)
                self._end_group(group, TaskStatus.FAILED_BACKEND_ERROR, message)
                return
            self.c.check_leading()
            for manifest in group.manifests:
                self.backend.apply(manifest, namespace)
        except BackendError as err:
            self._creation_failed(group, err)
            return
        self.c.create_failures.pop(group.uuid, None)
        self.group_status[group.name] = TaskStatus.SCHEDULING
        self.changes.group(group.uuid, status=TaskStatus.SCHEDULING.value, scheduling_at=self.now)
        for task in group.tasks:
            self.task_status[task.uuid] = TaskStatus.SCHEDULING
            self.changes.task(task.uuid, status=TaskStatus.SCHEDULING.value)
        self.report.created_groups += 1

    def _creation_failed(self, group: StoredGroup, err: BackendError) -> None:
        """Retry a transient error on the next ticks; fail the group on any other, or when
        retries are used up (cleanup then deletes whatever was made)."""
        attempts = self.c.create_failures.get(group.uuid, 0) + 1
        self.c.create_failures[group.uuid] = attempts
        log.warning(
            "creating a group's objects failed",
            group_uuid=group.uuid,
            attempt=attempts,
            transient=err.transient,
            error=err.message,
        )
        if err.transient and attempts < MAX_CREATE_ATTEMPTS:
            if self.group_status[group.name] is TaskStatus.SUBMITTING:
                self._set_group(group, TaskStatus.WAITING)
            return
        tries = f" after {attempts} attempts" if err.transient else ""
        message = f"The cluster refused the group's objects{tries}: {err.message}"
        self._end_group(group, TaskStatus.FAILED_BACKEND_ERROR, message)

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
