"""Start-time forecasts kept by the controller and shown by explain (docs/forecast.md), on
both databases: a gang that waits for the quota the running gangs hold is forecast to start
when the first of them reaches its exec timeout (no runtime history yet), and says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from corral.domain.views.capacity import TIMES
from corral.domain.views.explain import explain_workflow
from corral.domain.views.start_forecast import duration_text
from corral.services.lifecycle.forecasting import Forecaster, in_process, in_worker
from corral.services.runtime import utc_now
from corral.store.forecast_records import ForecastRecords
from tests.services.lifecycle_world import World, task, workflow_yaml


def gang(name: str) -> str:
    """8 trays of 4 GPUs in one clique, for an hour at most."""
    tasks = [task(f"shard{i}", lead=i == 0, seconds=3600) for i in range(8)]
    resources = {"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}}
    return workflow_yaml(
        [{"name": "train", "tasks": tasks}],
        name=name,
        resources=resources,
        timeout={"exec_timeout": "1h"},
    )


def explain(world: World, workflow_id: str) -> dict[str, Any]:
    status, body = world.api.call("GET", f"/api/workflow/{workflow_id}/explain")
    assert status == 200, body
    return dict(body)


@pytest.mark.parametrize("simulated", ["in this process", "in a worker process"])
def test_a_waiting_gang_is_forecast_to_start_when_the_quota_it_waits_for_frees(
    world: World, simulated: str
) -> None:
    """The same forecast, simulated in the controller's process or (as the server does) in a
    worker process of its own."""
    runtime = world.runtime
    world.forecast_on_its_clock(in_process if simulated == "in this process" else in_worker())
    first, second = world.submit(gang("first")), world.submit(gang("second"))
    world.run_until(
        lambda: all(world.workflow(w).groups[0].status == "RUNNING" for w in (first, second))
    )
    waiting = world.submit(gang("third"))  # over the pool's guarantee of 64 GPUs: it waits
    world.run_until(lambda: world.workflow(waiting).groups[0].pending_reason is not None)
    world.clock.advance(31)  # the least time between two forecasts
    world.controller.tick()
    (found,) = runtime.forecasts.of_workflow(waiting).values()
    started = world.workflow(first).groups[0].started_at
    assert started is not None
    ends = started + timedelta(hours=1)  # no runtime history yet: the exec timeout
    assert (found.p10, found.p50, found.p90) == (ends, ends, ends)
    assert (found.queue, found.queue_position, found.position) == ("nvl72", 1, 1)
    assert found.waits_on in (first, second) and found.on_timeouts
    # the clique the running gangs free (a group's domains end with its finest level's)
    paths = [(world.workflow(w).groups[0].domains or {}).values() for w in (first, second)]
    held = {path.rsplit(".", 1)[-1] for found_paths in paths for path in found_paths}
    assert {found.lands_in} == held
    reason = explain(world, waiting)["groups"][0]["reason"]
    assert "; position 1 in queue nvl72; " in reason, reason
    line = (
        explain_workflow(
            world.workflow(waiting),
            world.clock.now,
            forecasts=runtime.forecasts.of_workflow(waiting),
        )
        .groups[0]
        .reason
    )
    until = int((ends - world.clock.now).total_seconds() // 60)
    ran = duration_text((world.clock.now - started).total_seconds())
    assert found.waits_on_since == started
    assert line.endswith(
        f"; position 1 in queue nvl72; unknown: waits on {found.waits_on} (running {ran}, no "
        "past runs); "
        f"at the latest in {until} min (its exec timeout)"
    ), line


def test_the_queue_lists_waiting_groups_in_order_with_their_forecast(world: World) -> None:
    runtime = world.runtime
    world.controller.forecaster = Forecaster(
        runtime.forecasts, runtime.listings.completed_runtimes, background=False
    )
    first, second = world.submit(gang("first")), world.submit(gang("second"))
    world.run_until(
        lambda: all(world.workflow(w).groups[0].status == "RUNNING" for w in (first, second))
    )
    waiting = [world.submit(gang(f"later{i}")) for i in range(2)]
    world.run_until(lambda: world.workflow(waiting[1]).groups[0].pending_reason is not None)
    world.controller.forecaster = Forecaster(  # a fresh one forecasts at its first tick
        runtime.forecasts, runtime.listings.completed_runtimes, background=False
    )
    world.controller.tick()
    status, body = world.api.call("GET", "/api/queue")
    assert status == 200, body
    entries = body["entries"]
    assert [(e["workflow_id"], e["position"], e["queue_position"]) for e in entries] == [
        (waiting[0], 1, 1),
        (waiting[1], 2, 2),
    ]
    assert entries[0]["pool"] == "nvl72" and entries[0]["user"] == "admin"
    assert entries[0]["tasks"] == 8 and entries[0]["on_timeouts"] is True
    assert entries[0]["p50"] is not None and entries[0]["p50"] <= entries[1]["p50"]
    assert entries[0]["reason"].startswith("pool nvl72 would use 96 GPUs")
    # NORMAL work never borrows (it runs within the guarantee): the queue said it would
    # borrow 32 GPUs
    assert (entries[0]["shape"], entries[0]["gpus"], entries[0]["borrows"]) == (
        "8 x 4 GPUs, required gpu-clique",
        32,
        None,
    )
    low = world.submit(gang("low"), priority="LOW")  # 64 in use: 8 of its 32 fit the maximum
    world.controller.tick()
    status, body = world.api.call("GET", "/api/queue")
    (entry,) = [e for e in body["entries"] if e["workflow_id"] == low]
    assert entry["borrows"] == 32  # all above the guarantee of 64, all held
    status, mine = world.api.call("GET", "/api/queue", params={"users": ["someone-else"]})
    assert status == 200 and mine["entries"] == []
    status, other = world.api.call("GET", "/api/queue", params={"pools": ["default"]})
    assert status == 200 and other["entries"] == []


def test_pool_shapes_show_each_clique_and_when_a_busy_one_is_whole_again(world: World) -> None:
    world.clock.now = utc_now()  # the API answers at the real time: a forecast past it is stale
    runtime = world.runtime
    world.controller.forecaster = Forecaster(
        runtime.forecasts, runtime.listings.completed_runtimes, background=False
    )
    first = world.submit(gang("first"))
    world.run_until(lambda: world.workflow(first).groups[0].status == "RUNNING")
    world.controller.tick()
    status, body = world.api.call("GET", "/api/pool/nvl72/shapes")
    assert status == 200, body
    assert (body["level"], body["label"]) == ("gpu-clique", "nvidia.com/gpu-clique")
    # NORMAL work runs within the guarantee of 64, 32 of it in use: 8 more trays anywhere,
    # and never a whole clique (72 GPUs), whatever ends.
    assert (body["priority"], body["largest_gang"], body["largest_physically"]) == (
        "NORMAL",
        8,
        18,
    )
    assert body["quota"] == "guarantee 64 for HIGH and NORMAL work, 32 in use"
    assert {d["largest_gang"] for d in body["domains"]} == {8}
    assert all(d["whole_free_at"] is None for d in body["domains"])
    status, body = world.api.call("GET", "/api/pool/nvl72/shapes", params={"priority": "low"})
    assert status == 200, body
    busy = [d for d in body["domains"] if d["free"] < d["trays"]]
    started = world.workflow(first).groups[0].started_at
    assert started is not None
    assert busy == [
        {
            "domain": "zone-b-spine-0-rack-0-gpu-clique-0",
            "trays": 18,
            "healthy": 18,
            "open": 18,
            "free": 10,
            "gpus": 72,
            "free_gpus": 40,
            "task_gpus": 4,
            "physical": 10,
            "largest_gang": 10,
            "fits": f"fits now: 10 {TIMES} 4-GPU tasks",
            "whole_free_at": busy[0]["whole_free_at"],
            "forecast_at": busy[0]["forecast_at"],
        }
    ]
    # No runtime history: the gang holds its clique until its exec timeout, counted from when
    # the controller bound it (its tasks start a tick later).
    whole_free = datetime.fromisoformat(busy[0]["whole_free_at"]).replace(tzinfo=UTC)
    assert timedelta(0) <= started + timedelta(hours=1) - whole_free <= timedelta(seconds=5)
    assert busy[0]["forecast_at"] is not None
    idle = [d for d in body["domains"] if d not in busy]
    # LOW work may borrow up to the maximum of 72: 40 GPUs left, so no idle clique is whole
    # free now either; its next moment is not known (the forecast's was now).
    assert len(idle) == 4 and body["largest_gang"] == 10
    assert all(d["whole_free_at"] is None and d["largest_gang"] == 10 for d in idle)
    assert (
        idle[0]["fits"]
        == f"fits now: 10 {TIMES} 4-GPU tasks (18 physically; pool maximum 72, 32 in use)"
    )
    status, missing = world.api.call("GET", "/api/pool/nope/shapes")
    assert (status, missing["message"]) == (
        404,
        "Pool nope does not exist, or you may not use it: `corral pool list` shows yours.",
    )


class SlowStore:
    """Forecasts written take 20 s of the fake clock: the forecaster's budget then spaces the
    next one at least 80 s after (25% of a core)."""

    def __init__(self, clock: list[float], records: ForecastRecords) -> None:
        self.clock = clock
        self.writes = 0
        self.records = records

    def replace(self, *args: Any) -> None:
        self.clock[0] += 20
        self.writes += 1


def test_a_slow_forecast_spaces_the_next_one_by_its_budget(world: World) -> None:
    clock = [0.0]
    store = SlowStore(clock, world.runtime.forecasts.records)
    forecaster = Forecaster(
        store,  # type: ignore[arg-type]
        world.runtime.listings.completed_runtimes,
        background=False,
        monotonic=lambda: clock[0],
    )
    world.controller.forecaster = forecaster
    writes = []
    for moment in (0.0, 31.0, 79.0, 101.0):  # the first forecast ends at 20 s
        clock[0] = moment
        world.submit(gang(f"more{moment:g}"))  # every tick changes something
        world.controller.tick()
        writes.append(store.writes)
    assert writes == [1, 1, 1, 2]  # without the budget: a second one at 31 s
