"""How good the published forecasts were, and what refreshing them cost
(docs/forecast.md#accuracy): for each forecast whose group has started since, whether the
start fell inside its 80% band and how far its median was, relative to the wait; per pool,
over its latest starts. The benchmark (``benchmarks/forecast.py``) scores its forecasts with
the same functions."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

#: A wait shorter than this counts as this long: a start seconds after a forecast of "now"
#: is not a 100% error.
SHORTEST_WAIT_S = 60.0
#: A median beyond the forecast's horizon for a group that did start: this many waits off.
BEYOND_HORIZON_ERROR = 10.0


@dataclass(frozen=True)
class Outcome:
    """A published forecast and the start that followed it."""

    pool: str
    group: str
    published_at: datetime
    p10: datetime | None
    p50: datetime | None
    p90: datetime | None
    #: It said "unknown" with a bound (p90): no median to score.
    unknown: bool
    started_at: datetime

    @property
    def wait_s(self) -> float:
        return max((self.started_at - self.published_at).total_seconds(), SHORTEST_WAIT_S)

    @property
    def held(self) -> bool:
        """The start fell inside the band (an open end: the horizon, never reached); for an
        "unknown", by its bound: that was all it said."""
        after_low = self.unknown or self.p10 is None or self.p10 <= self.started_at
        return after_low and (self.p90 is None or self.started_at <= self.p90)

    @property
    def error(self) -> float | None:
        """|median - start| / wait; None when the forecast said "unknown"."""
        if self.unknown:
            return None
        if self.p50 is None:
            return BEYOND_HORIZON_ERROR
        return abs((self.p50 - self.started_at).total_seconds()) / self.wait_s

    @property
    def width(self) -> float:
        """(p90 - p10) / wait: how much the band said (infinite when open-ended)."""
        if self.p10 is None or self.p90 is None:
            return float("inf")
        return (self.p90 - self.p10).total_seconds() / self.wait_s


@dataclass(frozen=True)
class PoolAccuracy:
    """A pool's forecasts over its latest starts."""

    pool: str
    starts: int
    forecasts: int
    #: The share of forecasts whose start fell inside the 80% band.
    band_hits_ratio: float
    #: The median |median - start| / wait (None: every forecast said "unknown").
    median_error: float | None

    def text(self) -> str:
        """``nvl72: 84% of 310 forecasts inside their 80% band, median error 21% (last 57
        starts)``."""
        error = "" if self.median_error is None else f", median error {self.median_error:.0%}"
        starts = "start" if self.starts == 1 else "starts"
        forecasts = "forecast inside its" if self.forecasts == 1 else "forecasts inside their"
        return (
            f"{self.pool}: {self.band_hits_ratio:.0%} of {self.forecasts} {forecasts} 80% "
            f"band{error} (last {self.starts} {starts})"
        )


def calibration_pairs(outcomes: Iterable[Outcome]) -> list[tuple[float, float]]:
    """(median wait, actual wait) in seconds of each outcome that had a median: what
    ``scheduler/calibration.py`` widens the next bands by."""
    return [
        ((o.p50 - o.published_at).total_seconds(), (o.started_at - o.published_at).total_seconds())
        for o in outcomes
        if o.p50 is not None and not o.unknown
    ]


def accuracy_by_pool(outcomes: Iterable[Outcome]) -> list[PoolAccuracy]:
    """Per pool, sorted by name."""
    by_pool: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_pool[outcome.pool].append(outcome)
    return [_accuracy(pool, found) for pool, found in sorted(by_pool.items())]


def _accuracy(pool: str, outcomes: list[Outcome]) -> PoolAccuracy:
    errors = [error for error in (o.error for o in outcomes) if error is not None]
    return PoolAccuracy(
        pool=pool,
        starts=len({outcome.group for outcome in outcomes}),
        forecasts=len(outcomes),
        band_hits_ratio=sum(outcome.held for outcome in outcomes) / len(outcomes),
        median_error=statistics.median(errors) if errors else None,
    )


@dataclass(frozen=True)
class Refresh:
    """One forecast refresh: how many groups, and what it cost."""

    computed_at: datetime
    groups: int
    cpu_seconds: float
    wall_seconds: float


def cpu_share(refreshes: Sequence[Refresh]) -> float:
    """The share of one core ``refreshes`` (oldest first) took: the CPU of all but the first
    over the time from the first to the last (0 with fewer than two)."""
    if len(refreshes) < 2:
        return 0.0
    span = (refreshes[-1].computed_at - refreshes[0].computed_at).total_seconds()
    return sum(r.cpu_seconds for r in refreshes[1:]) / span if span > 0 else 0.0
