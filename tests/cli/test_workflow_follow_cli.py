"""``corral workflow query/explain/logs/cancel`` end to end: the real command against a real
``corral server --demo`` whose lifecycle controller is held back (it ticks once, at start); what
the controller would write is written straight into the server's database."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from corral.cli.output import local_time
from corral.domain.workflows.record import Changes
from corral.services.runtime import utc_now
from corral.store.database import make_engine, sqlite_url
from corral.store.workflows import WorkflowStore
from tests.cli.results import failed, succeeded
from tests.cli.test_pool_cli import table_row, together
from tests.conftest import REPO, LiveServer, start_server

EXAMPLES = REPO / "examples" / "workflows"
CLIQUE = "zone-a.zone-a-spine-0.zone-a-spine-0-rack-1.clique-zone-a-s0-r1"
T = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    """The example configs, and a controller that leaves the workflows as the tests set them."""
    server = start_server(tmp_path, "--demo", "--tick-seconds", "100000")
    wait_for_the_controller(server)
    yield server
    server.stop()


def wait_for_the_controller(server: LiveServer) -> None:
    """The controller's process starts after the server answers, and may tick once when it
    takes the lease: that tick must come before the tests write, or it steps the workflows
    they set (it did, once in CI)."""
    deadline = time.monotonic() + 30
    while httpx.get(f"{server.url}/health", timeout=5).json()["controller"] != "leader":
        assert time.monotonic() < deadline, "the controller never took the lease"
        time.sleep(0.1)
    time.sleep(1.0)  # its one tick, on an empty database, takes milliseconds


@pytest.fixture
def store(live_server: LiveServer) -> Iterator[WorkflowStore]:
    """The server's workflows, as the lifecycle controller sees them."""
    engine = make_engine(sqlite_url(live_server.home / "data"))
    yield WorkflowStore(engine, utc_now)
    engine.dispose()


def simulate_tasks(server: LiveServer) -> None:
    """Run the example backend's tasks simulated: their logs are then known exactly."""
    response = httpx.patch(
        f"{server.url}/api/configs/backend/default",
        json={"configs_dict": {"execution": {"mode": "simulate", "simulated_duration": "10s"}}},
        headers={"Authorization": f"Bearer {server.token}"},
    )
    assert response.status_code == 200, response.text


def submit(server: LiveServer, example: str, pool: str) -> str:
    out = succeeded(server.cli("workflow", "submit", str(EXAMPLES / example), "--pool", pool))
    return out.splitlines()[1].split(" - ")[1]


def advance(
    store: WorkflowStore,
    workflow_id: str,
    run: dict[str, Any],
    groups: dict[str, dict[str, Any]],
    tasks: dict[str, dict[str, Any]],
) -> None:
    wf = store.get(workflow_id)
    changes = Changes()
    changes.workflow(workflow_id, **run)
    for group in wf.groups:
        if group.name in groups:
            changes.group(group.uuid, **groups[group.name])
        for task in group.tasks:
            if task.name in tasks:
                changes.task(task.uuid, **tasks[task.name])
    store.commit(changes)


def at(minutes: int) -> datetime:
    return T + timedelta(minutes=minutes)


def shown(minutes: int) -> str:
    return local_time(at(minutes).isoformat())


