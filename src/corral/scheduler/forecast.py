"""When will a waiting group start: the embedded scheduler run forward in virtual time, many
times over sampled runtimes (docs/forecast.md). Pure: no I/O, no clock, deterministic for a
seed.

One *run* starts from the cluster as it is: the running gangs bound where they run, the waiting
groups in the cache as the controller has them. Each running gang ends at a runtime drawn from
the history of like work (never before now, never beyond its exec timeout); then the real pass
(``cycle.place_waiting``: fair share, priorities, preemption, topology) places what it would,
and each group placed gets its own drawn runtime. The run moves from one end to the next until
every group has started or the horizon is reached.

Over the runs, each group's start times give its p10, p50 and p90 (a group that did not start
within the horizon counts as later than any that did), and the gang whose end most often came
just before its start (what it waits on). Each topology domain asked for (``domain_labels``)
gets the median moment its open nodes are first all free at once, before the pass that follows
(when a whole clique frees up for the gang first in line).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from corral.domain.labels import QUEUE as QUEUE_LABEL
from corral.domain.platform.node_health import closed_reason
from corral.domain.platform.nodes import Node
from corral.domain.topology.fabric import NO_FABRIC_RULE, FabricRule
from corral.scheduler import Queue
from corral.scheduler.cache import ReadGroup, SchedulerCache, read_group
from corral.scheduler.cycle import place_waiting
from corral.scheduler.records import BoundPodOnNode
from corral.scheduler.runtimes import Runtimes

#: How far ahead a run looks: a group not started by then is "not within the horizon".
HORIZON = timedelta(days=7)
#: Runs per forecast: p10 and p90 are the 2nd and 18th of 20 sorted starts.
RUNS = 20
#: Changes this close share one pass, as a controller tick (0.5 s) sees them together.
#: Wider windows were measured: 30 s plus 2% of how far ahead lowered the benchmark's coverage
#: from 53% to 49% and raised its median error from 28% to 36% (starts come later, and the
#: delay cascades through every start after them).
WINDOW = timedelta(seconds=1)


@dataclass(frozen=True)
class RunningGang:
    """A group bound to nodes: its pods as the cache reads them, since when it runs."""

    key: str
    pods: tuple[BoundPodOnNode, ...]
    started_at: datetime
    runtimes: Runtimes


@dataclass(frozen=True)
class QueuedGroup:
    """A group waiting for the scheduler, as the controller hands it to the cache."""

    key: str
    manifests: tuple[Mapping[str, Any], ...]
    levels: tuple[str, ...]
    priority: str
    #: Sorts older groups first; its first item is when it began to wait (an arrival's is
    #: replaced by its simulated arrival time).
    age: tuple[Any, ...]
    runtimes: Runtimes
    fabric: FabricRule = NO_FABRIC_RULE


@dataclass(frozen=True)
class Forecast:
    """When a waiting group starts: p10, p50 and p90 (None: not within the horizon), its
    place in its queue and in the admission order of every queue (1 first), and the gang whose
    end it waits on most often (None: it starts at once, or on no one's end)."""

    key: str
    p10: datetime | None
    p50: datetime | None
    p90: datetime | None
    queue: str
    queue_position: int
    position: int
    waits_on: str | None = None
    #: The domain (value of the first of ``domain_labels`` its nodes have) it starts in most
    #: often (None: none of those labels, or it does not start).
    lands_in: str | None = None
    #: The work it waits on has no past runs at all: its start rests on that work's exec
    #: timeout, an upper bound (the forecast says "unknown", not a band).
    on_timeouts: bool = False


@dataclass(frozen=True)
class ClusterNow:
    """What a forecast starts from."""

    nodes: Sequence[Node]
    queues: Sequence[Queue]
    running: Sequence[RunningGang]
    waiting: Sequence[QueuedGroup]
    now: datetime
    min_runtime: Mapping[str, timedelta] = field(default_factory=dict)
    #: Work expected to arrive, seconds after ``now`` each (for example the last hour's
    #: submissions, replayed): it may jump ahead, as real arrivals do. Not forecast itself.
    arrivals: Sequence[tuple[float, QueuedGroup]] = ()
    #: Node labels whose domains (label, value) get a "whole domain free" forecast.
    domain_labels: Sequence[str] = ()


#: A topology domain: its node label and value.
Domain = tuple[str, str]


@dataclass(frozen=True)
class Outlook:
    """A forecast: each waiting group's, by key, and when each domain of ``domain_labels`` is
    next wholly free (median over the runs; None: not within the horizon)."""

    groups: dict[str, Forecast]
    whole_free: dict[Domain, datetime | None]
    #: The CPU seconds it took (of the thread that made it).
    cpu_seconds: float = 0.0


def forecast(
    cluster: ClusterNow, *, seed: int = 0, runs: int = RUNS, horizon: timedelta = HORIZON
) -> dict[str, Forecast]:
    """Each waiting group's forecast, by key."""
    return outlook(cluster, seed=seed, runs=runs, horizon=horizon).groups


def outlook(
    cluster: ClusterNow, *, seed: int = 0, runs: int = RUNS, horizon: timedelta = HORIZON
) -> Outlook:
    """Each waiting group's forecast, and each domain's next wholly free moment."""
    cpu_started = time.thread_time()
    starts: dict[str, list[datetime | None]] = {group.key: [] for group in cluster.waiting}
    waits_on: dict[str, Counter[str]] = {group.key: Counter() for group in cluster.waiting}
    lands_in: dict[str, Counter[str]] = {group.key: Counter() for group in cluster.waiting}
    domains = _Domains(cluster.nodes, cluster.domain_labels)
    reads = _Reads()
    free_at: dict[Domain, list[datetime | None]] = {domain: [] for domain in domains.members}
    order: list[tuple[str, str]] = []
    for run in range(runs):
        rng = random.Random(f"{seed}:{run}")
        result = _run(cluster, rng, cluster.now + horizon, domains, reads)
        order = order or result.order
        for key, found in starts.items():
            start = result.starts.get(key)
            found.append(start[0] if start else None)
            if start and start[1] is not None:
                waits_on[key][start[1]] += 1
            if start and start[2] is not None:
                lands_in[key][start[2]] += 1
        for domain, moments in free_at.items():
            moments.append(result.whole_free.get(domain))
    whole_free = {domain: _percentile(moments, 0.5) for domain, moments in free_at.items()}
    groups = _forecasts(cluster, order, starts, waits_on, lands_in)
    return Outlook(groups, whole_free, time.thread_time() - cpu_started)


class _Domains:
    """The open nodes of each domain, and the domains of each node."""

    def __init__(self, nodes: Sequence[Node], labels: Sequence[str]) -> None:
        self.members: dict[Domain, list[str]] = {}
        self.of_node: dict[str, list[Domain]] = {}
        for node in nodes:
            if closed_reason(node.health) is not None:
                continue
            for label in labels:
                if label in node.labels:
                    domain = (label, node.labels[label])
                    self.members.setdefault(domain, []).append(node.name)
                    self.of_node.setdefault(node.name, []).append(domain)

    def landing(self, nodes: Sequence[str]) -> str | None:
        """The value of the first domain label the first of ``nodes`` has."""
        found = self.of_node.get(nodes[0]) if nodes else None
        return found[0][1] if found else None

    def note_free(
        self,
        cache: SchedulerCache,
        nodes: Iterable[str],
        moment: datetime,
        found: dict[Domain, datetime],
    ) -> None:
        """Record ``moment`` for each domain of ``nodes`` not yet recorded whose open nodes
        all hold nothing."""
        for domain in {d for node in nodes for d in self.of_node.get(node, ())}:
            if domain not in found and not any(
                cache.holds_anything(node) for node in self.members[domain]
            ):
                found[domain] = moment


def _forecasts(
    cluster: ClusterNow,
    order: list[tuple[str, str]],
    starts: Mapping[str, list[datetime | None]],
    waits_on: Mapping[str, Counter[str]],
    lands_in: Mapping[str, Counter[str]],
) -> dict[str, Forecast]:
    found: dict[str, Forecast] = {}
    in_queue: Counter[str] = Counter()
    unknown = {g.key for g in cluster.running if not g.runtimes.known}
    unknown |= {g.key for g in cluster.waiting if not g.runtimes.known}
    # A group no run started waits, past the horizon, on work whose end only its timeout
    # bounds: the one running longest is named (its end is what is not known), of its own
    # queue where there is one.
    unknown_running = sorted(
        (g.started_at, g.key, _queue_of(g)) for g in cluster.running if g.key in unknown
    )
    for position, (key, queue) in enumerate(order, start=1):
        in_queue[queue] += 1
        p10, p50, p90 = (_percentile(starts[key], q) for q in (0.1, 0.5, 0.9))
        common = waits_on[key].most_common(1)
        waits = common[0][0] if common else None
        if waits is None and p50 is None and unknown_running:
            ours = [key for _, key, its in unknown_running if its == queue]
            waits = ours[0] if ours else unknown_running[0][1]
        landing = lands_in[key].most_common(1)
        found[key] = Forecast(
            key,
            p10,
            p50,
            p90,
            queue,
            in_queue[queue],
            position,
            waits,
            landing[0][0] if landing else None,
            waits in unknown,
        )
    return found


def _queue_of(gang: RunningGang) -> str | None:
    return gang.pods[0].labels.get(QUEUE_LABEL) if gang.pods else None


def _percentile(starts: list[datetime | None], quantile: float) -> datetime | None:
    """Nearest rank, a start not within the horizon sorting after every other."""
    ordered = sorted(starts, key=lambda start: (start is None, start or datetime.min))
    index = min(len(ordered) - 1, max(0, math.ceil(quantile * len(ordered)) - 1))
    return ordered[index]


@dataclass
class _RunResult:
    #: Key -> (start, the gang whose end came just before it: None if it started at once,
    #: the domain it started in).
    starts: dict[str, tuple[datetime, str | None, str | None]]
    #: (key, queue) in admission order: by queue, priority and age, as the pass offers them.
    order: list[tuple[str, str]]
    #: When each domain was first wholly free (before that moment's pass).
    whole_free: dict[Domain, datetime]


def _run(
    cluster: ClusterNow, rng: random.Random, until: datetime, domains: _Domains, reads: _Reads
) -> _RunResult:
    now = cluster.now
    cache = SchedulerCache(
        cluster.nodes,
        cluster.queues,
        [pod for gang in cluster.running for pod in gang.pods],
        bound_at={gang.key: gang.started_at for gang in cluster.running},
        min_runtime=cluster.min_runtime,
    )
    ends: list[tuple[datetime, str]] = []
    for gang in cluster.running:
        elapsed = max((now - gang.started_at).total_seconds(), 0.0)
        total = gang.runtimes.draw(rng, elapsed)
        heapq.heappush(ends, (gang.started_at + timedelta(seconds=total), gang.key))
    runtimes = {group.key: group.runtimes for group in cluster.waiting}
    for group in cluster.waiting:
        reads.wait(cache, group)
    order = _admission_order(cache)
    forecast_keys = set(runtimes)
    arrivals = sorted(
        (
            (now + timedelta(seconds=after), f"+{index}", group)
            for index, (after, group) in enumerate(_resampled(cluster.arrivals, rng))
        ),
        key=lambda arrival: (arrival[0], arrival[1]),
    )
    starts: dict[str, tuple[datetime, str | None, str | None]] = {}
    whole_free: dict[Domain, datetime] = {}
    domains.note_free(cache, domains.of_node, now, whole_free)
    ended: set[str] = set()
    moment, last_end = now, None
    while True:
        passed = place_waiting(cache, moment, explain=False)
        ended.update(eviction.group for eviction in passed.evicted)
        for placed in passed.placed:
            key = placed.group.key
            if key in forecast_keys:
                nodes = [binding.node for binding in placed.placement.bindings]
                starts[key] = (moment, last_end, domains.landing(nodes))
            length = timedelta(seconds=runtimes[key].draw(rng))
            heapq.heappush(ends, (moment + length, key))
        if len(starts) == len(forecast_keys) and len(whole_free) == len(domains.members):
            break
        step = _next_step(ends, ended, arrivals[0][0] if arrivals else None)
        if step is None or step[0] > until:
            break
        moment, ending = step
        last_end = ending[-1] if ending else None
        freed: set[str] = set()
        for key in ending:
            freed |= _release(cache, key)
        while arrivals and arrivals[0][0] <= moment:
            _, key, group = arrivals.pop(0)
            runtimes[key] = group.runtimes
            reads.wait(cache, dataclasses.replace(group, key=key, age=(moment, *group.age[1:])))
        domains.note_free(cache, freed, moment, whole_free)
    return _RunResult(starts, order, whole_free)


def _resampled(
    arrivals: Sequence[tuple[float, QueuedGroup]], rng: random.Random
) -> list[tuple[float, QueuedGroup]]:
    """This run's expected arrivals: as many as given, each drawn (with replacement) from
    them at a uniform time over their span. The future is like the recent past, not the
    same: a Poisson process with its rate and its mix of work."""
    if not arrivals:
        return []
    span = max(after for after, _ in arrivals)
    return [(rng.uniform(0.0, span), rng.choice(arrivals)[1]) for _ in arrivals]


def _release(cache: SchedulerCache, key: str) -> set[str]:
    """End the group; the nodes it held."""
    nodes = cache.nodes_of(key)
    cache.release(key)
    return nodes


class _Reads:
    """Each group's objects read once for every run of a forecast (by their identity)."""

    def __init__(self) -> None:
        self._found: dict[int, tuple[Sequence[Mapping[str, Any]], ReadGroup]] = {}

    def wait(self, cache: SchedulerCache, group: QueuedGroup) -> None:
        found = self._found.get(id(group.manifests))
        if found is None:  # the manifests are kept with their reading: the id stays theirs
            found = self._found[id(group.manifests)] = (
                group.manifests,
                read_group(group.manifests),
            )
        cache.add_read(group.key, found[1], group.levels, group.priority, group.age, group.fabric)


def _next_step(
    ends: list[tuple[datetime, str]], ended: set[str], arrival: datetime | None
) -> tuple[datetime, list[str]] | None:
    """The next moment the run passes again, and the gangs that end by then (taken off the
    heap, in end order; evicted ones are skipped). Changes within :data:`WINDOW` of the first
    one are taken together, at the last of them."""
    while ends and ends[0][1] in ended:
        heapq.heappop(ends)
    first = min((when for when in (ends[0][0] if ends else None, arrival) if when), default=None)
    if first is None:
        return None
    until = first + WINDOW
    moment = arrival if arrival is not None and arrival <= until else first
    ending: list[str] = []
    while ends and ends[0][0] <= until:
        when, key = heapq.heappop(ends)
        if key not in ended:
            ended.add(key)
            ending.append(key)
            moment = max(moment, when)
    return moment, ending


def _admission_order(cache: SchedulerCache) -> list[tuple[str, str]]:
    """The waiting groups by queue, then priority and age (``WaitingGroup.order``)."""
    groups = sorted(cache.waiting.values(), key=lambda group: (*group.order(), group.queue))
    return [(group.key, group.queue) for group in groups]
