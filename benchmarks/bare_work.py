"""The bare database work of a workflow's life, written with bare SQLAlchemy Core: what the
control-plane benchmark (``control_plane.py``) divides its figures by.

A workflow's life is the insert of its rows (the workflow, its group with the objects a real
submission renders, its tasks), one transaction per workflow as one submission is; then its
status changes, batched as a good controller batches them, one transaction per step for a batch
of workflows: scheduling (group and tasks), bound (each task its node), running (workflow, group
and tasks, with start times) and ended (all three, with end times).

- :func:`capacity`: that life by ``threads`` threads as fast as they go, in workflows per
  second, and the CPU it took per workflow: this process's, plus PostgreSQL's server processes'
  (SQLite works inside this process).
- :func:`paced_inserts`: the seconds of each bare insert when ``threads`` threads insert at a
  given rate in all (the latency phase's pace).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, insert, update

from benchmarks.deployment import CLOCK_TICKS, proc_stat
from corral.store.database import make_engine, migrate, writing
from corral.store.tables import workflow_groups, workflow_tasks, workflows

#: Workflows a controller's tick carries through one status change together.
BATCH = 8


@dataclass(frozen=True)
class Shape:
    """What one workflow's rows hold: its group's rendered objects and its task count."""

    objects: list[dict[str, Any]]
    tasks: int


@dataclass(frozen=True)
class Capacity:
    workflows_per_second: float
    cpu_seconds_per_workflow: float
    workflows: int


@dataclass(frozen=True)
class Ids:
    workflow_id: str
    group_uuid: str
    task_uuids: tuple[str, ...]


def insert_rows(engine: Engine, number: int, shape: Shape) -> Ids:
    """One submission's rows, in one transaction."""
    ids = Ids(
        f"bare-{number}-{uuid.uuid4().hex[:8]}",
        uuid.uuid4().hex,
        tuple(uuid.uuid4().hex for _ in range(shape.tasks)),
    )
    with writing(engine) as connection:
        connection.execute(insert(workflows).values(**_workflow_row(ids.workflow_id, number)))
        connection.execute(
            insert(workflow_groups).values(
                group_uuid=ids.group_uuid,
                workflow_id=ids.workflow_id,
                position=0,
                name="train",
                status="SUBMITTING",
                upstream=[],
                resource_kinds=[[o["apiVersion"], o["kind"]] for o in shape.objects],
                manifests=shape.objects,
                ignore_non_lead=True,
                cleaned=False,
            )
        )
        connection.execute(
            insert(workflow_tasks),
            [
                {
                    "task_uuid": task_uuid,
                    "group_uuid": ids.group_uuid,
                    "position": rank,
                    "name": f"rank{rank}",
                    "pod_name": f"pod-{rank}",
                    "platform": "gb200",
                    "lead": rank == 0,
                    "status": "WAITING",
                    "retry_id": 0,
                }
                for rank, task_uuid in enumerate(ids.task_uuids)
            ],
        )
    return ids


def _workflow_row(workflow_id: str, number: int) -> dict[str, Any]:
    return {
        "workflow_id": workflow_id,
        "name": "bare",
        "number": number,
        "uuid": uuid.uuid4().hex,
        "pool": "bench",
        "backend": "default",
        "namespace": "default",
        "status": "PENDING",
        "priority": "NORMAL",
        "submitted_by": "bench",
        "submitted_at": datetime.now(UTC),
        "exec_timeout_s": 3600.0,
        "queue_timeout_s": 3600.0,
        "spec": "workflow: {}",
    }


def live(engine: Engine, batch: Sequence[Ids]) -> None:
    """The status changes of ``batch``'s lives: scheduling, bound, running, ended; one
    transaction each for the whole batch."""
    groups = [ids.group_uuid for ids in batch]
    ids_of = [ids.workflow_id for ids in batch]
    tasks = [task for ids in batch for task in ids.task_uuids]
    steps: list[Callable[[Connection], None]] = [
        lambda c: _set(c, groups, ids_of, tasks, "SCHEDULING", None, {}),
        lambda c: _bind(c, groups, tasks),
        lambda c: _set(c, groups, ids_of, tasks, "RUNNING", "RUNNING", {"started_at": _now()}),
        lambda c: _set(c, groups, ids_of, tasks, "COMPLETED", "COMPLETED", {"ended_at": _now()}),
    ]
    for step in steps:
        with writing(engine) as connection:
            step(connection)


