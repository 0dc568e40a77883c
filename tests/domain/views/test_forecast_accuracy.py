"""Scoring published forecasts against the starts that followed (docs/forecast.md#accuracy)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from corral.domain.views.forecast_accuracy import (
    Outcome,
    PoolAccuracy,
    Refresh,
    accuracy_by_pool,
    calibration_pairs,
    cpu_share,
)

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def outcome(
    start_min: float,
    band: tuple[float | None, float | None, float | None] = (15, 30, 60),
    pool: str = "p",
    group: str = "g",
    unknown: bool = False,
) -> Outcome:
    def at(value: float | None) -> datetime | None:
        return None if value is None else NOW + timedelta(minutes=value)

    p10, p50, p90 = (at(v) for v in band)
    started = NOW + timedelta(minutes=start_min)
    return Outcome(pool, group, NOW, p10, p50, p90, unknown, started)


def test_a_start_inside_the_band_held_and_its_error_is_relative_to_the_wait() -> None:
    on_time = outcome(40)
    assert (on_time.held, on_time.error, on_time.width) == (True, 10 / 40, 45 / 40)
    late = outcome(120)
    assert (late.held, late.error) == (False, 90 / 120)
    early = outcome(10)
    assert (early.held, early.error) == (False, 20 / 10)


def test_a_start_seconds_after_a_forecast_of_now_is_no_large_error() -> None:
    now = outcome(0.1, band=(0, 0, 0))
    assert now.wait_s == 60 and now.error is not None and round(now.error, 3) == 0.1


def test_open_ends_and_unknowns() -> None:
    beyond = outcome(30, band=(15, None, None))  # median beyond the horizon, yet it started
    assert (beyond.held, beyond.error, beyond.width) == (True, 10.0, float("inf"))
    unknown = outcome(30, band=(60 * 24, 60 * 24, 60 * 24), unknown=True)  # its bound
    assert (unknown.held, unknown.error) == (True, None)
    assert not outcome(60 * 25, band=(60 * 24, 60 * 24, 60 * 24), unknown=True).held
    assert calibration_pairs([unknown, beyond, outcome(40)]) == [(1800.0, 2400.0)]


def test_accuracy_per_pool_over_its_starts() -> None:
    found = accuracy_by_pool(
        [
            outcome(40, group="a"),
            outcome(120, group="a"),
            outcome(30, pool="q", group="b", band=(None, None, 60), unknown=True),
        ]
    )
    assert found == [
        PoolAccuracy("p", 1, 2, 0.5, (10 / 40 + 90 / 120) / 2),
        PoolAccuracy("q", 1, 1, 1.0, None),
    ]
    assert found[0].text() == (
        "p: 50% of 2 forecasts inside their 80% band, median error 50% (last 1 start)"
    )
    assert found[1].text() == "q: 100% of 1 forecast inside its 80% band (last 1 start)"


def test_the_share_of_a_core_the_refreshes_took() -> None:
    every_minute = [Refresh(NOW + timedelta(minutes=n), 5, 6.0, 8.0) for n in range(4)]
    assert cpu_share(every_minute) == 18.0 / 180
    assert cpu_share(every_minute[:1]) == 0.0


bands = st.tuples(
    st.one_of(st.none(), st.floats(0, 600)),
    st.one_of(st.none(), st.floats(0, 600)),
    st.one_of(st.none(), st.floats(0, 600)),
)


@given(
    st.lists(
        st.tuples(st.floats(0, 900), bands, st.sampled_from("pq"), st.sampled_from("abc")),
        min_size=1,
        max_size=30,
    )
)
def test_accuracy_is_a_share_and_counts_what_it_scored(
    found: list[tuple[float, tuple[float | None, float | None, float | None], str, str]],
) -> None:
    outcomes = [outcome(start, band, pool, group) for start, band, pool, group in found]
    for pool in accuracy_by_pool(outcomes):
        mine = [o for o in outcomes if o.pool == pool.pool]
        assert 0.0 <= pool.band_hits_ratio <= 1.0
        assert pool.forecasts == len(mine) and pool.starts == len({o.group for o in mine})
        assert pool.median_error is not None and pool.median_error >= 0
