"""Where the lifecycle controller runs (docs/lifecycle.md#the-controller-process): in a child
process of ``corral server``, on SQLite as on PostgreSQL, which dies with the server, is started
again when it dies alone, and gives the lease up when the server stops.

Real ``corral server`` processes; the child is found in ``/proc`` by its parent."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from corral.services.lifecycle.process import MODULE
from corral.services.runtime import utc_now
from corral.store.database import make_engine, scratch_postgres_database
from corral.store.lease import LeaseStore
from tests.conftest import POSTGRES_ENV, LiveServer, start_server

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to find the controller process"
)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'corral.db'}"
        return
    with scratch_postgres_database(postgres_admin(), "corral_ctl") as url:
        yield url


def controller_children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(stat[1]) == parent and MODULE.encode() in command:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(condition: object, seconds: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def role(server: LiveServer) -> str:
    try:
        return str(httpx.get(f"{server.url}/health", timeout=2).json()["controller"])
    except (httpx.HTTPError, ValueError):
        return "down"


def holder_of(server: LiveServer) -> str:
    """The lease holder name the server's controller logged when it took the lease."""
    for line in (server.home / "server.log").read_text().splitlines():
        if "took the controller lease" in line:
            return str(json.loads(line[line.index("{") :])["holder"])
    raise AssertionError("the server never took the lease")


def test_the_controller_is_a_child_that_dies_with_the_server(
    tmp_path: Path, database_url: str
) -> None:
    server = start_server(tmp_path, "--demo", database_url=database_url)
    try:
        wait_for(lambda: len(controller_children(server.process.pid)) == 1, 10, "no child")
        (child,) = controller_children(server.process.pid)
        wait_for(lambda: role(server) == "leader", 10, "never led")
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        wait_for(lambda: not alive(child), 5, "the controller outlived a kill -9 of its server")
    finally:
        server.stop()


def test_a_controller_that_dies_alone_is_started_again_and_runs_workflows(
    tmp_path: Path, database_url: str
) -> None:
    server = start_server(tmp_path, "--demo", "--lease-seconds", "2", database_url=database_url)
    try:
        wait_for(lambda: len(controller_children(server.process.pid)) == 1, 10, "no child")
        (first,) = controller_children(server.process.pid)
        os.kill(first, signal.SIGKILL)
        wait_for(
            lambda: [p for p in controller_children(server.process.pid) if p != first],
            10,
            "the controller was not started again",
        )
        log = (tmp_path / "server.log").read_text()
        assert "the controller process exited; starting it again" in log
        spec = tmp_path / "again.yaml"
        spec.write_text(
            "workflow:\n  name: again\n  tasks:\n  - name: t\n    image: busybox\n"
            "    command: [sh, -c, 'true']\n"
        )
        submitted = server.cli("workflow", "submit", str(spec), "--pool", "default")
        assert submitted.returncode == 0, submitted.stderr
        wait_for(
            lambda: "COMPLETED" in server.cli("workflow", "query", "again-1").stdout,
            30,
            "the restarted controller did not run the workflow",
        )
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_stopped_server_gives_the_lease_up(tmp_path: Path, kind: str) -> None:
    """SIGTERM: uvicorn shuts down and raises the signal again; the server still stops its
    controller and releases the lease first (it did not: a standby waited the whole lease)."""
    with contextlib.ExitStack() as stack:
        url = f"sqlite:///{tmp_path / 'corral.db'}"
        if kind == "postgresql":
            url = stack.enter_context(scratch_postgres_database(postgres_admin(), "corral_ctl"))
        stopped_server_releases_the_lease(tmp_path, url)


def postgres_admin() -> str:
    admin_url = os.environ.get(POSTGRES_ENV)
    if not admin_url:
        pytest.skip(f"PostgreSQL not configured: set {POSTGRES_ENV} (./scripts/test does)")
    return admin_url


def stopped_server_releases_the_lease(tmp_path: Path, url: str) -> None:
    server = start_server(tmp_path, "--demo", "--lease-seconds", "60", database_url=url)
    wait_for(lambda: role(server) == "leader", 10, "never led")
    holder = holder_of(server)
    children = controller_children(server.process.pid)
    server.stop()
    assert server.process.returncode == -signal.SIGTERM  # as uvicorn meant
    assert not any(alive(child) for child in children)
    engine = make_engine(url)
    try:
        row = LeaseStore(engine, utc_now).read()
    finally:
        engine.dispose()
    assert row is not None
    assert row.holder == "", f"still held by {row.holder} (was {holder}): a standby waits 60 s"
