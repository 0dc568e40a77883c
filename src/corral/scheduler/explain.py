"""Why a PodGroup is pending, in the user's terms.

Only computed when placement failed, so it may scan every node. The checks go from the most
specific cause to the most general: a pod no node accepts, a pod no node is big enough for, a
required level no domain has room in, the gang as a whole, and finally the combination.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from corral.domain.formats.quantities import format_quantity
from corral.scheduler.podgroup import PodRequest, PodSet
from corral.scheduler.resources import Demand, describe
from corral.scheduler.snapshot import ClusterSnapshot, Domain

#: Closed nodes named in a reason; the rest are counted.
CLOSED_NAMED = 5


def explain_pending(snapshot: ClusterSnapshot, root: PodSet) -> str:
    """The first reason, from specific to general, that ``root`` cannot be placed now; then the
    closed nodes it could have used, and why each is closed (their capacity is not free)."""
    members = list(root.all_members())
    usable = _usable_by_all(snapshot, members)  # reads every node: once per explanation
    return _first_reason(snapshot, root, members, usable) + _closed_note(snapshot, usable)


def _closed_note(snapshot: ClusterSnapshot, usable: list[bool]) -> str:
    closed = [
        f"{snapshot.nodes[i].name} {reason}"
        for i, reason in enumerate(snapshot.closed)
        if reason is not None and usable[i]
    ]
    if not closed:
        return ""
    more = len(closed) - CLOSED_NAMED
    named = "; ".join(closed[:CLOSED_NAMED]) + (f"; and {more} more" if more > 0 else "")
    return f" (not counted: {named})"


def _first_reason(
    snapshot: ClusterSnapshot, root: PodSet, members: list[PodRequest], usable: list[bool]
) -> str:
    seen: set[tuple[object, ...]] = set()
    for pod in members:
        key = (
            pod.demand,
            tuple(sorted(pod.node_selector.items())),
            repr(pod.tolerations),
            pod.affinity,
        )
        if key in seen:  # gang members are mostly alike: one check each
            continue
        seen.add(key)
        reason = _node_problem(snapshot, pod)
        if reason:
            return reason
    for pod_set in root.walk():
        reason = _required_level_problem(snapshot, pod_set)
        if reason:
            return reason
    constrained = any(pod_set.constraint for pod_set in root.walk())
    nodes = _labelled(snapshot) if constrained else range(len(snapshot.nodes))
    shape = _shape(members)
    room = _room(snapshot, nodes, members, usable)
    if room < len(members):
        return (
            f"needs room for {len(members)} pods{shape} at once (gang scheduling); "
            f"the cluster has room for {room} now"
        )
    return (
        f"the {len(members)} pods fit the cluster one by one, but not all at once with their "
        "topology constraints"
    )


def _selector_text(pod: PodRequest) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(pod.node_selector.items()))


def _node_problem(snapshot: ClusterSnapshot, pod: PodRequest) -> str | None:
    eligible = snapshot.eligible(pod.node_selector, pod.tolerations, pod.affinity)
    if not any(eligible):
        affinity = pod.affinity.describe_required() if pod.affinity.required is not None else ""
        if affinity:
            selector = f"nodeSelector {_selector_text(pod)}, " if pod.node_selector else ""
            return (
                f"no node matches {selector}the required node affinity {affinity} and "
                "tolerates its taints"
            )
        if pod.node_selector:
            return f"no node matches nodeSelector {_selector_text(pod)} and tolerates its taints"
        return f"pod {pod.name} tolerates the taints of no node; add a toleration for them"
    demand = pod.demand
    if not any(ok and _within(demand, snapshot.capacity[i]) for i, ok in enumerate(eligible)):
        return (
            f"pod {pod.name} needs {_requests_text(demand)} on one node; no node it may use "
            "has that much even when empty"
        )
    return None


def _within(demand: Demand, free: Demand) -> bool:
    return _copies(free, demand) >= 1


def _requests_text(demand: Demand) -> str:
    parts = [describe(Demand(cpu=demand.cpu))] if demand.cpu else []
    if demand.gpu:
        parts.insert(0, describe(demand))
    if demand.memory:
        parts.append(f"{format_quantity(Decimal(demand.memory))} memory")
    if demand.storage:
        parts.append(f"{format_quantity(Decimal(demand.storage))} ephemeral storage")
    parts.extend(f"{amount} {name}" for name, amount in demand.extended)
    return ", ".join(parts)


def _shape(members: list[PodRequest]) -> str:
    demands = {pod.demand for pod in members}
    if len(demands) == 1:
        return f" with {describe(demands.pop())} each"
    return ""


def _representative(members: Iterable[PodRequest]) -> Demand:
    largest = Demand()
    for pod in members:
        largest = largest.max(pod.demand)
    return largest


def _labelled(snapshot: ClusterSnapshot) -> list[int]:
    return [i for i, labelled in enumerate(snapshot.labelled) if labelled]


def _room(
    snapshot: ClusterSnapshot, nodes: Iterable[int], members: list[PodRequest], usable: list[bool]
) -> int:
    """How many copies of the members' largest request fit on ``nodes`` now, on the open
    nodes every member may use (``usable``; KAI's allocatable pod count)."""
    largest = _representative(members)
    return sum(
        _copies(snapshot.free(i), largest)
        for i in nodes
        if usable[i] and snapshot.closed[i] is None
    )


def _usable_by_all(snapshot: ClusterSnapshot, members: list[PodRequest]) -> list[bool]:
    """Per node: may every member use it. Computed once per explanation (it reads every
    node), not once per domain."""
    usable = [True] * len(snapshot.nodes)
    seen: list[list[bool]] = []
    for pod in members:
        eligible = snapshot.eligible(pod.node_selector, pod.tolerations, pod.affinity)
        if any(eligible is other for other in seen):  # the snapshot caches alike pods' lists
            continue
        seen.append(eligible)
        usable = [a and b for a, b in zip(usable, eligible, strict=True)]
    return usable


def _copies(free: Demand, demand: Demand) -> int:
    """How many pods of ``demand`` fit in ``free`` (pods: each takes one of the node's)."""
    extended = dict(free.extended)
    counts = [
        have // need
        for have, need in (
            (free.gpu, demand.gpu),
            (free.cpu, demand.cpu),
            (free.memory, demand.memory),
            (free.storage, demand.storage),
            (free.pods, demand.pods),
            *((extended.get(name, 0), amount) for name, amount in demand.extended),
        )
        if need
    ]
    return min(counts) if counts else 1_000_000


def _required_level_problem(snapshot: ClusterSnapshot, pod_set: PodSet) -> str | None:
    constraint = pod_set.constraint
    if constraint is None or constraint.required is None:
        return None
    level = snapshot.level_of(constraint.required)
    if level is None:
        return None
    members = list(pod_set.all_members())
    label = constraint.required
    usable = _usable_by_all(snapshot, members)
    whole = snapshot.whole_fabric_for(label, len(members))
    rooms = sorted(
        (-_room(snapshot, snapshot.nodes_of(domain), members, usable), domain.id, domain)
        for domain in snapshot.by_level[level].values()
    )
    if not rooms:
        return f"needs room for {len(members)} pods{_shape(members)} in one {label}; there is none"
    fitting = [domain for room, _, domain in rooms if -room >= len(members)]
    if whole and fitting and all(snapshot.degraded(domain) for domain in fitting):
        return _degraded_problem(snapshot, label, members, fitting[0])
    best, roomiest = -rooms[0][0], rooms[0][2].value
    if best >= len(members):
        return None
    return (
        f"needs room for {len(members)} pods{_shape(members)} in one {label}; "
        f"the roomiest {label}, {label}={roomiest}, has room for {best}"
    )


def _degraded_problem(
    snapshot: ClusterSnapshot, label: str, members: list[PodRequest], roomiest: Domain
) -> str:
    """Every domain with room has a faulty tray, and the pool wants a whole NVLink domain."""
    trays = snapshot.nodes_of(roomiest)
    faulty = snapshot.faulty_trays(roomiest)
    return (
        f"needs {len(members)} pods{_shape(members)} in one {label} whose NVLink fabric is "
        f"whole; every {label} with room has a faulty tray: {label}={roomiest.value} has "
        f"{len(trays) - len(faulty)} healthy trays of {len(trays)} ({'; '.join(faulty[:5])}). "
        "The pool's fabric.partial_domains would let the gang use the healthy part"
    )
