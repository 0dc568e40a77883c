"""How long a group runs, as the forecast draws it (docs/forecast.md#runtimes): from the past
runs of like work, conditioned on what is known.

- A running group's total runtime is drawn from past runs *longer than it has run*: first of
  its own kind (the same workflow name and user in its pool), then its pool's, then the
  cluster's.
- Where the past run drawn took exactly as long as another (or is the only one it may be drawn
  from), the draw is spread a little around it: no two runs take exactly as long, and runs
  timed by a controller tick take a few distinct lengths, so a band never has zero width for
  that alone.
- Work that has outlived every past run it has gets a tail: the log-normal fitted to its
  closest history, conditioned on what it has run (a Pareto ratio from its elapsed time where
  it is far past that fit). It never ends the instant it is looked at, and never all at one
  moment; a Pareto tail everywhere put half its draws at the timeout for work at three times
  its median, where the fit puts one in eight.
- The exec timeout bounds every draw. It is the answer only where the history puts it there (a
  past run that ended at it; a run of the pool's far past it was other work's, and is not
  drawn), or where there is no history at all (:attr:`Runtimes.known` is then False, and the
  forecast says "unknown" instead of a band).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

#: Fewer past runs of like work than this: the pool's history stands in for them.
LEAST_SAMPLES = 3
#: Past this many deviations of its fitted log-normal, work's tail is a Pareto ratio.
FAR_Z = 4.0
_NORMAL = statistics.NormalDist()
#: A past run up to this multiple of the timeout may have been cut at it (a tick late).
CUT_SLACK = 1.05
#: Log-scale spread of a draw around the past run it comes from (about 10%).
SPREAD = 0.1
#: The least log-scale spread of a tail: a history of runs that all took as long says little
#: about how long one that outlived them all will take.
LEAST_TAIL_SPREAD = 0.5


@dataclass(frozen=True)
class Runtimes:
    """Past runtimes of like work (seconds), wider histories to fall back on, and the exec
    timeout."""

    samples: tuple[float, ...]
    timeout_s: float
    #: The pool's, then the cluster's runtimes: drawn from when work outlives ``samples``.
    wider: tuple[tuple[float, ...], ...] = ()

    def __post_init__(self) -> None:  # sorted: a draw finds the longer ones by bisection
        object.__setattr__(self, "samples", _sorted(self.samples))
        object.__setattr__(self, "wider", tuple(_sorted(w) for w in self.wider))

    @property
    def known(self) -> bool:
        """Whether any past run says how long such work takes."""
        return bool(self.samples) or any(self.wider)

    def draw(self, rng: random.Random, elapsed: float = 0.0) -> float:
        """A total runtime longer than ``elapsed``, at most the timeout (or ``elapsed``, for
        work already past it)."""
        bound = max(self.timeout_s, elapsed)
        # A run well past this work's timeout was other work's (it would have been cut): it
        # says nothing of this one, and drawn would end it at its timeout.
        longest = self.timeout_s * CUT_SLACK
        for history in (self.samples, *self.wider):
            first = bisect.bisect_right(history, elapsed)
            end = bisect.bisect_right(history, longest)
            if first < end:
                index = first + int(rng.random() * (end - first))
                longer = history[index]
                if longer >= self.timeout_s:  # that run was cut at the timeout: so is this one
                    return bound
                if _alike(history, first, end, index):  # they say nothing of spread
                    return min(_spread(rng, longer, elapsed), bound)
                return longer
        if not self.known:
            return bound  # nothing known: the only bound (the forecast says "unknown")
        return min(self._tail(rng, max(elapsed, 1.0)), bound)

    def _tail(self, rng: random.Random, elapsed: float) -> float:
        """A runtime past ``elapsed`` from the log-normal fitted to its closest history (its
        own runs, else its pool's, else the cluster's), conditioned on having run that long.
        Where that fit puts ``elapsed`` beyond :data:`FAR_Z` deviations, a Pareto ratio of
        shape 1/spread instead (the median 1.4x ``elapsed`` at the least spread): the fit no
        longer says anything there."""
        mean, spread = self._fit()
        z = (math.log(elapsed) - mean) / spread
        if z >= FAR_Z:
            return elapsed * math.exp(spread * rng.expovariate(1.0))
        below = _NORMAL.cdf(z)
        quantile = min(below + (1.0 - below) * rng.random(), 1.0 - 1e-12)
        return max(math.exp(mean + spread * _NORMAL.inv_cdf(quantile)), elapsed)

    def _fit(self) -> tuple[float, float]:
        """The mean and spread (at least :data:`LEAST_TAIL_SPREAD`) of the log runtimes of its
        closest history with :data:`LEAST_SAMPLES` runs (else the richest). Worked out once: a
        forecast draws from one instance in every run."""
        found: tuple[float, float] | None = self.__dict__.get("_fitted")
        if found is None:
            histories = (self.samples, *self.wider)
            closest = next((h for h in histories if len(h) >= LEAST_SAMPLES), None)
            chosen = closest or max(histories, key=len)
            logs = [math.log(max(runtime, 1.0)) for runtime in chosen]
            found = (statistics.fmean(logs), max(statistics.pstdev(logs), LEAST_TAIL_SPREAD))
            object.__setattr__(self, "_fitted", found)
        return found


def _alike(history: tuple[float, ...], first: int, end: int, index: int) -> bool:
    """The run drawn is the only candidate (of ``history[first:end]``), or others took exactly
    as long (runs timed by a tick take a few distinct lengths): drawn as it is, every run of a
    forecast would agree."""
    value = history[index]
    tied = (index > first and history[index - 1] == value) or (
        index + 1 < end and history[index + 1] == value
    )
    return first == end - 1 or tied


def _spread(rng: random.Random, runtime: float, elapsed: float) -> float:
    drawn = runtime * math.exp(rng.gauss(0.0, SPREAD))
    return drawn if drawn > elapsed else runtime


def _sorted(history: tuple[float, ...]) -> tuple[float, ...]:
    """``history`` sorted; the same tuple when it is already, so that the pool's and the
    cluster's histories, shared by every group's runtimes, stay one object (and are pickled
    once when a forecast goes to its worker)."""
    if all(a <= b for a, b in itertools.pairwise(history)):
        return history
    return tuple(sorted(history))


def history_runtimes(
    samples: Iterable[float],
    pool: Iterable[float],
    timeout_s: float,
    *,
    cluster: Iterable[float] = (),
    least: int = LEAST_SAMPLES,
) -> Runtimes:
    """Runtimes of like work (the same workflow name, user and pool), else of the pool (when
    fewer than ``least`` of like work); the pool's and the cluster's behind them."""
    own, in_pool = _measured(samples), _measured(pool)
    wider = (in_pool, _measured(cluster))
    if len(own) >= least:
        return Runtimes(own, timeout_s, wider)
    return Runtimes(in_pool if len(in_pool) >= least else own, timeout_s, wider)


def _measured(runtimes: Iterable[float]) -> tuple[float, ...]:
    """The runtimes that are durations; a tuple of them all is kept as the same object."""
    found = runtimes if isinstance(runtimes, tuple) else tuple(runtimes)
    return found if all(s >= 0 for s in found) else tuple(s for s in found if s >= 0)
