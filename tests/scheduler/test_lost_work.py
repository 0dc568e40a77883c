"""Victims chosen by the work they would lose (``scheduler/preemption.py``, docs/checkpoints.md):
GPUs x seconds since each victim's last checkpoint, or since its start; with no checkpoint
reported anywhere, the choice is by GPUs, priority and age, as before."""

from __future__ import annotations

from datetime import timedelta

import pytest

from corral.scheduler import Queue
from corral.scheduler.lost_work import lost_work
from corral.scheduler.resources import Demand
from corral.scheduler.running import Running
from corral.scheduler.snapshot import Binding
from tests.scheduler.test_cycle_preemption import T0, World, cluster


def _two_low_cliques() -> World:
    """Two cliques of two 8-GPU trays, each filled by a LOW gang: "old" bound 2 hours before
    "young"."""
    world = World(cluster(2, 2), [Queue("q")])
    world.run("old", 2, 8, "q", "LOW")
    world.now += timedelta(hours=1)
    world.run("young", 2, 8, "q", "LOW")
    world.now += timedelta(hours=1)
    return world


def _evicted_for_high(world: World) -> list[str]:
    world.wait("high", 2, 8, "q", "HIGH")
    result = world.place()
    assert [placed.group.key for placed in result.placed] == ["high"]
    return [eviction.group for eviction in result.evicted]


def test_without_checkpoints_the_youngest_gang_is_evicted_as_before() -> None:
    assert _evicted_for_high(_two_low_cliques()) == ["young"]


def test_the_gang_that_checkpointed_a_minute_ago_is_evicted_not_the_one_50_minutes_ago() -> None:
    world = _two_low_cliques()
    world.placements.checkpoint("old", world.now - timedelta(minutes=1))
    world.placements.checkpoint("young", world.now - timedelta(minutes=50))
    assert _evicted_for_high(world) == ["old"]


def test_a_gang_that_never_checkpointed_loses_everything_since_its_start() -> None:
    """Once any gang reported a checkpoint, one that never did counts from its start: "young"
    (1 h since start) loses more than "old" (checkpointed 59 minutes ago)."""
    world = _two_low_cliques()
    world.placements.checkpoint("old", world.now - timedelta(minutes=59))
    assert _evicted_for_high(world) == ["old"]


def test_the_preemption_records_the_work_lost_and_the_other_sets_weighed() -> None:
    world = _two_low_cliques()
    world.placements.checkpoint("old", world.now - timedelta(minutes=1))
    world.placements.checkpoint("young", world.now - timedelta(minutes=50))
    world.wait("high", 2, 8, "q", "HIGH")
    result = world.place()  # the pass is one second later
    [(preemptor, chosen)] = result.preemptions
    assert preemptor == "high"
    assert chosen.lost_gpu_seconds == 16 * 61
    # the other clique's estimate (16 x 3001 s) cannot be cheaper: it is never placed
    assert chosen.alternatives == ()


def test_a_released_gang_forgets_its_checkpoint() -> None:
    world = _two_low_cliques()
    world.placements.checkpoint("old", world.now)
    assert world.placements.release("old")
    assert world.placements.checkpoints == {}
    world.placements.checkpoint("gone", world.now)  # not bound: ignored
    assert world.placements.checkpoints == {}


def test_the_latest_of_a_gangs_reports_counts() -> None:
    world = _two_low_cliques()
    world.placements.checkpoint("old", world.now - timedelta(minutes=1))
    world.placements.checkpoint("old", world.now - timedelta(minutes=30))
    assert world.placements.checkpoints == {"old": world.now - timedelta(minutes=1)}


@pytest.mark.parametrize(
    ("started", "checkpoint", "expected"),
    [
        (T0, None, 8 * 600.0),  # never checkpointed: since its start
        (T0, T0 + timedelta(seconds=500), 8 * 100.0),
        (T0 + timedelta(seconds=300), T0, 8 * 300.0),  # a checkpoint of an earlier run
        (None, None, 0.0),  # start unknown, no checkpoint: nothing known to lose
        (T0 + timedelta(seconds=900), None, 0.0),  # a clock behind the start loses nothing
    ],
)
def test_lost_work_counts_from_the_later_of_start_and_checkpoint(
    started: object, checkpoint: object, expected: float
) -> None:
    victim = Running("v", (Binding("p", "n", Demand(gpu=8)),), "q", "LOW", (started, 0))
    marks = {"v": checkpoint} if checkpoint else {"other": T0}
    lost = lost_work(T0 + timedelta(seconds=600), marks)  # type: ignore[arg-type]
    assert lost is not None and lost(victim) == expected


def test_nothing_is_weighed_without_any_checkpoint() -> None:
    assert lost_work(T0, {}) is None
