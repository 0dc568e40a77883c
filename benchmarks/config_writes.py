"""Config write cost against the number of pools, end to end: a real ``corral server`` per
database and size, real HTTP, SQLite and (if CORRAL_TEST_POSTGRES_URL is set) PostgreSQL.

A write stores the items it changes and checks what they can break, so one pool write should
cost about the same with 10 pools as with 5,000. For each size this loads that many pools
(through ``/api/configs/apply``, 500 a request), then measures:

- one pool written ``--writes`` times (``PUT /api/configs/pool/NAME``): p50 and p99;
- the same writes from 4 clients at once (writers queue on the config lock): p99;
- the first ``/api/pool_quota`` after the load, one ``GET /api/configs/pool/NAME``, and the
  bytes of ``/api/configs/history?limit=5``.

Baselines measured in the same run: ``/health`` over the same connection, and the bare
database work of a config write (lock row, revision row, item row) with SQLAlchemy Core on a
fresh database of the same kind. The goal (issue 25): write p99 at the largest size at most 5x
the p99 at the smallest, in the same run.

    python -m benchmarks.config_writes                      # 10, 100, 1,000, 5,000 pools
    python -m benchmarks.config_writes --quick              # 10 and 100 pools, SQLite (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

if __package__ in (None, ""):  # run as a script: python benchmarks/config_writes.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert, update

from benchmarks.control_plane import databases, percentile
from benchmarks.deployment import Http, Replica
from corral.store.database import make_engine, migrate
from corral.store.tables import config_items, config_revisions, config_write_lock

T = TypeVar("T")

SIZES = (10, 100, 1000, 5000)
QUICK_SIZES = (10, 100)
LOAD_CHUNK = 500
CONCURRENT_WRITERS = 4
GOAL_RATIO = 5.0
#: Writes before the measured ones: the first ones start the sandbox workers.
WARM_UP = 5
EXAMPLE_CLUSTER = Path(__file__).resolve().parents[1] / "examples" / "clusters" / "example.yaml"


def pool(index: int) -> dict[str, Any]:
    return {
        "backend": "default",
        "description": f"pool {index}",
        "common_pod_template": ["default_ctrl", "default_user"],
        "common_resource_validations": ["default_cpu", "default_memory"],
        "common_default_variables": {
            "USER_CPU": 1,
            "USER_GPU": 0,
            "USER_MEMORY": "1Gi",
            "USER_STORAGE": "1Gi",
        },
        "platforms": {"a100": {"override_pod_template": []}, "h100": {}},
    }


@dataclass(frozen=True)
class Result:
    database: str
    pools: int
    write_p50: float  # ms
    write_p99: float
    concurrent_p99: float
    first_quota: float
    get_pool: float
    history_bytes: int
    health_p50: float
    bare_write_p50: float


def timed(action: Callable[[int], object], repeat: int) -> list[float]:
    samples = []
    for index in range(repeat):
        started = time.perf_counter()
        action(index)
        samples.append(1000 * (time.perf_counter() - started))
    return samples


def load(http: Http, size: int) -> None:
    for start in range(0, size, LOAD_CHUNK):
        pools = {f"p{i}": pool(i) for i in range(start, min(size, start + LOAD_CHUNK))}
        http.json("POST", "/api/configs/apply", {"bundle": {"pools": pools}})


def put_pool(http: Http, name: str, index: int) -> None:
    http.json("PUT", f"/api/configs/pool/{name}", {"configs_dict": pool(-index - 1)})


def concurrent_writes(replica: Replica, token: str, size: int, writes: int) -> list[float]:
    found: list[float] = []
    lock = threading.Lock()

    def writer(number: int) -> None:
        http = Http(replica.url, token)
        samples = timed(
            lambda i: put_pool(http, f"p{(number + CONCURRENT_WRITERS * i) % size}", i), writes
        )
        with lock:
            found.extend(samples)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(CONCURRENT_WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found


def measure(database: str, url: str, baseline_url: str, size: int, writes: int) -> Result:
    with tempfile.TemporaryDirectory() as directory:
        replica = Replica(Path(directory) / "server", url, EXAMPLE_CLUSTER, tick_seconds=0.5)
        try:
            token = replica.token()
            http = Http(replica.url, token)
            load(http, size)
            first_quota = timed(lambda _: http.request("GET", "/api/pool_quota"), 1)[0]
            get_pool = timed(lambda _: http.request("GET", "/api/configs/pool/p0"), 1)[0]
            timed(lambda i: put_pool(http, f"p{i % size}", i), WARM_UP)  # sandbox workers start
            write_times = timed(lambda i: put_pool(http, f"p{i % size}", i), writes)
            together = concurrent_writes(replica, token, size, max(1, writes // 2))
            http = Http(replica.url, token)  # the first one idled past the keep-alive timeout
            _, history = http.request("GET", "/api/configs/history?limit=5&order=DESC")
            health = timed(lambda _: http.request("GET", "/health"), writes)
        finally:
            replica.stop()
    return Result(
        database,
        size,
        statistics.median(write_times),
        percentile(write_times, 0.99),
        percentile(together, 0.99),
        first_quota,
        get_pool,
        len(history),
        statistics.median(health),
        statistics.median(bare_writes(baseline_url, writes)),
    )


def bare_writes(url: str, writes: int) -> list[float]:
    """The database work of one config write, alone: the lock row, a revision row, one item."""
    engine = make_engine(url)
    migrate(engine)
    item = pool(0)

    def write(index: int) -> None:
        with engine.begin() as connection:
            connection.execute(
                update(config_write_lock)
                .where(config_write_lock.c.id == 1)
                .values(writes=config_write_lock.c.writes + 1)
            )
            connection.execute(
                insert(config_revisions).values(
                    config_type="POOL",
                    revision=1000 + index,
                    name="p0",
                    username="bench",
                    created_at=datetime.now(UTC),
                    description="",
                    tags=[],
                )
            )
            connection.execute(
                insert(config_items).values(
                    config_type="POOL",
                    name="p0",
                    revision=1000 + index,
                    position=0,
                    action="updated",
                    data=item,
                )
            )

    try:
        return timed(write, writes)
    finally:
        engine.dispose()


def report(results: list[Result]) -> None:
    print(
        f"{'database':<11}{'pools':>6}{'write p50':>11}{'write p99':>11}{'4 writers p99':>15}"
        f"{'first quota':>13}{'get pool':>10}{'history?limit=5':>17}"
        f"{'baseline /health p50':>22}{'bare write p50':>16}"
    )
    for r in results:
        print(
            f"{r.database:<11}{r.pools:>6}{r.write_p50:>9.1f}ms{r.write_p99:>9.1f}ms"
            f"{r.concurrent_p99:>13.1f}ms{r.first_quota:>11.1f}ms{r.get_pool:>8.1f}ms"
            f"{r.history_bytes:>15,}B{r.health_p50:>20.1f}ms{r.bare_write_p50:>14.1f}ms"
        )
    for database in dict.fromkeys(r.database for r in results):
        mine = [r for r in results if r.database == database]
        small, large = mine[0], mine[-1]
        ratio = large.write_p99 / small.write_p99
        verdict = "within" if ratio <= GOAL_RATIO else "ABOVE"
        print(
            f"{database}: write p99 at {large.pools:,} pools / at {small.pools:,} pools = "
            f"{ratio:.2f}x ({verdict} the {GOAL_RATIO:g}x goal)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="Config write cost against the pool count.")
    parser.add_argument("--writes", type=int, default=100)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="pool counts")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--quick", action="store_true", help="10 and 100 pools, SQLite, 10 writes")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    kinds = args.databases.split(",")
    if args.quick:
        sizes, kinds, args.writes = list(QUICK_SIZES), ["sqlite"], 10
    results = each_database_and_size(
        kinds,
        sizes,
        lambda kind, url, baseline, size: measure(kind, url, baseline, size, args.writes),
    )
    report(results)


def each_database_and_size(
    kinds: list[str], sizes: list[int], run: Callable[[str, str, str, int], T]
) -> list[T]:
    """``run(kind, url, baseline_url, size)`` on fresh databases of each kind (PostgreSQL only
    where CORRAL_TEST_POSTGRES_URL is set) and size; each result also as JSON on stderr."""
    if "postgresql" in kinds and not os.environ.get("CORRAL_TEST_POSTGRES_URL"):
        print("PostgreSQL skipped: set CORRAL_TEST_POSTGRES_URL")
        kinds = [kind for kind in kinds if kind != "postgresql"]
    results = []
    for kind in kinds:
        for size in sizes:
            with (
                tempfile.TemporaryDirectory() as directory,
                databases(kind, Path(directory)) as (url, baseline_url),
            ):
                results.append(run(kind, url, baseline_url, size))
            print(json.dumps(results[-1], default=lambda r: r.__dict__), file=sys.stderr)
    return results


if __name__ == "__main__":
    main()
