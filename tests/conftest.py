"""Shared fixtures: a database per test (SQLite and PostgreSQL), an in-process API, and a real
``corral server`` subprocess for CLI tests."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

warnings.filterwarnings("ignore", message=".*httpx2.*")
from fastapi.testclient import TestClient  # noqa: E402

from corral.files import read_bundle_directory  # noqa: E402
from corral.services.runtime import Runtime, open_runtime  # noqa: E402
from corral.store.database import (  # noqa: E402
    make_engine,
    migrate,
    scratch_postgres_database,
)
from corral.web.app import create_server_app  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
POSTGRES_ENV = "CORRAL_TEST_POSTGRES_URL"


def _postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test, dropped afterwards."""
    admin_url = os.environ.get(POSTGRES_ENV)
    if not admin_url:
        pytest.skip(f"PostgreSQL not configured: set {POSTGRES_ENV} (./scripts/test does)")
    with scratch_postgres_database(admin_url, "corral_test") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test using this runs twice: on a SQLite file and on a PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'corral.db'}"
    else:
        yield from _postgres_database()


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated once per worker: a test's is a copy (0.06 s, against 0.2 to
    0.4 s to migrate a new file)."""
    path = tmp_path_factory.mktemp("template") / "migrated.db"
    found = make_engine(f"sqlite:///{path}")
    migrate(found)
    found.dispose()
    return path


def _from_template(url: str, template: Path) -> None:
    """Start the SQLite file of ``url`` as a copy of ``template`` (nothing for PostgreSQL, or a
    file that exists); migrating it afterwards then finds nothing to do."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not Path(url[len(prefix) :]).exists():
        shutil.copyfile(template, url[len(prefix) :])


def _migrated_engine(url: str) -> Iterator[Engine]:
    found = make_engine(url)
    migrate(found)
    yield found
    found.dispose()


@pytest.fixture
def engine(database_url: str, _sqlite_template: Path) -> Iterator[Engine]:
    """A migrated engine on ``database_url`` (each database in turn)."""
    _from_template(database_url, _sqlite_template)
    yield from _migrated_engine(database_url)


@pytest.fixture
def postgres_engine() -> Iterator[Engine]:
    """A migrated engine on a fresh PostgreSQL database (for what only PostgreSQL has)."""
    for url in _postgres_database():
        yield from _migrated_engine(url)


@pytest.fixture
def runtime(database_url: str, _sqlite_template: Path) -> Iterator[Runtime]:
    _from_template(database_url, _sqlite_template)
    runtime = open_runtime(database_url)
    yield runtime
    runtime.engine.dispose()


