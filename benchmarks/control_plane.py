"""End-to-end load benchmark of the control plane: real ``corral server`` processes, real HTTP
clients, a real database (SQLite file and PostgreSQL), thousands of live workflows.

    .venv/bin/python benchmarks/control_plane.py [--quick] [--databases sqlite,postgresql]

The cluster is generated: NVL72-style racks of 18 trays (4 GPUs each, one ``gpu-clique`` per
rack) in zones and spines, 5,040 nodes (``--quick``: 180), run by the embedded backend with
simulated execution. Workflows have 8 or 16 tasks of 2 GPUs, one task group with a required
``gpu-clique``; every fourth also prefers one ``spine``. Three of four have 16 tasks.

On SQLite one server runs (the embedded default); on PostgreSQL ``--replicas`` servers (2, as
``deploy/`` runs them) share the database: one leads the controller, all serve the API, and
client *i* talks to replica *i* mod N (as a Service would spread them). For each database, every
figure is also given as a ratio against the bare database work of a workflow's life, measured in
the same run (``bare_work.py``), so that runs on different machines compare:

1. **baseline**: ``--clients`` threads do the bare work of whole lives as fast as they go: its
   capacity in workflows/s, and its CPU per workflow (this process and PostgreSQL's).
2. **throughput**: the clients submit ``--workflows`` short workflows (1 s each) as fast as they
   can: workflows/s from the first submission to the first tick with nothing alive, as a
   fraction of the bare capacity; CPU per workflow of every process (servers, controllers,
   sandbox workers, PostgreSQL) as a multiple of the bare work's; and pods placed per second
   (to the tick that bound the last pod, from the leader's tick log).
3. **latency**: the clients submit paced at half the end-to-end capacity just measured (or
   ``--rate``), so that latency is service time, not queueing: submit p99 as a multiple of the
   bare insert's p99 at the same pace, by as many threads.
4. **scale**: long-running workflows are submitted until ``--levels`` workflows are alive
   (most of them waiting: the cluster holds a few hundred); at each level, for
   ``--churn-seconds``, clients cancel the oldest workflows and submit new ones at
   ``--churn-rate`` each per second, and the ticks of that window are reported: p50/p99
   duration and queries per tick (``corral server --log-level debug`` logs every tick), and
   p99 at the last level as a multiple of p99 at the first.

Finally the servers' CPU time and peak RSS (main processes and their sandbox workers). The
clients are plain ``http.client`` connections with pre-encoded bodies, so that they take little
of the machine the servers run on. ``--json`` prints one JSON object: per database,
``throughput_fraction``, ``cpu_multiple``, ``latency_multiple`` and ``tick_growth`` beside the
absolute figures (the report goes to standard error). ``--profile DIR`` records the servers
and their subprocesses with py-spy during the throughput phase and prints where the CPU went,
by process and by function (``profile_stacks.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):  # run as a script: python benchmarks/control_plane.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bare_work import Capacity, Shape, capacity, paced_inserts, postgres_cpu
from benchmarks.deployment import Deployment, Http, Tick, Usage
from benchmarks.profile_stacks import Recorder, read_profiles, table
from corral.store.database import scratch_postgres_database

POSTGRES_ENV = "CORRAL_TEST_POSTGRES_URL"
TRAYS_PER_RACK = 18


@dataclass(frozen=True)
class Sizes:
    zones: int
    spines: int  # per zone
    racks: int  # per spine
    paced_seconds: float  # the latency phase: this long, at half the end-to-end capacity
    bare: int  # whole lives of the bare work, for its capacity
    workflows: int  # throughput phase
    levels: tuple[int, ...]
    churn_seconds: float
    churn_rate: float  # cancels and submissions per second, each

    @property
    def nodes(self) -> int:
        return self.zones * self.spines * self.racks * TRAYS_PER_RACK


FULL = Sizes(2, 7, 20, 30.0, 3000, 3000, (1000, 5000, 10000), 10.0, 10.0)
QUICK = Sizes(1, 2, 5, 4.0, 200, 100, (100, 200), 2.0, 5.0)


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


# -- the bare work -----------------------------------------------------------------------------


def sample_shape(deployment: Deployment) -> Shape:
    """The objects a 16-task benchmark workflow's group gets (a dry run), and its task count."""
    text, tasks = workflow_yaml(1, 1.0)
    path = "/api/pool/bench/workflow?dry_run=true"
    found = deployment.client(0).json("POST", path, {"file": text})
    return Shape(list(found["groups"][0]["manifests"]), tasks)


