"""The lifecycle controller: moves stored workflows through OSMO's statuses on the embedded
cluster (docs/osmo-reference.md#group-order, docs/lifecycle.md).

A tick costs what changed, not what is alive. The controller keeps a working set
(``working_set.py``): the alive workflows, read from the database when it starts leading
and followed from then on, indexed by what each waits on. A tick (``tick.py``; each part
records into the tick's ``TickWrites``, ``unit.py``, and only the tick commits):

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
ticks is ``process.run_until_stopped``. Nothing here knows the embedded cluster: the backends
say through the port whether they write in the tick's transaction (``writes_in_transaction``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from functools import partial
from typing import Any

import structlog

from corral.backends.cluster_writes import ClusterWrites
from corral.backends.port import BackendError, ClusterBackend, GroupObjects
from corral.backends.registry import Backends
from corral.domain.configs.snapshot import Configs
from corral.domain.topology.kai_objects import queue_manifests, topology_manifests
from corral.domain.workflows.record import (
    Changes,
    StoredWorkflow,
)
from corral.domain.workflows.statuses import HOLDS_NODES, TaskStatus
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.queues import min_runtimes, pool_queues
from corral.services.auth.task_tokens import TaskTokens
from corral.services.lifecycle.forecasting import Forecaster
from corral.services.lifecycle.leadership import Leadership
from corral.services.lifecycle.reading import note_checkpoints, readable_workflows
from corral.services.lifecycle.tick import Tick
from corral.services.lifecycle.tick_index import WorkingSetIndexer
from corral.services.lifecycle.tick_report import TickReport
from corral.services.lifecycle.unit import TickWrites
from corral.services.lifecycle.working_set import (
    Finished,
    ManifestCache,
    WorkingSet,
)
from corral.store.database import StatementCounter
from corral.store.workflows import WorkflowStore

log = structlog.get_logger("corral.lifecycle")

#: Statuses a task or group ends in; cleanup runs for groups in one of them.
FINISHED = tuple(s.value for s in TaskStatus if s.group_finished)
#: How often the working set is checked against the database (the ids of alive workflows).
RESYNC_SECONDS = 30.0


class LifecycleController:
    def __init__(
        self,
        *,
        workflows: WorkflowStore,
        configs: Callable[[], Configs],
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
        self.configs = configs
        self.nodes = nodes
        self.backends = backends
        self.clock = clock
        self._monotonic = monotonic
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

    def commit(self, writes: TickWrites) -> Changes:
        """Write what ``writes`` recorded since its last commit in one transaction, fenced by
        the lease (``unit.py``); the changes written."""
        fence = self.leadership.fence() if self.leadership is not None else None
        return writes.commit(self.workflows, self.backends.write_in_transaction, fence)

    def invalidate(self) -> None:
        """Forget the working set: the next tick reads it from the database again (for a test
        that changes the embedded cluster's objects behind the controller's back)."""
        self._working = None

    def tick(self) -> TickReport:
        self.check_leading()
        report = TickReport()
        configs = self.configs()
        try:
            working = self._current(configs)
            clusters = self.backends.kubernetes(configs)
            self._sync_scheduler_objects(configs, clusters)
            Tick(self, working, configs, report).run(clusters)
        except BaseException:
            self._working = None  # memory may be ahead of what was written: read it again
            raise
        if self.forecaster is not None:
            self.forecaster.after_tick(working, configs, report, self.clock())
        return report

    def _current(self, configs: Configs) -> WorkingSet:
        """The working set, read again when it is missing, was read under other configs or
        another lease, or no longer counts as many alive workflows as the database."""
        epoch = self.leadership.epoch if self.leadership is not None else None
        working = self._working
        if working is not None and (working.configs is not configs or working.epoch != epoch):
            working = None
        if working is not None and self._monotonic() - self._checked_at >= RESYNC_SECONDS:
            self._checked_at = self._monotonic()
            if not self._in_step(working):
                working = None
            self.workflows.forget_shapes()
        if working is None:
            working = self._working = self._read(configs, epoch)
            self._checked_at = self._monotonic()
        working.scheduler_cache.follow_health(self.nodes())  # a cordon, a failure, a heal
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

    def _read(self, configs: Configs, epoch: int | None) -> WorkingSet:
        started = time.perf_counter()
        bound = self.backends.placed_pods()
        alive = self.readable_workflows()
        bound_groups = {
            group.uuid: (workflow.workflow_id, group.started_at or group.scheduling_at)
            for workflow in alive
            for group in workflow.groups
            if group.status in HOLDS_NODES
        }
        cache = SchedulerCache(
            self.nodes(),
            pool_queues(configs),
            bound,
            bound_at={uuid: at for uuid, (_, at) in bound_groups.items() if at is not None},
            min_runtime=min_runtimes(configs),
        )
        note_checkpoints(cache, alive)
        working = WorkingSet(configs, epoch, cache, ManifestCache(self.workflows.manifests))
        working.bound.update({uuid: owner for uuid, (owner, _) in bound_groups.items()})
        for workflow in alive:
            working.keep(workflow)
            working.dirty.add(workflow.workflow_id)
        self.indexer(working, configs, self.clock()).waiting(alive)
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
            waiting=len(cache.waiting) + len(working.observed),
            bound_pods=len(bound),
            seconds=round(time.perf_counter() - started, 3),
        )
        return working

    def indexer(
        self,
        working: WorkingSet,
        configs: Configs,
        now: datetime,
        writes: ClusterWrites | None = None,
    ) -> WorkingSetIndexer:
        """Files workflows in ``working`` (``tick_index.py``); ``writes``: the tick's, given to
        the backends that write in its transaction."""
        return WorkingSetIndexer(
            working,
            configs,
            partial(self.backends.get, configs=configs, writes=writes),
            self.workflows.manifests,
            now,
        )

    def readable_workflows(self, ids: Sequence[str] | None = None) -> list[StoredWorkflow]:
        """The alive workflows (of ``ids``) as the controller works on them, without one whose
        stored state cannot be read (``reading.readable_workflows``)."""
        fence = self.leadership.fence() if self.leadership is not None else None
        return readable_workflows(self.workflows, ids, fence)

    def _sync_scheduler_objects(self, configs: Configs, clusters: Sequence[ClusterBackend]) -> None:
        """Each Kubernetes backend's KAI Queues and Topologies, as the pools say now."""
        for backend in clusters:
            desired = [
                *queue_manifests(configs, backend.name),
                *topology_manifests(configs, backend.name),
            ]
            try:
                backend.sync_scheduler_objects(desired)
            except BackendError as err:
                log.warning("queue sync failed", backend=backend.name, error=err.message)