@dataclass
class Api:
    """An in-process API with an admin token; ``call`` returns (status, JSON body)."""

    client: TestClient
    token: str
    runtime: Runtime

    def call(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        response = self.client.request(method, path, headers=headers, **kwargs)
        return response.status_code, (response.json() if response.content else None)


@pytest.fixture
def api(runtime: Runtime) -> Api:
    token = runtime.tokens.create(name="test-admin", username="admin", roles=["osmo-admin"])
    client = TestClient(create_server_app(runtime), raise_server_exceptions=False)
    return Api(client, token, runtime)


@pytest.fixture
def examples(api: Api) -> Api:
    """The API with the example configs applied."""
    bundle, _ = read_bundle_directory(REPO / "examples" / "configs")
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status == 200, body
    return api


@pytest.fixture
def many_pools(api: Api) -> Api:
    """The example configs with ``default`` and 120 pools like it (team-000 ... team-119) in
    place of the other example pools, so the nodes those served are used by no pool."""
    bundle, _ = read_bundle_directory(REPO / "examples" / "configs")
    default = {key: value for key, value in bundle["pools"]["default"].items() if key != "name"}
    bundle["pools"] = {"default": default}
    bundle["pools"].update((f"team-{index:03d}", default) for index in range(120))
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status == 200, body
    return api


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LiveServer:
    """A real ``corral server`` subprocess; ``cli`` runs the real ``corral`` command against it."""

    url: str
    home: Path
    process: subprocess.Popen[bytes]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def token(self) -> str:
        data = json.loads((self.home / "config" / "credentials.json").read_text())
        return str(next(iter(data["servers"].values()))["token"])

    def cli(
        self, *args: str, stdin: str | None = None, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "corral", *args],
            input=stdin or "",
            capture_output=True,
            text=True,
            env={**self.env, **(extra_env or {})},
            cwd=self.home,
            timeout=60,
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_server(
    home: Path,
    *extra: str,
    database_url: str | None = None,
    port: int | None = None,
    extra_env: dict[str, str] | None = None,
) -> LiveServer:
    port = port or free_port()
    env = {
        **os.environ,
        **(extra_env or {}),
        "CORRAL_CONFIG_DIR": str(home / "config"),
        "CORRAL_URL": f"http://127.0.0.1:{port}",
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    env.pop("CORRAL_TOKEN", None)
    env.pop("CORRAL_DATABASE_URL", None)
    command = [
        sys.executable,
        "-m",
        "corral",
        "server",
        "--port",
        str(port),
        "--data-dir",
        str(home / "data"),
        *extra,
    ]
    if database_url:  # in the environment: a command line is anybody's to read
        env["CORRAL_DATABASE_URL"] = database_url
    log = open(home / "server.log", "ab")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = LiveServer(f"http://127.0.0.1:{port}", home, process, env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {(home / 'server.log').read_text()}")
        try:
            if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"server did not start: {(home / 'server.log').read_text()}")


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A fresh server with the example configs loaded (``--demo``)."""
    server = start_server(tmp_path, "--demo")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def oidc_provider() -> Iterator[Any]:
    """The tests' OpenID Connect provider (``tests/oidc_support.py``)."""
    from tests.oidc_support import running_provider

    with running_provider() as provider:
        yield provider


@pytest.fixture(scope="session")
def sso_server(tmp_path_factory: pytest.TempPathFactory, oidc_provider: Any) -> Iterator[Any]:
    """A ``corral server --demo`` whose people sign in through the tests' provider, shared by
    the single sign-on tests (each uses users of its own)."""
    home = tmp_path_factory.mktemp("sso")
    server = start_server(home, "--demo", extra_env=oidc_provider.server_env(home))
    try:
        yield server
    finally:
        server.stop()


#: Test files that start real servers, browsers or benchmarks, or run fuzzers and state
#: machines for a minute: ``-m slow`` (docs/architecture.md#tests).
SLOW_FILES = frozenset(
    {
        "tests/api/test_fuzz.py",
        "tests/api/test_schemathesis.py",
        "tests/api/test_views_fuzz.py",
        "tests/api/test_workflow_fuzz.py",
        "tests/scheduler/test_cycle_stateful.py",
        "tests/scheduler/test_stateful.py",
        "tests/services/lifecycle/test_health_stateful.py",
        "tests/services/test_capacity_model.py",
        "tests/services/test_jinja_worker.py",
        "tests/test_benchmarks.py",
        "tests/test_controller_process.py",
        "tests/test_crash_recovery.py",
        "tests/test_deploy.py",
        "tests/test_hostile_input.py",
        "tests/test_hostile_sign_in.py",
        "tests/test_osmo_cli.py",
        "tests/test_server.py",
        "tests/test_task_trust.py",
        "tests/test_two_servers.py",
        "tests/web/test_dashboard_browser.py",
        "tests/web/test_pages_fuzz.py",
        "tests/web/test_sso_browser.py",
    }
)
#: Fixtures that start a server, a browser or the sign-in provider.
SLOW_FIXTURES = frozenset({"live_server", "sso_server", "oidc_provider", "chromium"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` the tests of :data:`SLOW_FILES` and :data:`SLOW_DIRECTORIES` (but
    :data:`QUICK_FILES`), those using a :data:`SLOW_FIXTURES` fixture, and every test's
    PostgreSQL run (its SQLite run stays in the quick loop)."""
    for item in items:
        path = item.path.relative_to(REPO).as_posix()
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        on_postgresql = any(value == "postgresql" for value in params)
        in_slow_directory = path.startswith(SLOW_DIRECTORIES) and path not in QUICK_FILES
        uses = set(getattr(item, "fixturenames", ()))
        if path in SLOW_FILES or in_slow_directory or uses & SLOW_FIXTURES or on_postgresql:
            item.add_marker(pytest.mark.slow)


#: The CLI tests run a real ``corral server``; the Kubernetes adapter's run an API server over
#: HTTP.
SLOW_DIRECTORIES = ("tests/cli/", "tests/backends/kubernetes/")
#: What runs in those directories without a server: the CLI's help and sign-in checks.
QUICK_FILES = frozenset({"tests/cli/test_help.py", "tests/cli/test_sign_in.py"})
