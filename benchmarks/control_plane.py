"""End-to-end load benchmark of the control plane: real ``corral server`` processes, real HTTP
clients, a real database (SQLite file and PostgreSQL), thousands of live workflows.

    .venv/bin/python benchmarks/control_plane.py [--quick] [--databases sqlite,postgresql]

The cluster is generated: NVL72-style racks of 18 trays (4 GPUs each, one ``gpu-clique`` per
rack) in zones and spines, 5,040 nodes (``--quick``: 180), run by the embedded backend with
simulated execution. Workflows have 8 or 16 tasks of 2 GPUs, one task group with a required
``gpu-clique``; every fourth also prefers one ``spine``. Three of four have 16 tasks.

For each database, in one run:

1. **baseline**: the same workload's rows (a workflow, its group with the objects a real
   submission renders, its tasks) inserted with bare SQLAlchemy Core by ``--clients`` threads
   into a fresh database of the same kind: p50/p99 per insert, so that the server's figures can
   be read as a ratio, whatever the machine.
2. **throughput**: ``--clients`` HTTP clients submit ``--workflows`` short workflows (1 s each)
   paced at ``--rate`` workflows per second in all: submit latency p50/p99, achieved
   throughput, and pods placed per second end to end (from the first submission to the moment
   the last submitted pod was bound, from the server's tick log).
3. **scale**: long-running workflows are submitted until ``--levels`` workflows are alive
   (most of them waiting: the cluster holds a few hundred); at each level, for
   ``--churn-seconds``, the clients cancel the oldest running workflows and submit new ones at
   ``--churn-rate`` each per second, and the tick durations and queries per tick of that window
   are reported (``corral server --log-level debug`` writes one line per tick).

Finally the server's CPU time and peak RSS (main process and its sandbox workers).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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
from pathlib import Path
from typing import Any

import httpx
import yaml
from sqlalchemy import insert

from corral.store.database import make_engine, migrate, scratch_postgres_database, writing
from corral.store.tables import workflow_groups, workflow_tasks, workflows

POSTGRES_ENV = "CORRAL_TEST_POSTGRES_URL"
TRAYS_PER_RACK = 18
ALIVE = ("PENDING", "RUNNING", "WAITING")


@dataclass(frozen=True)
class Sizes:
    zones: int
    spines: int  # per zone
    racks: int  # per spine
    workflows: int  # throughput phase
    rate: float  # throughput phase, workflows per second in all
    levels: tuple[int, ...]
    churn_seconds: float
    churn_rate: float  # cancels and submissions per second, each

    @property
    def nodes(self) -> int:
        return self.zones * self.spines * self.racks * TRAYS_PER_RACK


FULL = Sizes(2, 7, 20, 3000, 150.0, (100, 1000, 5000, 10000), 10.0, 10.0)
QUICK = Sizes(1, 2, 5, 150, 50.0, (100, 300), 3.0, 5.0)


# -- what the server is given -----------------------------------------------------------------


def cluster_yaml(sizes: Sizes) -> str:
    generator = {
        "prefix": "gb200",
        "count": TRAYS_PER_RACK,
        "levels": [
            {"label": "topology.kubernetes.io/zone", "count": sizes.zones},
            {"label": "topology.kubernetes.io/spine", "count": sizes.spines},
            {"label": "topology.kubernetes.io/rack", "count": sizes.racks},
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


# -- the server -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    at: float  # seconds since the epoch
    seconds: float
    alive: int
    placed_pods: int
    queries: int


class Server:
    """A ``corral server`` process on ``database_url`` with the generated cluster."""

    def __init__(self, home: Path, database_url: str, cluster: Path, tick_seconds: float) -> None:
        self.home = home
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "server.log"
        env = {
            **os.environ,
            "CORRAL_CONFIG_DIR": str(home / "config"),
            "CORRAL_URL": self.url,
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
            "--database-url",
            database_url,
            "--cluster",
            str(cluster),
            "--demo",
            "--tick-seconds",
            str(tick_seconds),
            "--log-level",
            "debug",
        ]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(command, env=env, stdout=self._log, stderr=self._log)
        self.peak_rss = 0
        self._wait_healthy()
        credentials = json.loads((home / "config" / "credentials.json").read_text())
        self.token = str(next(iter(credentials["servers"].values()))["token"])

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited:\n{self.log_path.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"server did not start:\n{self.log_path.read_text()[-3000:]}")

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=60
        )

    def ticks(self) -> list[Tick]:
        found = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if '"controller tick"' not in line:
                continue
            entry = json.loads(line)
            found.append(
                Tick(
                    at=datetime.fromisoformat(entry["timestamp"]).timestamp(),
                    seconds=float(entry["seconds"]),
                    alive=int(entry["alive"]),
                    placed_pods=int(entry["placed_pods"]),
                    queries=int(entry["queries"]),
                )
            )
        return found

    def usage(self) -> tuple[float, float, int]:
        """CPU seconds of the server process, of its children, and their RSS now (bytes)."""
        main = _cpu_seconds(self.process.pid)
        children = sum(_cpu_seconds(pid) for pid in _children(self.process.pid))
        rss = _rss(self.process.pid) + sum(_rss(pid) for pid in _children(self.process.pid))
        self.peak_rss = max(self.peak_rss, rss)
        return main, children, rss

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


def _free_port() -> int:
    import socket

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


def configure(server: Server) -> None:
    """The benchmark pool, and simulated execution on the default backend."""
    with server.client() as http:
        for method, path, body in (
            ("POST", "/api/configs/backend/default", {"execution": {"mode": "simulate"}}),
            ("PUT", "/api/configs/pool/bench", BENCH_POOL),
        ):
            response = http.request(method, path, json={"configs_dict": body})
            if response.status_code != 200:
                raise RuntimeError(f"{path}: {response.status_code} {response.text}")


# -- clients ----------------------------------------------------------------------------------


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


def submit(http: httpx.Client, number: int, seconds: float, load: Load) -> Submitted | None:
    text, tasks = workflow_yaml(number, seconds)
    started = time.perf_counter()
    response = http.post(
        "/api/pool/bench/workflow",
        json={"file": text},
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )
    latency = time.perf_counter() - started
    if response.status_code != 200:
        with load.lock:
            load.errors.append(f"{response.status_code} {response.text[:200]}")
        return None
    done = Submitted(str(response.json()["name"]), tasks, latency)
    with load.lock:
        load.submitted.append(done)
    return done


def paced(
    server: Server,
    clients: int,
    count: int,
    rate: float,
    action: Callable[[httpx.Client, int], object],
) -> float:
    """``action(http, n)`` for n in 0..count-1 by ``clients`` threads, started ``rate`` per
    second in all (as fast as they can with ``rate`` 0); the seconds it took."""
    started = time.perf_counter()
    numbers = iter(range(count))
    lock = threading.Lock()

    def work() -> None:
        with server.client() as http:
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

    threads = [threading.Thread(target=work) for _ in range(clients)]
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


def alive_count(server: Server) -> int:
    ticks = server.ticks()
    return ticks[-1].alive if ticks else 0


# -- phases -----------------------------------------------------------------------------------


@dataclass
class Throughput:
    latencies: list[float]
    seconds: float
    workflows: int
    errors: int
    pods: int
    placement_seconds: float

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.placement_seconds if self.placement_seconds else 0.0


def throughput_phase(server: Server, clients: int, sizes: Sizes) -> Throughput:
    load = Load()
    first_submit = time.time()
    placed_before = sum(t.placed_pods for t in server.ticks())
    seconds = paced(
        server,
        clients,
        sizes.workflows,
        sizes.rate,
        lambda http, n: submit(http, n, 1.0, load),
    )
    pods = sum(s.tasks for s in load.submitted)
    deadline = time.monotonic() + 300
    while True:
        ticks = server.ticks()
        placed = sum(t.placed_pods for t in ticks) - placed_before
        if placed >= pods or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    last = ticks[-1].at
    for tick in ticks:  # the tick that bound the last pod
        placed_before += tick.placed_pods if tick.at >= first_submit else 0
    cumulative = 0
    for tick in ticks:
        if tick.at < first_submit:
            continue
        cumulative += tick.placed_pods
        if cumulative >= pods:
            last = tick.at
            break
    return Throughput(
        latencies=[s.latency for s in load.submitted],
        seconds=seconds,
        workflows=len(load.submitted),
        errors=len(load.errors),
        pods=min(placed, pods),
        placement_seconds=max(last - first_submit, 1e-9),
    )


@dataclass
class Level:
    alive: int
    ticks: list[Tick]
    submit_latencies: list[float]


def scale_phase(server: Server, clients: int, sizes: Sizes) -> list[Level]:
    """Fill up to each level with long workflows, then churn and record the ticks."""
    load = Load()
    order: deque[str] = deque()
    counter = iter(range(10**9))
    results = []
    for level in sizes.levels:
        missing = level - alive_count(server)
        if missing > 0:
            before = len(load.submitted)
            paced(
                server, clients, missing, 0, lambda http, n: submit(http, next(counter), 3600, load)
            )
            order.extend(s.workflow_id for s in load.submitted[before:])
        time.sleep(2)  # let the controller create and place what it can
        window_start = time.time()
        churn = Load()
        count = int(sizes.churn_seconds * sizes.churn_rate)

        def churn_once(http: httpx.Client, n: int, churn: Load = churn) -> None:
            with load.lock:
                victim = order.popleft() if order else None
            if victim is not None:
                http.post(f"/api/workflow/{victim}/cancel")
            done = submit(http, next(counter), 3600, churn)
            if done is not None:
                with load.lock:
                    order.append(done.workflow_id)

        paced(server, min(clients, 4), count, sizes.churn_rate, churn_once)
        time.sleep(1)
        window = [t for t in server.ticks() if t.at >= window_start]
        results.append(Level(level, window, [s.latency for s in churn.submitted]))
        server.usage()
    return results


# -- baseline ---------------------------------------------------------------------------------


def sample_rows(server: Server) -> tuple[list[dict[str, Any]], int]:
    """The objects a 16-task benchmark workflow's group gets (a dry run), and its task count."""
    text, tasks = workflow_yaml(1, 1.0)
    with server.client() as http:
        response = http.post(
            "/api/pool/bench/workflow", params={"dry_run": True}, json={"file": text}
        )
    response.raise_for_status()
    groups = response.json()["groups"]
    return list(groups[0]["manifests"]), tasks


