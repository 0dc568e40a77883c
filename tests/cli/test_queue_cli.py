"""``corral queue`` and ``corral pool shapes`` against a real server on both databases
(docs/forecast.md): nothing waits, then a gang waiting for its pool's guarantee is listed, in
text and JSON; each clique's free shape is printed as the API answers it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cli.results import failed, succeeded
from tests.conftest import LiveServer, start_server


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    """A fresh server with the example configs, on SQLite and on PostgreSQL; a tick of 50 ms
    forecasts at most every 3 s."""
    found = start_server(tmp_path, "--demo", "--tick-seconds", "0.05", database_url=database_url)
    yield found
    cancel_alive(found)
    found.stop()


def cancel_alive(server: LiveServer) -> None:
    """Cancel every workflow still alive and wait until it ended: a local task's runner
    outlives the server by design, and a gang of ``sleep 600`` would run on for ten minutes."""
    for _ in range(100):
        listed = json.loads(succeeded(server.cli("workflow", "list", "--format", "json")))
        alive = [w["name"] for w in listed["workflows"] if w["status"] in ALIVE]
        if not alive:
            return
        for workflow_id in alive:
            server.cli("workflow", "cancel", workflow_id)
        time.sleep(0.1)
    raise AssertionError(f"still alive after being canceled: {alive}")


ALIVE = ("PENDING", "WAITING", "RUNNING")


def sixteen_trays(path: Path) -> Path:
    """16 trays of 4 GPUs at NORMAL priority for 10 minutes (a local process, or simulated):
    all of nvl72's guarantee of 64 GPUs."""
    tasks = [
        {
            "name": f"shard{i}",
            "image": "busybox",
            "command": ["sleep", "600"],
            "lead": i == 0,
            "environment": {"CORRAL_SIMULATED_DURATION": "600"},
        }
        for i in range(16)
    ]
    group = {"name": "rack", "tasks": tasks}
    spec = {"workflow": {"name": "rack", "resources": {"default": {"gpu": 4}}, "groups": [group]}}
    path.write_text(yaml.safe_dump(spec))
    return path


def test_the_queue_shows_a_waiting_gang(server: LiveServer, tmp_path: Path) -> None:
    assert succeeded(server.cli("queue")) == "Nothing waits.\n"
    spec = sixteen_trays(tmp_path / "rack.yaml")
    submit = ("workflow", "submit", str(spec), "--pool", "nvl72")
    running = re.search(r"Workflow ID\s+-\s+(\S+)", succeeded(server.cli(*submit)))
    assert running is not None  # it runs, holding the guarantee
    submitted = succeeded(server.cli(*submit))  # waits for the quota
    found_id = re.search(r"Workflow ID\s+-\s+(\S+)", submitted)
    assert found_id is not None, submitted
    workflow_id = found_id.group(1)
    found: dict[str, object] = {}
    for _ in range(100):  # until the controller has made the group wait, and forecast it
        found = json.loads(succeeded(server.cli("queue", "--format", "json")))
        if found["entries"] and found["entries"][0]["forecast_at"]:  # type: ignore[index]
            break
    (entry,) = found["entries"]  # type: ignore[misc]
    assert (entry["workflow_id"], entry["pool"], entry["user"], entry["tasks"]) == (
        workflow_id,
        "nvl72",
        "admin",
        16,
    )
    lines = succeeded(server.cli("queue", "--pool", "nvl72")).splitlines()
    assert lines[0].split() == [
        "Pos",
        "Workflow",
        "Group",
        "Pool",
        "User",
        "Priority",
        "Shape",
        "Waiting",
        "Start",
        "(80%)",
        "Reason",
    ]
    assert lines[2].split()[1:10] == [
        workflow_id,
        "rack",
        "nvl72",
        "admin",
        "NORMAL",
        "16",
        "x",
        "4",
        "GPUs",
    ]
    assert succeeded(server.cli("queue", "--pool", "default")) == "Nothing waits.\n"
    explained = succeeded(server.cli("workflow", "explain", workflow_id))
    # No runtime history: the start is unknown, bounded by the running gang's exec timeout
    # (the demo's 7 days).
    forecast = re.escape(
        f"position 1 in queue nvl72; unknown: waits on {running.group(1)} (running X, no past "
        "runs); at the latest in 6 d 23 h (its exec timeout)"
    ).replace("X", "(under a minute|1 min)")
    assert re.search(f"; {forecast}\n", explained), explained
    queried = succeeded(server.cli("workflow", "query", workflow_id))
    assert re.search(f"\nQueue       : rack: {forecast}\n", queried), queried
    assert (
        lines[2]
        .rstrip()
        .endswith(
            "unknown (at the latest 6 d 23 h)   pool nvl72 would use 128 GPUs, over its "
            "maximum of 72 (64 in use)"
        )
    ), lines[2]
    # The running gang is canceled: the waiting one starts before its bound. Its forecast is
    # measured (an "unknown" holds if the start came by its bound; it has no median).
    succeeded(server.cli("workflow", "cancel", running.group(1)))
    measured = (
        "\nForecasts so far:\n  nvl72: 100% of 1 forecast inside its 80% band (last 1 start)\n"
    )
    text = ""
    for _ in range(100):
        text = succeeded(server.cli("queue"))
        if text.endswith(measured):
            break
        time.sleep(0.1)
    assert text == f"Nothing waits.\n{measured}", text
    found = json.loads(succeeded(server.cli("queue", "--format", "json")))
    assert found["accuracy"] == [
        {"pool": "nvl72", "starts": 1, "forecasts": 1, "band_hits_ratio": 1.0, "median_error": None}
    ]


