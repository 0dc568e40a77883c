"""The lifecycle controller's memory: the alive workflows, indexed by what each waits on, so that
a tick touches what changed, not everything alive.

The database stays the truth. The working set is read from it when a controller starts leading
(and after anything unexpected), and follows it afterwards: a change enters memory only once the
transaction that wrote it committed. What other servers write reaches it through the controller
inbox (submissions, cancels). The indexes:

- ``dirty``: workflows to step in the next tick (new, canceled, just bound, a step that may
  continue, a group whose creation is retried);
- timers: the next moment a workflow needs a look by itself (a simulated task's end, a queue or
  exec timeout), one live entry per workflow;
- ``every_tick``: workflows with running tasks whose executor cannot tell when they end (local
  processes, Kubernetes pods: polling them is a file check or an informer lookup);
- the scheduling state (``scheduler/cache.py``) with the groups waiting for corral's
  scheduler, and ``observed``: groups a cluster's own scheduler places (asked every tick);
- ``cleanup``: finished groups whose objects are still on the cluster.

Manifests are most of a workflow's bytes and are not kept with it: a bounded cache holds the
objects of the groups a tick works on (being created, started, polled).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from corral.backends.port import GroupObjects
from corral.domain.workflows.record import StoredGroup, StoredWorkflow
from corral.scheduler.cache import SchedulerCache

#: Groups whose objects the cache keeps, least recently used first out (a 16-task group's
#: objects take about 100 KB of memory).
MANIFEST_CACHE_GROUPS = 1024

Loader = Callable[[Sequence[str]], Mapping[str, list[dict[str, Any]]]]


class ManifestCache:
    """The stored objects of recently used groups, by group uuid."""

    def __init__(self, load: Loader, size: int = MANIFEST_CACHE_GROUPS) -> None:
        self._load = load
        self._size = size
        self._kept: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def get(self, group_uuids: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        """The objects of every group of ``group_uuids``; the missing ones in one query."""
        wanted = list(dict.fromkeys(group_uuids))
        found: dict[str, list[dict[str, Any]]] = {}
        missing = []
        for uuid in wanted:
            kept = self._kept.get(uuid)
            if kept is None:
                missing.append(uuid)
            else:
                self._kept.move_to_end(uuid)
                found[uuid] = kept
        if missing:
            for uuid, manifests in self._load(missing).items():
                found[uuid] = manifests
                self._keep(uuid, manifests)
        return found

    def _keep(self, uuid: str, manifests: list[dict[str, Any]]) -> None:
        self._kept[uuid] = manifests
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)

    def forget(self, uuid: str) -> None:
        self._kept.pop(uuid, None)


@dataclass(frozen=True)
class Observed:
    """A waiting group that a cluster's own scheduler places."""

    workflow_id: str
    pod_group: str | None  # the name of its PodGroup, if it has one


@dataclass(frozen=True)
class Finished:
    """A finished group to clean up, and the workflow it belongs to."""

    workflow_id: str
    objects: GroupObjects


@dataclass
class WorkingSet:
    """See the module docstring."""

    #: What the working set was read under: the configs and the lease epoch.
    configs: object
    epoch: int | None
    scheduler_cache: SchedulerCache
    manifests: ManifestCache
    #: Alive workflows, without their groups' manifests.
    workflows: dict[str, StoredWorkflow] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    every_tick: set[str] = field(default_factory=set)
    observed: dict[str, Observed] = field(default_factory=dict)
    cleanup: dict[str, Finished] = field(default_factory=dict)
    #: Group uuid -> the workflow of a group waiting for corral's scheduler.
    owners: dict[str, str] = field(default_factory=dict)
    #: Group uuid -> the workflow of a group corral's scheduler bound (a possible victim).
    bound: dict[str, str] = field(default_factory=dict)
    #: Group uuid -> the workflow of a group evicted or under notice of its stop, whose tasks
    #: still run: a node failing under it stops it at once, and a task bound to its nodes
    #: starts once it stopped (``node_faults.py``).
    noticed: dict[str, str] = field(default_factory=dict)
    #: Groups that started waiting for corral's scheduler, and their shape (to be written).
    new_shapes: dict[str, str] = field(default_factory=dict)
    #: Group uuid -> ticks its objects failed to be created with a transient error.
    create_failures: dict[str, int] = field(default_factory=dict)
    #: (backend, node) where a task under notice still runs, this tick (``node_faults.py``).
    nodes_under_notice: frozenset[tuple[str, str]] = frozenset()
    _timers: list[tuple[datetime, str]] = field(default_factory=list)
    _wake: dict[str, datetime] = field(default_factory=dict)

    def take_due(self, now: datetime, limit: int) -> list[str]:
        """The workflows to step now, oldest first, at most ``limit``: the others stay due
        (``dirty``) for the next tick, so that a burst makes more ticks, not longer ones."""
        due = set(self.dirty) | self.every_tick
        self.dirty.clear()
        while self._timers and self._timers[0][0] <= now:
            when, workflow_id = heapq.heappop(self._timers)
            if self._wake.get(workflow_id) == when:
                del self._wake[workflow_id]
                due.add(workflow_id)
        found = [self.workflows[w] for w in due if w in self.workflows]
        found.sort(key=lambda w: (w.submitted_at, w.workflow_id))
        self.dirty.update(w.workflow_id for w in found[limit:])
        return [w.workflow_id for w in found[:limit]]

    def wake(self, workflow_id: str, when: datetime | None) -> None:
        """Step the workflow at ``when`` (None: no timer), replacing its earlier timer."""
        if when is None:
            self._wake.pop(workflow_id, None)
            return
        if self._wake.get(workflow_id) == when:
            return
        self._wake[workflow_id] = when
        heapq.heappush(self._timers, (when, workflow_id))

    def keep(self, workflow: StoredWorkflow) -> None:
        """Hold ``workflow`` (without manifests) as the database now has it."""
        self.workflows[workflow.workflow_id] = without_manifests(workflow)

    def forget(self, workflow_id: str) -> None:
        """The workflow ended: nothing of it is kept but its groups to clean up."""
        self.workflows.pop(workflow_id, None)
        self.dirty.discard(workflow_id)
        self.every_tick.discard(workflow_id)
        self._wake.pop(workflow_id, None)


def without_manifests(workflow: StoredWorkflow) -> StoredWorkflow:
    if not any(group.manifests for group in workflow.groups):
        return workflow
    groups = [dataclasses.replace(group, manifests=[]) for group in workflow.groups]
    return dataclasses.replace(workflow, groups=groups)


def with_manifests(
    workflow: StoredWorkflow, manifests: Mapping[str, list[dict[str, Any]]]
) -> StoredWorkflow:
    """``workflow`` with the objects of the groups found in ``manifests``."""
    groups = [_filled(group, manifests) for group in workflow.groups]
    return dataclasses.replace(workflow, groups=groups)


def _filled(group: StoredGroup, manifests: Mapping[str, list[dict[str, Any]]]) -> StoredGroup:
    found = manifests.get(group.uuid)
    return group if found is None else dataclasses.replace(group, manifests=found)
