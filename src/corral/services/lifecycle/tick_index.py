"""Filing workflows in the controller's working set under what each waits on: a scheduler
(corral's or the cluster's own), a timer, every tick, or the next tick (a part of a tick,
``controller.py``; the working set is ``working_set.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import structlog

from corral.backends.execution import TaskExecutor, TaskRun
from corral.backends.port import BackendError, ClusterBackend, GroupObjects
from corral.domain.configs.snapshot import Configs
from corral.domain.topology.fabric import NO_FABRIC_RULE, fabric_rule
from corral.domain.topology.podgroup import pod_group_of
from corral.domain.workflows.record import (
    StoredGroup,
    StoredWorkflow,
    pod_of,
)
from corral.domain.workflows.statuses import ALIVE, HOLDS_NODES, TaskStatus
from corral.services.lifecycle.working_set import Finished, Observed, WorkingSet

log = structlog.get_logger("corral.lifecycle")

#: A timeout fires once it is over, strictly.
_JUST_AFTER = timedelta(microseconds=1)


class WorkingSetIndexer:
    """Files a workflow, as the database has it after a commit, under what it waits on."""

    def __init__(
        self,
        working: WorkingSet,
        configs: Configs,
        backends: Callable[[str], ClusterBackend],
        manifests: Callable[[list[str]], Mapping[str, list[dict[str, Any]]]],
        now: datetime,
    ) -> None:
        """``backends``: each backend by name; ``manifests``: the stored objects of groups
        (by uuid); ``now``: when a group waits from, when its record does not say."""
        self.working = working
        self.configs = configs
        self._get_backend = backends
        self._manifests = manifests
        self._now = now
        self._backends: dict[str, tuple[ClusterBackend, TaskExecutor]] = {}

    def backend(self, name: str) -> tuple[ClusterBackend, TaskExecutor]:
        """The backend and its executor, once per tick."""
        found = self._backends.get(name)
        if found is None:
            backend = self._get_backend(name)
            found = self._backends[name] = (backend, backend.executor())
        return found

    def unbind(self, groups: Iterable[str]) -> None:
        """Unbind the pods of the bound ``groups``, each on its workflow's backend (recorded in
        the tick's writes by a backend that writes in its transaction)."""
        by_backend: dict[str, list[str]] = {}
        for group_uuid in groups:
            workflow = self.working.workflows[self.working.bound[group_uuid]]
            by_backend.setdefault(workflow.backend, []).append(group_uuid)
        for name, uuids in by_backend.items():
            self.backend(name)[0].unbind(uuids)

    def waiting(self, workflows: Iterable[StoredWorkflow]) -> None:
        """Hand the waiting groups of ``workflows`` (read from the database) to their
        scheduler, with their objects read in one query."""
        working = self.working
        pending = [
            (workflow, group)
            for workflow in workflows
            for group in workflow.groups
            if group.status == TaskStatus.SCHEDULING
            and group.uuid not in working.scheduler_cache.waiting
            and group.uuid not in working.observed
        ]
        if not pending:
            return
        manifests = self._manifests([g.uuid for _, g in pending])
        for workflow, group in pending:
            self._wait(workflow, group, manifests.get(group.uuid, []))

    def workflow(self, workflow: StoredWorkflow, now: datetime) -> None:
        """Keep ``workflow`` (stepped, with the objects of its active groups) and index it."""
        working = self.working
        if workflow.status not in ALIVE:
            working.forget(workflow.workflow_id)
        else:
            working.keep(workflow)
        for group in workflow.groups:
            if group.status == TaskStatus.SCHEDULING:
                if (
                    group.uuid not in working.scheduler_cache.waiting
                    and group.uuid not in working.observed
                ):
                    self._wait(workflow, group, group.manifests)
            else:
                working.scheduler_cache.drop(group.uuid)
                working.observed.pop(group.uuid, None)
                working.owners.pop(group.uuid, None)
            if group.status not in HOLDS_NODES:
                working.bound.pop(group.uuid, None)
            if TaskStatus(group.status).group_finished and not group.cleaned:
                working.cleanup[group.uuid] = Finished(
                    workflow.workflow_id,
                    GroupObjects(
                        group.uuid,
                        workflow.uuid,
                        workflow.backend,
                        workflow.namespace,
                        group.resource_kinds,
                    ),
                )
        if workflow.status in ALIVE:
            self._follow(workflow, now)

    def _wait(
        self, workflow: StoredWorkflow, group: StoredGroup, manifests: Sequence[Mapping[str, Any]]
    ) -> None:
        try:
            backend, _ = self.backend(workflow.backend)
        except BackendError as err:
            log.warning("backend unavailable", backend=workflow.backend, error=err.message)
            self.working.dirty.add(workflow.workflow_id)
            return
        if backend.schedules_itself:
            self.working.observed[group.uuid] = Observed(
                workflow.workflow_id, _pod_group_name(manifests)
            )
            return
        pool = self.configs.find_pool(workflow.pool)
        levels = tuple(key.label for key in pool.topology_keys) if pool else ()
        fabric = fabric_rule(pool) if pool else NO_FABRIC_RULE
        position = next(i for i, g in enumerate(workflow.groups) if g.uuid == group.uuid)
        # Its first wait, not this one: a group put back by a fault, a drain or a preemption
        # keeps its place (docs/health.md#running-work).
        since = group.admitted_at or group.scheduling_at or self._now
        waiting = self.working.scheduler_cache.add(
            group.uuid,
            manifests,
            levels=levels,
            priority=workflow.priority,
            age=(since, workflow.submitted_at, workflow.workflow_id, position),
            fabric=fabric,
        )
        self.working.owners[group.uuid] = workflow.workflow_id
        if group.pending_shape != waiting.shape.key:
            self.working.new_shapes[group.uuid] = waiting.shape.key

    def _follow(self, workflow: StoredWorkflow, now: datetime) -> None:
        """When the workflow needs its next step by itself: at once (tasks to start, a
        creation to retry, a cancel to finish), at a timer, or at every tick."""
        working = self.working
        workflow_id = workflow.workflow_id
        working.every_tick.discard(workflow_id)
        wake: list[datetime] = []
        retry = any(g.uuid in working.create_failures for g in workflow.groups)
        if retry or workflow.cancel_requested_by is not None:
            working.dirty.add(workflow_id)
        for group in workflow.groups:
            status = TaskStatus(group.status)
            if status is TaskStatus.SCHEDULING and group.scheduling_at is not None:
                wake.append(group.scheduling_at + timedelta(seconds=workflow.queue_timeout_s))
            if status is TaskStatus.RUNNING and group.started_at is not None:
                wake.append(group.started_at + timedelta(seconds=workflow.exec_timeout_s))
            if status.group_finished:
                continue
            if group.evict:
                working.noticed[group.uuid] = workflow_id  # its tasks still hold their nodes
            if group.evict and group.notice_deadline is not None:
                wake.append(group.notice_deadline)  # its stop, at the latest
                working.every_tick.add(workflow_id)  # a task may say it is ready
            for task in group.tasks:
                if task.status == TaskStatus.INITIALIZING.value:
                    working.dirty.add(workflow_id)
                elif task.status == TaskStatus.RUNNING.value:
                    check = self._next_check(workflow, task)
                    if check is None:
                        working.every_tick.add(workflow_id)
                    else:
                        wake.append(check)
        working.wake(workflow_id, min(wake) + _JUST_AFTER if wake else None)

    def _next_check(self, workflow: StoredWorkflow, task: Any) -> datetime | None:
        if task.started_at is None:
            return None
        try:
            _, executor = self.backend(workflow.backend)
            run = TaskRun(task.uuid, task.retry_id, pod_of(workflow, task), task.started_at)
        except (BackendError, LookupError):
            return None  # no pod at hand: poll it every tick
        return executor.next_check(run)


def _pod_group_name(manifests: Sequence[Mapping[str, Any]]) -> str | None:
    found = pod_group_of(manifests)
    return str(found["metadata"]["name"]) if found is not None else None