def test_query_explain_and_logs_of_a_failed_workflow(
    live_server: LiveServer, store: WorkflowStore
) -> None:
    simulate_tasks(live_server)
    wf = submit(live_server, "heterogeneous.yaml", "heterogeneous_pool")
    advance(
        store,
        wf,
        run={"status": "FAILED", "started_at": at(1), "ended_at": at(9), "message": "train failed"},
        groups={
            "simulate": {"status": "COMPLETED", "started_at": at(1), "ended_at": at(3)},
            "train": {"status": "FAILED", "started_at": at(4), "ended_at": at(9)},
        },
        tasks={
            "render-scenes": {
                "status": "COMPLETED",
                "node": "l40s-0",
                "exit_code": 0,
                "started_at": at(1),
                "ended_at": at(3),
            },
            "train-policy": {
                "status": "FAILED",
                "node": "a100-1",
                "exit_code": 1,
                "retry_id": 1,
                "started_at": at(4),
                "ended_at": at(9),
                "message": "CUDA out of memory",
            },
        },
    )
    query, explain, explain_json, one_log, all_logs, no_task = together(
        live_server,
        ["workflow", "query", wf],
        ["workflow", "explain", wf],
        ["workflow", "explain", wf, "--format", "json"],
        ["workflow", "logs", wf, "--task", "render-scenes"],
        ["workflow", "logs", wf],
        ["workflow", "logs", wf, "--task", "nope"],
    )
    text = succeeded(query)
    head = text.split("\n\n")[0].splitlines()
    assert head[0:5] == [
        "Workflow ID : simulate-then-train-1",
        f"Dashboard   : {live_server.url}/ui/workflows/simulate-then-train-1",
        "Status      : FAILED",
        "Pool        : heterogeneous_pool",
        "Priority    : NORMAL",
    ]
    assert head[5].startswith("Submitted by: admin at ")
    assert head[6:] == [
        f"Started     : {shown(1)}",
        f"Ended       : {shown(9)}",
        "Message     : train failed",
    ]
    assert table_row(text, "simulate", "COMPLETED", "-", "-")
    assert table_row(text, "train", "FAILED", "-", "simulate")
    assert table_row(
        text, "render-scenes", "simulate", "COMPLETED", "l40s-0", "0", "0", shown(1), shown(3)
    )
    assert table_row(
        text, "train-policy", "train", "FAILED", "a100-1", "1", "1", shown(4), shown(9)
    )
    header = [line for line in text.splitlines() if "Exit code" in line]
    assert len(header) == 1
    assert [c.strip() for c in header[0].split("┃")[1:-1]] == [
        "Task",
        "Group",
        "Status",
        "Node",
        "Exit code",
        "Retry",
        "Started",
        "Ended",
        "Message",
    ]
    assert succeeded(explain) == (
        "Workflow ID : simulate-then-train-1\n"
        "Status      : FAILED (ended FAILED: train failed)\n"
        "\n"
        "simulate [COMPLETED]: completed: render-scenes exited 0\n"
        "train [FAILED]: failed: train-policy exited 1 (CUDA out of memory)\n"
    )
    assert json.loads(succeeded(explain_json)) == {
        "workflow_id": "simulate-then-train-1",
        "status": "FAILED",
        "summary": "ended FAILED: train failed",
        "groups": [
            {
                "name": "simulate",
                "status": "COMPLETED",
                "reason": "completed: render-scenes exited 0",
                "details": [],
            },
            {
                "name": "train",
                "status": "FAILED",
                "reason": "failed: train-policy exited 1 (CUDA out of memory)",
                "details": [],
            },
        ],
    }
    render = (
        "corral: simulated task (retry 0) started at 2025-03-01T12:01:00+00:00: "
        "sh -c echo rendering into /osmo/data/output; sleep 5\n"
        "corral: runs for 10s, then exits with code 0\n"
    )
    train = (
        "corral: simulated task (retry 1) started at 2025-03-01T12:04:00+00:00: "
        "sh -c echo training on /osmo/data/input/0; sleep 5\n"
        "corral: runs for 10s, then exits with code 0\n"
    )
    assert succeeded(one_log) == render
    assert succeeded(all_logs) == (
        f"==> render-scenes (retry 0) <==\n{render}\n==> train-policy (retry 1) <==\n{train}"
    )
    assert failed(no_task) == (
        "error: Workflow simulate-then-train-1 has no task nope. "
        "Its tasks: render-scenes, train-policy."
    )


