"""The notice before a stop, for real (docs/checkpoints.md#the-notice): ``corral server --demo``
runs the training loop of docs/checkpoints.md, from its example workflow as written, as a local
task on both databases; a drain gives it notice, and the stop comes when the task says it is
ready, or at the deadline for a task that ignores the notice. A drain is not the task's doing:
the group is then placed again. What each stop cost is read from ``eviction_stops``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import select

from corral.services.auth.task_tokens import TaskScope, TaskTokens
from corral.store.database import make_engine
from corral.store.tables import eviction_stops, workflow_groups
from corral.store.workflows.records import utc
from tests.cli.results import succeeded
from tests.cli.test_workflow_run_cli import query, wait_for_end
from tests.conftest import REPO, LiveServer, start_server

EXAMPLE = re.search(
    r"## A training loop that checkpoints on notice.*?```python\n(.*?)```",
    (REPO / "docs" / "checkpoints.md").read_text(),
    re.DOTALL,
)
assert EXAMPLE is not None
TRAINING_LOOP = EXAMPLE.group(1)
EXAMPLE_FILE = REPO / "examples" / "workflows" / "checkpoint-on-notice.yaml"


TASK = {"name": "t0", "image": "python"}


@pytest.fixture
def server(tmp_path: Path, database_url: str) -> Iterator[LiveServer]:
    found = start_server(tmp_path, "--demo", "--tick-seconds", "0.05", database_url=database_url)
    found.database_url = database_url  # type: ignore[attr-defined]
    yield found
    found.stop()


def submit(server: LiveServer, tmp_path: Path, name: str, command: list[str]) -> str:
    spec = {
        "workflow": {
            "name": name,
            "resources": {"default": {"gpu": 1}},
            "groups": [
                {"name": "g", "tasks": [{"name": "t0", "image": "python", "command": command}]}
            ],
        }
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    succeeded(server.cli("workflow", "submit", str(path), "--pool", "default"))
    return f"{name}-1"


def running_node(server: LiveServer, workflow_id: str) -> str:
    deadline = time.monotonic() + 60
    while True:
        found: Any = query(server, workflow_id)
        (task,) = found["groups"][0]["tasks"]
        if task["status"] == "RUNNING" and task["node"]:
            return str(task["node"])
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def stop_row(server: LiveServer, workflow_id: str) -> dict[str, Any]:
    engine = make_engine(server.database_url)  # type: ignore[attr-defined]
    try:
        with engine.connect() as connection:
            rows = (
                connection.execute(
                    select(eviction_stops).where(eviction_stops.c.workflow_id == workflow_id)
                )
                .mappings()
                .all()
            )
            notices = connection.execute(
                select(workflow_groups.c.notice_at, workflow_groups.c.notice_deadline).where(
                    workflow_groups.c.workflow_id == workflow_id
                )
            ).all()
    finally:
        engine.dispose()
    (row,) = rows
    ((notice_at, deadline),) = notices
    return {**row, "notice_at": _epoch(notice_at), "deadline": _epoch(deadline)}


def _epoch(moment: datetime) -> float:
    found = utc(moment)  # SQLite keeps no zone: corral writes UTC
    assert found is not None
    return found.timestamp()


def logged(server: LiveServer, workflow_id: str, what: str, retry: int) -> list[float]:
    """The times the task's attempt ``retry`` printed ``what`` at."""
    text = succeeded(
        server.cli("workflow", "logs", workflow_id, "--task", "trainer", "--retry-id", str(retry))
    )
    return [float(m) for m in re.findall(rf"^{what} .*?at ([0-9.]+)", text, re.MULTILINE)]


def test_the_example_holds_the_docs_loop_as_written() -> None:
    (task,) = yaml.safe_load(EXAMPLE_FILE.read_text())["workflow"]["groups"][0]["tasks"]
    assert task["command"] == ["python3", "-c"]
    assert task["args"] == [TRAINING_LOOP]


def wait_for_stop(server: LiveServer, workflow_id: str) -> dict[str, Any]:
    """The row of the drain's stop of ``workflow_id``, once there is one."""
    deadline = time.monotonic() + 90
    while True:
        try:
            return stop_row(server, workflow_id)
        except ValueError:  # no row yet
            assert time.monotonic() < deadline, query(server, workflow_id)
            time.sleep(0.2)


