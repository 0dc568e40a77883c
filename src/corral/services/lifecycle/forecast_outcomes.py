"""How wrong past forecasts were (docs/forecast.md#calibration): each waiting group's first
forecast median, kept until the group starts; then (median wait, actual wait) is an outcome.
The latest outcomes calibrate the bands of the next forecasts (``scheduler/calibration.py``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from datetime import datetime

from corral.scheduler.calibration import OUTCOMES, Calibration, calibration
from corral.scheduler.forecast import ClusterNow, Forecast

#: The most groups followed at once (the oldest forgotten first).
MOST_OPEN = 20_000


class PastForecasts:
    def __init__(self) -> None:
        #: Group key -> (when forecast, its median start).
        self._open: dict[str, tuple[datetime, datetime]] = {}
        self._done: deque[tuple[float, float]] = deque(maxlen=OUTCOMES)

    def resolve(self, cluster: ClusterNow) -> None:
        """Turn the followed groups that have started into outcomes; forget those that no
        longer wait and did not start (canceled, timed out)."""
        started = {gang.key: gang.started_at for gang in cluster.running}
        waiting = {group.key for group in cluster.waiting}
        for key, (at, median) in list(self._open.items()):
            if key in started and started[key] >= at:
                since = (median - at).total_seconds(), (started[key] - at).total_seconds()
                self._done.append(since)
                del self._open[key]
            elif key not in started and key not in waiting:
                del self._open[key]

    def follow(self, found: Mapping[str, Forecast], at: datetime) -> None:
        """Follow each group forecast at ``at`` that is not followed yet."""
        for key, forecast in found.items():
            if forecast.p50 is not None and key not in self._open:
                self._open[key] = (at, forecast.p50)
        while len(self._open) > MOST_OPEN:
            del self._open[next(iter(self._open))]

    @property
    def outcomes(self) -> int:
        return len(self._done)

    def calibration(self) -> Calibration | None:
        return calibration(self._done)