def test_query_shows_the_domain_of_a_placed_group(
    live_server: LiveServer, store: WorkflowStore
) -> None:
    wf = submit(live_server, "nvl72-single-rack.yaml", "nvl72")
    advance(
        store,
        wf,
        run={"status": "COMPLETED"},
        groups={"group1": {"status": "COMPLETED", "domains": {"": CLIQUE}}},
        tasks={
            f"model1-shard{i}": {"status": "COMPLETED", "node": f"gb200-n{i}", "exit_code": 0}
            for i in range(1, 5)
        },
    )
    text = succeeded(live_server.cli("workflow", "query", wf))
    assert table_row(text, "group1", "COMPLETED", "clique-zone-a-s0-r1", "-")
    assert table_row(text, "model1-shard4", "group1", "COMPLETED", "gb200-n4", "0", "0", "-", "-")


def test_cancel(live_server: LiveServer, store: WorkflowStore) -> None:
    wf = submit(live_server, "heterogeneous.yaml", "heterogeneous_pool")
    assert succeeded(live_server.cli("workflow", "cancel", wf)) == (
        f"Cancel requested for workflow {wf}; its tasks will be stopped and it will end "
        "FAILED_CANCELED.\n"
    )
    assert failed(live_server.cli("workflow", "cancel", wf)) == (
        f"error: Workflow {wf} is already being canceled (requested by admin)."
    )
    assert store.get(wf).cancel_requested_by == "admin"
    done = submit(live_server, "heterogeneous.yaml", "heterogeneous_pool")
    advance(store, done, run={"status": "COMPLETED"}, groups={}, tasks={})
    as_json = failed(live_server.cli("workflow", "cancel", done, "--format", "json"))
    assert as_json == (
        f"error: Workflow {done} already finished (COMPLETED); there is nothing to cancel."
    )
    assert failed(live_server.cli("workflow", "cancel", "nope-1")) == (
        "error: Workflow nope-1 not found."
    )


def column_cells(text: str, header: str) -> list[str]:
    """The cells of the column titled ``header`` in the first table of ``text``, one per line
    (a wrapped cell gives several)."""
    lines = text.splitlines()
    head = next(line for line in lines if re.search(rf"[│┃]\s*{header}\s*[│┃]", line))
    index = [cell.strip() for cell in re.split(r"[│┃]", head)].index(header)
    start = lines.index(head)
    cells = []
    for line in lines[start + 2 :]:
        if not re.match(r"^\s*[│┃]", line):
            break
        cells.append(re.split(r"[│┃]", line)[index].strip())
    return cells


def test_query_fits_a_narrow_terminal_by_wrapping_and_is_whole_when_piped(
    live_server: LiveServer, store: WorkflowStore
) -> None:
    """At 80 columns the table fits, the domain shown as its finest level's value (the whole
    dotted path is in the JSON); piped without COLUMNS, every table line is as long as its
    content."""
    wf = submit(live_server, "nvl72-single-rack.yaml", "nvl72")
    advance(
        store,
        wf,
        run={"status": "RUNNING"},
        groups={"group1": {"status": "RUNNING", "domains": {"": CLIQUE}}},
        tasks={},
    )
    narrow = succeeded(live_server.cli("workflow", "query", wf, extra_env={"COLUMNS": "80"}))
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "".join(column_cells(narrow, "Domain")) == CLIQUE.rsplit(".", 1)[-1]  # the leaf
    piped_env = {k: v for k, v in live_server.env.items() if k != "COLUMNS"}
    piped = subprocess.run(
        [sys.executable, "-m", "corral", "workflow", "query", wf],
        capture_output=True,
        text=True,
        env=piped_env,
        timeout=60,
    )
    assert piped.returncode == 0, piped.stderr
    assert table_row(piped.stdout, "group1", "RUNNING", "clique-zone-a-s0-r1", "-")
    as_json = json.loads(succeeded(live_server.cli("workflow", "query", wf, "--format", "json")))
    assert as_json["groups"][0]["domains"] == {"": CLIQUE}  # the whole path
