"""Start-time forecasts of the waiting groups, kept fresh by the controller
(docs/forecast.md): after a tick that changed something, and at most every
:data:`TICKS_BETWEEN` ticks (30 s at the default tick), the tick hands the scheduler's state
to a thread that runs ``scheduler/forecast.py`` on it and replaces the stored forecasts.
Reading one never runs the simulation, and a tick never waits for it.

The server's controller runs the simulation in a worker process of its own
(:func:`in_worker`), at the sandbox workers' lower CPU priority: in a thread beside the tick it
held the interpreter for as long as it ran (103 s for 3,244 waiting groups on 5,040 nodes), and
every tick meanwhile took ten times as long.
"""

from __future__ import annotations

import atexit
import dataclasses
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog

from corral.domain.configs.snapshot import Configs
from corral.domain.labels import PRIORITY as PRIORITY_LABEL
from corral.domain.labels import QUEUE as QUEUE_LABEL
from corral.domain.views.forecast_accuracy import Refresh, calibration_pairs
from corral.domain.views.start_forecast import GroupForecast
from corral.domain.workflows.record import StoredWorkflow
from corral.scheduler.calibration import OUTCOMES, calibrated, calibration
from corral.scheduler.forecast import (
    ClusterNow,
    Forecast,
    Outlook,
    QueuedGroup,
    RunningGang,
    outlook,
)
from corral.scheduler.queues import min_runtimes, pool_queues
from corral.scheduler.records import BoundPodOnNode
from corral.scheduler.runtimes import Runtimes, history_runtimes
from corral.services.lifecycle.expected_arrivals import RecentArrivals
from corral.services.lifecycle.tick_report import TickReport
from corral.services.lifecycle.working_set import WorkingSet
from corral.services.workers.sandbox import Limits, SandboxPool
from corral.store.forecasts import VALUE_MAX, ForecastStore

log = structlog.get_logger("corral.lifecycle")

#: The least time between two forecasts, in controller ticks.
TICKS_BETWEEN = 60
#: The forecast thread takes at most this share of one core: after a forecast that took
#: ``s`` seconds, the next one waits at least ``s / BUDGET``.
BUDGET = 0.25
#: Runs per forecast (the engine's p10 and p90 are the 1st and 9th of 10).
RUNS = 10
#: A pod of no task group holds its node for as long as a forecast looks.
FOREVER_S = 10 * 365 * 86400.0

#: Completed runtimes of a pool: (workflow name, user, seconds).
History = Callable[[str], Sequence[tuple[str, str, float]]]
#: Runs the simulation: in this process (tests, tools) or in a worker (:func:`in_worker`).
Simulate = Callable[[ClusterNow], Outlook]
#: What one forecast in a worker may use: it is corral's own code, bounded by the size of the
#: queue and the cluster, so these are backstops.
WORKER_LIMITS = Limits(cpu_seconds=900, wall_seconds=900.0, memory_bytes=4 * 2**30)


def in_process(cluster: ClusterNow) -> Outlook:
    return outlook(cluster, runs=RUNS)


def in_worker() -> Simulate:
    """The simulation in a worker process of its own, started at the first forecast and
    stopped at exit (one: forecasts never overlap)."""
    pool = SandboxPool(size=1)
    atexit.register(pool.close)

    def simulate(cluster: ClusterNow) -> Outlook:
        return pool.call(WORKER_LIMITS, "the start-time forecast", outlook, cluster, runs=RUNS)

    return simulate


