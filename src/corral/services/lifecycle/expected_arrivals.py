"""What a forecast expects to arrive (docs/forecast.md#how-it-works): the groups first seen
waiting in the last hour, replayed over the next two hours at the same offsets. The future is
assumed like the recent past; ``benchmarks/forecast.py`` measures the same rule."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from corral.scheduler.forecast import QueuedGroup

#: How far back submissions are remembered, and how many times they are replayed ahead.
WINDOW = timedelta(hours=1)
REPEATS = 2
#: The most groups remembered (the newest kept): a burst of submissions costs bounded memory.
MOST = 5_000


class RecentArrivals:
    """Groups first seen waiting, with when; kept for :data:`WINDOW`."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[datetime, QueuedGroup]] = {}

    def note(self, waiting: Sequence[QueuedGroup], now: datetime) -> None:
        """Remember the groups of ``waiting`` not seen before; forget the old ones."""
        for group in waiting:
            self._seen.setdefault(group.key, (now, group))
        horizon = now - WINDOW
        kept = [(key, seen) for key, seen in self._seen.items() if seen[0] > horizon]
        self._seen = dict(kept[-MOST:])

    def expected(self, now: datetime) -> list[tuple[float, QueuedGroup]]:
        """Seconds after ``now`` and the group for each expected arrival."""
        window = WINDOW.total_seconds()
        return [
            ((seen - now).total_seconds() + window * (repeat + 1), group)
            for repeat in range(REPEATS)
            for seen, group in self._seen.values()
        ]
