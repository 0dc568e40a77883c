"""Benchmark of the start-time forecast (``scheduler/forecast.py``, docs/forecast.md) against
what the real scheduler then does, on a seeded synthetic trace replayed in virtual time; and
what one forecast costs, in scheduling passes of the same queue.

    .venv/bin/python benchmarks/forecast.py [--nodes 5000] [--hours 24] [--trace current]
        [--quick] [--json]

The cluster is ``benchmarks/scheduler.py``'s (8-GPU nodes, 16 per gpu-clique); the traces are
``benchmarks/forecast_trace.py``'s (``current``; ``overrun``: one name's runs take twice as long
from halfway on; ``new-names``: a quarter of the submissions under names never seen before).
*Reality* (``benchmarks/forecast_reality.py``) is the embedded scheduler's cache and pass
driven by the true runtimes. Every ``--every`` minutes the forecast runs on reality's state,
with runtimes sampled from what finished so far, and each waiting group's band is compared,
later, with its actual start, scored as the controller scores what it publishes
(``domain/views/forecast_accuracy.py``).

Printed: the share of actual starts inside [p10, p90] (target >= 80%), the median of |p50 -
actual start| / actual wait (target <= 25%), the median band width (p90 - p10) / actual wait
(target <= 1.0), forecasts of groups that started within an hour, and more than 5 minutes
before their median, whose median was a running gang's exec timeout (target 0); the same
figures for a naive baseline in the same run (one run with every runtime at its declared
timeout, as Slurm's backfill guesses); the p99 time of a
forecast and of one of reality's passes; and the cost of one forecast of ``--cost-sizes``
waiting groups as scheduling passes of that queue (``benchmarks/forecast_cost.py``; target
<= 30 at 1,000, and 4,000 at most 5x 1,000).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python benchmarks/forecast.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.forecast_cost import costs
from benchmarks.forecast_reality import T0, Reality
from benchmarks.forecast_trace import QUEUE, TRACES, trace
from benchmarks.synthetic_cluster import make_nodes
from corral.domain.views.forecast_accuracy import Outcome
from corral.scheduler.calibration import OUTCOMES, calibrated, calibration
from corral.scheduler.forecast import Forecast, forecast

#: A group that started within this long of a forecast must not have had its median at an
#: exec timeout.
WITHIN_AN_HOUR_S = 3600.0
#: ... and whose start came this long before that timeout (a gang that did run to its timeout
#: ended it: a median there was right).
EARLY_S = 300.0


@dataclass
class Scores:
    outcomes: list[Outcome] = field(default_factory=list)

    def coverage(self) -> float:
        return sum(o.held for o in self.outcomes) / len(self.outcomes) if self.outcomes else 0.0

    def median_error(self) -> float:
        errors = [error for error in (o.error for o in self.outcomes) if error is not None]
        return statistics.median(errors) if errors else 0.0

    def median_width(self) -> float:
        """(p90 - p10) / actual wait: a band of any width covers, a useful one is narrow."""
        return statistics.median(o.width for o in self.outcomes) if self.outcomes else 0.0


@dataclass(frozen=True)
class Published:
    """A forecast made at ``when`` (seconds from T0), the baseline's, and when the running
    gangs' exec timeouts fell then."""

    when: float
    key: str
    found: Forecast
    naive: Forecast
    timeouts: frozenset[datetime]


