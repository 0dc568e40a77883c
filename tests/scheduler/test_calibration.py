"""Calibrating a forecast's band by past errors (``scheduler/calibration.py``): exact figures,
and invariants (hypothesis): the band only widens and stays ordered, the median never moves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from corral.scheduler.calibration import Calibration, calibrated, calibration
from corral.scheduler.forecast import Forecast

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def band(p10: float, p50: float, p90: float | None) -> Forecast:
    def at(seconds: float | None) -> datetime | None:
        return None if seconds is None else NOW + timedelta(seconds=seconds)

    return Forecast("g", at(p10), at(p50), at(p90), "q", 1, 1)


def test_the_ratios_percentiles_come_from_the_outcomes() -> None:
    outcomes = [(600.0, 600.0 * (i + 1) / 10) for i in range(20)]  # ratios 0.1 .. 2.0
    assert calibration(outcomes) == Calibration(0.2, 1.8, 20)  # the 2nd and 18th of 20
    assert calibration(outcomes[:19]) is None  # too few


def test_a_narrow_band_is_widened_around_its_median_wait() -> None:
    found = calibrated({"g": band(1000, 1200, 1300)}, NOW, Calibration(0.5, 2.0, 20))["g"]
    assert (found.p10, found.p50, found.p90) == (
        NOW + timedelta(seconds=600),
        NOW + timedelta(seconds=1200),
        NOW + timedelta(seconds=2400),
    )


def test_a_band_beyond_the_horizon_stays_open_ended() -> None:
    found = calibrated({"g": band(1000, 1200, None)}, NOW, Calibration(0.5, 2.0, 20))["g"]
    assert found.p90 is None and found.p10 == NOW + timedelta(seconds=600)


seconds = st.floats(min_value=0, max_value=7 * 86400)


@given(
    st.lists(seconds, min_size=3, max_size=3),
    st.floats(min_value=0, max_value=1),
    st.floats(min_value=1, max_value=10),
)
def test_the_band_only_widens_stays_ordered_and_keeps_its_median(
    times: list[float], low: float, high: float
) -> None:
    p10, p50, p90 = sorted(times)
    before = band(p10, p50, p90)
    after = calibrated({"g": before}, NOW, Calibration(low, high, 20))["g"]
    assert after.p50 == before.p50
    assert after.p10 is not None and after.p90 is not None and after.p50 is not None
    assert after.p10 <= before.p10 and after.p90 >= before.p90  # type: ignore[operator]
    assert NOW <= after.p10 <= after.p50 <= after.p90
