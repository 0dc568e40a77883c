"""Widening a forecast's band by how wrong past forecasts were (docs/forecast.md#calibration).

The runs of a forecast differ only in the runtimes they draw; with many gangs running, those
differences average out and the band narrows, while what the runs cannot know (submissions to
come, failures) does not. So each band is widened, where narrower, to what the errors of past
forecasts say: over the latest outcomes, the 10th and 90th percentiles of (actual wait /
forecast median wait), applied to this forecast's median wait. Pure: the caller keeps the
outcomes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from corral.scheduler.forecast import Forecast

#: Fewer outcomes than this: no calibration (the band is the runs' alone).
LEAST_OUTCOMES = 20
#: The latest outcomes kept.
OUTCOMES = 2_000
#: A median wait under this counts as this long: a start "now" has no ratio.
SHORTEST_WAIT_S = 60.0


@dataclass(frozen=True)
class Calibration:
    """The 10th and 90th percentiles of actual wait / forecast median wait."""

    low: float
    high: float
    outcomes: int


def calibration(outcomes: Iterable[tuple[float, float]]) -> Calibration | None:
    """From (forecast median wait, actual wait) pairs in seconds; None when too few."""
    ratios = sorted(actual / max(median, SHORTEST_WAIT_S) for median, actual in outcomes)
    if len(ratios) < LEAST_OUTCOMES:
        return None

    def nearest_rank(quantile: float) -> float:
        return ratios[max(0, math.ceil(quantile * len(ratios)) - 1)]

    return Calibration(nearest_rank(0.1), nearest_rank(0.9), len(ratios))


def calibrated(
    found: Mapping[str, Forecast], now: datetime, by: Calibration | None
) -> dict[str, Forecast]:
    """Each forecast with its band widened to ``by`` around its median wait, where the runs'
    band is narrower (a forecast beyond the horizon is left as it is)."""
    if by is None:
        return dict(found)
    return {key: _widened(forecast, now, by) for key, forecast in found.items()}


def _widened(forecast: Forecast, now: datetime, by: Calibration) -> Forecast:
    if forecast.p50 is None or forecast.p10 is None:
        return forecast
    wait = max((forecast.p50 - now).total_seconds(), SHORTEST_WAIT_S)
    low = now + timedelta(seconds=wait * by.low)
    high = now + timedelta(seconds=wait * by.high)
    p10 = min(forecast.p10, max(low, now))
    p90 = forecast.p90 if forecast.p90 is None else max(forecast.p90, high)
    return dataclasses.replace(forecast, p10=min(p10, forecast.p50), p90=p90)
