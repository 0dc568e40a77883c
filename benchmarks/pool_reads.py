"""Reads against the number of pools, end to end: a real ``corral server`` per database and
size, real HTTP, SQLite and (if CORRAL_TEST_POSTGRES_URL is set) PostgreSQL.

A list that a client reads without asking for a page gets the default page, so its bytes and
its time should not grow with the pools there are. For each size this loads that many pools
(``/api/configs/apply``, 500 a request; each pool has two platforms over the example cluster's
nodes), then measures the default page of each read ``--requests`` times: its bytes, p50 and
p99. The first read after the load is timed apart ("first"): the reader that follows a write of
thousands of new pools validates their models once (about a second per 5,000), as a server does
once at start; the reads after it are what the goal is about. It also times one bundle apply of
every pool (each one's description changed), first as a dry run, then for real (at 5,000 pools
such a bundle failed before its pools were rendered in batches).

Baseline measured in the same run: ``/health`` over the same connection. The goal (issue 44):
at the largest size, each read's bytes and p99 at most 2x those at the smallest.

    python -m benchmarks.pool_reads                   # 50 and 5,000 pools
    python -m benchmarks.pool_reads --quick           # 50 and 250 pools, SQLite (CI)
"""

from __future__ import annotations

import argparse
import contextlib
import http.client as http_client
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

if __package__ in (None, ""):  # run as a script: python benchmarks/pool_reads.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.config_writes import EXAMPLE_CLUSTER, LOAD_CHUNK, each_database_and_size, pool
from benchmarks.control_plane import percentile
from benchmarks.deployment import Http, Replica

SIZES = (50, 5000)
QUICK_SIZES = (50, 250)
GOAL_RATIO = 2.0
READS = (
    "/api/resources?all_pools=true",
    "/api/pool_quota",
    "/api/pool",
    "/ui",
    "/ui/pools",
    "/ui/config",
)


@dataclass(frozen=True)
class Read:
    path: str
    bytes: int
    first: float  # ms: the first read after the load, which builds the new pools' models
    p50: float  # ms: the reads after it
    p99: float


@dataclass(frozen=True)
class Result:
    database: str
    pools: int
    reads: list[Read]
    health_p50: float  # ms
    dry_run_apply: float  # s
    apply: float  # s


def bundle(size: int, start: int, stop: int, edition: str) -> dict[str, Any]:
    pools = {}
    for index in range(start, min(size, stop)):
        item = pool(index)
        item["description"] = f"pool {index}, {edition}"
        pools[f"p{index}"] = item
    return {"bundle": {"pools": pools}}


def load(http: Http, size: int) -> None:
    for start in range(0, size, LOAD_CHUNK):
        http.json("POST", "/api/configs/apply", bundle(size, start, start + LOAD_CHUNK, "first"))


def seconds_to_apply(http: Http, size: int, dry_run: bool) -> float:
    """One bundle of every pool, each one's description changed."""
    body = {**bundle(size, 0, size, "second"), "dry_run": dry_run}
    started = time.perf_counter()
    http.json("POST", "/api/configs/apply", body)
    return time.perf_counter() - started


def log_in(server: Replica) -> Http:
    """A client holding a dashboard session cookie, as a browser would."""
    connection = http_client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    form = urlencode({"token": server.token(), "next": "/ui"})
    connection.request(
        "POST", "/ui/login", form, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    response = connection.getresponse()
    response.read()
    connection.close()
    browser = Http(server.url, "")
    browser.headers = {"Cookie": response.getheader("set-cookie", "").split(";", 1)[0]}
    return browser


def measure_read(http: Http, path: str, requests: int) -> Read:
    with contextlib.suppress(http_client.RemoteDisconnected, ConnectionResetError):
        http.request("GET", "/health")  # a keep-alive connection idle too long is closed
    started = time.perf_counter()
    http.request("GET", path)
    first = 1000 * (time.perf_counter() - started)
    samples, size = [], 0
    for _ in range(requests):
        started = time.perf_counter()
        status, body = http.request("GET", path)
        samples.append(1000 * (time.perf_counter() - started))
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {body[:300]!r}")
        size = len(body)
    return Read(path, size, first, statistics.median(samples), percentile(samples, 0.99))


def measure(database: str, url: str, size: int, requests: int) -> Result:
    with tempfile.TemporaryDirectory() as directory:
        replica = Replica(Path(directory) / "server", url, EXAMPLE_CLUSTER, tick_seconds=0.5)
        try:
            api = Http(replica.url, replica.token())
            load(api, size)
            browser = log_in(replica)
            reads = [
                measure_read(browser if path.startswith("/ui") else api, path, requests)
                for path in READS
            ]
            health = measure_read(api, "/health", requests)
            dry_run = seconds_to_apply(api, size, dry_run=True)
            applied = seconds_to_apply(api, size, dry_run=False)
        finally:
            replica.stop()
    return Result(database, size, reads, health.p50, dry_run, applied)


def report(results: list[Result]) -> None:
    print(
        f"{'database':<11}{'pools':>6}  {'read (default page)':<32}"
        f"{'bytes':>12}{'first':>10}{'p50':>10}{'p99':>10}"
    )
    for r in results:
        for read in r.reads:
            print(
                f"{r.database:<11}{r.pools:>6}  {read.path:<32}{read.bytes:>12,}"
                f"{read.first:>8.1f}ms{read.p50:>8.1f}ms{read.p99:>8.1f}ms"
            )
        print(
            f"{r.database:<11}{r.pools:>6}  baseline /health p50 {r.health_p50:.1f}ms; bundle "
            f"of every pool: dry run {r.dry_run_apply:.2f}s, apply {r.apply:.2f}s"
        )
    for database in dict.fromkeys(r.database for r in results):
        mine = [r for r in results if r.database == database]
        small, large = mine[0], mine[-1]
        for before, after in zip(small.reads, large.reads, strict=True):
            bytes_ratio = after.bytes / before.bytes
            time_ratio = after.p99 / before.p99
            verdict = "within" if max(bytes_ratio, time_ratio) <= GOAL_RATIO else "ABOVE"
            print(
                f"{database}: {after.path} at {large.pools:,} pools / at {small.pools:,}: "
                f"bytes {bytes_ratio:.2f}x, p99 {time_ratio:.2f}x ({verdict} the "
                f"{GOAL_RATIO:g}x goal)"
            )
        print(
            f"{database}: at {large.pools:,} pools the dry run takes "
            f"{large.dry_run_apply / large.apply:.2f}x the apply"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="Reads against the pool count.")
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="pool counts")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--quick", action="store_true", help="50 and 250 pools, SQLite")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    kinds = args.databases.split(",")
    if args.quick:
        sizes, kinds, args.requests = list(QUICK_SIZES), ["sqlite"], 5
    results = each_database_and_size(
        kinds, sizes, lambda kind, url, _, size: measure(kind, url, size, args.requests)
    )
    report(results)


if __name__ == "__main__":
    main()
