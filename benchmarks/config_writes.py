"""Config write and read cost, on SQLite and (if CORRAL_TEST_POSTGRES_URL is set) PostgreSQL.

Every write stores a full snapshot of its type and validates the whole state, so its cost grows
with the number of items. For stores holding 10, 100 and 1,000 pools this prints: p50/p99
latency of one pool write through ConfigService (validation, the render check of the pool's
platforms in a sandbox worker, lock, revision insert), reads of
the current snapshot per second, and, as a baseline measured in the same run on the same
database, the latency of inserting the same snapshot row with SQLAlchemy Core alone.

    .venv/bin/python benchmarks/config_writes.py [--writes 50] [--sizes 10,100,1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert

from corral.domain.configs.types import ConfigType
from corral.services.config_service import WriteMeta
from corral.services.runtime import Runtime, open_runtime
from corral.store.database import scratch_postgres_database
from corral.store.tables import config_revisions

SIZES = (10, 100, 1000)
POSTGRES_ENV = "CORRAL_TEST_POSTGRES_URL"


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


def timed(action: Callable[[int], object], repeat: int) -> list[float]:
    samples = []
    for index in range(repeat):
        started = time.perf_counter()
        action(index)
        samples.append(time.perf_counter() - started)
    return samples


def measure(runtime: Runtime, size: int, writes: int) -> dict[str, float]:
    meta = WriteMeta(username="bench")
    pools = {f"p{i}": pool(i) for i in range(size)}
    runtime.configs.put_document(ConfigType.POOL, {"pools": pools}, meta)

    def write(index: int) -> None:
        runtime.configs.put_item(ConfigType.POOL, f"p{index % size}", pool(-index - 1), meta)

    write_times = timed(write, writes)
    read_times = timed(lambda _: runtime.configs.snapshot(ConfigType.POOL), writes)
    data, revision = runtime.configs.snapshot(ConfigType.POOL)

    def raw_insert(index: int) -> None:
        with runtime.engine.begin() as connection:
            connection.execute(
                insert(config_revisions).values(
                    config_type="POOL",
                    revision=revision + 1 + index,
                    name="",
                    username="bench",
                    created_at=datetime.now(UTC),
                    description="",
                    tags=[],
                    data=data,
                )
            )

    baseline = timed(raw_insert, writes)
    return {
        "write_p50": 1000 * statistics.median(write_times),
        "write_p99": 1000 * sorted(write_times)[int(0.99 * (len(write_times) - 1))],
        "reads_per_s": len(read_times) / sum(read_times),
        "baseline_p50": 1000 * statistics.median(baseline),
    }


def sqlite_databases() -> Iterator[str]:
    while True:
        with tempfile.TemporaryDirectory() as directory:
            yield f"sqlite:///{directory}/bench.db"


def postgres_databases(admin_url: str) -> Iterator[str]:
    while True:
        with scratch_postgres_database(admin_url, "corral_bench") as url:
            yield url


def main() -> None:
    parser = argparse.ArgumentParser(description="Config write and read cost.")
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="pool counts")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    sources: list[tuple[str, Iterator[str]]] = [("sqlite", sqlite_databases())]
    admin_url = os.environ.get(POSTGRES_ENV)
    if admin_url:
        sources.append(("postgresql", postgres_databases(admin_url)))
    else:
        print(f"PostgreSQL skipped: set {POSTGRES_ENV}")
    print(
        f"{'database':<11}{'pools':>6}{'write p50':>11}{'write p99':>11}{'reads/s':>9}"
        f"{'baseline insert p50':>21}"
    )
    for label, urls in sources:
        for size in sizes:
            url = next(urls)
            runtime = open_runtime(url)
            result = measure(runtime, size, args.writes)
            runtime.engine.dispose()
            print(
                f"{label:<11}{size:>6}{result['write_p50']:>9.1f}ms{result['write_p99']:>9.1f}ms"
                f"{result['reads_per_s']:>9.0f}{result['baseline_p50']:>19.1f}ms"
            )
        urls.close()


if __name__ == "__main__":
    main()