def retried(server: LiveServer, workflow_id: str) -> dict[str, Any]:
    """The task once its second attempt runs, placed again on another node."""
    deadline = time.monotonic() + 60
    while True:
        found: Any = query(server, workflow_id)
        (task,) = found["groups"][0]["tasks"]
        if task["retry_id"] == 1 and task["status"] == "RUNNING":
            return dict(task)
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def test_a_task_that_acknowledges_is_stopped_within_a_second_of_it(
    server: LiveServer, tmp_path: Path
) -> None:
    """The example as written: submitted, drained with 20 s of notice."""
    found = succeeded(server.cli("workflow", "submit", str(EXAMPLE_FILE), "--pool", "default"))
    workflow_id = "checkpoint-on-notice-1"
    assert workflow_id in found
    node = running_node(server, workflow_id)
    time.sleep(1)  # a few training steps
    succeeded(server.cli("node", "drain", node, "--grace", "20s", "--reason", "test"))
    row = wait_for_stop(server, workflow_id)
    (ready,) = logged(server, workflow_id, "ready", retry=0)
    (noticed,) = logged(server, workflow_id, "notice", retry=0)
    saved = logged(server, workflow_id, "checkpoint", retry=0)[-1]
    stopped = _epoch(row["at"])
    assert (row["cause"], row["gpus"], row["acknowledged"]) == ("drained", 1, True)
    assert 0 <= stopped - ready <= 1.0, (stopped, ready)  # not at the 20 s deadline
    assert 2.0 <= ready - noticed <= 3.0  # the loop saves for two seconds
    assert noticed - row["notice_at"] <= 1.0  # the notice reached it at once
    assert row["deadline"] - row["notice_at"] == pytest.approx(20.0)
    assert row["lost_gpu_seconds"] == pytest.approx(1 * (stopped - saved), abs=1.0)
    again = retried(server, workflow_id)  # a drain is not the task's doing: placed again
    assert again["node"] != node
    (attempt,) = again["attempts"]
    assert (attempt["retry_id"], attempt["node"], attempt["exit_code"]) == (0, node, 3006)
    assert attempt["message"].endswith("The group is placed again whole (retry 1 of 3).")
    explained = succeeded(server.cli("workflow", "explain", workflow_id))
    assert (
        f"lost {row['lost_gpu_seconds'] / 3600:.2f} GPU-h since its last checkpoint; stopped "
        f"{row['stop_seconds']:.1f} s after its notice (every task was ready)"
    ) in explained, explained
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'corral_eviction_stops{cause="drained",pool="default"} 1.0' in metrics
    assert 'corral_eviction_stops_acknowledged{cause="drained",pool="default"} 1.0' in metrics
    succeeded(server.cli("workflow", "cancel", workflow_id))
    assert wait_for_end(server, workflow_id)["status"] == "FAILED_CANCELED"


def test_a_plain_task_keeps_its_whole_notice_and_is_stopped_at_the_deadline(
    server: LiveServer, tmp_path: Path
) -> None:
    """A plain ``sh`` that handles no signal: the notice's signal killed it at once (10 s of
    grace became 1.2 s); now there is none, and it runs to the deadline."""
    workflow_id = submit(server, tmp_path, "deaf", ["sh", "-c", "sleep 600"])
    node = running_node(server, workflow_id)
    started = time.time()
    succeeded(server.cli("node", "drain", node, "--grace", "4s", "--reason", "test"))
    row = wait_for_stop(server, workflow_id)
    stopped = _epoch(row["at"])
    assert (row["cause"], row["acknowledged"]) == ("drained", False)
    assert stopped - row["notice_at"] >= 4.0  # the whole notice, before the stop
    assert stopped - row["deadline"] <= 1.0  # and not much more
    assert row["stop_seconds"] == pytest.approx(stopped - row["notice_at"], abs=0.01)
    # never checkpointed: everything since its start is lost
    assert row["lost_gpu_seconds"] >= stopped - started
    (attempt,) = retried(server, workflow_id)["attempts"]
    assert (attempt["exit_code"], attempt["node"]) == (3006, node)
    succeeded(server.cli("workflow", "cancel", workflow_id))
    wait_for_end(server, workflow_id)


