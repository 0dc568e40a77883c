"""NVIDIA OSMO's own CLI (``../shared/osmo-cli``, client 6.4.0) against a real ``corral server``.

OSMO users keep their CLI: it logs in with an API token (``osmo login --method token``) and
every command of it that covers a feature corral has exits 0 and prints the right content, on
SQLite and on PostgreSQL. The CLI runs unchanged, in a Python 3.12+ venv of its own that
``./scripts/test`` builds (``CORRAL_OSMO_PYTHON``), from the folder it lies in
(``CORRAL_OSMO_CLI``); nothing of it is copied into corral. It joins its base URL and
``/api/...`` into ``//api/...``, as newer ``requests`` releases send it: the server merges them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import yaml

from corral import __version__
from corral.api.paging import OSMO_CLIENT_HEADER
from tests.conftest import REPO, LiveServer, _postgres_database, start_server
from tests.osmo_contract import osmo_cli_folder

SINGLE_RACK = REPO / "examples" / "workflows" / "nvl72-single-rack.yaml"
NODE = "gb200-zone-a-s0-r0-g0-00"


def osmo_cli() -> tuple[Path, Path]:
    """OSMO's CLI folder and the Python to run it with, or a skip saying what is missing
    (a failure when ``./scripts/test`` set them up: then they must work)."""
    folder = osmo_cli_folder()
    python = os.environ.get("CORRAL_OSMO_PYTHON", "")
    if python and Path(python).exists():
        return folder, Path(python)
    reason = (
        "No Python for OSMO's CLI: set CORRAL_OSMO_PYTHON to a Python 3.12+ with its "
        "requirements.txt installed (./scripts/test makes .venv-osmo)"
    )
    if os.environ.get("CORRAL_REQUIRE_OSMO_CLI"):
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass
class Osmo:
    """OSMO's CLI, logged in to one corral server, with a home of its own."""

    folder: Path
    python: Path
    home: Path
    server: LiveServer

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "COLUMNS": "250",
            "TZ": "UTC",
        }
        done = subprocess.run(
            [str(self.python), "-m", "src.cli.cli", *args],
            cwd=self.folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        if check:
            assert done.returncode == 0, f"osmo {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    def api(self, path: str, **params: Any) -> Any:
        """What the server answers OSMO's CLI (which names itself in a header) at ``path``."""
        headers = {"Authorization": f"Bearer {self.server.token}", OSMO_CLIENT_HEADER: "6.0.0"}
        answer = httpx.get(f"{self.server.url}{path}", params=params, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def osmo(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Osmo]:
    """A demo server on each database, and OSMO's CLI logged in to it with the admin token."""
    folder, python = osmo_cli()
    home = tmp_path_factory.mktemp(f"osmo-{request.param}")
    databases: Iterator[str | None] = (
        _postgres_database() if request.param == "postgresql" else iter([None])
    )
    database = next(databases)
    server = start_server(home, "--demo", database_url=database)
    try:
        client = Osmo(folder, python, home / "osmo-home", server)
        login = client.run("login", server.url, "--method", "token", "--token", server.token)
        assert login.stdout.splitlines() == [
            f"Logging in to {server.url}",
            "Successfully logged in. Welcome admin.",
        ]
        yield client
    finally:
        server.stop()
        for _ in databases:  # drop the PostgreSQL database
            pass


def rows(text: str) -> list[list[str]]:
    """The rows of one of OSMO's tables, split on runs of two or more spaces."""
    return [
        [cell for cell in line.strip().split("  ") if cell.strip()]
        for line in text.splitlines()
        if line.strip() and not line.startswith("=")
    ]


def cells(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in row] for row in rows(text)]


def test_version_is_the_servers(osmo: Osmo) -> None:
    assert osmo.out("version").splitlines() == [
        "OSMO client version:  6.4.0",
        f"OSMO service version: {__version__}",
    ]


def test_an_expired_session_is_renewed_with_the_api_token(osmo: Osmo) -> None:
    """OSMO's CLI posts its API token again when the session it holds has expired."""
    stored = osmo.home / ".config" / "osmo" / "login.yaml"
    login = yaml.safe_load(stored.read_text())
    expired = jwt.encode({"sub": "admin", "exp": int(time.time()) - 60}, "not the key " * 3)
    login["token_login"]["id_token"] = expired
    stored.write_text(yaml.safe_dump(login))
    assert "  email: admin\n" in osmo.out("profile", "list")
    renewed = yaml.safe_load(stored.read_text())["token_login"]["id_token"]
    claims = jwt.decode(renewed, options={"verify_signature": False})
    assert renewed != expired and claims["exp"] > time.time() + 3000


def test_pool_list_shows_corrals_quotas(osmo: Osmo) -> None:
    quota = osmo.api("/api/pool_quota")
    # OSMO's CLI follows no page: it gets every pool (docs/api.md#pages).
    assert quota["page"]["limit"] is None
    shown = sum(len(node_set["pools"]) for node_set in quota["node_sets"])
    assert shown == quota["page"]["total"] > 0
    assert json.loads(osmo.out("pool", "list", "-t", "json")) == quota
    table = cells(osmo.out("pool", "list"))
    shown = {row[0]: row for row in table if row and row[0] in ("nvl72", "my-pool")}
    by_name = {p["name"]: p for ns in quota["node_sets"] for p in ns["pools"]}
    for name, row in shown.items():
        usage = by_name[name]["resource_usage"]
        assert row[-4:-1] == [usage["quota_used"], usage["quota_limit"], usage["total_usage"]]
    assert set(shown) == {"nvl72", "my-pool"}


def test_resource_list_and_info(osmo: Osmo) -> None:
    listed = osmo.api("/api/resources", pools=["nvl72"])["resources"]
    table = cells(osmo.out("resource", "list", "--pool", "nvl72"))
    nodes = [row[0] for row in table if row and row[0].startswith("gb200-")]
    assert nodes == [entry["node"] for entry in listed]
    # the sum row: every node counted once, GPUs used/capacity
    gpus = sum(entry["capacity"]["gpu"] for entry in listed)
    assert table[-1][-1] == f"0/{gpus}"
    info = osmo.out("resource", "info", NODE)
    assert f"Resource Name: {NODE}" in info
    assert "gpu: 4\n" in info and "memory: 850Gi\n" in info
    assert "Host Network Allowed: False" in info


def test_config_list_show_history_diff(osmo: Osmo) -> None:
    listed = cells(osmo.out("config", "list"))
    assert {row[0] for row in listed[1:]} >= {"POOL", "POD_TEMPLATE", "ROLE", "BACKEND"}
    shown = json.loads(osmo.out("config", "show", "POOL", "nvl72"))
    assert shown == osmo.api("/api/configs/pool/nvl72")
    history = osmo.out("config", "history", "POOL")
    assert "Load example configs (--demo)" in history and "Initial configuration" in history
    diff = osmo.out("config", "diff", "POOL:1", "POOL:2")
    assert '+  "nvl72": {\n+    "name": "nvl72",' in diff


def test_config_update_and_rollback(osmo: Osmo, tmp_path: Path) -> None:
    pool = json.loads(osmo.out("config", "show", "POOL", "nvl72"))
    before = pool["description"]
    edited = tmp_path / "nvl72.json"
    edited.write_text(json.dumps({**pool, "description": "edited with OSMO's CLI"}))
    updated = osmo.out(
        "config", "update", "POOL", "nvl72", "--file", str(edited), "--description", "osmo edit"
    )
    assert updated.strip() == "Successfully updated POOL config"
    assert osmo.api("/api/configs/pool/nvl72")["description"] == "edited with OSMO's CLI"
    head = osmo.api("/api/configs/history", config_types=["POOL"], order="DESC", limit=1)
    revision = head["configs"][0]["revision"]
    assert head["configs"][0]["description"] == "osmo edit"
    rolled = osmo.out("config", "rollback", f"POOL:{revision - 1}", "--description", "undo")
    assert rolled.startswith(f"Successfully rolled back POOL to revision {revision - 1}.")
    assert osmo.api("/api/configs/pool/nvl72")["description"] == before


def test_profile_user_and_submit_without_a_pool(osmo: Osmo) -> None:
    assert osmo.out("profile", "set", "pool", "nvl72").strip() == "Profile Set"
    profile = osmo.out("profile", "list")
    assert "pool:\n  default: nvl72\n" in profile
    assert "  email: admin\n" in profile and "roles:\n  - osmo-admin" in profile

    created = osmo.out("user", "create", "alice", "--roles", "osmo-user")
    assert created.splitlines() == ["User created: alice", "Roles assigned: osmo-user"]
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert osmo.out("user", "get", "alice").splitlines() == [
        "User ID: alice",
        f"Created At: {today}",
        "Created By: admin",
        "",
        "Roles:",
        f"  - osmo-user (assigned by admin on {today})",
    ]
    users = cells(osmo.out("user", "list"))
    assert users[0] == ["Total users: 2"]
    assert [row[0] for row in users[2:]] == ["admin", "alice"]

    # no --pool: the profile's pool
    submitted = osmo.out("workflow", "submit", str(SINGLE_RACK))
    assert "Workflow ID        - single-nvl72-rack-" in submitted


def test_workflow_submit_query_list_logs_cancel(osmo: Osmo) -> None:
    submitted = osmo.out("workflow", "submit", str(SINGLE_RACK), "--pool", "nvl72")
    lines = submitted.splitlines()
    assert lines[0] == "Workflow submit successful."
    workflow_id = lines[1].split(" - ")[1]
    assert lines[2] == f"Workflow Overview  - {osmo.server.url}/ui/workflows/{workflow_id}"

    listed = json.loads(osmo.out("workflow", "list", "--pool", "nvl72", "-t", "json"))
    assert workflow_id in [w["name"] for w in listed["workflows"]]
    table = cells(osmo.out("workflow", "list", "--pool", "nvl72"))
    assert ["admin", workflow_id] == table[[r[1] for r in table].index(workflow_id)][:2]

    deadline = time.monotonic() + 60
    while osmo.api(f"/api/workflow/{workflow_id}")["status"] != "COMPLETED":
        assert time.monotonic() < deadline, osmo.api(f"/api/workflow/{workflow_id}")
        time.sleep(0.5)
    query = osmo.out("workflow", "query", workflow_id)
    assert f"Workflow ID : {workflow_id}\nStatus      : COMPLETED\nUser        : admin" in query
    tasks = cells(query.split("\n\n")[-1])
    assert [(row[0], row[-1]) for row in tasks[1:]] == [
        (f"model1-shard{n}", "COMPLETED") for n in range(1, 5)
    ]
    logs = osmo.out("workflow", "logs", workflow_id)
    assert logs.startswith(f"Workflow {workflow_id} has logs:\n==> model1-shard1 (retry 0) <==\n")
    assert f"shard 1 of {workflow_id}" in logs
    one = osmo.out("workflow", "logs", workflow_id, "--task", "model1-shard3")
    assert one == f"Workflow {workflow_id} has logs:\nshard 3\n"

    again = osmo.out("workflow", "submit", str(SINGLE_RACK), "--pool", "nvl72")
    second = again.splitlines()[1].split(" - ")[1]
    canceled = osmo.out("workflow", "cancel", second)
    assert canceled.strip() == f"Cancel job for workflow {second} is submitted!"
    deadline = time.monotonic() + 60
    while osmo.api(f"/api/workflow/{second}")["status"] != "FAILED_CANCELED":
        assert time.monotonic() < deadline, osmo.api(f"/api/workflow/{second}")
        time.sleep(0.5)
