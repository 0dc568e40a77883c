"""One tick's work on the controller's working set (``controller.py`` says what a tick does
and why it is crash safe): stop work on bad nodes, read the inbox, step the due workflows, offer
the waiting groups to the scheduler, clean up finished groups. Each part records into the
tick's :class:`TickWrites` (``unit.py``), and the tick commits after each part that others rely
on; the working set follows what was committed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

import structlog

from corral.backends.cluster_writes import ClusterWrites
from corral.backends.execution import TaskExecutor
from corral.backends.port import BackendError, ClusterBackend, GroupObjects
from corral.domain.configs.snapshot import Configs
from corral.domain.workflows.record import (
    Changes,
    SharedReason,
    StoredGroup,
    StoredWorkflow,
    with_changes,
)
from corral.domain.workflows.statuses import TaskStatus
from corral.scheduler.cycle import place_waiting
from corral.services.auth.task_tokens import TaskTokens
from corral.services.lifecycle.evictions import record_evictions
from corral.services.lifecycle.node_faults import (
    nodes_under_notice,
    stop_work_on_bad_nodes,
    stop_work_on_kubernetes,
)
from corral.services.lifecycle.reading import note_checkpoints
from corral.services.lifecycle.step import WorkflowStep
from corral.services.lifecycle.step_base import StepContext
from corral.services.lifecycle.tick_index import WorkingSetIndexer
from corral.services.lifecycle.tick_report import TickReport
from corral.services.lifecycle.unit import TickWrites
from corral.services.lifecycle.working_set import Observed, WorkingSet, with_manifests
from corral.store.workflows import WorkflowStore

log = structlog.get_logger("corral.lifecycle")

#: Groups in these statuses need their objects in a step: to be created, started or polled.
_NEEDS_MANIFESTS = frozenset(
    {TaskStatus.SUBMITTING, TaskStatus.WAITING, TaskStatus.INITIALIZING, TaskStatus.RUNNING}
)
#: A tick reads at most this many inbox rows and steps at most this many workflows; the rest
#: waits for the next tick (a burst of submissions makes more ticks, not longer ones).
MAX_INBOX_PER_TICK = 1000
MAX_STEPS_PER_TICK = 500


class Controller(Protocol):
    """What a tick needs of the lifecycle controller."""

    workflows: WorkflowStore
    task_tokens: TaskTokens | None
    clock: Callable[[], datetime]

    def check_leading(self) -> None: ...

    def commit(self, writes: TickWrites) -> Changes: ...

    def readable_workflows(self, ids: Sequence[str] | None = None) -> list[StoredWorkflow]: ...

    def indexer(
        self,
        working: WorkingSet,
        configs: Configs,
        now: datetime,
        writes: ClusterWrites | None = None,
    ) -> WorkingSetIndexer: ...


class Tick:
    """One tick's work on the working set (see the module docstring)."""

    def __init__(
        self,
        controller: Controller,
        working: WorkingSet,
        configs: Configs,
        report: TickReport,
    ) -> None:
        self.controller = controller
        self.working = working
        self.configs = configs
        self.report = report
        self.now = controller.clock()
        self.writes = TickWrites()
        self.index = controller.indexer(working, configs, self.now, self.writes.cluster)

    def run(self, clusters: Sequence[ClusterBackend]) -> None:
        """One tick; ``clusters``: the connected Kubernetes backends."""
        stopped = stop_work_on_bad_nodes(self.working, self.index, self.writes, self.now)
        stopped += stop_work_on_kubernetes(self.working, clusters, self.writes, self.now)
        if stopped:
            stopped.follow(self.working, self.controller.commit(self.writes))
        self.working.nodes_under_notice = nodes_under_notice(self.working, self.index)
        self._read_inbox()
        stepped = self._step()
        committed = self.controller.commit(self.writes)
        for workflow in stepped:
            self.index.workflow(with_changes(workflow, committed), self.now)
        self._schedule()
        self._clean_up()

    def _read_inbox(self) -> None:
        """New workflows join the working set; a canceled one is read again (its
        ``cancel_requested_by``). Either is stepped in this tick."""
        entries = self.controller.workflows.inbox(MAX_INBOX_PER_TICK)
        if not entries:
            return
        ids = list(dict.fromkeys(entry.workflow_id for entry in entries))
        fresh = self.controller.readable_workflows(ids)
        note_checkpoints(self.working.scheduler_cache, fresh)  # a task reported one
        for workflow in fresh:
            self.working.keep(workflow)
            self.working.dirty.add(workflow.workflow_id)
        self.index.waiting(fresh)
        read = Changes()
        read.inbox_done.extend(entry.id for entry in entries)
        self.writes.record(read)

    # -- stepping ---------------------------------------------------------------------------

    def _step(self) -> list[StoredWorkflow]:
        """Step every due workflow, recording its changes and cluster writes; each stepped
        workflow, with its manifests."""
        due = self.working.take_due(self.now, MAX_STEPS_PER_TICK)
        self.report.alive = len(self.working.workflows)
        self.report.stepped = len(due)
        workflows = [self.working.workflows[w] for w in due]
        manifests = self.working.manifests.get(
            g.uuid for w in workflows for g in w.groups if g.status in _NEEDS_MANIFESTS
        )
        stepped = []
        for stored in workflows:
            workflow = with_manifests(stored, manifests)
            mark = self.writes.checkpoint()
            try:
                backend, executor = self.index.backend(workflow.backend)
                step = WorkflowStep(self._context(backend, executor), workflow)
                step.decide()
                step.apply()
            except BackendError as err:
                # The database still holds the step's start: a later tick does it again.
                log.warning(
                    "backend step failed", workflow_id=workflow.workflow_id, error=err.message
                )
                self.writes.rollback(mark)
                self.working.dirty.add(workflow.workflow_id)
                continue
            self.writes.record(step.changes)
            stepped.append(workflow)
        return stepped

    def _context(self, backend: ClusterBackend, executor: TaskExecutor) -> StepContext:
        return StepContext(
            self.configs,
            self.now,
            backend,
            executor,
            self.report,
            self.controller.task_tokens,
            self.working.nodes_under_notice,
            self.working.create_failures,
            self.controller.check_leading,
        )

    # -- scheduling -------------------------------------------------------------------------

    def _schedule(self) -> None:
        changes = Changes()
        placed: dict[str, StoredWorkflow] = {}
        reasoned: dict[str, StoredWorkflow] = {}  # a cluster's scheduler said why they wait
        for group_uuid, observed in list(self.working.observed.items()):
            self._observe(group_uuid, observed, changes, placed, reasoned)
        cache = self.working.scheduler_cache
        for group_uuid, key in self.working.new_shapes.items():
            if group_uuid in cache.waiting:
                changes.group(group_uuid, pending_shape=key)
        self.working.new_shapes.clear()
        result = place_waiting(cache, self.now)
        self.index.unbind(eviction.group for eviction in result.evicted)
        evicted = record_evictions(self.working, result.evicted, self.now, changes)
        for found in result.placed:
            workflow = self.working.workflows[self.working.owners.pop(found.group.key)]
            group = _group(workflow, found.group.key)
            nodes = found.placement.nodes()
            _bind(changes, group, nodes, dict(found.placement.domains))
            self.index.backend(workflow.backend)[0].bind(workflow.namespace, nodes)
            self.working.bound[group.uuid] = workflow.workflow_id
            placed[workflow.workflow_id] = workflow
            self.report.placed_groups += 1
            self.report.placed_pods += len(nodes)
        for shape in result.reasons:
            if shape.reason is not None:
                changes.shapes[shape.key] = SharedReason(shape.reason, shape.pod_names)
        if changes.empty:
            return
        self.writes.record(changes)
        changes = self.controller.commit(self.writes)
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
        cleaned = Changes()
        for group_uuid in done:
            cleaned.group(group_uuid, cleaned=True)
        self.writes.record(cleaned)
        changes = self.controller.commit(self.writes)
        for group_uuid in done:
            entry = self.working.cleanup.pop(group_uuid)
            self.working.scheduler_cache.release(group_uuid)
            self.working.bound.pop(group_uuid, None)
            self.working.manifests.forget(group_uuid)
            self.working.create_failures.pop(group_uuid, None)
            workflow = self.working.workflows.get(entry.workflow_id)
            if workflow is not None:
                self.working.keep(with_changes(workflow, _only_group(changes, group_uuid)))
        self.report.cleaned_groups += len(done)


def _bind(
    changes: Changes, group: StoredGroup, nodes: Mapping[str, str], domains: dict[str, str]
) -> None:
    changes.group(
        group.uuid,
        status=TaskStatus.INITIALIZING,
        domains=domains,
        pending_reason=None,
    )
    for task in group.tasks:
        if task.pod_name in nodes:
            changes.task(task.uuid, status=TaskStatus.INITIALIZING, node=nodes[task.pod_name])


def _group(workflow: StoredWorkflow, group_uuid: str) -> StoredGroup:
    return next(g for g in workflow.groups if g.uuid == group_uuid)


def _only_group(changes: Changes, group_uuid: str) -> Changes:
    only = Changes()
    only.groups[group_uuid] = changes.groups[group_uuid]
    return only
