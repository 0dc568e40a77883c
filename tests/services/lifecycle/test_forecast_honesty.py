"""Issue 46's scenario on the embedded cluster (docs/forecast.md#runtimes): three 30 s runs of a
gang that fills its pool's guarantee, then five 60 s runs of it. Before any run has ended the
waiting gangs' start is "unknown", with the running one's exec timeout as its bound; once the
running gang has outlived every past run, the forecast still says something: never a median at
the exec timeout, never a band of zero width unless the start is now. The record of what was
published then measures it: the queue, its CLI and ``/metrics`` say how often the bands held."""

from __future__ import annotations

import re
from datetime import timedelta

from corral.domain.views.start_forecast import GroupForecast, duration_text, forecast_text
from tests.services.lifecycle_world import World, task, workflow_yaml

EXEC_TIMEOUT = timedelta(days=7)


def big_train(seconds: float) -> str:
    """16 trays of 4 GPUs in one clique: all of nvl72's guarantee of 64 GPUs."""
    tasks = [task(f"shard{i}", lead=i == 0, seconds=seconds) for i in range(16)]
    return workflow_yaml(
        [{"name": "train", "tasks": tasks}],
        name="big-train",
        resources={"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}},
        timeout={"exec_timeout": "7d"},
    )


def forecasts(world: World) -> list[GroupForecast]:
    return list(world.runtime.forecasts.every().values())


def says_something(found: GroupForecast) -> None:
    """No median at an exec timeout, no band of zero width unless the start is now."""
    assert not found.on_timeouts, found
    assert found.p10 is not None and found.p50 is not None and found.p90 is not None, found
    assert found.p50 - found.computed_at < timedelta(hours=1), found
    assert found.p10 < found.p90 or found.p50 <= found.computed_at, found


def test_a_gang_outrunning_its_history_is_forecast_honestly(world: World) -> None:
    world.forecast_on_its_clock()
    short = [world.submit(big_train(30)) for _ in range(3)]

    def forecast_since_it_started() -> bool:
        started = world.workflow(short[0]).groups[0].started_at
        found = forecasts(world)
        return started is not None and len(found) == 2 and found[0].computed_at >= started

    world.run_until(forecast_since_it_started, step=5)
    # No past runs: "unknown", bounded by the running gang's exec timeout.
    running = world.workflow(short[0]).groups[0]
    assert running.started_at is not None
    next_one, after_it = sorted(forecasts(world), key=lambda found: found.position)
    ran = duration_text((world.clock.now - running.started_at).total_seconds())
    said = f"; unknown: waits on {short[0]} (running {ran}, no past runs); "
    assert next_one.p90 == running.started_at + EXEC_TIMEOUT
    bound = duration_text((next_one.p90 - world.clock.now).total_seconds())
    assert forecast_text(next_one, world.clock.now).endswith(
        f"{said}at the latest in {bound} (its exec timeout)"
    )
    # the one after it: two unknown runs ahead, the bound past the horizon
    assert forecast_text(after_it, world.clock.now).endswith(f"{said}no bound within 7 days")
    world.finish(*short, step=5)

    longer = [world.submit(big_train(60)) for _ in range(5)]
    seen = 0
    while any(world.workflow(w).status in ("PENDING", "RUNNING") for w in longer):
        world.controller.tick()
        for found in forecasts(world):
            says_something(found)
            seen += 1
        world.clock.advance(5)
    assert seen > 50  # forecasts past 30 s of a 60 s run among them

    # What was published, measured: the queue, the CLI's lines and /metrics agree.
    status, body = world.api.call("GET", "/api/queue")
    assert status == 200, body
    (pool,) = body["accuracy"]
    assert pool == {
        "pool": "nvl72",
        "starts": 6,  # the two short runs and four long ones that waited
        "forecasts": pool["forecasts"],
        "band_hits_ratio": pool["band_hits_ratio"],
        "median_error": pool["median_error"],
    }
    assert pool["forecasts"] >= 6 and pool["median_error"] is not None
    status, page = 200, world.api.client.get("/metrics").text
    line = f'corral_forecast_band_hits_ratio{{pool="nvl72"}} {pool["band_hits_ratio"]}'
    assert re.search(f"^{re.escape(line)}", page, re.MULTILINE), page
    assert re.search(r"^corral_forecast_refresh_cpu_seconds [0-9.e-]+$", page, re.MULTILINE)