class Forecaster:
    def __init__(
        self,
        store: ForecastStore,
        history: History,
        *,
        every_seconds: float = 30.0,
        background: bool = True,
        monotonic: Callable[[], float] = time.monotonic,
        simulate: Simulate = in_process,
    ) -> None:
        self._every = every_seconds
        self._simulate = simulate
        self._store = store
        self._history = history
        self._background = background
        self._monotonic = monotonic
        self._last: float | None = None
        self._recent = RecentArrivals()
        #: Seconds the last forecast took.
        self._took = 0.0
        #: A tick changed the queue or the cluster since the last forecast.
        self._changed = True
        self._thread: threading.Thread | None = None

    def after_tick(
        self,
        working: WorkingSet,
        configs: Configs,
        report: TickReport,
        now: datetime,
    ) -> None:
        """Forecast again when a tick changed something since the last forecast and that one
        is old enough (in a thread, unless one still runs)."""
        self._changed |= bool(report.stepped or report.placed_groups or report.cleaned_groups)
        clock = self._monotonic()
        every = max(self._every, self._took / BUDGET)
        if not self._changed or (self._last is not None and clock - self._last < every):
            return
        if self._thread is not None and self._thread.is_alive():
            return
        self._last, self._changed = clock, False
        try:
            cluster, owners = forecast_input(working, configs, self._history, now)
        except Exception:  # advice: the tick has committed, and goes on without it
            log.exception("forecast input failed")
            return
        self._recent.note(cluster.waiting, now)
        cluster = dataclasses.replace(cluster, arrivals=self._recent.expected(now))
        pools = {queue.name: queue.pool or queue.name for queue in cluster.queues}
        since = {gang.key: gang.started_at for gang in cluster.running}
        job = (cluster, _Names(owners, pools, since), now)
        if self._background:
            self._thread = threading.Thread(
                target=self._forecast, args=job, name="forecast", daemon=True
            )
            self._thread.start()
        else:
            self._forecast(*job)

    def _forecast(self, cluster: ClusterNow, names: _Names, now: datetime) -> None:
        started = self._monotonic()
        try:
            by = calibration(calibration_pairs(self._store.records.outcomes(limit=OUTCOMES)))
            found = self._simulate(cluster)
            bands = calibrated(found.groups, now, by)
            groups = [_stored(f, names, now) for f in bands.values()]
            self._store.replace(groups, found.whole_free, now)
            self._took = self._monotonic() - started
            cost = Refresh(now, len(groups), found.cpu_seconds, self._took)
            self._store.records.note_refresh(cost)
        except Exception:  # a forecast is advice: the controller goes on without it
            log.exception("forecast failed")
            return
        log.info("forecast written", groups=len(groups), seconds=round(self._took, 3))


@dataclass(frozen=True)
class _Names:
    """What users call what a forecast names: each group's workflow, each queue's pool."""

    workflows: dict[str, str]
    pools: dict[str, str]
    #: Each running gang's start (or its wait's, when not started yet).
    since: dict[str, datetime]


def _stored(found: Forecast, names: _Names, now: datetime) -> GroupForecast:
    return GroupForecast(
        group_uuid=found.key,
        workflow_id=names.workflows.get(found.key, ""),
        computed_at=now,
        p10=found.p10,
        p50=found.p50,
        p90=found.p90,
        queue=names.pools.get(found.queue, found.queue),
        queue_position=found.queue_position,
        position=found.position,
        waits_on=names.workflows.get(found.waits_on) if found.waits_on else None,
        waits_on_since=names.since.get(found.waits_on) if found.waits_on else None,
        on_timeouts=found.on_timeouts,
        lands_in=found.lands_in if found.lands_in and len(found.lands_in) <= VALUE_MAX else None,
    )


