"""``corral queue`` against a real server (docs/forecast.md#the-queue): nothing waits, then a
gang waiting for its pool's guarantee is listed, in text and JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.cli.results import succeeded
from tests.conftest import LiveServer


def sixteen_trays(path: Path) -> Path:
    """16 trays of 4 GPUs at NORMAL priority for 10 simulated minutes: all of nvl72's
    guarantee of 64 GPUs."""
    tasks = [
        {
            "name": f"shard{i}",
            "image": "busybox",
            "command": ["sh", "-c", "true"],
            "lead": i == 0,
            "environment": {"CORRAL_SIMULATED_DURATION": "600"},
        }
        for i in range(16)
    ]
    group = {"name": "rack", "tasks": tasks}
    spec = {"workflow": {"name": "rack", "resources": {"default": {"gpu": 4}}, "groups": [group]}}
    path.write_text(yaml.safe_dump(spec))
    return path


def test_the_queue_shows_a_waiting_gang(live_server: LiveServer, tmp_path: Path) -> None:
    assert succeeded(live_server.cli("queue")) == "Nothing waits.\n"
    spec = sixteen_trays(tmp_path / "rack.yaml")
    submit = ("workflow", "submit", str(spec), "--pool", "nvl72")
    succeeded(live_server.cli(*submit))  # runs, holding the guarantee
    submitted = succeeded(live_server.cli(*submit))  # waits for the quota
    found_id = re.search(r"Workflow ID\s+-\s+(\S+)", submitted)
    assert found_id is not None, submitted
    workflow_id = found_id.group(1)
    found: dict[str, object] = {}
    for _ in range(100):  # until the controller has made the group wait
        found = json.loads(succeeded(live_server.cli("queue", "--format", "json")))
        if found["entries"]:
            break
    (entry,) = found["entries"]  # type: ignore[misc]
    assert (entry["workflow_id"], entry["pool"], entry["user"], entry["tasks"]) == (
        workflow_id,
        "nvl72",
        "admin",
        16,
    )
    lines = succeeded(live_server.cli("queue", "--pool", "nvl72")).splitlines()
    assert lines[0].split() == [
        "Pos",
        "Workflow",
        "Group",
        "Pool",
        "User",
        "Priority",
        "Tasks",
        "Waiting",
        "Start",
        "(80%)",
    ]
    assert lines[2].split()[1:7] == [workflow_id, "rack", "nvl72", "admin", "NORMAL", "16"]
    assert succeeded(live_server.cli("queue", "--pool", "default")) == "Nothing waits.\n"
