"""End-to-end load benchmark of the control plane: real ``corral server`` processes, real HTTP
clients, a real database (SQLite file and PostgreSQL), thousands of live workflows.

    .venv/bin/python benchmarks/control_plane.py [--quick] [--databases sqlite,postgresql]

The cluster is generated: NVL72-style racks of 18 trays (4 GPUs each, one ``gpu-clique`` per
rack) in zones and spines, 5,040 nodes (``--quick``: 180), run by the embedded backend with
simulated execution. Workflows have 8 or 16 tasks of 2 GPUs, one task group with a required
``gpu-clique``; every fourth also prefers one ``spine``. Three of four have 16 tasks.

On SQLite one server runs (the embedded default); on PostgreSQL ``--replicas`` servers (2, as
``deploy/`` runs them) share the database: one leads the controller, all serve the API, and
client *i* talks to replica *i* mod N (as a Service would spread them). For each database:

1. **baseline**: the same workload's rows (a workflow, its group with the objects a real
   submission renders, its tasks) inserted with bare SQLAlchemy Core by ``--clients`` threads
   into a fresh database of the same kind: p50/p99 per insert, so that the server's figures can
   be read as a ratio, whatever the machine.
2. **latency**: ``--clients`` HTTP clients submit short workflows (1 s each) paced at
   ``--rate`` workflows per second in all: submit latency p50/p99 (16-task workflows and all).
3. **throughput**: the clients submit ``--workflows`` short workflows as fast as they can:
   workflows per second, and pods placed per second end to end (from the first submission to
   the tick that bound the last submitted pod, from the leader's tick log).
4. **scale**: long-running workflows are submitted until ``--levels`` workflows are alive
   (most of them waiting: the cluster holds a few hundred); at each level, for
   ``--churn-seconds``, clients cancel the oldest workflows and submit new ones at
   ``--churn-rate`` each per second, and the ticks of that window are reported: p50/p99
   duration and queries per tick (``corral server --log-level debug`` logs every tick).

Finally the servers' CPU time and peak RSS (main processes and their sandbox workers). The
clients are plain ``http.client`` connections with pre-encoded bodies, so that they take little
of the machine the servers run on.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from sqlalchemy import insert

from corral.services.lifecycle.process import MODULE as CONTROLLER_MODULE
from corral.store.database import make_engine, migrate, scratch_postgres_database, writing
from corral.store.tables import workflow_groups, workflow_tasks, workflows

POSTGRES_ENV = "CORRAL_TEST_POSTGRES_URL"
TRAYS_PER_RACK = 18


@dataclass(frozen=True)
class Sizes:
    zones: int
    spines: int  # per zone
    racks: int  # per spine
    paced: int  # workflows of the latency phase
    rate: float  # latency phase, workflows per second in all
    workflows: int  # throughput phase
    levels: tuple[int, ...]
    churn_seconds: float
    churn_rate: float  # cancels and submissions per second, each

    @property
    def nodes(self) -> int:
        return self.zones * self.spines * self.racks * TRAYS_PER_RACK


FULL = Sizes(2, 7, 20, 1200, 40.0, 3000, (100, 1000, 5000, 10000), 10.0, 10.0)
QUICK = Sizes(1, 2, 5, 60, 20.0, 100, (100, 200), 2.0, 5.0)


# -- what the servers are given --------------------------------------------------------------


def cluster_yaml(sizes: Sizes) -> str:
    return gb200_cluster_yaml(sizes.zones, sizes.spines, sizes.racks, TRAYS_PER_RACK)


def gb200_cluster_yaml(zones: int, spines: int, racks: int, trays: int) -> str:
    """A cluster file of GB200 racks, one clique each: ``zones`` x ``spines`` per zone x
    ``racks`` per spine x ``trays`` trays of 4 GPUs."""
    generator = {
        "prefix": "gb200",
        "count": trays,
        "levels": [
            {"label": "topology.kubernetes.io/zone", "count": zones},
            {"label": "topology.kubernetes.io/spine", "count": spines},
            {"label": "topology.kubernetes.io/rack", "count": racks},
            {"label": "nvidia.com/gpu-clique", "count": 1},
        ],
        "labels": {
            "kubernetes.io/arch": "arm64",
            "kubernetes.io/os": "linux",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-GB200",
        },
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "allocatable": {
            "cpu": "144",
            "memory": "850Gi",
            "ephemeral-storage": "3Ti",
            "nvidia.com/gpu": "4",
        },
    }
    return yaml.safe_dump({"generate": [generator]})


BENCH_POOL = {
    "description": "control-plane benchmark: NVL72 racks",
    "backend": "default",
    "default_platform": "gb200",
    "topology_keys": [
        {"key": "zone", "label": "topology.kubernetes.io/zone"},
        {"key": "spine", "label": "topology.kubernetes.io/spine"},
        {"key": "rack", "label": "topology.kubernetes.io/rack"},
        {"key": "gpu-clique", "label": "nvidia.com/gpu-clique"},
    ],
    "common_default_variables": {
        "USER_CPU": 8,
        "USER_GPU": 2,
        "USER_MEMORY": "64Gi",
        "USER_STORAGE": "10Gi",
    },
    "common_resource_validations": ["default_cpu", "default_memory", "default_storage"],
    "common_pod_template": ["default_ctrl", "default_user", "use-compute-domain"],
    "common_group_templates": ["compute-domain"],
    "platforms": {"gb200": {"override_pod_template": ["training_gb200_template"]}},
}


def workflow_yaml(number: int, seconds: float) -> tuple[str, int]:
    """The ``number``-th workflow: 16 tasks (8 for every fourth), a required clique, every
    fourth (offset by one) also a preferred spine; its tasks run ``seconds``."""
    tasks = 8 if number % 4 == 0 else 16
    topology: list[dict[str, str]] = [{"key": "gpu-clique"}]
    if number % 4 == 1:
        topology.append({"key": "spine", "requirementType": "preferred"})
    spec = {
        "workflow": {
            "name": f"bench{tasks}",
            "resources": {"default": {"gpu": 2, "topology": topology}},
            "groups": [
                {
                    "name": "train",
                    "tasks": [
                        {
                            "name": f"rank{rank}",
                            **({"lead": True} if rank == 0 else {}),
                            "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                            "command": ["python", "train.py"],
                            "environment": {"CORRAL_SIMULATED_DURATION": f"{seconds:g}"},
                        }
                        for rank in range(tasks)
                    ],
                }
            ],
        }
    }
    return yaml.safe_dump(spec, sort_keys=False), tasks


@cache
def submission_body(tasks: int, preferred: bool, seconds: float) -> bytes:
    """The JSON body of a submission (pre-encoded: the clients stay cheap)."""
    number = 0 if tasks == 8 else 1 if preferred else 2
    text, found = workflow_yaml(number, seconds)
    assert found == tasks
    return json.dumps({"file": text}).encode()


def body_of(number: int, seconds: float) -> tuple[bytes, int]:
    tasks = 8 if number % 4 == 0 else 16
    return submission_body(tasks, number % 4 == 1, seconds), tasks


# -- the servers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    at: float  # seconds since the epoch
    seconds: float
    alive: int
    stepped: int
    placed_pods: int
    queries: int
    gc_seconds: float  # of ``seconds``, collecting garbage


class LogTail:
    """The tick lines a server has logged so far, read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.ticks: list[Tick] = []

    def read(self) -> list[Tick]:
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if b'"controller tick"' not in line:
                continue
            entry = json.loads(line)
            self.ticks.append(
                Tick(
                    at=datetime.fromisoformat(entry["timestamp"]).timestamp(),
                    seconds=float(entry["seconds"]),
                    alive=int(entry["alive"]),
                    stepped=int(entry["stepped"]),
                    placed_pods=int(entry["placed_pods"]),
                    queries=int(entry["queries"]),
                    gc_seconds=float(entry.get("gc_seconds", 0.0)),
                )
            )
        return self.ticks


