"""The servers under load in the control-plane benchmarks (``control_plane.py``,
``dashboard.py``): ``corral server`` processes on one database, their tick log lines, their CPU
and memory (read from ``/proc``), and a cheap keep-alive HTTP client."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from corral.services.lifecycle.process import MODULE as CONTROLLER_MODULE

#: /proc counts CPU time in these a second.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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
    controller: float  # of their controller processes
    workers: float  # of the servers' sandbox workers
    forecast: float  # of the controllers' sandbox workers (the forecast)
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
        """CPU seconds of the server process, of its controller process and of
        the sandbox workers of each, and their RSS now."""
        parents = _parents()
        children = _descendants(parents, self.process.pid)
        controller = [pid for pid in children if CONTROLLER_MODULE in _command(pid)]
        forecast = [pid for parent in controller for pid in _descendants(parents, parent)]
        workers = [pid for pid in children if pid not in controller and pid not in forecast]
        return Usage(
            _cpu_seconds(self.process.pid),
            sum(_cpu_seconds(pid) for pid in controller),
            sum(_cpu_seconds(pid) for pid in workers),
            sum(_cpu_seconds(pid) for pid in forecast),
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
        return Usage(*(sum(getattr(u, f.name) for u in found) for f in fields(Usage)))

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


def proc_stat(pid: int | str) -> tuple[str, list[str]] | None:
    """A process's name and the fields of ``/proc/PID/stat`` after it (None: it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, _, rest = text.partition(" (")[2].rpartition(")")
    return name, rest.split()


def _parents() -> dict[int, int]:
    """Every process's parent, from one pass over ``/proc``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        stat = proc_stat(entry.name) if entry.name.isdigit() else None
        if stat is not None:
            parents[int(entry.name)] = int(stat[1][1])
    return parents


def _descendants(parents: dict[int, int], pid: int) -> list[int]:
    """Every process below ``pid``: the controller's own sandbox worker (the forecast) is a
    grandchild of the server."""
    found: list[int] = []
    frontier = [pid]
    while frontier:
        below = [child for child, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def _cpu_seconds(pid: int) -> float:
    """A process's CPU time, with that of its children that exited (a recycled worker's
    is then its parent's): summed over a tree, every process counts once."""
    stat = proc_stat(pid)
    return sum(int(field) for field in stat[1][11:15]) / CLOCK_TICKS if stat else 0.0


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