def baseline(
    database_url: str, clients: int, count: int, objects: list[dict[str, Any]], tasks: int
) -> list[float]:
    """p50/p99 input: seconds per bare insert of one workflow's rows, ``clients`` threads."""
    engine = make_engine(database_url)
    migrate(engine)
    latencies: list[float] = []
    lock = threading.Lock()
    numbers = iter(range(count))

    def work() -> None:
        while True:
            with lock:
                number = next(numbers, None)
            if number is None:
                return
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
    """Two fresh databases of ``kind``: the server's and the baseline's."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'corral.db'}", f"sqlite:///{directory / 'baseline.db'}"
        return
    admin = os.environ[POSTGRES_ENV]
    with (
        scratch_postgres_database(admin, "corral_bench") as server_url,
        scratch_postgres_database(admin, "corral_base") as baseline_url,
    ):
        yield server_url, baseline_url


def ms(value: float) -> str:
    return f"{value * 1000:.1f}"


def run(kind: str, sizes: Sizes, clients: int, tick_seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="corral-bench-") as scratch:
        directory = Path(scratch)
        cluster = directory / "cluster.yaml"
        cluster.write_text(cluster_yaml(sizes))
        with databases(kind, directory) as (server_url, baseline_url):
            home = directory / "server"
            home.mkdir()
            server = Server(home, server_url, cluster, tick_seconds)
            try:
                configure(server)
                objects, tasks = sample_rows(server)
                inserts = baseline(
                    baseline_url, clients, max(200, sizes.workflows // 4), objects, tasks
                )
                throughput = throughput_phase(server, clients, sizes)
                server.usage()
                levels = scale_phase(server, clients, sizes)
                cpu_main, cpu_children, _ = server.usage()
            finally:
                server.stop()
    report(
        kind, sizes, clients, inserts, throughput, levels, cpu_main, cpu_children, server.peak_rss
    )


def report(
    kind: str,
    sizes: Sizes,
    clients: int,
    inserts: list[float],
    throughput: Throughput,
    levels: list[Level],
    cpu_main: float,
    cpu_children: float,
    peak_rss: int,
) -> None:
    print(f"\n== {kind}: {sizes.nodes} nodes, {clients} clients")
    base_p50, base_p99 = percentile(inserts, 0.5), percentile(inserts, 0.99)
    print(
        f"baseline  bare insert of one workflow's rows: p50 {ms(base_p50)} ms, "
        f"p99 {ms(base_p99)} ms ({len(inserts)} inserts)"
    )
    lat = throughput.latencies
    p50, p99 = percentile(lat, 0.5), percentile(lat, 0.99)
    print(
        f"submit    {throughput.workflows} workflows paced at {sizes.rate:g}/s: p50 {ms(p50)} ms, "
        f"p99 {ms(p99)} ms (p99 {p99 / base_p99:.1f}x baseline), "
        f"{throughput.workflows / throughput.seconds:.0f} workflows/s, {throughput.errors} errors"
    )
    print(
        f"placed    {throughput.pods} pods in {throughput.placement_seconds:.1f} s from the first "
        f"submission: {throughput.pods_per_second:.0f} pods/s end to end"
    )
    print(
        f"{'alive':>7} {'ticks':>6} {'tick p50 ms':>12} {'tick p99 ms':>12} "
        f"{'queries/tick p50':>17} {'max':>5} {'submit p99 ms':>14}"
    )
    for level in levels:
        seconds = [t.seconds for t in level.ticks]
        queries = [t.queries for t in level.ticks]
        alive = statistics.median([t.alive for t in level.ticks]) if level.ticks else 0
        print(
            f"{alive:>7.0f} {len(seconds):>6} {ms(percentile(seconds, 0.5)):>12} "
            f"{ms(percentile(seconds, 0.99)):>12} {percentile(queries, 0.5):>17.0f} "
            f"{max(queries, default=0):>5} {ms(percentile(level.submit_latencies, 0.99)):>14}"
        )
    print(
        f"server    CPU {cpu_main:.1f} s (main process), {cpu_children:.1f} s (sandbox workers); "
        f"peak RSS {peak_rss / 2**20:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI (< 2 minutes)")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--workflows", type=int)
    parser.add_argument("--rate", type=float)
    parser.add_argument("--levels", help="alive workflows to measure ticks at, e.g. 100,1000")
    parser.add_argument("--tick-seconds", type=float, default=0.25)
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    if args.workflows:
        sizes = dataclasses_replace(sizes, workflows=args.workflows)
    if args.rate:
        sizes = dataclasses_replace(sizes, rate=args.rate)
    if args.levels:
        sizes = dataclasses_replace(sizes, levels=tuple(int(v) for v in args.levels.split(",")))
    for kind in args.databases.split(","):
        if kind == "postgresql" and not os.environ.get(POSTGRES_ENV):
            print(f"\n== postgresql: skipped, {POSTGRES_ENV} is not set (./scripts/test sets it)")
            continue
        run(kind, sizes, args.clients, args.tick_seconds)


def dataclasses_replace(sizes: Sizes, **changes: Any) -> Sizes:
    import dataclasses

    return dataclasses.replace(sizes, **changes)


if __name__ == "__main__":
    main()
