"""Kill the server (SIGKILL) at random moments while 50 workflows are submitted and run as real
local processes; after the last restart every accepted workflow completes, every task ran exactly
once, and nothing is left behind: no cluster object, no process."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import httpx
import yaml
from sqlalchemy import create_engine, text

from tests.conftest import LiveServer, free_port, start_server

SUBMISSIONS = 50
KILLS = 6
SEED = 20261121


def chain_workflow(number: int) -> tuple[str, str]:
    """Two groups on the default pool (CPU), the second consuming the first."""
    tasks = []
    for index, inputs in ((1, []), (2, [{"task": f"w{number}-t1"}])):
        name = f"w{number}-t{index}"
        tasks.append(
            {
                "name": f"g{index}",
                "tasks": [
                    {
                        "name": name,
                        "image": "busybox",
                        "command": [
                            "sh",
                            "-c",
                            f"echo {{{{workflow_id}}}}/{name}; sleep 0.2",
                        ],
                        "inputs": inputs,
                    }
                ],
            }
        )
    spec = {"workflow": {"name": f"chain{number}", "groups": tasks}}
    return "default", yaml.safe_dump(spec)


def compute_domain_workflow(number: int) -> tuple[str, str]:
    """Two GB200 trays in one clique: the pool adds a ComputeDomain per group."""
    tasks = [
        {
            "name": f"w{number}-r{rank}",
            "lead": rank == 0,
            "image": "busybox",
            "command": [
                "sh",
                "-c",
                f"echo {{{{workflow_id}}}}/w{number}-r{rank}; sleep 0.3",
            ],
        }
        for rank in range(2)
    ]
    spec = {
        "workflow": {
            "name": f"nvlink{number}",
            "resources": {"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}},
            "groups": [{"name": "ranks", "tasks": tasks}],
        }
    }
    return "nvl72", yaml.safe_dump(spec)


class Cluster:
    """The server, restarted on the same port and data directory after every kill."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.server: LiveServer = start_server(home, "--demo", *self.flags(), port=self.port)
        self.token = self.server.token
        self.lock = threading.Lock()

    def flags(self) -> list[str]:
        return ["--tick-seconds", "0.1", "--lease-seconds", "1"]

    def kill_and_restart(self) -> None:
        with self.lock:
            self.server.process.kill()
            self.server.process.wait()
            self.server = start_server(self.home, *self.flags(), port=self.port)

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.server.url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )


def submit_all(cluster: Cluster, accepted: dict[str, int]) -> None:
    for number in range(SUBMISSIONS):
        pool, spec = (compute_domain_workflow if number % 2 else chain_workflow)(number)
        for _attempt in range(100):
            try:
                with cluster.client() as client:
                    response = client.post(f"/api/pool/{pool}/workflow", json={"file": spec})
            except httpx.HTTPError:
                time.sleep(0.2)  # the server is down or died mid-request: try again
                continue
            if response.status_code == 200:
                accepted[response.json()["name"]] = number
            else:  # a clash with a row written just before a kill is the only expected refusal
                assert response.status_code == 409, response.text
            break


def wait_until_finished(cluster: Cluster, deadline_s: float) -> list[dict[str, object]]:
    deadline = time.monotonic() + deadline_s
    while True:
        with cluster.client() as client:
            found = client.get("/api/workflow", params={"limit": 1000}).json()["workflows"]
        if all(w["status"] not in ("PENDING", "RUNNING", "WAITING") for w in found):
            return list(found)
        assert time.monotonic() < deadline, [w for w in found if w["status"] == "PENDING"]
        time.sleep(0.3)


def stored_tasks(cluster: Cluster, workflow_id: str) -> list[dict[str, object]]:
    with cluster.client() as client:
        found = client.get(f"/api/workflow/{workflow_id}").json()
    return [task for group in found["groups"] for task in group["tasks"]]


def runs_of(tasks_root: Path, task_uuid: str) -> list[str]:
    """What each run of the task printed: one entry per attempt whose runner started it."""
    return [
        (started.parent / "task.log").read_text()
        for started in sorted((tasks_root / task_uuid).glob("*/started"))
    ]


def alive_count(cluster: Cluster) -> int:
    try:
        with cluster.client() as client:
            found = client.get("/api/workflow", params={"limit": 1000}).json()["workflows"]
    except httpx.HTTPError:
        return 0
    return sum(1 for w in found if w["status"] in ("PENDING", "RUNNING", "WAITING"))


def leftover_processes(root: Path) -> list[int]:
    """Runners (their argv names an attempt under ``root``) and tasks (their working directory
    is a home an attempt recorded) still alive."""
    homes = [path.read_text().strip() for path in root.glob("*/*/home")]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(root) in command or any(cwd.startswith(home) for home in homes):
            found.append(int(entry.name))
    return found


def test_killing_the_server_loses_and_leaks_nothing(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    with cluster.client() as client:
        response = client.post(
            "/api/configs/backend/default",
            json={"configs_dict": {"execution": {"mode": "local_processes"}}},
        )
        assert response.status_code == 200, response.text
    accepted: dict[str, int] = {}
    submitter = threading.Thread(target=submit_all, args=(cluster, accepted))
    submitter.start()
    chance = random.Random(SEED)
    alive_at_kill = []
    for _ in range(KILLS):
        time.sleep(chance.uniform(0.3, 2.0))
        alive_at_kill.append(alive_count(cluster))
        cluster.kill_and_restart()
    submitter.join(timeout=300)
    assert not submitter.is_alive()
    cluster.kill_and_restart()  # once more after the last submission

    finished = wait_until_finished(cluster, deadline_s=180)
    try:
        statuses = {w["name"]: w["status"] for w in finished}
        print(
            f"accepted {len(accepted)}, stored {len(statuses)}, alive at each kill {alive_at_kill}"
        )
        assert sum(1 for alive in alive_at_kill if alive) >= KILLS // 2  # kills hit live work
        assert len(accepted) >= SUBMISSIONS - KILLS
        assert {statuses[name] for name in accepted} == {"COMPLETED"}
        assert set(statuses.values()) == {"COMPLETED"}  # also those accepted without a reply

        # Every task of every stored workflow ran exactly once, despite the kills. (A submission
        # stored just before a kill, unanswered and then retried, is a second workflow.)
        tasks_root = tmp_path / "data" / "tasks"
        for workflow_id in statuses:
            for task in stored_tasks(cluster, workflow_id):
                line = f"{workflow_id}/{task['name']}\n"
                assert runs_of(tasks_root, str(task["uuid"])) == [line], line

        engine = create_engine(f"sqlite:///{tmp_path / 'data' / 'corral.db'}")
        with engine.connect() as connection:
            left = connection.execute(text("SELECT kind, name FROM cluster_objects")).all()
            uncleaned = connection.execute(
                text("SELECT count(*) FROM workflow_groups WHERE NOT cleaned")
            ).scalar()
        engine.dispose()
        assert left == []
        assert uncleaned == 0
        assert leftover_processes(tmp_path / "data" / "tasks") == []
    finally:
        cluster.server.stop()
