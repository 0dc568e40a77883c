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

from corral.backends import landlock
from tests.conftest import LiveServer, start_server

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
            response = http.post(
                "/api/pool/default/workflow", json={"file": hostile_task(server, targets)}
            )
            assert response.status_code == 200, response.text
            workflow_id = response.json()["name"]
            deadline = time.monotonic() + 60
            while http.get(f"/api/workflow/{workflow_id}").json()["status"] != "COMPLETED":
                assert time.monotonic() < deadline, http.get(f"/api/workflow/{workflow_id}").json()
                time.sleep(0.2)
            log = http.get(f"/api/workflow/{workflow_id}/logs", params={"task": "probe"}).text
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