@dataclass(frozen=True)
class Life:
    """The throughput phase's workflows, submitted to ended, end to end."""

    workflows: int
    seconds: float  # from the first submission to the first tick with nothing alive
    cpu_by_process: dict[str, float]  # servers, controllers, sandbox and forecast workers, ...

    @property
    def cpu_seconds(self) -> float:  # every process, PostgreSQL's too
        return sum(self.cpu_by_process.values())

    @property
    def workflows_per_second(self) -> float:
        return self.workflows / self.seconds

    @property
    def cpu_per_workflow(self) -> float:
        return self.cpu_seconds / self.workflows

    @property
    def forecast_core_share(self) -> float:
        """The forecast workers' CPU over the phase: the share of one core (target <= 0.25)."""
        return self.cpu_by_process.get("forecast workers", 0.0) / self.seconds


def per_workflow(life: Life) -> dict[str, float]:
    """CPU seconds per workflow of each kind of process."""
    return {kind: cpu / life.workflows for kind, cpu in life.cpu_by_process.items()}


def all_cpu(deployment: Deployment, database_url: str) -> dict[str, float]:
    """CPU seconds so far of every process of the control plane and of its database, by kind."""
    usage = deployment.usage()
    return {
        "servers": usage.server,
        "controllers": usage.controller,
        "sandbox workers": usage.workers,
        "forecast workers": usage.forecast,
        "database": postgres_cpu() if database_url.startswith("postgresql") else 0.0,
    }


