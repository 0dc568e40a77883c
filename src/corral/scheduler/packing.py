"""Which domains a gang goes to: the order of candidate domains, and how a set's pods are spread
over the children of the domain chosen for it (docs/scheduler.md#packing).

corral's order (:attr:`Packing.BEST_FIT`, the default):

* **Best fit at the level asked for, ties from the top down.** Among the candidate domains of
  one level, the one with the fewest free GPUs that passes the fit test comes first; among
  equals (two whole racks, say), the one inside the fuller zone, then the fuller spine, and so
  on. KAI's topology plugin orders candidates from the top down only (each domain's children
  fullest first, from the root; :attr:`Packing.TOP_DOWN`): a job goes into the fullest spine
  even when that breaks a whole rack there and a tighter rack elsewhere would hold it. On
  ``benchmarks/scheduler.py --fragmentation`` that refuses more large gangs than best fit
  does; breaking ties top down keeps KAI's gain (whole spines stay whole) without that cost.
* **Fewest domains** (Kueue's ``findTopologyAssignment``: at each level below the chosen domain,
  take the children that hold the most of the set's pods first, and for the last part the
  child that holds it most tightly): a set that fits in one rack of its spine goes to one rack.

Below the finest level corral keeps KAI's node order, not Kueue's: each pod takes the node with
the fewest free GPUs that fits it (bin packing), so two 1-GPU pods go to two 1-GPU holes rather
than splitting a whole 2-GPU node; a 2-GPU pod finds that node later.

:attr:`Packing.TIGHTEST` is the order before issue 25 (each domain by its own free GPUs, ties by
id; pods placed one by one into the tightest child). It and :attr:`Packing.TOP_DOWN` are kept so
that the benchmark measures all three on one stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from corral.scheduler.packing_policy import Packing
from corral.scheduler.resources import Demand

if TYPE_CHECKING:  # only for types: the gang search imports this module
    from corral.scheduler.podgroup import PodRequest
    from corral.scheduler.snapshot import Domain


#: The room of a domain for pods that ask for nothing.
UNBOUNDED = 1 << 30


def candidate_key(packing: Packing) -> Callable[[Domain], tuple[Any, ...]]:
    """Sort key of the candidate domains of one level for ``packing`` (TOP_DOWN walks the
    tree instead, see ``gang._top_down``)."""
    return own_key if packing is Packing.TIGHTEST else best_fit_key


def best_fit_key(domain: Domain) -> tuple[int, tuple[tuple[int, ...], str]]:
    """A domain's own free GPUs, then :func:`top_down_key`."""
    return domain.free_gpu, top_down_key(domain)


def top_down_key(domain: Domain) -> tuple[tuple[int, ...], str]:
    """Sort key of candidate domains of one level: the free GPUs of each of its domains from
    the coarsest level down (fullest first), then its id."""
    return tuple(part.free_gpu for part in domain.path), domain.id


def own_key(domain: Domain) -> tuple[int, str]:
    """A domain's own free GPUs, then its id (the candidate order before issue 25; still the
    order of children when one pod descends to its node)."""
    return domain.free_gpu, domain.id


def largest(pods: Sequence[PodRequest]) -> Demand:
    """The most any one pod asks of each resource (KAI sizes a domain's room by it)."""
    return Demand(
        gpu=max(pod.demand.gpu for pod in pods),
        cpu=max(pod.demand.cpu for pod in pods),
        memory=max(pod.demand.memory for pod in pods),
        storage=max(pod.demand.storage for pod in pods),
    )


def room(domain: Domain, demand: Demand) -> int:
    """How many pods of ``demand`` the domain's free resources hold (by its nodes' free GPUs,
    and by its sums of CPU, memory and storage)."""
    counts = []
    if demand.gpu:
        counts.append(domain.copies_fitting(demand.gpu))
    for free, wanted in (
        (domain.free_cpu, demand.cpu),
        (domain.free_memory, demand.memory),
        (domain.free_storage, demand.storage),
    ):
        if wanted:
            counts.append(free // wanted)
    return min(counts) if counts else UNBOUNDED


def fewest_children(domain: Domain, pods: Sequence[PodRequest]) -> list[tuple[Domain, int]] | None:
    """How many of ``pods`` each child of ``domain`` takes so that they use the fewest
    children: the roomiest first, and for the last part the child that holds it most tightly.
    None when the children's room (sized by the largest pod) cannot hold them all."""
    demand = largest(pods)
    rooms = {child: room(child, demand) for child in domain.children}
    ordered = sorted(
        (child for child in domain.children if rooms[child] > 0),
        key=lambda child: (-rooms[child], top_down_key(child)),
    )
    shares: list[tuple[Domain, int]] = []
    remaining = len(pods)
    for index, child in enumerate(ordered):
        if rooms[child] >= remaining:
            tightest = min(
                (other for other in ordered[index:] if rooms[other] >= remaining),
                key=lambda other: (rooms[other], top_down_key(other)),
            )
            shares.append((tightest, remaining))
            return shares
        shares.append((child, rooms[child]))
        remaining -= rooms[child]
    return None
