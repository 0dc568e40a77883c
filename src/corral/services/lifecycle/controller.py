"""The lifecycle controller: moves stored workflows through OSMO's statuses on the embedded
cluster (docs/osmo-reference.md#group-order, docs/lifecycle.md).

A tick costs what changed, not what is alive. The controller keeps a working set
(``working_set.py``): the alive workflows, read from the database when it starts leading
and followed from then on, indexed by what each waits on. A tick:

1. reads the inbox (submissions and cancels made by any server since the last tick);
2. steps the workflows that are due (``services/lifecycle/step.py``: new, canceled, just bound, a
   task that may have ended, a timeout): decide, apply the effects on the cluster (start or stop
   tasks, create a group's objects), and write every step's changes in one transaction;
3. offers the waiting groups to the scheduler (a pass, ``scheduler/cycle.py``, over the cache
   kept between ticks, ``scheduler/cache.py``)
   and writes the bindings in one transaction; asks a cluster's own scheduler about its groups;
4. deletes the objects of finished groups, by the ``(apiVersion, kind)`` recorded on the group
   and the group's label (so a pool template changed meanwhile changes nothing), and marks them
   cleaned in one transaction.

Crash safety is as it was: every effect is idempotent (applying an object that exists does
nothing, starting a started task does nothing, deleting what is gone does nothing), and each
result is committed before anything relies on it, so a tick after a restart (or another
server's, after a take-over) sees the state before a step or after it, never half of it. Memory
follows the database only after a commit; anything unexpected in a tick drops the working set,
and the next tick reads it all again.

After a commit each workflow is filed under what it waits on by ``tick_index.py``; the loop that
ticks is ``process.run_until_stopped``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import structlog

from corral.backends.embedded_objects import ClusterObjectStore
from corral.backends.port import BackendError, ClusterBackend, GroupObjects
from corral.backends.registry import Backends
from corral.domain.configs.snapshot import Configs
from corral.domain.topology.kai_objects import queue_manifests, topology_manifests
from corral.domain.workflows.record import (
    Changes,
    SharedReason,
    StoredGroup,
    StoredWorkflow,
    with_changes,
)
from corral.domain.workflows.statuses import TaskStatus
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting
from corral.scheduler.queues import min_runtimes, pool_queues
from corral.scheduler.records import BoundPodOnNode
from corral.services.lifecycle.evictions import record_evictions
from corral.services.lifecycle.forecasting import Forecaster
from corral.services.lifecycle.leadership import Leadership
from corral.services.lifecycle.node_faults import (
    nodes_under_notice,
    stop_work_on_bad_nodes,
    stop_work_on_kubernetes,
)
from corral.services.lifecycle.reading import note_checkpoints, readable_workflows
from corral.services.lifecycle.step import WorkflowStep
from corral.services.lifecycle.tick_index import HOLDS_NODES, WorkingSetIndexer
from corral.services.lifecycle.tick_report import TickReport
from corral.services.lifecycle.working_set import (
    Finished,
    ManifestCache,
    Observed,
    WorkingSet,
    with_manifests,
)
from corral.services.task_tokens import TaskTokens
from corral.store.database import StatementCounter
from corral.store.workflows import WorkflowStore

log = structlog.get_logger("corral.lifecycle")

#: Statuses a task or group ends in; cleanup runs for groups in one of them.
FINISHED = tuple(s.value for s in TaskStatus if s.group_finished)
#: Groups in these statuses need their objects in a step: to be created, started or polled.
_NEEDS_MANIFESTS = ("SUBMITTING", "WAITING", "INITIALIZING", "RUNNING")
#: How often the working set is checked against the database (the ids of alive workflows).
RESYNC_SECONDS = 30.0
#: A tick reads at most this many inbox rows and steps at most this many workflows; the rest
#: waits for the next tick (a burst of submissions makes more ticks, not longer ones).
MAX_INBOX_PER_TICK = 1000
MAX_STEPS_PER_TICK = 500


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
        monotonic: Callable[[], float] = time.monotonic,
        forecaster: Forecaster | None = None,
        task_tokens: TaskTokens | None = None,
    ) -> None:
        self.workflows = workflows
        #: Mints each task's own token as its group is applied (None: tasks are given none).
        self.task_tokens = task_tokens
        #: Keeps the waiting groups' start-time forecasts fresh (None: no forecasts).
        self.forecaster = forecaster
        #: When set, the controller acts only while it holds the lease, and every write is
        #: fenced by it (``leadership.py``); None: the only controller (tests, tools).
        self.leadership = leadership
        self.objects = objects
        self.state = state
        self.nodes = nodes
        self.backends = backends
        self.clock = clock
        self._monotonic = monotonic
        #: Group uuid -> ticks its objects failed to be created with a transient error.
        self.create_failures: dict[str, int] = {}
        #: (backend, node) where a task under notice still runs, this tick (node_faults.py).
        self.nodes_under_notice: frozenset[tuple[str, str]] = frozenset()
        self._statements = StatementCounter(workflows.engine)
        self._working: WorkingSet | None = None
        self._checked_at = 0.0

    def counting(self) -> AbstractContextManager[Callable[[], int]]:
        """Count the SQL statements of the block (``store.database.StatementCounter``)."""
        return self._statements.counting()

    def check_leading(self) -> None:
        """LostLease unless this controller may act (before any effect on a cluster)."""
        if self.leadership is not None:
            self.leadership.check()

    def commit(self, changes: Changes, also: Callable[[Any], None] | None = None) -> None:
        """Write ``changes``, the embedded cluster's staged objects and whatever ``also``
        writes in one transaction, fenced by the lease."""
        fence = self.leadership.fence() if self.leadership is not None else None
        if self.objects.has_staged():
            also = _both(self.objects.write_staged, also)
        self.workflows.commit(changes, also=also, fence=fence)

    def invalidate(self) -> None:
        """Forget the working set: the next tick reads it from the database again (for a test
        that changes the embedded cluster's objects behind the controller's back)."""
        self._working = None

    def tick(self) -> TickReport:
        self.check_leading()
        report = TickReport()
        state = self.state()
        try:
            working = self._current(state)
            clusters = self.backends.kubernetes(state)
            self._sync_scheduler_objects(state, clusters)
            _Tick(self, working, state, report).run(clusters)
        except BaseException:
            self._working = None  # memory may be ahead of what was written: read it again
            self.objects.unstage((0, 0))
            raise
        if self.forecaster is not None:
            self.forecaster.after_tick(working, state, report, self.clock())
        return report

    def _current(self, state: Configs) -> WorkingSet:
        """The working set, read again when it is missing, was read under other configs or
        another lease, or no longer counts as many alive workflows as the database."""
        epoch = self.leadership.epoch if self.leadership is not None else None
        working = self._working
        if working is not None and (working.state is not state or working.epoch != epoch):
            working = None
        if working is not None and self._monotonic() - self._checked_at >= RESYNC_SECONDS:
            self._checked_at = self._monotonic()
            if not self._in_step(working):
                working = None
            self.workflows.forget_shapes()
        if working is None:
            working = self._working = self._read(state, epoch)
            self._checked_at = self._monotonic()
        working.placements.follow_health(self.nodes())  # a cordon, a failure, a heal
        return working

    def _in_step(self, working: WorkingSet) -> bool:
        """Whether the working set holds every alive workflow of the database, and no other,
        but for submissions still in the inbox (read after the ids: a workflow and its inbox
        row are written together). A safety net: a difference is a bug, logged."""
        alive = set(self.workflows.alive_ids())
        unread = {entry.workflow_id for entry in self.workflows.inbox()}
        missing = alive - set(working.workflows) - unread
        extra = set(working.workflows) - alive
        if missing or extra:
            log.warning(
                "working set out of step; reading it again",
                missing=sorted(missing)[:10],
                extra=sorted(extra)[:10],
            )
        return not (missing or extra)

    def _read(self, state: Configs, epoch: int | None) -> WorkingSet:
        started = time.perf_counter()
        bound = [
            BoundPodOnNode(
                pod.name, pod.node, pod.group_uuid, pod.labels, pod.body.get("spec") or {}
            )
            for pod in self.objects.bound_pods()
            if pod.node is not None
        ]
        alive = self.readable_workflows()
        bound_groups = {
            group.uuid: (workflow.workflow_id, group.started_at or group.scheduling_at)
            for workflow in alive
            for group in workflow.groups
            if group.status in HOLDS_NODES
        }
        placements = SchedulerCache(
            self.nodes(),
            pool_queues(state),
            bound,
            bound_at={uuid: at for uuid, (_, at) in bound_groups.items() if at is not None},
            min_runtime=min_runtimes(state),
        )
        note_checkpoints(placements, alive)
        working = WorkingSet(state, epoch, placements, ManifestCache(self.workflows.manifests))
        working.bound.update({uuid: owner for uuid, (owner, _) in bound_groups.items()})
        for workflow in alive:
            working.keep(workflow)
            working.dirty.add(workflow.workflow_id)
        WorkingSetIndexer(self, working, state).waiting(alive)
        for group in self.workflows.uncleaned_groups(FINISHED):
            working.cleanup[group.uuid] = Finished(
                group.workflow_id,
                GroupObjects(
                    group.uuid, group.workflow_uuid, group.backend, group.namespace, group.kinds
                ),
            )
        log.info(
            "working set read",
            alive=len(alive),
            waiting=len(placements.waiting) + len(working.observed),
            bound_pods=len(bound),
            seconds=round(time.perf_counter() - started, 3),
        )
        return working

    def readable_workflows(self, ids: Sequence[str] | None = None) -> list[StoredWorkflow]:
        """The alive workflows (of ``ids``) as the controller works on them, without one whose
        stored state cannot be read (``reading.readable_workflows``)."""
        fence = self.leadership.fence() if self.leadership is not None else None
        return readable_workflows(self.workflows, ids, fence)

    def _sync_scheduler_objects(self, state: Configs, clusters: Sequence[ClusterBackend]) -> None:
        """Each Kubernetes backend's KAI Queues and Topologies, as the pools say now."""
        for backend in clusters:
            desired = [
                *queue_manifests(state, backend.name),
                *topology_manifests(state, backend.name),
            ]
            try:
                backend.sync_scheduler_objects(desired)
            except BackendError as err:
                log.warning("queue sync failed", backend=backend.name, error=err.message)


