"""Past forecasts followed until their group starts (``forecast_outcomes.py``): the outcomes
that calibrate the next bands."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from corral.scheduler import Queue
from corral.scheduler.calibration import Calibration
from corral.scheduler.forecast import (
    ClusterNow,
    Forecast,
    QueuedGroup,
    RunningGang,
)
from corral.scheduler.runtimes import Runtimes
from corral.services.lifecycle.forecast_outcomes import PastForecasts

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
NEVER = Runtimes((), 60.0)


def forecast(key: str, median_s: float) -> Forecast:
    at = NOW + timedelta(seconds=median_s)
    return Forecast(key, at, at, at, "q", 1, 1)


def cluster(running: dict[str, float], waiting: list[str]) -> ClusterNow:
    """``running``: key -> seconds after NOW it started."""
    gangs = [RunningGang(k, (), NOW + timedelta(seconds=s), NEVER) for k, s in running.items()]
    queued = [QueuedGroup(k, (), (), "NORMAL", (NOW,), NEVER) for k in waiting]
    return ClusterNow([], [Queue("q")], gangs, queued, NOW + timedelta(hours=1))


def test_each_group_started_after_its_first_forecast_is_an_outcome() -> None:
    past = PastForecasts()
    keys = [f"g{i}" for i in range(20)]
    past.follow({k: forecast(k, 600) for k in keys}, NOW)
    past.follow({k: forecast(k, 60) for k in keys}, NOW + timedelta(minutes=5))  # not again
    # g0..g9 started on time, g10..g18 at twice the wait, g19 before the forecast was made
    # (a bound group whose tasks have not started: it stays followed)
    started = {k: 600.0 for k in keys[:10]} | {k: 1200.0 for k in keys[10:19]}
    past.resolve(cluster(started | {"g19": -5.0}, []))
    assert past.outcomes == 19 and past.calibration() is None  # too few
    past.resolve(cluster({"g19": 1800.0}, []))
    assert past.calibration() == Calibration(1.0, 2.0, 20)


def test_a_group_that_neither_waits_nor_runs_is_forgotten() -> None:
    past = PastForecasts()
    past.follow({"gone": forecast("gone", 600)}, NOW)
    past.resolve(cluster({}, []))  # canceled
    past.resolve(cluster({"gone": 600.0}, []))  # a later run of the same key counts no more
    assert past.outcomes == 0
