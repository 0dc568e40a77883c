"""The lifecycle controller: moves stored workflows through OSMO's statuses on the embedded
cluster (docs/osmo-reference.md#group-order, docs/lifecycle.md).

Each :meth:`LifecycleController.tick` reads everything it needs from the database and writes
each step's result in one transaction, so the server may die at any moment: the next tick (after
a restart) sees either the state before a step or after it, never half of it. Steps that touch
the cluster are idempotent — applying an object that exists does nothing, starting a started
task does nothing, deleting what is gone does nothing — so redoing a step is always safe.

A tick, in order:

1. per alive workflow, one step (``services/workflow_step.py``), decided then committed: cancel
   and exec timeout; queue timeouts; start bound tasks, collect exit codes (exit actions, lead
   rules), aggregate group statuses; FAILED_UPSTREAM downstream of a failure; create the objects
   of groups whose upstream groups completed (group templates first, in stored order) and hand
   them to the scheduler; aggregate the workflow status;
2. one scheduling pass over every waiting group (fair share, ``services/placement.py``);
3. delete every object of finished groups, by the ``(apiVersion, kind)`` recorded on the group
   and the group's label — so a pool template changed or removed meanwhile changes nothing.
"""

from __future__ import annotations

import functools
import threading
import time
from contextlib import AbstractContextManager
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog

from corral.backends.execution import TaskExecutor
from corral.backends.port import BackendError, ClusterBackend
from corral.backends.registry import Backends
from corral.domain.configs.snapshot import Configs
from corral.domain.labels import GROUP_UUID as GROUP_LABEL
from corral.domain.labels import WORKFLOW_UUID as WORKFLOW_LABEL
from corral.domain.topology.kai_objects import queue_manifests, topology_manifests
from corral.domain.workflows.statuses import TaskStatus
from corral.scheduler import Placement
from corral.services.leadership import Leadership
from corral.services.placement import SchedulingPass, pool_queues
from corral.services.workflow_step import TickReport, Waiting, WorkflowStep
from corral.store.cluster_objects import ClusterObjectStore
from corral.store.database import StatementCounter
from corral.store.lease import LostLease
from corral.store.workflows import (
    Changes,
    StoredGroup,
    WorkflowStore,
)

log = structlog.get_logger("corral.lifecycle")

#: Statuses a task or group ends in; cleanup runs for groups in one of them.
FINISHED = tuple(s.value for s in TaskStatus if s.group_finished)


class LifecycleController:
    def __init__(
        self,
        *,
        workflows: WorkflowStore,
        objects: ClusterObjectStore,
        state: Callable[[], Configs],
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
        self._statements = StatementCounter(workflows.engine)

    def counting(self) -> AbstractContextManager[Callable[[], int]]:
        """Count the SQL statements of the block (``store.database.StatementCounter``)."""
        return self._statements.counting()

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
        alive = self.workflows.alive_ids()
        report.alive = report.stepped = len(alive)
        for workflow_id in alive:
            workflow = self.workflows.get(workflow_id)
            try:
                if workflow.backend not in backends:
                    backend = self.backends.get(workflow.backend, state)
                    backends[workflow.backend] = (backend, backend.executor())
                backend, executor = backends[workflow.backend]
                step = WorkflowStep(self, workflow, state, report, backend, executor, self.clock())
                step.decide()
                step.commit()
            except BackendError as err:
                # The database still holds the step's start: the next tick does it again.
                log.warning("backend step failed", workflow_id=workflow_id, error=err.message)
                continue
            waiting.extend(step.waiting())
        self._schedule(state, waiting, report)
        self._clean_up(report)
        return report

    def _sync_scheduler_objects(self, state: Configs) -> None:
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

    def _schedule(self, state: Configs, waiting: Sequence[Waiting], report: TickReport) -> None:
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
                report.placed_pods += len(nodes)
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
    started = time.perf_counter()
    try:
        with controller.counting() as queries:
            report = controller.tick()
            report.queries = queries()
    except LostLease as err:
        log.warning("controller stopped: the lease moved on", reason=str(err))
    except Exception:
        log.exception("lifecycle tick failed; retrying")
    else:
        report.seconds = time.perf_counter() - started
        log.debug("controller tick", **report.log_fields())
        for workflow_id in report.finished_workflows:
            log.info("workflow finished", workflow_id=workflow_id)


def deletion_order(kinds: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """Pods first (nothing keeps running on a deleted ComputeDomain), then the other kinds in
    reverse creation order."""
    ordered = [(str(api), str(kind)) for api, kind in reversed(kinds)]
    return sorted(ordered, key=lambda pair: pair != ("v1", "Pod"))


def _pod_group_name(manifests: Sequence[Mapping[str, Any]]) -> str | None:
    for manifest in manifests:
        if manifest["kind"] == "PodGroup":
            return str(manifest["metadata"]["name"])
    return None