def wait_all_ended(deployment: Deployment, after: float) -> float:
    """When the first tick after ``after`` (seconds since the epoch) found nothing alive."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        for tick in deployment.ticks():
            if tick.at >= after and tick.alive == 0:
                return tick.at
        time.sleep(0.5)
    raise RuntimeError("the throughput phase's workflows did not end within 10 minutes")


def throughput_phase(
    deployment: Deployment,
    database_url: str,
    clients: int,
    count: int,
    profile: Path | None = None,
) -> tuple[Submissions, Life]:
    """``count`` short workflows as fast as the clients can; and their lives end to end. With
    ``profile``, py-spy records the servers meanwhile and the table is printed."""
    pids = [replica.process.pid for replica in deployment.replicas]
    recorder = Recorder(profile, database_url.partition(":")[0], pids) if profile else None
    cpu_before = all_cpu(deployment, database_url)
    first = time.time()
    found = submit_phase(deployment, clients, count, 0)
    ended = wait_all_ended(deployment, first + found.seconds)
    cpu_after = all_cpu(deployment, database_url)
    cpu = {kind: cpu_after[kind] - cpu_before[kind] for kind in cpu_after}
    if recorder is not None:
        for line in table(read_profiles(recorder.stop())):
            say(line)
    return found, Life(len(found.submitted), ended - first, cpu)


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
    bare: Capacity
    life: Life
    inserts: list[float]
    latency: Submissions
    throughput: Submissions
    levels: list[Level]
    usage: Usage
    peak_rss: int

    @property
    def throughput_fraction(self) -> float:
        return self.life.workflows_per_second / self.bare.workflows_per_second

    @property
    def cpu_multiple(self) -> float:
        return self.life.cpu_per_workflow / self.bare.cpu_seconds_per_workflow

    @property
    def latency_multiple(self) -> float:
        submitted = [s.latency for s in self.latency.submitted]
        return percentile(submitted, 0.99) / percentile(self.inserts, 0.99)

    @property
    def tick_growth(self) -> float:
        first, last = (
            [t.seconds for t in level.ticks] for level in (self.levels[0], self.levels[-1])
        )
        return percentile(last, 0.99) / percentile(first, 0.99)


def run(
    kind: str,
    sizes: Sizes,
    clients: int,
    replicas: int,
    keep: Path | None = None,
    rate: float | None = None,
    profile: Path | None = None,
) -> Run:
    """Every phase on ``kind``; the latency phase at ``rate``, by default half the end-to-end
    capacity the throughput phase measured."""
    with tempfile.TemporaryDirectory(prefix="corral-bench-") as scratch:
        directory = Path(scratch)
        cluster = directory / "cluster.yaml"
        cluster.write_text(cluster_yaml(sizes))
        with databases(kind, directory) as (server_url, baseline_url):
            deployment = Deployment(directory, server_url, cluster, replicas)
            try:
                configure(deployment)
                shape = sample_shape(deployment)
                bare = capacity(baseline_url, clients, sizes.bare, shape)
                warm_up(deployment, clients)
                throughput, life = throughput_phase(
                    deployment, server_url, clients, sizes.workflows, profile
                )
                pace = rate or life.workflows_per_second / 2
                count = max(clients, int(pace * sizes.paced_seconds))
                latency = submit_phase(deployment, clients, count, pace)
                inserts = paced_inserts(baseline_url, clients, count, pace, shape)
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
        bare,
        life,
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
    say(f"\n== {found.kind}: {sizes.nodes} nodes, {servers}, {clients} clients")
    bare, life = found.bare, found.life
    say(
        f"baseline   the bare database work of a workflow's life, {clients} threads as fast as "
        f"they go: {bare.workflows_per_second:.0f} workflows/s, "
        f"{ms(bare.cpu_seconds_per_workflow)} ms CPU per workflow ({bare.workflows} lives)"
    )
    throughput = found.throughput
    every = [s.latency for s in throughput.submitted]
    say(
        f"throughput {life.workflows} workflows submitted to ended in {life.seconds:.1f} s "
        f"({throughput.errors} errors): {life.workflows_per_second:.1f} workflows/s = "
        f"{found.throughput_fraction:.2f} of the bare work's; submit p50 "
        f"{ms(percentile(every, 0.5))} ms, p99 {ms(percentile(every, 0.99))} ms; "
        f"{throughput.pods} pods bound {throughput.placement_seconds:.1f} s after the first "
        f"submission: {throughput.pods_per_second:.0f} pods/s end to end"
    )
    say(
        f"cpu        {ms(life.cpu_per_workflow)} ms per workflow, every process together = "
        f"{found.cpu_multiple:.1f}x the bare work's ("
        + ", ".join(f"{kind} {ms(cpu)}" for kind, cpu in per_workflow(life).items())
        + ")"
    )
    latency = found.latency
    every = [s.latency for s in latency.submitted]
    big = [s.latency for s in latency.submitted if s.tasks == 16]
    say(
        f"latency    {len(every)} workflows paced at {latency.rate:.1f}/s "
        f"({latency.errors} errors): p50 {ms(percentile(every, 0.5))} ms, p99 "
        f"{ms(percentile(every, 0.99))} ms = {found.latency_multiple:.1f}x the bare insert's "
        f"p99 at that rate ({ms(percentile(found.inserts, 0.99))} ms); 16-task workflows: "
        f"p50 {ms(percentile(big, 0.5))} ms, p99 {ms(percentile(big, 0.99))} ms"
    )
    say(
        f"{'alive':>10} {'ticks':>6} {'tick p50 ms':>12} {'tick p99 ms':>12} "
        f"{'queries/tick p50':>17} {'p99':>5} {'churn submit p99 ms':>20} "
        f"{'slowest tick: gc ms':>20}"
    )
    for level in found.levels:
        seconds = [t.seconds for t in level.ticks]
        queries = [float(t.queries) for t in level.ticks]
        alive = statistics.median([t.alive for t in level.ticks]) if level.ticks else 0
        say(
            f"{alive:>10.0f} {len(seconds):>6} {ms(percentile(seconds, 0.5)):>12} "
            f"{ms(percentile(seconds, 0.99)):>12} {percentile(queries, 0.5):>17.0f} "
            f"{percentile(queries, 0.99):>5.0f} {ms(percentile(level.submit_latencies, 0.99)):>20} "
            f"{ms(_slowest_gc(level.ticks)):>20}"
        )
    say(
        f"ticks      p99 at {found.levels[-1].alive} alive = {found.tick_growth:.2f}x p99 at "
        f"{found.levels[0].alive} alive"
    )
    say(
        f"servers    CPU {found.usage.server:.1f} s (server processes), "
        f"{found.usage.controller:.1f} s (controller processes), {found.usage.workers:.1f} s "
        f"(sandbox workers), {found.usage.forecast:.1f} s (the controllers' forecast workers); "
        f"peak RSS {found.peak_rss / 2**20:.0f} MiB in all"
    )
    say(
        f"forecast   {found.life.forecast_core_share:.1%} of one core over the throughput phase "
        "(target <= 25%)"
    )


def figures(found: Run) -> dict[str, Any]:
    """One database's ratios, beside the absolute figures they come from (``--json``)."""
    latency = [s.latency for s in found.latency.submitted]
    return {
        "throughput_fraction": found.throughput_fraction,
        "cpu_multiple": found.cpu_multiple,
        "latency_multiple": found.latency_multiple,
        "tick_growth": found.tick_growth,
        "replicas": found.replicas,
        "baseline": {
            "workflows_per_second": found.bare.workflows_per_second,
            "cpu_ms_per_workflow": found.bare.cpu_seconds_per_workflow * 1000,
            "insert_p99_ms": percentile(found.inserts, 0.99) * 1000,
        },
        "workflows_per_second": found.life.workflows_per_second,
        "forecast_core_share": found.life.forecast_core_share,
        "pods_per_second": found.throughput.pods_per_second,
        "cpu_ms_per_workflow": found.life.cpu_per_workflow * 1000,
        "cpu_ms_per_workflow_by_process": {
            kind: cpu * 1000 for kind, cpu in per_workflow(found.life).items()
        },
        "latency_rate": found.latency.rate,
        "submit_p99_ms": percentile(latency, 0.99) * 1000,
        "tick_p99_ms": {
            str(level.alive): percentile([t.seconds for t in level.ticks], 0.99) * 1000
            for level in found.levels
        },
        "cpu_seconds": {
            "servers": found.usage.server,
            "controllers": found.usage.controller,
            "workers": found.usage.workers,
            "forecast_workers": found.usage.forecast,
        },
        "errors": found.latency.errors + found.throughput.errors,
    }