def test_pool_shapes_prints_each_clique_as_the_api_answers(server: LiveServer) -> None:
    found = json.loads(succeeded(server.cli("pool", "shapes", "nvl72", "--format", "json")))
    assert (found["pool"], found["level"], found["label"]) == (
        "nvl72",
        "gpu-clique",
        "nvidia.com/gpu-clique",
    )
    lines = succeeded(server.cli("pool", "shapes", "nvl72")).splitlines()
    largest, physically = found["largest_gang"], found["largest_physically"]
    assert largest == 16 and physically == 18  # NORMAL work: within the guarantee of 64
    assert lines[0] == (
        "Pool nvl72 by gpu-clique (nvidia.com/gpu-clique), NORMAL work: the largest whole-node "
        "gang in one gpu-clique now is 16 tasks of 4 GPUs (18 physically; guarantee 64 for HIGH "
        "and NORMAL work, 0 in use); the next whole gpu-clique is free at a moment not known "
        "(not within the forecast, or not at this quota)."
    ), lines[0]
    assert lines[1].split() == [
        "Domain",
        "Trays",
        "Healthy",
        "Free",
        "Free",
        "GPUs",
        "Largest",
        "gang",
        "Physically",
        "Whole",
        "free",
    ]
    rows = [line.split()[:7] for line in lines[3:]]
    assert rows == [
        [
            d["domain"],
            str(d["trays"]),
            str(d["healthy"]),
            str(d["free"]),
            f"{d['free_gpus']}/{d['gpus']}",
            str(d["largest_gang"]),
            str(d["physical"]),
        ]
        for d in found["domains"]
    ]
    low = succeeded(server.cli("pool", "shapes", "nvl72", "--priority", "LOW")).splitlines()
    assert low[0] == (
        "Pool nvl72 by gpu-clique (nvidia.com/gpu-clique), LOW work: the largest whole-node "
        "gang in one gpu-clique now is 18 tasks of 4 GPUs; the next whole gpu-clique is free now."
    )
    assert failed(server.cli("pool", "shapes", "nope")) == (
        "error: Pool nope does not exist, or you may not use it: `corral pool list` shows yours."
    )
