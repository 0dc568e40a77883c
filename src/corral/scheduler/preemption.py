"""Preemption and reclaim that respect topology
(docs/scheduler.md#queues-priorities-and-preemption).

When a group of HIGH or NORMAL priority does not fit, running gangs may be evicted for it:

* **victims** are whole running gangs, never part of one, of strictly lower priority and
  preemptible (LOW), no younger than their queue's minimum runtime (the caller says which are
  protected), and either of the preemptor's own queue (*preempt*) or of a queue that borrows
  GPUs above its guarantee, taken only while it still does (*reclaim*: the preemptor's queue
  runs it within its own guarantee, as all HIGH and NORMAL work does);
* **simulated first**: the victims are evicted in a :class:`Statement` on the scheduler cache,
  the preemptor is placed, and the statement is discarded; victims are returned only when the
  preemptor then fits;
* **topology**: for a group with a required level (one NVL72 clique, say) each domain of that
  level is a candidate region, and only victims with pods in the region are chosen for it, so
  the region the preemptor needs is the one freed (KAI cannot: KAI #1591);
* **cost**: the region whose victims cost least wins — fewest GPUs evicted, then the lowest
  priority, then the youngest (the victims' oldest member started last). Once any running
  gang has reported a checkpoint, the work the victims would lose ranks first: GPUs x seconds
  since each one's last checkpoint, or since its start (docs/checkpoints.md); within a region
  the victims losing least per GPU are taken first, the regions of the victims with the latest
  checkpoints are searched besides the others, and no region is skipped for its GPUs or ages
  (its work lost is not known before it is counted). With no checkpoint reported
  anywhere the choice is the one above, unchanged.

The search counts first and places later. Regions come from two sources in turn — those of the
most preferred victims (youngest first) and those with the most free GPUs (fewest to evict) —
each skipped once it could not beat the cheapest found, until :data:`ENOUGH_ESTIMATES`
regions have enough victims or :data:`MOST_REGIONS_COUNTED` were counted (as
kube-scheduler's own preemption samples its candidates). In each, victims are taken youngest
first until the free GPUs plus theirs hold the group, then any the count does not need is
given back. Then the group is placed (simulated) in the cheapest region by count, with more of
the region's victims when its nodes are too fragmented for the count, and in the next ones
while they could still be cheaper. On a cluster of thousands of nodes a preemption costs a
few counts and about one simulated placement, not one per domain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from corral.scheduler.cache import SchedulerCache
from corral.scheduler.fair_share import PRIORITY_RANK
from corral.scheduler.gang import Placement, place_within, relevant_levels
from corral.scheduler.lost_work import LostWork, remembered
from corral.scheduler.podgroup import PodSet
from corral.scheduler.records import Preemption
from corral.scheduler.running import PREEMPTIBLE, Running
from corral.scheduler.snapshot import ClusterSnapshot, Domain
from corral.scheduler.statement import Statement


@dataclass(frozen=True)
class _Estimate:
    """A region and the victims that would free enough GPUs in it, by count (not yet placed)."""

    region: Domain
    victims: tuple[Running, ...]
    #: The remaining allowed victims of the region, most preferred first, for when the
    #: placement needs more than the count says (nodes too fragmented).
    spare: tuple[tuple[Running, int], ...]
    in_region: dict[Running, int]
    cost: Cost


@dataclass(frozen=True)
class _Candidate:
    victims: tuple[Running, ...]
    placement: Placement
    region: Domain
    cost: Cost


#: Least work lost, fewest GPUs, lowest priority (highest rank), youngest, region id.
Cost = tuple[float, int, int, Any, str]


def _cost(victims: Sequence[Running], region: Domain, lost: LostWork) -> Cost:
    """The least work lost (0 when nothing is weighed), then the fewest GPUs, then the
    lowest priority, then the youngest (the set's oldest member started last), then the
    region id."""
    gpus = sum(victim.gpus for victim in victims)
    oldest = min(victim.since for victim in victims)
    work = sum(lost(victim) for victim in victims) if lost else 0.0
    return (work, gpus, -min(v.rank for v in victims), _Later(oldest), region.id)


class _Later:
    """Orders ``since`` values latest first (younger victims are cheaper)."""

    __slots__ = ("since",)

    def __init__(self, since: Any) -> None:
        self.since = since

    def __lt__(self, other: _Later) -> bool:
        return bool(self.since > other.since)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Later) and bool(self.since == other.since)

    def __hash__(self) -> int:
        return hash(self.since)


class Victims(Protocol):
    """Where a search takes its candidate victims from: the scheduler's index of bound gangs
    that are not protected (placed in this pass, or younger than their queue's minimum
    runtime). Both are filtered by priority and queue in the search."""

    def unprotected(self) -> Iterable[Running]:
        """Every candidate, most preferred victim first (youngest first)."""
        ...

    def on_node(self, node: int) -> Iterable[Running]:
        """The candidates with a pod on node ``node`` (the snapshot's index)."""
        ...


def preempt(
    cache: SchedulerCache,
    snapshot: ClusterSnapshot,
    root: PodSet,
    queue: str,
    priority: str,
    victims: Victims,
    lost: LostWork = None,
    freshest: Iterable[Running] = (),
) -> Preemption | None:
    """Victims whose eviction lets ``root`` (of ``queue`` and ``priority``) be placed, and
    where it then goes; None when no allowed victims would do (see the module docstring).
    ``lost`` weighs the work each victim would lose; the regions of ``freshest`` (the
    victims with the latest checkpoints first) are then searched too. ``snapshot`` is the
    cache's for the root's levels; each victim set is tried in a :class:`Statement` on the
    cache and discarded, so the cache is left as it was.
    """
    usage = cache.usage
    rank = PRIORITY_RANK.get(priority, 1)
    if rank >= PRIORITY_RANK[PREEMPTIBLE]:
        return None  # LOW work evicts nothing: it would be equal or higher
    if usage.refusal(queue, root.total.gpu, freed=usage.used.get(queue, 0)):
        return None  # over its guarantee (or maximum) even if its queue were empty
    search = _Search(cache, snapshot, root, queue, rank, victims.on_node, lost)
    sources = [search.regions_of_victims(victims.unprotected()), search.roomiest_regions()]
    if lost is not None:
        sources.append(search.regions_of_victims(freshest))
    for region in _alternate(*sources):
        if len(search.estimates) >= ENOUGH_ESTIMATES or search.tried >= MOST_REGIONS_COUNTED:
            break
        search.estimate(region)
    best, others = search.place_cheapest()
    if best is None:
        return None
    return Preemption(
        best.placement,
        best.victims,
        best.region.id,
        best.cost[0],
        tuple(other.cost[0] for other in others),
    )


#: A search counts victims in regions until this many regions have enough of them, or this
#: many were counted, then places the group in the cheapest (kube-scheduler's preemption, too,
#: looks at a bounded sample of candidates).
ENOUGH_ESTIMATES = 4
MOST_REGIONS_COUNTED = 64


def _alternate(*given: Iterator[Domain]) -> Iterator[Domain]:
    """One region of each source in turn, until all are empty."""
    sources = list(given)
    while sources:
        for source in list(sources):
            found = next(source, None)
            if found is None:
                sources.remove(source)
            else:
                yield found


class _Search:
    """Counting first (cheap: a region's nodes and their victims), then simulated placements in
    the cheapest regions by count (each releases the victims, places the group, and puts
    everything back)."""

    def __init__(
        self,
        cache: SchedulerCache,
        snapshot: ClusterSnapshot,
        root: PodSet,
        queue: str,
        rank: int,
        on_node: Callable[[int], Iterable[Running]],
        lost: LostWork,
    ) -> None:
        self.cache = cache
        self.snapshot = snapshot
        self.lost = remembered(lost)
        self.root = root
        self.queue = queue
        self.rank = rank
        self.usage = cache.usage
        self.on_node = on_node
        self.need = root.total.gpu
        self.level = _region_level(snapshot, root)
        self.estimates: list[_Estimate] = []
        self.best: _Estimate | None = None
        self.seen: set[Domain] = set()
        self.tried = 0

    # -- which victims ----------------------------------------------------------------------

    def allowed(self, victim: Running) -> bool:
        """Preemptible, strictly lower priority, and of the preemptor's queue or of a queue
        that borrows above its guarantee."""
        if victim.priority != PREEMPTIBLE or victim.rank <= self.rank:
            return False
        return victim.queue == self.queue or self.usage.borrowed(victim.queue) > 0

    def _may_improve_with(self, victim: Running) -> bool:
        """Whether a region whose most preferred victim is ``victim`` could cost no more than
        the best so far on priority and age (it may still win on GPUs: see
        :meth:`roomiest_regions`). Always, when work lost is weighed: it ranks first, and is
        not known before a region is counted."""
        assert self.best is not None
        if self.lost is not None:
            return True
        best_rank = min(v.rank for v in self.best.victims)
        if victim.rank != best_rank:
            return victim.rank > best_rank
        return bool(victim.since > min(v.since for v in self.best.victims))

    # -- where ------------------------------------------------------------------------------

    def regions_of_victims(self, running: Iterable[Running]) -> Iterator[Domain]:
        """The regions of the allowed victims, most preferred victim first, until no region
        of a later victim could be younger than the best found."""
        for victim in running:
            if not self.allowed(victim):
                continue
            if self.best is not None and not self._may_improve_with(victim):
                return
            yield from self._regions_of(victim)

    def _regions_of(self, victim: Running) -> Iterator[Domain]:
        """The regions (domains of the required level) holding a pod of ``victim``."""
        if self.level is None:
            yield self.snapshot.root
            return
        for binding in victim.bindings:
            index = self.snapshot.index.get(binding.node)
            if index is None:
                continue
            leaf = self.snapshot.ancestors[index][0]
            if self.level < len(leaf.path):
                yield leaf.path[self.level]

    def roomiest_regions(self) -> Iterator[Domain]:
        """Regions with the most free GPUs first (the fewest to evict), from the free-GPU
        index, while one could evict fewer GPUs than the best so far."""
        if self.level is None:
            return
        index = self.snapshot.by_free_gpu[self.level]
        for free in sorted(index, reverse=True):
            for region in sorted(index[free], key=lambda d: d.id):
                if self._beaten_by_count(free, ties=True):
                    return
                yield region

    def _beaten_by_count(self, free: int, *, ties: bool = False) -> bool:
        """Whether a region with ``free`` GPUs must evict more GPUs than the best so far (or
        as many, with ``ties``). Never when work lost is weighed: it ranks before GPUs."""
        if self.best is None or self.lost is not None:
            return False
        least = self.need - free
        return least >= self.best.cost[1] if ties else least > self.best.cost[1]

    # -- counting ---------------------------------------------------------------------------

    def estimate(self, region: Domain) -> None:
        """The victims of ``region`` that free enough GPUs by count: youngest first, then
        without any that is not needed for the count."""
        if region in self.seen:
            return
        self.seen.add(region)
        if self._beaten_by_count(region.free_gpu):
            return  # it would evict more than the best even at its best
        self.tried += 1
        victims = self._victims_in(region)
        in_region = dict(victims)
        chosen: list[Running] = []
        taken: dict[str, int] = {}
        freed = 0
        rest = iter(victims)
        for victim, gpus in rest:
            if not self._may_take(victim, taken):
                continue
            chosen.append(victim)
            freed += gpus
            if region.free_gpu + freed >= self.need:
                break
        else:
            return  # even every allowed victim of the region would not free enough
        for victim in sorted(chosen, key=self._dearest):
            if len(chosen) > 1 and region.free_gpu + freed - in_region[victim] >= self.need:
                chosen.remove(victim)
                freed -= in_region[victim]
        found = _Estimate(region, tuple(chosen), tuple(rest), in_region, self._cost(chosen, region))
        self.estimates.append(found)
        if self.best is None or found.cost < self.best.cost:
            self.best = found

    def _cost(self, victims: Sequence[Running], region: Domain) -> Cost:
        return _cost(victims, region, self.lost)

    def _dearest(self, victim: Running) -> tuple[float, int]:
        """Sorts the victims a count may give back: the most work lost first (when weighed),
        then the most GPUs."""
        return (-self.lost(victim) if self.lost else 0.0, -victim.gpus)

    def _may_take(self, victim: Running, taken: dict[str, int]) -> bool:
        """Whether reclaim may take ``victim`` after ``taken`` (GPUs per queue): only while
        its queue still borrows."""
        if victim.queue == self.queue:
            return True
        if self.usage.borrowed(victim.queue) - taken.get(victim.queue, 0) <= 0:
            return False
        taken[victim.queue] = taken.get(victim.queue, 0) + victim.gpus
        return True

    def _victims_in(self, region: Domain) -> list[tuple[Running, int]]:
        """Allowed victims with a pod in ``region``, most preferred first, with the GPUs each
        frees there."""
        nodes = self.snapshot.nodes_of(region)
        inside = set(nodes)
        index = self.snapshot.index
        freed: dict[Running, int] = {}
        for i in nodes:
            for victim in self.on_node(i):
                if victim not in freed and self.allowed(victim):
                    freed[victim] = sum(
                        b.demand.gpu for b in victim.bindings if index.get(b.node) in inside
                    )
        return sorted(freed.items(), key=lambda item: self._preference(item[0]))

    def _preference(self, victim: Running) -> tuple[int, float, _Later]:
        """Most preferred victim first: the lowest priority, the least work lost per GPU
        (when weighed), the youngest."""
        per_gpu = self.lost(victim) / max(victim.gpus, 1) if self.lost else 0.0
        return (-victim.rank, per_gpu, _Later(victim.since))

    # -- placing ----------------------------------------------------------------------------

    def place_cheapest(self) -> tuple[_Candidate | None, list[_Candidate]]:
        """Simulate the cheapest estimates first; stop once no estimate left is cheaper than a
        placement found. The cheapest placement, and the others found."""
        placed: list[_Candidate] = []
        for estimate in sorted(self.estimates, key=lambda e: e.cost):
            if placed and not estimate.cost < min(c.cost for c in placed):
                break
            found = self._place(estimate)
            if found is not None:
                placed.append(found)
        if not placed:
            return None, []
        best = min(placed, key=lambda c: c.cost)
        return best, [c for c in placed if c is not best]

    def _place(self, estimate: _Estimate) -> _Candidate | None:
        """The estimate's victims, and more of the region's when the nodes are too
        fragmented for the count: the group's placement once they are gone, or None."""
        chosen = list(estimate.victims)
        taken: dict[str, int] = {}
        for victim in chosen:
            self._may_take(victim, taken)
        placement = self._placement_without(chosen, estimate.region)
        spare = iter(estimate.spare)
        while placement is None:
            more = next(spare, None)
            if more is None:
                return None
            if not self._may_take(more[0], taken):
                continue
            chosen.append(more[0])
            placement = self._placement_without(chosen, estimate.region)
        return _Candidate(
            tuple(chosen), placement, estimate.region, self._cost(chosen, estimate.region)
        )

    def _placement_without(self, victims: Sequence[Running], region: Domain) -> Placement | None:
        """The preemptor's placement in ``region`` once ``victims`` are gone (simulated), or
        None; also None when its queue would still be over a limit, or a victim's queue would
        be reclaimed below its guarantee."""
        if not self._queues_allow(victims):
            return None
        with Statement(self.cache) as trial:  # discarded: only the placement is kept
            for victim in victims:
                trial.evict(victim.key)
            return place_within(self.snapshot, self.root, self.queue, region)

    def _queues_allow(self, victims: Sequence[Running]) -> bool:
        own = sum(v.gpus for v in victims if v.queue == self.queue)
        if self.usage.refusal(self.queue, self.need, freed=own):
            return False
        taken: dict[str, int] = {}
        for victim in sorted(victims, key=lambda v: v.gpus):
            if victim.queue == self.queue:
                continue
            # reclaim takes a gang only while its queue still borrows
            if self.usage.borrowed(victim.queue) - taken.get(victim.queue, 0) <= 0:
                return False
            taken[victim.queue] = taken.get(victim.queue, 0) + victim.gpus
        return True


def _region_level(snapshot: ClusterSnapshot, root: PodSet) -> int | None:
    """The level whose domains are the candidate regions: the root's required level, or None
    (the whole cluster) when the root has none."""
    constraint = root.constraint
    if constraint is None or constraint.required is None:
        return None
    levels = relevant_levels(snapshot, root)
    required = snapshot.level_of(constraint.required)
    return required if required is not None and required in levels else None


def by_node(running: Iterable[Running], snapshot: ClusterSnapshot) -> Mapping[int, list[Running]]:
    """The gangs with a pod on each node (for callers without an index of their own)."""
    found: dict[int, list[Running]] = {}
    for gang in running:
        for i in {snapshot.index[b.node] for b in gang.bindings if b.node in snapshot.index}:
            found.setdefault(i, []).append(gang)
    return found