def test_corral_task_inside_a_local_task_writes_its_control_directory(tmp_path: Path) -> None:
    env = {**os.environ, "CORRAL_CONTROL_DIR": str(tmp_path)}
    for args, expected in (
        (("checkpoint", "--step", "5", "--description", "epoch 1"), "checkpoint written to"),
        (("ready",), "ready written to"),
        (("notice",), "no notice"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "corral", "task", *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.startswith(expected), done
    assert json.loads((tmp_path / "checkpoint").read_text()) == {
        "step": 5,
        "description": "epoch 1",
    }
    assert (tmp_path / "ready").read_text() == ""


def own_token_env(server: LiveServer, tmp_path: Path, workflow_id: str) -> dict[str, str]:
    """What a pod's container has: the task's own token in a file (minted here with the
    server's key, as its controller mints it for a pod) and no login of its user."""
    (task,) = query(server, workflow_id)["groups"][0]["tasks"]
    key = (server.home / "data" / "session.key").read_bytes().strip()
    token = TaskTokens(key).mint(TaskScope(workflow_id, "t0", task["uuid"]))
    (tmp_path / "token").write_text(token)
    (tmp_path / "no-login").mkdir()
    return {
        "CORRAL_TASK_TOKEN_FILE": str(tmp_path / "token"),
        "CORRAL_CONFIG_DIR": str(tmp_path / "no-login"),
    }


def test_corral_task_through_the_api(server: LiveServer, tmp_path: Path) -> None:
    workflow_id = submit(server, tmp_path, "api", ["sh", "-c", "sleep 600"])
    node = running_node(server, workflow_id)
    assert succeeded(server.cli("task", "notice", workflow_id, "t0")) == (
        f"{workflow_id} task t0: no notice\n"
    )
    refused = server.cli("task", "ready", workflow_id, "t0")
    assert refused.returncode != 0 and "has no notice of a stop" in refused.stderr, refused
    said = succeeded(server.cli("task", "checkpoint", workflow_id, "t0", "--step", "7"))
    assert said.startswith(f"checkpoint of {workflow_id} task t0 at ")
    as_the_task = own_token_env(server, tmp_path, workflow_id)
    said = succeeded(server.cli("task", "checkpoint", "--step", "8", extra_env=as_the_task))
    assert said.startswith(f"checkpoint of {workflow_id} task t0 at ")
    succeeded(server.cli("node", "drain", node, "--grace", "60s", "--reason", "test"))
    deadline = time.monotonic() + 30
    while "no notice" in succeeded(server.cli("task", "notice", workflow_id, "t0")):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    found = json.loads(
        succeeded(server.cli("task", "notice", workflow_id, "t0", "--format", "json"))
    )
    assert found["checkpoint_at"] is not None and found["notice"]["seconds_left"] > 50
    assert "ready at" in succeeded(server.cli("task", "ready", extra_env=as_the_task))
    row = wait_for_stop(server, workflow_id)
    assert row["acknowledged"] is True and row["stop_seconds"] < 30
    retried(server, workflow_id)  # a drain is not the task's doing: placed again
    succeeded(server.cli("workflow", "cancel", workflow_id))
    wait_for_end(server, workflow_id)


def test_corral_task_in_a_pod_says_which_token_file_is_wrong(tmp_path: Path) -> None:
    env = {**os.environ, "CORRAL_TASK_TOKEN_FILE": str(tmp_path / "token")}
    env.pop("CORRAL_CONTROL_DIR", None)
    path = tmp_path / "token"
    expected = {
        "not a token": f"error: {path} (CORRAL_TASK_TOKEN_FILE) holds no task token.\n",
        None: f"error: Cannot read the task's token from {path} (CORRAL_TASK_TOKEN_FILE): "
        f"[Errno 2] No such file or directory: '{path}'.\n",
    }
    for contents, message in expected.items():
        if contents is not None:
            (tmp_path / "token").write_text(contents)
        else:
            (tmp_path / "token").unlink()
        done = subprocess.run(
            [sys.executable, "-m", "corral", "task", "ready"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert (done.returncode, done.stderr) == (1, message)