@dataclass(frozen=True)
class Usage:
    server: float  # CPU seconds of the server processes
    controller: float  # of their controller processes (PostgreSQL)
    workers: float  # of their sandbox workers
    rss: int  # bytes, now


class Replica:
    """One ``corral server`` process."""

    def __init__(self, home: Path, database_url: str, cluster: Path, tick_seconds: float) -> None:
        home.mkdir(parents=True)
        self.home = home
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "CORRAL_CONFIG_DIR": str(home / "config"),
            "CORRAL_URL": self.url,
            "CORRAL_DATABASE_URL": database_url,
        }
        env.pop("CORRAL_TOKEN", None)
        command = [
            sys.executable,
            "-m",
            "corral",
            "server",
            "--port",
            str(self.port),
            "--data-dir",
            str(home / "data"),
            "--cluster",
            str(cluster),
            "--demo",
            "--tick-seconds",
            str(tick_seconds),
            "--log-level",
            "debug",
        ]
        self.log_path = home / "server.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(command, env=env, stdout=self._log, stderr=self._log)
        self.tail = LogTail(self.log_path)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited:\n{self.log_path.read_text()[-3000:]}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"server did not start:\n{self.log_path.read_text()[-3000:]}")

    def token(self) -> str:
        credentials = json.loads((self.home / "config" / "credentials.json").read_text())
        return str(next(iter(credentials["servers"].values()))["token"])

    def usage(self) -> Usage:
        """CPU seconds of the server process, of its controller process (PostgreSQL) and of
        its sandbox workers, and their RSS now."""
        children = _children(self.process.pid)
        controller = [pid for pid in children if CONTROLLER_MODULE in _command(pid)]
        workers = [pid for pid in children if pid not in controller]
        return Usage(
            _cpu_seconds(self.process.pid),
            sum(_cpu_seconds(pid) for pid in controller),
            sum(_cpu_seconds(pid) for pid in workers),
            _rss(self.process.pid) + sum(_rss(pid) for pid in children),
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


class Deployment:
    """``replicas`` servers on one database; the first one's admin token for every client."""

    def __init__(self, directory: Path, database_url: str, cluster: Path, replicas: int) -> None:
        self.replicas: list[Replica] = []
        try:
            for index in range(replicas):
                home = directory / f"server-{index}"
                self.replicas.append(Replica(home, database_url, cluster, tick_seconds=0.2))
        except BaseException:
            self.stop()
            raise
        self.token = self.replicas[0].token()
        self.peak_rss = 0
        self._sampling = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def client(self, index: int) -> Http:
        return Http(self.replicas[index % len(self.replicas)].url, self.token)

    def ticks(self) -> list[Tick]:
        found = [tick for replica in self.replicas for tick in replica.tail.read()]
        return sorted(found, key=lambda tick: tick.at)

    def usage(self) -> Usage:
        found = [replica.usage() for replica in self.replicas]
        return Usage(
            sum(u.server for u in found),
            sum(u.controller for u in found),
            sum(u.workers for u in found),
            sum(u.rss for u in found),
        )

    def _sample(self) -> None:
        while not self._sampling.wait(1.0):
            self.peak_rss = max(self.peak_rss, self.usage().rss)

    def stop(self) -> None:
        if hasattr(self, "_sampling"):
            self._sampling.set()
        for replica in self.replicas:
            replica.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# -- clients ----------------------------------------------------------------------------------


class Http:
    """One keep-alive connection to a server."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self._connection: http.client.HTTPConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        if self._connection is None:
            self._connection = http.client.HTTPConnection(self.host, self.port, timeout=300)
        try:
            self._connection.request(method, path, body, {**self.headers, **(headers or {})})
            response = self._connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self._connection.close()
            self._connection = None
            raise

    def json(self, method: str, path: str, value: Any) -> Any:
        status, body = self.request(method, path, json.dumps(value).encode())
        if status != 200:
            raise RuntimeError(f"{method} {path}: {status} {body[:300]!r}")
        return json.loads(body)


def configure(deployment: Deployment) -> None:
    """The benchmark pool, and simulated execution on the default backend."""
    http = deployment.client(0)
    http.json(
        "POST",
        "/api/configs/backend/default",
        {"configs_dict": {"execution": {"mode": "simulate"}}},
    )
    http.json("PUT", "/api/configs/pool/bench", {"configs_dict": BENCH_POOL})


@dataclass
class Submitted:
    workflow_id: str
    tasks: int
    latency: float  # seconds


@dataclass
class Load:
    """What the clients did."""

    submitted: list[Submitted] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def submit(http: Http, number: int, seconds: float, load: Load) -> Submitted | None:
    body, tasks = body_of(number, seconds)
    started = time.perf_counter()
    status, answer = http.request(
        "POST", "/api/pool/bench/workflow", body, {"Idempotency-Key": uuid.uuid4().hex}
    )
    latency = time.perf_counter() - started
    if status != 200:
        with load.lock:
            load.errors.append(f"{status} {answer[:200]!r}")
        return None
    done = Submitted(str(json.loads(answer)["name"]), tasks, latency)
    with load.lock:
        load.submitted.append(done)
    return done


def paced(
    deployment: Deployment,
    clients: int,
    count: int,
    rate: float,
    action: Callable[[Http, int], object],
) -> float:
    """``action(http, n)`` for n in 0..count-1 by ``clients`` threads, started ``rate`` per
    second in all (as fast as they can with ``rate`` 0); the seconds it took."""
    started = time.perf_counter()
    numbers = iter(range(count))
    lock = threading.Lock()

    def work(index: int) -> None:
        http = deployment.client(index)
        while True:
            with lock:
                number = next(numbers, None)
            if number is None:
                return
            if rate:
                delay = started + number / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            action(http, number)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def percentile(values: Sequence[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# -- phases -----------------------------------------------------------------------------------


def warm_up(deployment: Deployment, clients: int) -> None:
    """One dry run per client at once: every replica starts its sandbox workers (a second or
    two each) before anything is timed."""
    text, _ = workflow_yaml(1, 1.0)
    path = "/api/pool/bench/workflow?dry_run=true"
    paced(deployment, clients, clients, 0, lambda http, n: http.json("POST", path, {"file": text}))


@dataclass
class Submissions:
    rate: float  # what they were paced at (0: as fast as they could)
    submitted: list[Submitted]
    seconds: float
    errors: int
    pods: int
    placement_seconds: float

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.placement_seconds if self.placement_seconds else 0.0


def submit_phase(deployment: Deployment, clients: int, count: int, rate: float) -> Submissions:
    """``count`` short workflows paced at ``rate`` (0: as fast as the clients can), and how
    long until the last of their pods was bound."""
    load = Load()
    deployment.ticks()  # read what is there: only later ticks count
    first_submit = time.time()
    seconds = paced(deployment, clients, count, rate, lambda http, n: submit(http, n, 1.0, load))
    pods = sum(s.tasks for s in load.submitted)
    deadline = time.monotonic() + 600
    while True:
        ticks = [tick for tick in deployment.ticks() if tick.at >= first_submit]
        placed, last = 0, first_submit
        for tick in ticks:
            placed += tick.placed_pods
            last = tick.at
            if placed >= pods:
                break
        if placed >= pods or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return Submissions(
        rate, load.submitted, seconds, len(load.errors), min(placed, pods), last - first_submit
    )


@dataclass
class Level:
    alive: int
    ticks: list[Tick]
    submit_latencies: list[float]


def settle(deployment: Deployment) -> None:
    """Wait until the controller has caught up with what was submitted: three ticks in a row
    that stepped few workflows (the fill's backlog is not what a window measures)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        recent = deployment.ticks()[-3:]
        if len(recent) == 3 and all(tick.stepped < 20 for tick in recent):
            return
        time.sleep(0.5)


def scale_phase(deployment: Deployment, clients: int, sizes: Sizes) -> list[Level]:
    """Fill up to each level with long workflows, then churn and record the ticks."""
    load = Load()
    order: deque[str] = deque()
    counter = iter(range(10**9))
    results = []
    for level in sizes.levels:
        ticks = deployment.ticks()
        missing = level - (ticks[-1].alive if ticks else 0)
        if missing > 0:
            before = len(load.submitted)
            paced(
                deployment,
                clients,
                missing,
                0,
                lambda http, n: submit(http, next(counter), 3600, load),
            )
            order.extend(s.workflow_id for s in load.submitted[before:])
        settle(deployment)
        window_start = time.time()
        churn = Load()

        def churn_once(http: Http, n: int, churn: Load = churn) -> None:
            with load.lock:
                victim = order.popleft() if order else None
            if victim is not None:
                http.request("POST", f"/api/workflow/{victim}/cancel")
            done = submit(http, next(counter), 3600, churn)
            if done is not None:
                with load.lock:
                    order.append(done.workflow_id)

        count = int(sizes.churn_seconds * sizes.churn_rate)
        paced(deployment, min(clients, 4), count, sizes.churn_rate, churn_once)
        time.sleep(1)
        window = [t for t in deployment.ticks() if t.at >= window_start]
        results.append(Level(level, window, [s.latency for s in churn.submitted]))
    return results


# -- baseline ---------------------------------------------------------------------------------


def sample_rows(deployment: Deployment) -> tuple[list[dict[str, Any]], int]:
    """The objects a 16-task benchmark workflow's group gets (a dry run), and its task count."""
    text, tasks = workflow_yaml(1, 1.0)
    path = "/api/pool/bench/workflow?dry_run=true"
    found = deployment.client(0).json("POST", path, {"file": text})
    return list(found["groups"][0]["manifests"]), tasks


def baseline(
    database_url: str,
    clients: int,
    count: int,
    rate: float,
    objects: list[dict[str, Any]],
    tasks: int,
) -> list[float]:
    """Seconds per bare insert of one workflow's rows, by ``clients`` threads paced at ``rate``
    inserts per second in all (the submissions' pace)."""
    engine = make_engine(database_url)
    migrate(engine)
    latencies: list[float] = []
    lock = threading.Lock()
    numbers = iter(range(count))
    begun = time.perf_counter()

    def work() -> None:
        while True:
            with lock:
                number = next(numbers, None)
            if number is None:
                return
            delay = begun + number / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            workflow_id = f"baseline-{number}"
            group = uuid.uuid4().hex
            started = time.perf_counter()
            with writing(engine) as connection:
                connection.execute(
                    insert(workflows).values(
                        workflow_id=workflow_id,
                        name="baseline",
                        number=number,
                        uuid=uuid.uuid4().hex,
                        pool="bench",
                        backend="default",
                        namespace="default",
                        status="PENDING",
                        priority="NORMAL",
                        submitted_by="bench",
                        submitted_at=datetime.now(UTC),
                        exec_timeout_s=3600.0,
                        queue_timeout_s=3600.0,
                        spec="workflow: {}",
                    )
                )
                connection.execute(
                    insert(workflow_groups).values(
                        group_uuid=group,
                        workflow_id=workflow_id,
                        position=0,
                        name="train",
                        status="SUBMITTING",
                        upstream=[],
                        resource_kinds=[[o["apiVersion"], o["kind"]] for o in objects],
                        manifests=objects,
                        ignore_non_lead=True,
                        cleaned=False,
                    )
                )
                connection.execute(
                    insert(workflow_tasks),
                    [
                        {
                            "task_uuid": uuid.uuid4().hex,
                            "group_uuid": group,
                            "position": rank,
                            "name": f"rank{rank}",
                            "pod_name": f"pod-{rank}",
                            "platform": "gb200",
                            "lead": rank == 0,
                            "status": "WAITING",
                            "retry_id": 0,
                        }
                        for rank in range(tasks)
                    ],
                )
            with lock:
                latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=work) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.dispose()
    return latencies


# -- one database -----------------------------------------------------------------------------


@contextlib.contextmanager
def databases(kind: str, directory: Path) -> Iterator[tuple[str, str]]:
    """Two fresh databases of ``kind``: the servers' and the baseline's."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'corral.db'}", f"sqlite:///{directory / 'baseline.db'}"
        return
    admin = os.environ[POSTGRES_ENV]
    with (
        scratch_postgres_database(admin, "corral_bench") as server_url,
        scratch_postgres_database(admin, "corral_base") as baseline_url,
    ):
        yield server_url, baseline_url


@dataclass
class Run:
    kind: str
    replicas: int
    inserts: list[float]
    latency: Submissions
    throughput: Submissions
    levels: list[Level]
    usage: Usage
    peak_rss: int


def run(kind: str, sizes: Sizes, clients: int, replicas: int, keep: Path | None = None) -> Run:
    with tempfile.TemporaryDirectory(prefix="corral-bench-") as scratch:
        directory = Path(scratch)
        cluster = directory / "cluster.yaml"
        cluster.write_text(cluster_yaml(sizes))
        with databases(kind, directory) as (server_url, baseline_url):
            deployment = Deployment(directory, server_url, cluster, replicas)
            try:
                configure(deployment)
                objects, tasks = sample_rows(deployment)
                inserts = baseline(baseline_url, clients, sizes.paced, sizes.rate, objects, tasks)
                warm_up(deployment, clients)
                latency = submit_phase(deployment, clients, sizes.paced, sizes.rate)
                throughput = submit_phase(deployment, clients, sizes.workflows, 0)
                levels = scale_phase(deployment, clients, sizes)
                usage = deployment.usage()
            finally:
                deployment.stop()
                if keep is not None:  # the servers' logs, for a closer look
                    keep.mkdir(parents=True, exist_ok=True)
                    for index, replica in enumerate(deployment.replicas):
                        target = keep / f"{kind}-server-{index}.log"
                        target.write_bytes(replica.log_path.read_bytes())
    return Run(
        kind,
        replicas,
        inserts,
        latency,
        throughput,
        levels,
        usage,
        deployment.peak_rss,
    )


def ms(value: float) -> str:
    return f"{value * 1000:.1f}"


def report(found: Run, sizes: Sizes, clients: int) -> None:
    servers = "1 server" if found.replicas == 1 else f"{found.replicas} replicas"
    print(f"\n== {found.kind}: {sizes.nodes} nodes, {servers}, {clients} clients")
    base_p50, base_p99 = percentile(found.inserts, 0.5), percentile(found.inserts, 0.99)
    print(
        f"baseline   bare insert of one workflow's rows, {clients} threads at {sizes.rate:g}/s: "
        f"p50 {ms(base_p50)} ms, p99 {ms(base_p99)} ms ({len(found.inserts)} inserts)"
    )
    latency = found.latency
    every = [s.latency for s in latency.submitted]
    big = [s.latency for s in latency.submitted if s.tasks == 16]
    p99 = percentile(every, 0.99)
    print(
        f"latency    {len(every)} workflows paced at {latency.rate:g}/s "
        f"({latency.errors} errors): p50 {ms(percentile(every, 0.5))} ms, p99 {ms(p99)} ms "
        f"({p99 / base_p99:.1f}x the baseline's p99); 16-task workflows: "
        f"p50 {ms(percentile(big, 0.5))} ms, p99 {ms(percentile(big, 0.99))} ms"
    )
    throughput = found.throughput
    done = len(throughput.submitted)
    every = [s.latency for s in throughput.submitted]
    print(
        f"throughput {done} workflows as fast as {clients} clients can ({throughput.errors} "
        f"errors): {done / throughput.seconds:.0f} workflows/s, p50 "
        f"{ms(percentile(every, 0.5))} ms, p99 {ms(percentile(every, 0.99))} ms; "
        f"{throughput.pods} pods bound {throughput.placement_seconds:.1f} s after the first "
        f"submission: {throughput.pods_per_second:.0f} pods/s end to end"
    )
    print(
        f"{'alive':>10} {'ticks':>6} {'tick p50 ms':>12} {'tick p99 ms':>12} "
        f"{'queries/tick p50':>17} {'p99':>5} {'churn submit p99 ms':>20} "
        f"{'slowest tick: gc ms':>20}"
    )
    for level in found.levels:
        seconds = [t.seconds for t in level.ticks]
        queries = [float(t.queries) for t in level.ticks]
        alive = statistics.median([t.alive for t in level.ticks]) if level.ticks else 0
        print(
            f"{alive:>10.0f} {len(seconds):>6} {ms(percentile(seconds, 0.5)):>12} "
            f"{ms(percentile(seconds, 0.99)):>12} {percentile(queries, 0.5):>17.0f} "
            f"{percentile(queries, 0.99):>5.0f} {ms(percentile(level.submit_latencies, 0.99)):>20} "
            f"{ms(_slowest_gc(level.ticks)):>20}"
        )
    print(
        f"servers    CPU {found.usage.server:.1f} s (server processes), "
        f"{found.usage.controller:.1f} s (controller processes), {found.usage.workers:.1f} s "
        f"(sandbox workers); peak RSS {found.peak_rss / 2**20:.0f} MiB in all"
    )


def _slowest_gc(ticks: Sequence[Tick]) -> float:
    """Seconds the slowest tick spent collecting garbage (0 without ticks)."""
    return max(ticks, key=lambda tick: tick.seconds).gc_seconds if ticks else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI (< 2 minutes)")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=2, help="servers on PostgreSQL")
    parser.add_argument("--workflows", type=int, help="submitted in the throughput phase")
    parser.add_argument("--rate", type=float, help="workflows per second in the latency phase")
    parser.add_argument("--levels", help="alive workflows to measure ticks at, e.g. 100,1000")
    parser.add_argument("--keep-logs", type=Path, help="copy the servers' logs to this directory")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    if args.workflows:
        sizes = dataclasses.replace(sizes, workflows=args.workflows)
    if args.rate:
        sizes = dataclasses.replace(sizes, rate=args.rate)
    if args.levels:
        sizes = dataclasses.replace(sizes, levels=tuple(int(v) for v in args.levels.split(",")))
    for kind in args.databases.split(","):
        if kind == "postgresql" and not os.environ.get(POSTGRES_ENV):
            print(f"\n== postgresql: skipped, {POSTGRES_ENV} is not set (./scripts/test sets it)")
            continue
        replicas = args.replicas if kind == "postgresql" else 1
        found = run(kind, sizes, args.clients, replicas, args.keep_logs)
        report(found, sizes, args.clients)


if __name__ == "__main__":
    main()
