"""What a pool can start now, as every view says it (docs/resources.md#what-fits-now): the
overview, the pools page, the topology page's "fits now", ``corral pool shapes``, the queue's
"Borrows". ``scheduler/capacity.py`` computes these figures from the same snapshot and queue
usage the scheduler places with; this module holds them and their words, so that no view has
its own arithmetic (they disagreed: the overview said 292 GPUs free where the pool could start
none).

Two answers, shown side by side where they differ:

* physically: the idle GPUs of the pool's nodes that take new work (not NotReady, cordoned,
  drained or cut off from their fabric), and the whole-node tasks they hold;
* under the pool's quota, at a priority: HIGH and NORMAL work runs within the guarantee and the
  maximum; LOW work may borrow above the guarantee, up to the maximum.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The priority whose work may borrow above its pool's guarantee.
BORROWING = "LOW"
#: The multiplication sign of "2 x 4-GPU tasks".
TIMES = "\u00d7"


@dataclass(frozen=True)
class QuotaRoom:
    """A pool's queue now, and what it leaves a priority (``scheduler/queues.py``'s rules).

    ``guarantee`` and ``maximum`` are None when the pool sets none (no limit)."""

    pool: str
    priority: str
    guarantee: int | None
    maximum: int | None
    #: GPUs of all the pool's running work, and of its HIGH and NORMAL work.
    used: int
    deserved: int

    @property
    def borrows(self) -> bool:
        """Whether work of this priority may use GPUs above the guarantee."""
        return self.priority == BORROWING

    @property
    def room(self) -> int | None:
        """GPUs work of this priority may still start (None: no limit)."""
        found: list[int] = []
        if self.maximum is not None:
            found.append(self.maximum - self.used)
        if self.guarantee is not None and not self.borrows:
            found.append(self.guarantee - self.deserved)
        return max(min(found), 0) if found else None

    @property
    def ceiling(self) -> int | None:
        """The most GPUs work of this priority may ever hold at once (None: no limit)."""
        limits = [] if self.maximum is None else [self.maximum]
        if self.guarantee is not None and not self.borrows:
            limits.append(self.guarantee)
        return min(limits) if limits else None

    def borrowed_by(self, gpus: int) -> int | None:
        """How many of ``gpus`` more GPUs would lie above the guarantee, were they started now:
        what such work borrows (None: the pool has no guarantee)."""
        if self.guarantee is None:
            return None
        return min(gpus, max(self.used + gpus - self.guarantee, 0))

    def words(self) -> str:
        """What limits this priority, in the scheduler's terms: ``pool maximum 72, 64 in
        use`` or ``guarantee 64 for HIGH and NORMAL work, 64 in use``; "" without a limit."""
        room = self.room
        if room is None:
            return ""
        by_maximum = self.maximum is not None and room == max(self.maximum - self.used, 0)
        if by_maximum or self.guarantee is None or self.borrows:
            return f"pool maximum {self.maximum}, {self.used} in use"
        return f"guarantee {self.guarantee} for HIGH and NORMAL work, {self.deserved} in use"


@dataclass(frozen=True)
class DomainCapacity:
    """One domain of a pool's finest topology level (a clique, a rack), or its nodes that
    lack that level's label (``UNLABELLED``), at one task size."""

    domain: str
    #: Its path: the label values of every level, coarsest first, joined by "." (two racks
    #: may share a name under different spines); ``UNLABELLED`` for nodes without them.
    key: str
    #: The pool's nodes there; those not faulty (healthy fabric, Ready); those open to new work;
    #: those open and holding no pod.
    trays: int
    healthy: int
    open: int
    idle: int
    gpus: int
    #: GPUs free on its open nodes.
    free_gpus: int
    #: The GPUs of one task (a whole node's: the most any of its nodes has).
    task_gpus: int
    #: Tasks of ``task_gpus`` its open nodes hold, whatever the quota.
    physical: int
    #: Tasks of ``task_gpus`` that one gang requiring this domain gets placed with now: the
    #: fabric rule (a degraded NVLink domain takes no gang of more than one) and the quota.
    fits: int
    #: It has a faulty tray, and gangs that must share it need a whole fabric.
    degraded: bool

    @property
    def whole_free(self) -> bool:
        """A gang of one whole-node task per tray, requiring this domain, is placed now."""
        return self.trays > 0 and self.task_gpus > 0 and self.fits >= self.trays


@dataclass(frozen=True)
class PoolCapacity:
    quota: QuotaRoom
    #: The pool's finest topology level's node label ("": none).
    level: str
    #: The pool's nodes' GPUs; those on nodes open to new work; those idle there.
    gpus: int
    healthy_gpus: int
    idle_gpus: int
    domains: tuple[DomainCapacity, ...]

    @property
    def free_gpus(self) -> int:
        """GPUs work of this priority may start now: idle, within the quota."""
        room = self.quota.room
        return self.idle_gpus if room is None else min(self.idle_gpus, room)

    @property
    def usable_gpus(self) -> int:
        """The most the pool's work may hold: its healthy GPUs, up to its maximum."""
        maximum = self.quota.maximum
        return self.healthy_gpus if maximum is None else min(self.healthy_gpus, maximum)

    @property
    def largest_gang(self) -> int:
        return max((d.fits for d in self.domains), default=0)

    def free_words(self) -> str:
        """The free GPUs in words: ``296`` when quota and nodes agree; else ``0 (296 idle;
        guarantee 64 for HIGH and NORMAL work, 64 in use)``."""
        if self.free_gpus == self.idle_gpus:
            return str(self.free_gpus)
        return f"{self.free_gpus} ({self.idle_gpus} idle; {self.quota.words()})"


def fits_words(domain: DomainCapacity, quota: QuotaRoom) -> str:
    """``fits now: 2 x 4-GPU tasks (18 physically; pool maximum 72, 64 in use)`` (with a
    multiplication sign): what one gang gets in the domain now, and, where it differs, what
    the nodes alone would hold and why."""
    if domain.task_gpus == 0:
        return "fits now: no GPU task (no node here has GPUs)"
    many = "s" if domain.fits != 1 else ""
    text = f"fits now: {domain.fits} {TIMES} {domain.task_gpus}-GPU task{many}"
    if domain.fits == domain.physical:
        return text
    why = []
    room = quota.room
    if room is not None and domain.fits == room // domain.task_gpus:
        why.append(quota.words())
    if domain.degraded and domain.fits < domain.physical:
        why.append("a faulty tray: gangs of more than one need a whole NVLink domain")
    return f"{text} ({domain.physical} physically; {'; '.join(why)})"
