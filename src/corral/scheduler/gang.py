"""Placing one PodGroup: KAI's gang and topology semantics
(docs/osmo-reference.md#kais-topology-and-gang-semantics).

Phases, as Kubernetes' scheduler framework names them: *filter* (nodeSelector, taints,
resources per node), *candidates* (topology domains that could hold a set, finest level
first, in the order of ``packing.py``, which also spreads a set over as few children of its
domain as hold it), *reserve* (tentative binds on the snapshot, rolled back when a later set
or pod fails, so the next candidate sees the true free capacity) and the caller's *bind*
(``snapshot.bind(placement.bindings)``). The snapshot is unchanged when this returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.scheduler.explain import explain_pending
from corral.scheduler.packing import candidate_key, fewest_children, own_key
from corral.scheduler.packing_policy import Packing
from corral.scheduler.podgroup import GroupError, PodRequest, PodSet, read_pod_group
from corral.scheduler.queues import QueueUsage
from corral.scheduler.resources import Demand
from corral.scheduler.snapshot import CLUSTER_ROOT, TOPOLOGY_ROOT, Binding, ClusterSnapshot, Domain


@dataclass(frozen=True)
class Placement:
    """Where every gang member (and every extra pod that fitted) goes."""

    bindings: tuple[Binding, ...]
    #: Per set (subgroup name; ``""`` for the PodGroup itself): the id of the domain chosen.
    domains: Mapping[str, str]
    #: Extra pods beyond a leaf's minMember that did not fit (KAI retries them later).
    unplaced: tuple[str, ...] = ()
    #: The PodGroup's ``spec.queue`` and the GPUs the placement takes, for queue accounting.
    queue: str = ""

    @property
    def gpus(self) -> int:
        return sum(binding.demand.gpu for binding in self.bindings)

    def nodes(self) -> dict[str, str]:
        """Pod name -> node name."""
        return {binding.pod: binding.node for binding in self.bindings}


@dataclass(frozen=True)
class Pending:
    """Nothing was placed; ``reason`` says why in the user's terms."""

    reason: str


#: A group that does not fit, its reason not worked out (``place_pod_set(explain=False)``).
UNEXPLAINED = Pending("")


class TopologyLevelError(GroupError):
    """A constraint names a level the topology does not have (KAI's message,
    docs/osmo-reference.md#kais-topology-and-gang-semantics)."""


def place_group(
    snapshot: ClusterSnapshot,
    pod_group: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    queues: QueueUsage | None = None,
    *,
    preemptible: bool = False,
) -> Placement | Pending:
    """Place every gang member of ``pod_group`` or none; the snapshot is left as it was.

    With ``queues``, a group that would push its ``spec.queue`` over its GPU maximum (or, when
    not ``preemptible``, over its guarantee) stays pending (the caller charges the queue when
    it binds the placement)."""
    queue = str((pod_group.get("spec") or {}).get("queue") or "")
    try:
        root = read_pod_group(pod_group, pods)
    except GroupError as err:
        return Pending(str(err))
    return place_pod_set(snapshot, root, queue, queues, preemptible=preemptible)


def place_pod_set(
    snapshot: ClusterSnapshot,
    root: PodSet,
    queue: str,
    queues: QueueUsage | None = None,
    *,
    preemptible: bool = False,
    explain: bool = True,
) -> Placement | Pending:
    """:func:`place_group` for a PodGroup already read (``podgroup.read_pod_group``). Without
    ``explain``, a group that does not fit gets :data:`UNEXPLAINED` instead of its reason
    (which scans the cluster: a caller that may still evict for it asks later)."""
    try:
        _check_levels(snapshot, root)
    except GroupError as err:
        return Pending(str(err))
    if queues is not None:
        refusal = queues.refusal(queue, root.total.gpu, preemptible=preemptible)
        if refusal:
            return Pending(refusal)
    placement = place_within(snapshot, root, queue, snapshot.root)
    if placement is not None:
        return placement
    return Pending(explain_pending(snapshot, root)) if explain else UNEXPLAINED


def place_within(
    snapshot: ClusterSnapshot, root: PodSet, queue: str, within: Domain
) -> Placement | None:
    """Where the gang of ``root`` goes inside ``within`` (a domain of its required level, or
    the cluster root), or None; no queue check, and the snapshot is left as it was."""
    trial = _Trial(snapshot)
    try:
        if not trial.place_set(root, within):
            return None
        unplaced = trial.place_extras(root)
        return Placement(
            bindings=tuple(
                Binding(pod.name, snapshot.nodes[i].name, pod.demand) for i, pod in trial.bound
            ),
            domains={name: domain.id for name, domain in trial.domains.items()},
            unplaced=tuple(unplaced),
            queue=queue,
        )
    finally:
        trial.rollback(0)


def _prefers_nodes(pods: Sequence[PodRequest]) -> bool:
    """Whether a pod has a preferred node affinity: its preference leads it, pod by pod."""
    return any(pod.affinity.preferred for pod in pods)


