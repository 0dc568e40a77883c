"""How long a group runs, as the forecast draws it (docs/forecast.md#runtimes): from the past
runs of like work, conditioned on what is known.

- A running group's total runtime is drawn from past runs *longer than it has run*: first of
  its own kind (the same workflow name and user in its pool), then its pool's, then the
  cluster's.
- Where the past run drawn took exactly as long as another (or is the only one it may be drawn
  from), the draw is spread a little around it: no two runs take exactly as long, and runs
  timed by a controller tick take a few distinct lengths, so a band never has zero width for
  that alone.
- Work that has outlived every past run it has gets a tail: a Pareto tail from its elapsed time,
  as wide as its history is spread on a log scale. It never ends the instant it is looked at,
  and never all at one moment.
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
        return min(max(elapsed, 1.0) * math.exp(self._tail() * rng.expovariate(1.0)), bound)

    def _tail(self) -> float:
        """The log-scale spread of the richest history (at least :data:`LEAST_TAIL_SPREAD`):
        work that has outlived every past run ends at ``elapsed`` times a Pareto ratio of shape
        1/spread, the median 1.4x ``elapsed`` at the least spread. Worked out once: a forecast
        draws from one instance in every run."""
        found: float | None = self.__dict__.get("_tail_spread")
        if found is None:
            richest = max((self.samples, *self.wider), key=len)
            logs = [math.log(max(runtime, 1.0)) for runtime in richest]
            found = max(statistics.pstdev(logs), LEAST_TAIL_SPREAD)
            object.__setattr__(self, "_tail_spread", found)
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
