"""The queue as ``GET /api/queue`` answers it and the dashboard's Queue page draws it
(``domain/views/queue.py``, docs/forecast.md#the-queue): every waiting group with its forecast,
what it asks for and what it would borrow, read from the store and the clusters."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from corral.domain.configs.snapshot import Configs
from corral.domain.views.capacity import BORROWING, QuotaRoom
from corral.domain.views.forecast_accuracy import PoolAccuracy
from corral.domain.views.queue import queue_entries
from corral.domain.views.requested_shape import RequestedShape
from corral.domain.workflows.record import StoredWorkflow
from corral.domain.workflows.statuses import TaskStatus
from corral.scheduler.podgroup import requested_shape
from corral.services.capacity import ClusterCapacity
from corral.services.capacity_model import pool_capacities
from corral.store.forecasts import ForecastStore
from corral.store.workflows.store import WorkflowStore


def queue_view(
    configs: Configs,
    store: WorkflowStore,
    forecasts: ForecastStore,
    clusters: Sequence[ClusterCapacity],
    may_read: Callable[[StoredWorkflow], bool],
    now: datetime,
    *,
    pools: Sequence[str] = (),
    users: Sequence[str] = (),
) -> list[dict[str, Any]]:
    alive = store.controller_view()
    readable = [
        group.uuid
        for workflow in alive
        if (not pools or workflow.pool in pools) and may_read(workflow)
        for group in workflow.groups
        if group.status == TaskStatus.SCHEDULING
    ]
    shapes = _known_shapes.of(store, readable)
    return queue_entries(
        alive,
        forecasts.every(),
        may_read,
        now,
        pools=pools,
        users=users,
        reasons=store.waiting_reasons(alive),
        shapes=shapes,
        quotas=_quotas(configs, clusters, {w.pool for w in alive}),
    )


def forecast_accuracy(forecasts: ForecastStore, pools: Sequence[str] = ()) -> list[PoolAccuracy]:
    """Per pool (of ``pools``; every pool with starts on record when empty): how often the
    published bands held, and how far the medians were (docs/forecast.md#accuracy)."""
    return forecasts.records.accuracy(pools)


class _KnownShapes:
    """Each group's requested shape, read once (a group's objects never change): a queue of
    thousands reads its groups' objects at the first request only, :data:`CHUNK` at a time."""

    CHUNK = 500
    MOST = 50_000

    def __init__(self) -> None:
        self._found: OrderedDict[str, RequestedShape | None] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, store: WorkflowStore, uuids: Sequence[str]) -> dict[str, RequestedShape]:
        with self._lock:
            missing = [uuid for uuid in uuids if uuid not in self._found]
        for start in range(0, len(missing), self.CHUNK):
            read = store.manifests(missing[start : start + self.CHUNK])
            with self._lock:
                for uuid, manifests in read.items():
                    self._found[uuid] = requested_shape(manifests)
                while len(self._found) > self.MOST:
                    self._found.popitem(last=False)
        with self._lock:
            found = {uuid: self._found.get(uuid) for uuid in uuids}
        return {uuid: shape for uuid, shape in found.items() if shape is not None}


_known_shapes = _KnownShapes()


def _quotas(
    configs: Configs, clusters: Sequence[ClusterCapacity], pools: set[str]
) -> dict[str, QuotaRoom]:
    """Per pool: its queue now, for LOW work (what borrows), from the capacity model."""
    names = sorted(pools & set(configs.pools()))
    found = pool_capacities(configs, clusters, names, BORROWING)
    return {name: capacity.quota for name, capacity in found.items()}