def forecast_input(
    working: WorkingSet, configs: Configs, history: History, now: datetime
) -> tuple[ClusterNow, dict[str, str]]:
    """What a forecast starts from, read from the controller's memory (in the tick: the
    thread then touches nothing the tick changes), and each group's workflow."""
    cache = working.scheduler_cache
    # The cluster's history as the pools with alive work have it: a query per pool, not per
    # configured pool (thousands of pools).
    runtimes = _RuntimeLookup(history, sorted({w.pool for w in working.workflows.values()}))
    owners: dict[str, str] = {}
    running = []
    for key, bindings, queue, preemptible in cache.bound_groups():
        workflow = working.workflows.get(working.bound.get(key, ""))
        labels = {QUEUE_LABEL: queue, PRIORITY_LABEL: "LOW" if preemptible else ""}
        pods = tuple(BoundPodOnNode(b.pod, b.node, key, labels, {}, b.demand) for b in bindings)
        if workflow is None:
            continue
        owners[key] = workflow.workflow_id
        group = next(g for g in workflow.groups if g.uuid == key)
        since = group.started_at or group.scheduling_at or workflow.submitted_at
        running.append(RunningGang(key, pods, since, runtimes.of(workflow)))
    for i, binding in enumerate(cache.external):
        pod = BoundPodOnNode(binding.pod, binding.node, None, {}, {}, binding.demand)
        forever = Runtimes((FOREVER_S,), FOREVER_S)  # known: it holds its node throughout
        running.append(RunningGang(f"external-{i}", (pod,), now, forever))
    waiting = []
    manifests = working.manifests.get(cache.waiting)
    for key, queued in cache.waiting.items():
        workflow = working.workflows.get(working.owners.get(key, ""))
        if workflow is None or key not in manifests:
            continue
        owners[key] = workflow.workflow_id
        shape = queued.shape
        waiting.append(
            QueuedGroup(
                key,
                tuple(manifests[key]),
                shape.levels,
                queued.priority,
                queued.age,
                runtimes.of(workflow),
                shape.fabric,
            )
        )
    now_state = ClusterNow(
        tuple(cache.nodes),  # a copy: the next tick replaces nodes whose health changed
        pool_queues(configs),
        running,
        waiting,
        now,
        min_runtimes(configs),
        domain_labels=finest_labels(configs),
    )
    return now_state, owners


def finest_labels(configs: Configs) -> tuple[str, ...]:
    """The node label of each pool's finest topology level: the domains pool shapes shows."""
    found = {
        pool.topology_keys[-1].label for pool in configs.pools().values() if pool.topology_keys
    }
    return tuple(sorted(found))


class _RuntimeLookup:
    """Each workflow's runtime samples: its name and user's in its pool, else its pool's; the
    pool's and those of every pool in ``pools`` behind them (``scheduler/runtimes.py``)."""

    def __init__(self, history: History, pools: Sequence[str]) -> None:
        self._history = history
        self._pool_names = pools
        self._pools: dict[str, tuple[dict[tuple[str, str], list[float]], tuple[float, ...]]] = {}
        self._cluster: tuple[float, ...] | None = None
        #: One instance per kind of work: alike groups share it, and its histories.
        self._kinds: dict[tuple[str, str, str, float], Runtimes] = {}

    def of(self, workflow: StoredWorkflow) -> Runtimes:
        kind = (workflow.pool, workflow.name, workflow.submitted_by, workflow.exec_timeout_s)
        found = self._kinds.get(kind)
        if found is None:
            by_name, pool = self._pool(workflow.pool)
            own = by_name.get((workflow.name, workflow.submitted_by), [])
            found = history_runtimes(own, pool, workflow.exec_timeout_s, cluster=self._every())
            self._kinds[kind] = found
        return found

    def _every(self) -> tuple[float, ...]:
        if self._cluster is None:
            every = (s for name in self._pool_names for s in self._pool(name)[1])
            self._cluster = tuple(sorted(every))
        return self._cluster

    def _pool(self, pool: str) -> tuple[dict[tuple[str, str], list[float]], tuple[float, ...]]:
        found = self._pools.get(pool)
        if found is None:
            by_name: dict[tuple[str, str], list[float]] = defaultdict(list)
            every = []
            for name, user, seconds in self._history(pool):
                by_name[(name, user)].append(seconds)
                every.append(seconds)
            found = self._pools[pool] = (dict(by_name), tuple(sorted(every)))
        return found