class _Tick:
    """One tick's work on the working set (see the module docstring)."""

    def __init__(
        self,
        controller: LifecycleController,
        working: WorkingSet,
        state: Configs,
        report: TickReport,
    ) -> None:
        self.controller = controller
        self.working = working
        self.state = state
        self.report = report
        self.now = controller.clock()
        self.index = WorkingSetIndexer(controller, working, state)

    def run(self, clusters: Sequence[ClusterBackend]) -> None:
        """One tick; ``clusters``: the connected Kubernetes backends."""
        stop_work_on_bad_nodes(self.controller, self.working, self.now)
        stop_work_on_kubernetes(self.controller, self.working, clusters, self.now)
        self.controller.nodes_under_notice = nodes_under_notice(self.working, self.index)
        changes = Changes()
        self._read_inbox(changes)
        stepped = self._step(changes)
        self.controller.commit(changes)
        for workflow in stepped:
            self.index.workflow(workflow, self.now)
        self._schedule()
        self._clean_up()

    def _read_inbox(self, changes: Changes) -> None:
        """New workflows join the working set; a canceled one is read again (its
        ``cancel_requested_by``). Either is stepped in this tick."""
        entries = self.controller.workflows.inbox(MAX_INBOX_PER_TICK)
        if not entries:
            return
        ids = list(dict.fromkeys(entry.workflow_id for entry in entries))
        fresh = self.controller.readable_workflows(ids)
        note_checkpoints(self.working.placements, fresh)  # a task reported one
        for workflow in fresh:
            self.working.keep(workflow)
            self.working.dirty.add(workflow.workflow_id)
        self.index.waiting(fresh)
        changes.inbox_done.extend(entry.id for entry in entries)

    # -- stepping ---------------------------------------------------------------------------

    def _step(self, changes: Changes) -> list[StoredWorkflow]:
        """Step every due workflow; each one's state after its changes, with its manifests."""
        due = self.working.take_due(self.now, MAX_STEPS_PER_TICK)
        self.report.alive = len(self.working.workflows)
        self.report.stepped = len(due)
        workflows = [self.working.workflows[w] for w in due]
        manifests = self.working.manifests.get(
            g.uuid for w in workflows for g in w.groups if g.status in _NEEDS_MANIFESTS
        )
        stepped = []
        objects = self.controller.objects
        for stored in workflows:
            workflow = with_manifests(stored, manifests)
            mark = objects.staged_mark()
            try:
                backend, executor = self.index.backend(workflow.backend)
                step = WorkflowStep(
                    self.controller, workflow, self.state, self.report, backend, executor, self.now
                )
                step.decide()
                step.apply()
            except BackendError as err:
                # The database still holds the step's start: a later tick does it again.
                log.warning(
                    "backend step failed", workflow_id=workflow.workflow_id, error=err.message
                )
                objects.unstage(mark)
                self.working.dirty.add(workflow.workflow_id)
                continue
            changes.merge(step.changes)
            stepped.append(with_changes(workflow, step.changes))
        return stepped

    # -- scheduling -------------------------------------------------------------------------

    def _schedule(self) -> None:
        changes = Changes()
        bindings: list[tuple[str, str, str, str]] = []
        placed: dict[str, StoredWorkflow] = {}
        reasoned: dict[str, StoredWorkflow] = {}  # a cluster's scheduler said why they wait
        for group_uuid, observed in list(self.working.observed.items()):
            self._observe(group_uuid, observed, changes, placed, reasoned)
        placements = self.working.placements
        for group_uuid, key in self.working.new_shapes.items():
            if group_uuid in placements.waiting:
                changes.group(group_uuid, pending_shape=key)
        self.working.new_shapes.clear()
        result = place_waiting(placements, self.now)
        evicted = record_evictions(self.working, result.evicted, self.now, changes)
        for found in result.placed:
            workflow = self.working.workflows[self.working.owners.pop(found.group.key)]
            group = _group(workflow, found.group.key)
            nodes = found.placement.nodes()
            _bind(changes, group, nodes, dict(found.placement.domains))
            bindings.extend(
                (workflow.backend, workflow.namespace, pod, node) for pod, node in nodes.items()
            )
            self.working.bound[group.uuid] = workflow.workflow_id
            placed[workflow.workflow_id] = workflow
            self.report.placed_groups += 1
            self.report.placed_pods += len(nodes)
        for shape in result.reasons:
            if shape.reason is not None:
                changes.shapes[shape.key] = SharedReason(shape.reason, shape.pod_names)
        if changes.empty:
            return
        objects = self.controller.objects
        unbind = objects.unbinding([e.group for e in result.evicted])
        self.controller.commit(changes, also=_both(unbind, objects.binding(bindings)))
        for workflow in reasoned.values():
            self.working.keep(with_changes(workflow, changes))
        for workflow in {**evicted, **placed}.values():
            self.working.keep(with_changes(self.working.workflows[workflow.workflow_id], changes))
            self.working.dirty.add(workflow.workflow_id)

    def _observe(
        self,
        group_uuid: str,
        observed: Observed,
        changes: Changes,
        placed: dict[str, StoredWorkflow],
        reasoned: dict[str, StoredWorkflow],
    ) -> None:
        """A group a cluster's own scheduler places: bound once every pod has a node; else
        the scheduler's reason."""
        workflow = self.working.workflows.get(observed.workflow_id)
        if workflow is None:
            self.working.observed.pop(group_uuid, None)
            return
        group = _group(workflow, group_uuid)
        try:
            backend, _ = self.index.backend(workflow.backend)
            pods = [task.pod_name for task in group.tasks]
            result = backend.placement(workflow.namespace, pods, observed.pod_group)
        except BackendError as err:
            log.warning("placement unknown", group_uuid=group_uuid, error=err.message)
            return
        if isinstance(result, dict):
            _bind(changes, group, result, {})
            self.working.observed.pop(group_uuid)
            placed[workflow.workflow_id] = workflow
            self.report.placed_groups += 1
            self.report.placed_pods += len(result)
        elif result is not None and result != group.pending_reason:
            changes.group(group_uuid, pending_reason=result)
            reasoned[workflow.workflow_id] = workflow  # kept once the change is written

    # -- cleanup ----------------------------------------------------------------------------

    def _clean_up(self) -> None:
        finished = list(self.working.cleanup.values())
        if not finished:
            return
        self.controller.check_leading()
        done: list[str] = []
        by_backend: dict[str, list[GroupObjects]] = {}
        for entry in finished:
            by_backend.setdefault(entry.objects.backend, []).append(entry.objects)
        for name, groups in by_backend.items():
            try:
                backend, _ = self.index.backend(name)
                done.extend(backend.delete_groups(groups))
            except BackendError as err:
                log.warning("cleanup failed; retrying", backend=name, error=err.message)
        if not done:
            return
        changes = Changes()
        for group_uuid in done:
            changes.group(group_uuid, cleaned=True)
        self.controller.commit(changes)
        for group_uuid in done:
            entry = self.working.cleanup.pop(group_uuid)
            self.working.placements.release(group_uuid)
            self.working.bound.pop(group_uuid, None)
            self.working.manifests.forget(group_uuid)
            self.controller.create_failures.pop(group_uuid, None)
            workflow = self.working.workflows.get(entry.workflow_id)
            if workflow is not None:
                self.working.keep(with_changes(workflow, _only_group(changes, group_uuid)))
        self.report.cleaned_groups += len(done)


def _bind(
    changes: Changes, group: StoredGroup, nodes: Mapping[str, str], domains: dict[str, str]
) -> None:
    changes.group(
        group.uuid,
        status=TaskStatus.INITIALIZING.value,
        domains=domains,
        pending_reason=None,
    )
    for task in group.tasks:
        if task.pod_name in nodes:
            changes.task(task.uuid, status=TaskStatus.INITIALIZING.value, node=nodes[task.pod_name])


def _both(
    first: Callable[[Any], None], second: Callable[[Any], None] | None
) -> Callable[[Any], None]:
    def write(connection: Any) -> None:
        first(connection)
        if second is not None:
            second(connection)

    return write


def _group(workflow: StoredWorkflow, group_uuid: str) -> StoredGroup:
    return next(g for g in workflow.groups if g.uuid == group_uuid)


def _only_group(changes: Changes, group_uuid: str) -> Changes:
    only = Changes()
    only.groups[group_uuid] = changes.groups[group_uuid]
    return only