#: Where the human-readable report goes: standard output, or standard error with ``--json``.
_REPORT = {"stream": sys.stdout}


def say(text: str) -> None:
    print(text, file=_REPORT["stream"], flush=True)


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
    parser.add_argument(
        "--rate", type=float, help="the latency phase's pace (default: half the capacity)"
    )
    parser.add_argument("--levels", help="alive workflows to measure ticks at, e.g. 100,1000")
    parser.add_argument("--keep-logs", type=Path, help="copy the servers' logs to this directory")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (the report on stderr)"
    )
    parser.add_argument(
        "--profile", type=Path, help="py-spy the throughput phase; its stacks go to this directory"
    )
    args = parser.parse_args()
    if args.json:
        _REPORT["stream"] = sys.stderr
    sizes = QUICK if args.quick else FULL
    if args.workflows:
        sizes = dataclasses.replace(sizes, workflows=args.workflows)
    if args.levels:
        sizes = dataclasses.replace(sizes, levels=tuple(int(v) for v in args.levels.split(",")))
    results: dict[str, Any] = {}
    for kind in args.databases.split(","):
        if kind == "postgresql" and not os.environ.get(POSTGRES_ENV):
            say(f"\n== postgresql: skipped, {POSTGRES_ENV} is not set (./scripts/test sets it)")
            continue
        replicas = args.replicas if kind == "postgresql" else 1
        found = run(kind, sizes, args.clients, replicas, args.keep_logs, args.rate, args.profile)
        report(found, sizes, args.clients)
        results[kind] = figures(found)
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