def replay(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    nodes = make_nodes(args.nodes)
    jobs = trace(rng, args.hours, args.nodes, args.trace)
    reality = Reality(nodes)
    checks = [m * 60.0 for m in range(args.every, int(args.hours * 60), args.every)]
    pending: list[Published] = []
    outcomes = Outcomes()
    forecast_ms: list[float] = []
    arrivals = iter(jobs)
    upcoming = next(arrivals, None)
    moment = 0.0
    horizon = args.hours * 3600
    while moment <= horizon:
        while upcoming is not None and upcoming.arrives <= moment:
            reality.arrive(upcoming)
            upcoming = next(arrivals, None)
        reality.step(moment)
        while checks and checks[0] <= moment:
            checks.pop(0)
            if reality.waiting:
                started = time.perf_counter()
                found = forecast(reality.now_state(moment, False), seed=args.seed, runs=args.runs)
                forecast_ms.append((time.perf_counter() - started) * 1000)
                outcomes.resolve(reality, moment)
                outcomes.add(moment, found)
                at = T0 + timedelta(seconds=moment)
                found = calibrated(found, at, calibration(outcomes.done))
                naive = forecast(reality.now_state(moment, True), seed=args.seed, runs=1)
                timeouts = frozenset(reality.timeouts())
                pending.extend(
                    Published(moment, key, found[key], naive[key], timeouts) for key in found
                )
        candidates = [
            t
            for t in (
                reality.next_end(),
                upcoming.arrives if upcoming else None,
                checks[0] if checks else None,
            )
            if t is not None
        ]
        if not candidates:
            break
        moment = max(min(candidates), moment)
        reality.end_until(moment)
    return _scores(reality, pending, forecast_ms, len(jobs))


class Outcomes:
    """Past forecasts whose group has started since: what calibrates the next forecast, as
    the controller's forecaster keeps them (``scheduler/calibration.py``)."""

    def __init__(self) -> None:
        self.open: list[tuple[float, str, float]] = []  # (when, key, median wait)
        self.done: deque[tuple[float, float]] = deque(maxlen=OUTCOMES)

    def add(self, when: float, found: dict[str, Forecast]) -> None:
        for key, one in found.items():
            if one.p50 is not None:
                median = (one.p50 - T0).total_seconds() - when
                self.open.append((when, key, median))

    def resolve(self, reality: Reality, moment: float) -> None:
        still = []
        for when, key, median in self.open:
            actual = reality.jobs[key].start_after(when)
            if actual is not None and actual <= moment:
                self.done.append((median, actual - when))
            else:
                still.append((when, key, median))
        self.open = still


def _scores(
    reality: Reality, pending: list[Published], forecast_ms: list[float], jobs: int
) -> dict[str, Any]:
    ours, baseline = Scores(), Scores()
    at_timeout = 0
    for published in pending:
        actual = reality.jobs[published.key].start_after(published.when)
        if actual is None:
            continue  # not started again in the trace
        start = T0 + timedelta(seconds=actual)
        at = T0 + timedelta(seconds=published.when)
        found, naive = published.found, published.naive
        for scores, band, unknown in ((ours, found, found.on_timeouts), (baseline, naive, False)):
            scores.outcomes.append(
                Outcome(QUEUE, published.key, at, band.p10, band.p50, band.p90, unknown, start)
            )
        soon = actual - published.when <= WITHIN_AN_HOUR_S
        at_timeout += (
            soon
            and found.p50 in published.timeouts
            and not found.on_timeouts
            and (found.p50 - start).total_seconds() > EARLY_S  # a timeout it did not wait for
        )
    return {
        "jobs": jobs,
        "forecasts": len(ours.outcomes),
        "coverage": round(ours.coverage(), 3),
        "median_error": round(ours.median_error(), 3),
        "median_band_width": round(ours.median_width(), 3),
        "timeout_medians": at_timeout,
        "baseline_coverage": round(baseline.coverage(), 3),
        "baseline_median_error": round(baseline.median_error(), 3),
        "forecast_p99_ms": round(_p99(forecast_ms), 1),
        "pass_p99_ms": round(_p99(reality.pass_ms), 2),
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values) or [0.0]
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--trace", choices=TRACES, default="current")
    parser.add_argument("--every", type=int, default=30, help="minutes between forecasts")
    parser.add_argument("--runs", type=int, default=10, help="Monte Carlo runs per forecast")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--cost-sizes",
        default="1000,4000",
        help="waiting groups whose forecast's cost is measured, against the first ('': none)",
    )
    parser.add_argument("--cost-only", action="store_true", help="measure the cost alone")
    parser.add_argument("--quick", action="store_true", help="64 nodes, 6 hours, 6 runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:  # 6 h: up to the daily peak
        args.nodes, args.hours, args.runs, args.cost_sizes = 64, 6.0, 6, "50,200"
    result = {} if args.cost_only else replay(args)
    sizes = [int(size) for size in args.cost_sizes.split(",") if size]
    found = costs(args.nodes, sizes, args.runs, args.seed)
    if found:
        result["forecast_passes"] = round(found[0].passes, 2)
        result["growth_4k_over_1k"] = round(found[-1].forecast_s / found[0].forecast_s, 2)
    if args.json:
        print(json.dumps(result))
        return
    if not args.cost_only:
        _print_accuracy(args, result)
    if not found:
        return
    for one in found:
        print(
            f"  cost      {one.waiting} waiting: one forecast {one.forecast_s:.2f} s of CPU = "
            f"{one.passes:.1f} scheduling passes of that queue ({one.pass_s * 1000:.1f} ms each)"
        )
    print(
        f"  cost      {found[-1].waiting} waiting / {found[0].waiting}: "
        f"{result['growth_4k_over_1k']:.2f}x (target <= 5x at 4,000 / 1,000)"
    )


def _print_accuracy(args: argparse.Namespace, result: dict[str, Any]) -> None:
    print(
        f"{args.nodes} nodes x 8 GPUs, {args.hours:g} h {args.trace} trace, {result['jobs']} "
        f"workflows, forecasts every {args.every} min ({args.runs} runs each): "
        f"{result['forecasts']} forecast starts compared"
    )
    print(
        f"  forecast  inside [p10, p90] {result['coverage']:.0%} (target >= 80%)  "
        f"median |p50 - actual| / wait {result['median_error']:.0%} (target <= 25%)  "
        f"median (p90 - p10) / wait {result['median_band_width']:.0%} (target <= 100%)  "
        "medians at a timeout it did not wait for, started within an hour: "
        f"{result['timeout_medians']}"
    )
    print(
        f"  baseline  inside [p10, p90] {result['baseline_coverage']:.0%}  median |p50 - actual|"
        f" / wait {result['baseline_median_error']:.0%}  (every runtime its timeout, one run)"
    )
    print(
        f"  time      forecast p99 {result['forecast_p99_ms']} ms, one scheduling pass p99 "
        f"{result['pass_p99_ms']} ms"
    )


if __name__ == "__main__":
    main()
