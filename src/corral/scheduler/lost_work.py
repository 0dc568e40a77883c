"""The work a victim of preemption would lose (docs/checkpoints.md#how-victims-are-chosen):
GPUs x seconds since the later of its start and its last committed checkpoint."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TypeAlias

from corral.scheduler.running import Running

#: The GPU-seconds a victim would lose if evicted now; None: nothing is weighed (no gang has
#: reported a checkpoint).
LostWork: TypeAlias = Callable[[Running], float] | None


def lost_work(now: datetime, checkpoints: Mapping[str, datetime]) -> LostWork:
    """GPUs x seconds since the later of a victim's start and its last checkpoint (by group
    key); None when no checkpoint was reported (``since[0]`` is the start, or None)."""
    if not checkpoints:
        return None

    def lost(victim: Running) -> float:
        start = victim.since[0] if isinstance(victim.since, tuple) else None
        marks = [m for m in (start, checkpoints.get(victim.key)) if m is not None]
        seconds = (now - max(marks)).total_seconds() if marks else 0.0
        return victim.gpus * max(seconds, 0.0)

    return lost


def remembered(lost: LostWork) -> LostWork:
    """``lost``, worked out once per victim in a search (it is asked again by every sort)."""
    if lost is None:
        return None
    known: dict[str, float] = {}

    def once(victim: Running) -> float:
        found = known.get(victim.key)
        if found is None:
            found = known[victim.key] = lost(victim)
        return found

    return once