def _check_levels(snapshot: ClusterSnapshot, root: PodSet) -> None:
    for pod_set in root.walk():
        constraint = pod_set.constraint
        if constraint is None:
            continue
        owner = f"subgroup {pod_set.name}" if pod_set.name else "the PodGroup"
        for kind, label in (("required", constraint.required), ("preferred", constraint.preferred)):
            if label is not None and snapshot.level_of(label) is None:
                raise TopologyLevelError(
                    f"{owner} specifies {label!r} as its {kind} topology level, but the "
                    f"topology has only {', '.join(snapshot.levels) or 'no levels'}"
                )


class _Trial:
    """Tentative binds on the snapshot, undone in reverse order on failure."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.bound: list[tuple[int, PodRequest]] = []
        self.domains: dict[str, Domain] = {}

    def rollback(self, mark: int) -> None:
        while len(self.bound) > mark:
            i, pod = self.bound.pop()
            self.snapshot.give_back(i, pod.demand)

    def place_set(self, pod_set: PodSet, within: Domain) -> bool:
        for candidate in candidate_domains(self.snapshot, pod_set, within):
            mark = len(self.bound)
            if self._place_in(pod_set, candidate):
                self.domains[pod_set.name] = candidate
                return True
            self.rollback(mark)
        return False

    def _place_in(self, pod_set: PodSet, domain: Domain) -> bool:
        if not all(self.place_set(child, domain) for child in pod_set.children):
            return False
        if self.snapshot.packing is not Packing.TIGHTEST and not _prefers_nodes(pod_set.members):
            mark = len(self.bound)
            if self._spread(pod_set.members, domain):
                return True
            self.rollback(mark)  # the children's room was optimistic: pod by pod instead
        return all(self._place_pod(pod, domain) for pod in pod_set.members)

    def _spread(self, pods: Sequence[PodRequest], domain: Domain) -> bool:
        """Place ``pods`` in as few children of ``domain`` as hold them, level by level down
        to the finest (``packing.fewest_children``); there, pod by pod."""
        if not pods:
            return True
        if not domain.children:
            return all(self._place_pod(pod, domain) for pod in pods)
        shares = fewest_children(domain, pods)
        if shares is None:
            return False
        start = 0
        for child, count in shares:
            if not self._spread(pods[start : start + count], child):
                return False
            start += count
        return True

    def _place_pod(self, pod: PodRequest, domain: Domain) -> bool:
        snapshot = self.snapshot
        eligible = snapshot.eligible(pod.node_selector, pod.tolerations, pod.affinity)
        scores = snapshot.scores(pod.affinity)
        if scores is None:
            node = best_node(snapshot, domain, pod.demand, eligible)
        else:
            node = preferred_node(snapshot, domain, pod, eligible, scores)
        if node is None:
            return False
        self.snapshot.take(node, pod.demand)
        self.bound.append((node, pod))
        return True

    def place_extras(self, root: PodSet) -> list[str]:
        unplaced = []
        for pod_set in root.walk():
            if not pod_set.extras:
                continue
            domain = self.domains[pod_set.name]
            for pod in pod_set.extras:
                if not self._place_pod(pod, domain):
                    unplaced.append(pod.name)
        return unplaced


# -- candidates ---------------------------------------------------------------------------------


def relevant_levels(snapshot: ClusterSnapshot, pod_set: PodSet) -> list[int]:
    """Levels to search, finest first (docs/osmo-reference.md#kais-topology-and-gang-semantics:
    placing a group); TOPOLOGY_ROOT stands for "anywhere"."""
    constraint = pod_set.constraint
    if constraint is None:
        return []
    required = None if constraint.required is None else snapshot.level_of(constraint.required)
    preferred = None if constraint.preferred is None else snapshot.level_of(constraint.preferred)
    if required is not None:
        if preferred is None or preferred <= required:  # a coarser preference adds nothing
            return [required]
        return list(range(preferred, required - 1, -1))
    assert preferred is not None
    return [*range(preferred, -1, -1), TOPOLOGY_ROOT]


def candidate_domains(
    snapshot: ClusterSnapshot, pod_set: PodSet, within: Domain
) -> Iterator[Domain]:
    """Domains that could hold all of ``pod_set``, in the order to try them."""
    levels = relevant_levels(snapshot, pod_set)
    if not levels:
        yield within
        return
    if within.level == CLUSTER_ROOT:  # constrained sets use labelled nodes only (KAI)
        within = snapshot.topology_root
    required = pod_set.constraint.required if pod_set.constraint else None
    if snapshot.whole_fabric_for(required, pod_set.count):
        yield from (
            domain
            for domain in _candidates(snapshot, levels, pod_set, within)
            if not snapshot.degraded(domain)
        )
        return
    yield from _candidates(snapshot, levels, pod_set, within)


def _candidates(
    snapshot: ClusterSnapshot, levels: list[int], pod_set: PodSet, within: Domain
) -> Iterator[Domain]:
    for level in levels:
        if level <= within.level:  # already inside one domain of this level
            if fits(within, pod_set):
                yield within
            return
        yield from _fitting_domains(snapshot, level, within, pod_set)


def _fitting_domains(
    snapshot: ClusterSnapshot, level: int, within: Domain, pod_set: PodSet
) -> Iterator[Domain]:
    """Domains of ``level`` inside ``within`` that pass the fit test, in the snapshot's packing
    order (``packing.candidate_key``). From the free-GPU index when searching the whole
    topology, so the common case (first bucket fits) looks at a handful of domains."""
    if level == TOPOLOGY_ROOT:
        if fits(within, pod_set):
            yield within
        return
    if snapshot.packing is Packing.TOP_DOWN:
        yield from _top_down(level, within, pod_set)
        return
    key = candidate_key(snapshot.packing)
    if within.level == TOPOLOGY_ROOT:
        index = snapshot.by_free_gpu[level]
        for free in sorted(index):
            if free < pod_set.total.gpu:
                continue
            for domain in sorted(index[free], key=key):
                if fits(domain, pod_set):
                    yield domain
        return
    inside = [d for d in snapshot.domains_at(level, within) if fits(d, pod_set)]
    yield from sorted(inside, key=key)


def _top_down(level: int, within: Domain, pod_set: PodSet) -> Iterator[Domain]:
    """The domains of ``level`` inside ``within`` that pass the fit test, fullest first from
    the top down (``packing.top_down_key``): depth first, each domain's children by free GPUs;
    a domain that fails the fit test is not entered (none inside it can pass)."""
    for child in sorted(within.children, key=own_key):
        if not fits(child, pod_set):
            continue
        if child.level == level:
            yield child
        else:
            yield from _top_down(level, child, pod_set)


def fits(domain: Domain, pod_set: PodSet) -> bool:
    """KAI's optimistic fit test (docs/osmo-reference.md#kais-topology-and-gang-semantics): pod
    copies by free GPUs per node when every member asks for the same GPUs, else summed
    requests against the domain's free sums.
    Node selectors and taints are checked later, when pods are placed."""
    total = pod_set.total
    if pod_set.uniform_gpu:
        if domain.copies_fitting(pod_set.uniform_gpu) < pod_set.count:
            return False
    elif domain.free_gpu < total.gpu:
        return False
    return (
        domain.free_cpu >= total.cpu
        and domain.free_memory >= total.memory
        and domain.free_storage >= total.storage
    )


# -- nodes --------------------------------------------------------------------------------------


def best_node(
    snapshot: ClusterSnapshot, domain: Domain, demand: Demand, eligible: list[bool]
) -> int | None:
    """The node of ``domain`` for one pod: descend into the tightest child domain that could
    hold it, and there take the node with the fewest free GPUs that fits (bin packing keeps
    big holes for big pods). Only the nodes of the domains walked are looked at."""
    return _descend(snapshot, domain, demand, eligible, snapshot.free_gpu.__getitem__, own_key)


def preferred_node(
    snapshot: ClusterSnapshot,
    domain: Domain,
    pod: PodRequest,
    eligible: list[bool],
    scores: list[int],
) -> int | None:
    """:func:`best_node` for a pod with preferred node affinity: the child domain holding the
    best-scoring nodes first, and there the best-scoring node that fits (then the fewest free
    GPUs), as kube-scheduler's NodeAffinity score ranks nodes."""
    free_gpu = snapshot.free_gpu

    def node_key(node: int) -> tuple[int, int]:
        return -scores[node], free_gpu[node]

    def child_key(child: Domain) -> tuple[Any, ...]:
        return -snapshot.best_score(pod.affinity, child, scores), *own_key(child)

    return _descend(snapshot, domain, pod.demand, eligible, node_key, child_key)


def _descend(
    snapshot: ClusterSnapshot,
    domain: Domain,
    demand: Demand,
    eligible: list[bool],
    node_key: Callable[[int], Any],
    child_key: Callable[[Domain], Any],
) -> int | None:
    """The first node that fits ``demand`` down the children that could hold it, in
    ``child_key`` order; in a leaf domain the fitting node of the lowest ``node_key`` (the
    first of equals)."""
    if not domain.children:
        best: int | None = None
        best_key: Any = None
        for i in domain.nodes:
            if eligible[i] and snapshot.fits(i, demand):
                key = node_key(i)
                if best is None or key < best_key:
                    best, best_key = i, key
        return best
    children = [
        child
        for child in domain.children
        if child.free_cpu >= demand.cpu
        and child.free_memory >= demand.memory
        and child.max_node_gpu() >= demand.gpu
    ]
    children.sort(key=child_key)
    for child in children:
        found = _descend(snapshot, child, demand, eligible, node_key, child_key)
        if found is not None:
            return found
    return None
