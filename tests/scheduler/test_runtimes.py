"""How long a group runs, as the forecast draws it (``scheduler/runtimes.py``): conditioned on
what it has run, falling back from its own kind to its pool and the cluster, a tail past every
past run, and the exec timeout as a bound, never a default."""

from __future__ import annotations

import math
import random
import statistics

from hypothesis import given
from hypothesis import strategies as st

from corral.scheduler.runtimes import Runtimes

histories = st.lists(st.floats(1, 10_000, allow_nan=False), max_size=5).map(tuple)


@given(
    own=histories,
    pool=histories,
    every=histories,
    timeout=st.floats(10, 20_000, allow_nan=False),
    elapsed=st.floats(0, 30_000, allow_nan=False),
    seed=st.integers(0, 1000),
)
def test_a_draw_is_longer_than_what_ran_and_bounded_by_the_timeout(
    own: tuple[float, ...],
    pool: tuple[float, ...],
    every: tuple[float, ...],
    timeout: float,
    elapsed: float,
    seed: int,
) -> None:
    runtimes = Runtimes(own, timeout, (pool, every))
    drawn = runtimes.draw(random.Random(seed), elapsed)
    assert drawn <= max(timeout, elapsed)
    assert drawn > elapsed or drawn == max(timeout, elapsed)
    if not runtimes.known:
        assert drawn == max(timeout, elapsed)  # nothing known: the bound, said as "unknown"


def test_work_past_its_own_runs_draws_from_the_pools_longer_ones() -> None:
    runtimes = Runtimes((30.0, 30.0, 30.0), 3600, ((30.0, 500.0, 600.0), ()))
    draws = [runtimes.draw(random.Random(seed), elapsed=60) for seed in range(200)]
    assert min(draws) > 300 and max(draws) < 900  # the pool's 500 s and 600 s runs, spread


def test_the_new_users_case_is_not_its_exec_timeout_and_has_a_band() -> None:
    """Three 30 s runs, then a run that has gone 45 s: before, every draw was its exec timeout
    (6 d 23 h), a band of zero width."""
    runtimes = Runtimes((30.0, 30.0, 30.0), 7 * 86_400 - 3600)
    draws = sorted(runtimes.draw(random.Random(seed), elapsed=45) for seed in range(400))
    p10, p50, p90 = (draws[int(q * len(draws))] for q in (0.1, 0.5, 0.9))
    assert 45 < p10 < p50 < p90 < 300  # the fitted log-normal's tail past 45 s
    assert round(p50) in range(55, 75)


def test_work_far_into_its_tail_reaches_its_timeout_as_often_as_its_history_says() -> None:
    """Runs log-normal around an hour (log-spread 0.5), a 4 h timeout; this one has run
    2 h 43 min. Of such runs about one in eight reaches the timeout. A Pareto tail from the
    elapsed time put half its draws there: the median at the exec timeout."""
    rng = random.Random(1)
    history = tuple(rng.lognormvariate(math.log(3600), 0.5) for _ in range(400))
    runtimes = Runtimes(tuple(h for h in history if h < 9000), 14400)  # none past 2 h 30
    draws = sorted(runtimes.draw(random.Random(seed), elapsed=9800) for seed in range(1000))
    at_timeout = sum(d == 14400 for d in draws) / len(draws)
    assert 0.05 < at_timeout < 0.25, at_timeout
    assert 9800 < draws[500] < 13000  # the median well before the timeout


def test_alike_past_runs_still_give_a_band() -> None:
    draws = sorted(Runtimes((300.0,) * 3, 3600).draw(random.Random(seed)) for seed in range(400))
    assert draws[4] > 230 and draws[-5] < 390  # the 1st and 99th percentiles
    assert 0.05 < statistics.pstdev(draws) / 300 < 0.15  # about 10%


def test_runs_that_took_exactly_as_long_are_spread_and_distinct_ones_are_not() -> None:
    """Runs timed by a tick take a few lengths: three of 35 s and one of 65 s drew 35 s
    exactly in three runs of four, and a forecast's band had zero width one time in four."""
    runtimes = Runtimes((35.0, 35.0, 35.0, 65.0), 3600)
    draws = [runtimes.draw(random.Random(seed), elapsed=20) for seed in range(400)]
    near_35 = [d for d in draws if d < 50]
    assert len(set(near_35)) == len(near_35) > 250  # each of them its own length
    assert {d for d in draws if d >= 50} == {65.0}  # the distinct run, drawn as it is


def test_the_pools_runs_far_past_its_timeout_are_other_works_and_not_drawn() -> None:
    """Work of a 4 h timeout has run 2 h 45 min, past all of its own runs; the pool's longer
    runs are of 3-hour work with 12 h timeouts. Drawn, they ended it at its timeout in most
    runs: a median at its exec timeout for a group that started within the hour."""
    own = (3600.0,) * 5
    pool = (3000.0, 10200.0, 12000.0, 20000.0, 30000.0, 40000.0)
    runtimes = Runtimes(own, 14400, (pool, pool))
    draws = sorted(runtimes.draw(random.Random(n), elapsed=9900) for n in range(200))
    assert draws[100] < 14400  # the median is not the timeout
    assert all(9900 < d <= 14400 for d in draws)


def test_work_that_runs_to_its_timeout_is_drawn_at_its_timeout() -> None:
    """A past run that ended at its timeout was cut there: one drawn from it is too."""
    runtimes = Runtimes((3600.0,) * 5, 3600)
    assert {runtimes.draw(random.Random(seed), elapsed=100) for seed in range(50)} == {3600.0}
