"""Victims chosen by the work they would lose, with real processes (docs/checkpoints.md):
``corral server --demo`` on two NVL72 cliques, two equal LOW gangs of local tasks, one
checkpointed a minute ago and the other fifty minutes ago; a HIGH clique gang evicts the fresh
one, on both databases.

Fifty minutes of runtime cannot pass in a test, so the gangs are made two hours old the way a
server finds gangs after a restart: the server is stopped, their start times are moved back
two hours in the database, and it is started again (the local tasks' runners outlive it)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from benchmarks.control_plane import gb200_cluster_yaml
from sqlalchemy import select, update

from corral.store.database import make_engine
from corral.store.tables import workflow_groups, workflow_tasks
from corral.store.workflows.records import utc
from tests.cli.results import succeeded
from tests.cli.test_notice_local_tasks import stop_row
from tests.cli.test_workflow_run_cli import query, wait_for_end
from tests.conftest import LiveServer, start_server

#: Says it is ready as soon as it hears the notice: SIGUSR1, which it asks for (noticeSignal).
READY_ON_NOTICE = [
    "sh",
    "-c",
    "trap 'touch \"$CORRAL_CONTROL_DIR/ready\"' USR1; while :; do sleep 0.2; done",
]
GANG_GPUS = 8


def clique_gang(name: str) -> dict[str, Any]:
    tasks = [
        {
            "name": f"t{i}",
            "image": "sh",
            "command": READY_ON_NOTICE,
            "noticeSignal": "SIGUSR1",
            **({"lead": True} if i == 0 else {}),
        }
        for i in range(2)
    ]
    resources = {"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}}
    return {
        "workflow": {
            "name": name,
            "resources": resources,
            "groups": [{"name": "g", "tasks": tasks}],
        }
    }


class Cluster:
    """The server on two cliques, restartable on the same database and data directory."""

    def __init__(self, home: Path, database_url: str) -> None:
        self.home = home
        self.database_url = database_url
        self.cluster = home / "two-cliques.yaml"
        # two cliques (one rack each) of two GB200 trays with 4 GPUs
        self.cluster.write_text(gb200_cluster_yaml(zones=1, spines=1, racks=2, trays=2))
        self.server = self._start()

    def _start(self) -> LiveServer:
        found = start_server(
            self.home,
            "--demo",
            "--cluster",
            str(self.cluster),
            "--tick-seconds",
            "0.05",
            database_url=self.database_url,
        )
        found.database_url = self.database_url  # type: ignore[attr-defined]
        return found

    def restart(self) -> None:
        self.server.stop()
        self.server = self._start()

    def call(self, method: str, path: str, **sent: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.server.token}"}
        answer = httpx.request(method, f"{self.server.url}{path}", headers=headers, **sent)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def submit(self, name: str, priority: str) -> str:
        spec = yaml.safe_dump(clique_gang(name))
        found = self.call(
            "POST", "/api/pool/nvl72/workflow", json={"file": spec}, params={"priority": priority}
        )
        return str(found["name"])

    def wait_running(self, workflow_id: str) -> None:
        deadline = time.monotonic() + 60
        while query(self.server, workflow_id)["status"] != "RUNNING":
            assert time.monotonic() < deadline, query(self.server, workflow_id)
            time.sleep(0.2)

    def task_starts(self, workflow_id: str) -> list[datetime]:
        engine = make_engine(self.database_url)
        try:
            with engine.connect() as connection:
                found = connection.execute(
                    select(workflow_tasks.c.started_at)
                    .join(workflow_groups)
                    .where(workflow_groups.c.workflow_id == workflow_id)
                ).all()
        finally:
            engine.dispose()
        return [_utc(started) for (started,) in found]

    def age(self, workflow_ids: list[str], by: timedelta) -> None:
        """Move the workflows' groups' and tasks' start times back by ``by``."""
        groups = select(workflow_groups.c.group_uuid).where(
            workflow_groups.c.workflow_id.in_(workflow_ids)
        )
        tasks = select(workflow_tasks.c.task_uuid).where(workflow_tasks.c.group_uuid.in_(groups))
        engine = make_engine(self.database_url)
        try:
            with engine.begin() as connection:
                for table, key, chosen in (
                    (workflow_groups, workflow_groups.c.group_uuid, groups),
                    (workflow_tasks, workflow_tasks.c.task_uuid, tasks),
                ):
                    found = select(key, table.c.started_at).where(key.in_(chosen))
                    for uuid, started in connection.execute(found).all():
                        moved = (
                            update(table).where(key == uuid).values(started_at=_utc(started) - by)
                        )
                        connection.execute(moved)
        finally:
            engine.dispose()


def _utc(moment: datetime | None) -> datetime:
    found = utc(moment)  # SQLite keeps no zone: corral writes UTC
    assert found is not None
    return found


@pytest.fixture
def cluster(tmp_path: Path, database_url: str) -> Iterator[Cluster]:
    found = Cluster(tmp_path, database_url)
    yield found
    found.server.stop()


def test_a_high_clique_gang_evicts_the_low_gang_that_checkpointed_a_minute_ago(
    cluster: Cluster,
) -> None:
    cluster.call(
        "PATCH",
        "/api/configs/pool/nvl72",
        json={"configs_dict": {"resources": {"gpu": {"guarantee": 64, "maximum": -1}}}},
    )
    older = cluster.submit("fresh", "LOW")  # without checkpoints the younger gang would go
    cluster.wait_running(older)
    younger = cluster.submit("stale", "LOW")
    cluster.wait_running(younger)
    cluster.age([older, younger], timedelta(hours=2))
    cluster.restart()
    now = datetime.now(UTC)
    fresh_at = now - timedelta(minutes=1)
    for workflow_id, at in ((older, fresh_at), (younger, now - timedelta(minutes=50))):
        for task in ("t0", "t1"):
            cluster.call(
                "POST",
                f"/api/workflow/{workflow_id}/task/{task}/checkpoint",
                json={"at": at.isoformat()},
            )
    urgent = cluster.submit("urgent", "HIGH")
    ended = wait_for_end(cluster.server, older)
    assert ended["status"] == "FAILED_PREEMPTED", ended
    cluster.wait_running(urgent)
    assert query(cluster.server, younger)["status"] == "RUNNING"
    row = stop_row(cluster.server, older)
    stopped = _utc(row["at"])
    assert (row["cause"], row["gpus"], row["acknowledged"]) == ("preempted", GANG_GPUS, True)
    measured = GANG_GPUS * (stopped - fresh_at).total_seconds()
    assert row["lost_gpu_seconds"] == pytest.approx(measured, abs=1.0)
    # the HIGH gang's tasks started once the victim's had stopped: no GPU ran two tasks
    assert min(cluster.task_starts(urgent)) >= stopped
    for workflow_id in (younger, urgent):  # leave no task running
        succeeded(cluster.server.cli("workflow", "cancel", workflow_id))
        wait_for_end(cluster.server, workflow_id)