def _set(
    connection: Connection,
    groups: list[str],
    workflow_ids: list[str],
    tasks: list[str],
    status: str,
    workflow_status: str | None,
    times: dict[str, datetime],
) -> None:
    connection.execute(
        update(workflow_groups)
        .where(workflow_groups.c.group_uuid.in_(groups))
        .values(status=status, **times)
    )
    connection.execute(
        update(workflow_tasks)
        .where(workflow_tasks.c.task_uuid.in_(tasks))
        .values(status=status, **times)
    )
    if workflow_status is not None:
        connection.execute(
            update(workflows)
            .where(workflows.c.workflow_id.in_(workflow_ids))
            .values(status=workflow_status, **times)
        )


def _bind(connection: Connection, groups: list[str], tasks: list[str]) -> None:
    """The groups are bound; each task gets its own node (an executemany, as a placement
    writes it)."""
    connection.execute(
        update(workflow_groups)
        .where(workflow_groups.c.group_uuid.in_(groups))
        .values(status="INITIALIZING")
    )
    connection.execute(
        update(workflow_tasks)
        .where(workflow_tasks.c.task_uuid == bindparam("task"))
        .values(node=bindparam("node_name"), status="INITIALIZING"),
        [{"task": task, "node_name": f"gb200-{index:04d}"} for index, task in enumerate(tasks)],
    )


def _now() -> datetime:
    return datetime.now(UTC)


def capacity(database_url: str, threads: int, count: int, shape: Shape) -> Capacity:
    """``count`` whole lives by ``threads`` threads as fast as they go."""
    engine = make_engine(database_url)
    migrate(engine)
    numbers = iter(range(count))
    lock = threading.Lock()

    def work() -> None:
        pending: list[Ids] = []
        while True:
            with lock:
                number = next(numbers, None)
            if number is not None:
                pending.append(insert_rows(engine, number, shape))
            if pending and (number is None or len(pending) == BATCH):
                live(engine, pending)
                pending = []
            if number is None:
                return

    cpu_before = _cpu_now(database_url)
    started = time.perf_counter()
    _run_threads(work, threads)
    seconds = time.perf_counter() - started
    cpu = _cpu_now(database_url) - cpu_before
    engine.dispose()
    return Capacity(count / seconds, cpu / count, count)


def paced_inserts(
    database_url: str, threads: int, count: int, rate: float, shape: Shape
) -> list[float]:
    """Seconds per bare insert of one workflow's rows, by ``threads`` threads paced at
    ``rate`` inserts per second in all."""
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
            started = time.perf_counter()
            insert_rows(engine, 10**6 + number, shape)
            with lock:
                latencies.append(time.perf_counter() - started)

    _run_threads(work, threads)
    engine.dispose()
    return latencies


def _run_threads(work: Callable[[], None], threads: int) -> None:
    running = [threading.Thread(target=work) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()


def _cpu_now(database_url: str) -> float:
    """CPU seconds so far of this process, and of PostgreSQL's when the database is one."""
    own = time.process_time()
    return own + (postgres_cpu() if database_url.startswith("postgresql") else 0.0)


def postgres_cpu() -> float:
    """CPU seconds so far of every PostgreSQL server process on this machine, with its ended
    children's (a connection's process, once it ended, counts in its parent's)."""
    total = 0
    for entry in Path("/proc").iterdir():
        stat = proc_stat(entry.name) if entry.name.isdigit() else None
        if stat is not None and stat[0] in ("postgres", "postmaster"):
            total += sum(int(value) for value in stat[1][11:15])  # utime stime cutime cstime
    return total / CLOCK_TICKS
