"""A local task cannot reach the server's secrets (issue 13, item 2).

Before, a task of the ``--demo`` server found the server in ``/proc``, read its ``HOME`` and
printed the admin token from the CLI credentials file into a log every pool user can read. Here
a real server runs a hostile task that tries every way in: the credentials file, the session
key, the database, the server's environment and memory, other tasks' files, signals to the
server, and writing into the data directory. Every attempt fails; the server keeps serving."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy.engine import make_url

from corral.backends.embedded import landlock
from tests.conftest import POSTGRES_ENV, LiveServer, _postgres_database, start_server

CANARY = "canary-7f3a9"


def hostile_task(server: LiveServer, targets: dict[str, str]) -> str:
    checks = "".join(
        f'if cat "{path}" >/dev/null 2>&1; then echo "{name}: read"; '
        f'else echo "{name}: denied"; fi; '
        for name, path in targets.items()
    )
    pid = server.process.pid
    script = (
        f"{checks}"
        f'if ls "{server.home / "data" / "tasks"}" >/dev/null 2>&1; then echo "tasks: listed"; '
        'else echo "tasks: denied"; fi; '
        f'if (echo x > "{server.home / "data" / "planted"}") 2>/dev/null; then echo "write: done"; '
        'else echo "write: denied"; fi; '
        f'if kill -0 {pid} 2>/dev/null; then echo "signal: sent"; else echo "signal: denied"; fi; '
        f'echo "env: $(env | grep -c {CANARY})"; '
        'echo "home: $([ "$HOME" = "$PWD" ] && echo own)"; '
        'echo x > note && echo "home write: $(cat note)"'
    )
    task = {"name": "probe", "image": "busybox", "command": ["sh", "-c", script]}
    return yaml.safe_dump({"workflow": {"name": "probe", "tasks": [task]}})


def test_a_task_reaches_none_of_the_servers_secrets(tmp_path: Path) -> None:
    if not landlock.abi_version() and os.geteuid() != 0:
        pytest.skip(
            "this machine can confine no local task (no Landlock, not root): tasks are refused "
            "there, which tests/backends/test_task_sandbox.py checks"
        )
    os.environ["CORRAL_TEST_CANARY"] = CANARY  # in the server's environment
    try:
        server = start_server(tmp_path, "--demo", "--tick-seconds", "0.1")
    finally:
        del os.environ["CORRAL_TEST_CANARY"]
    try:
        headers = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=10) as http:
            first = http.post(  # a task of someone else, whose files must stay private
                "/api/pool/default/workflow",
                json={
                    "file": yaml.safe_dump(
                        {
                            "workflow": {
                                "name": "other",
                                "tasks": [
                                    {
                                        "name": "t",
                                        "image": "busybox",
                                        "command": ["sh", "-c", "echo private"],
                                    }
                                ],
                            }
                        }
                    )
                },
            )
            assert first.status_code == 200, first.text
            targets = {
                "credentials": str(server.home / "config" / "credentials.json"),
                "session key": str(server.home / "data" / "session.key"),
                "database": str(server.home / "data" / "corral.db"),
                "server environ": f"/proc/{server.process.pid}/environ",
                "server memory": f"/proc/{server.process.pid}/mem",
            }
            log = run_to_completion(http, hostile_task(server, targets), "probe")
            assert http.get("/health").json()["status"] == "ok"
        assert server.process.poll() is None
        lines = [
            *(f"{name}: denied" for name in targets),
            "tasks: denied",
            "write: denied",
            "signal: denied",
            "env: 0",
            "home: own",
            "home write: x",
        ]
        print(log)
        assert log.splitlines() == lines
        assert not (server.home / "data" / "planted").exists()
    finally:
        server.stop()


# -- what a task can reach (issue 25, item 2) ---------------------------------------------------


def reach_task(name: str, ports: dict[str, int], secret: str, *, host_network: bool) -> str:
    """A task that tries a TCP connection to each port on the host's 127.0.0.1, and looks for
    ``secret`` in every process's command line and environment it can read."""
    checks = "".join(
        f"if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo '{what}: reached'; "
        f"else echo '{what}: unreachable'; fi; "
        for what, port in ports.items()
    )
    half = len(secret) // 2  # written in two parts: no command line of the task holds it
    script = (
        f"{checks}printf '%s%s' '{secret[:half]}' '{secret[half:]}' > pattern; "
        "if grep -qsF -f pattern /proc/[0-9]*/cmdline /proc/[0-9]*/environ; "
        "then echo 'url: found'; else echo 'url: not found'; fi"
    )
    task: dict[str, object] = {
        "name": "reach",
        "image": "busybox",
        "command": ["bash", "-c", script],
    }
    if host_network:
        task["hostNetwork"] = True
    return yaml.safe_dump({"workflow": {"name": name, "tasks": [task]}})


def run_to_completion(http: httpx.Client, file: str, task: str) -> str:
    """Submit ``file`` to the default pool, wait for it to complete, and return ``task``'s log."""
    response = http.post("/api/pool/default/workflow", json={"file": file})
    assert response.status_code == 200, response.text
    workflow_id = response.json()["name"]
    deadline = time.monotonic() + 60
    while http.get(f"/api/workflow/{workflow_id}").json()["status"] != "COMPLETED":
        assert time.monotonic() < deadline, http.get(f"/api/workflow/{workflow_id}").json()
        time.sleep(0.2)
    return http.get(f"/api/workflow/{workflow_id}/logs", params={"task_name": task}).text


def test_a_task_reaches_neither_the_api_nor_postgresql_and_cannot_read_the_url(
    tmp_path: Path,
) -> None:
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"PostgreSQL not configured: set {POSTGRES_ENV} (./scripts/test does)")
    if not landlock.abi_version() and os.geteuid() != 0:
        pytest.skip("this machine can confine no local task (no Landlock, not root)")
    database = _postgres_database()
    url = next(database)
    server = start_server(tmp_path, "--demo", "--tick-seconds", "0.1", database_url=url)
    try:
        ports = {"api": int(server.url.rsplit(":", 1)[1]), "postgres": make_url(url).port or 5432}
        headers = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=10) as http:
            log = run_to_completion(
                http, reach_task("isolated", ports, url, host_network=False), "reach"
            )
            assert log.splitlines() == [
                "api: unreachable",
                "postgres: unreachable",
                "url: not found",
            ]
            # What isolates it is the network namespace: a platform that allows the host's
            # network lets a task that asks for it through.
            allow = {"platforms": {"default": {"host_network_allowed": True}}}
            patched = http.patch("/api/configs/pool/default", json={"configs_dict": allow})
            assert patched.status_code == 200, patched.text
            log = run_to_completion(
                http, reach_task("host", ports, url, host_network=True), "reach"
            )
            assert log.splitlines()[:2] == ["api: reached", "postgres: reached"]
    finally:
        server.stop()
        database.close()
