"""``corral server`` as a real process: start-up, token file, restart, PostgreSQL, real HTTP."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.conftest import POSTGRES_ENV, REPO, LiveServer, _postgres_database, start_server


def auth(server: LiveServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}"}


def history_count(server: LiveServer) -> int:
    response = httpx.get(
        f"{server.url}/api/configs/history",
        headers=auth(server),
        params={"limit": 1000, "omit_data": "true"},
    )
    return len(response.json()["configs"])


def test_demo_server_start_token_file_and_examples(live_server: LiveServer) -> None:
    credentials = live_server.home / "config" / "credentials.json"
    assert stat.S_IMODE(os.stat(credentials).st_mode) == 0o600
    assert httpx.get(f"{live_server.url}/health").json()["status"] == "ok"
    assert httpx.get(f"{live_server.url}/api/configs/pool").status_code == 401
    pools = httpx.get(f"{live_server.url}/api/configs/pool", headers=auth(live_server)).json()
    assert {"default", "heterogeneous_pool", "nvl72", "my-pool"} <= set(pools["pools"])
    log = (live_server.home / "server.log").read_text()
    assert f"corral listening on {live_server.url}" in log
    assert "Admin token written to" in log
    assert live_server.token not in log  # the secret itself is never printed
    assert " ".join(log.split()).count(f"Dashboard: {live_server.url}/ui (log in with") == 1
    assert '"event": "request"' not in log  # requests are logged with --access-log only
    login = httpx.get(f"{live_server.url}/ui", follow_redirects=True)
    assert login.status_code == 200 and "Log in to corral" in login.text
    # why the page is shown, in a prompt's colour (it was in the error's red)
    assert '<p class="notice" role="status">Log in to see the dashboard.</p>' in login.text
    made_up = httpx.get(f"{live_server.url}/ui/login", params={"why": "Call +1 555 0100"})
    assert "555" not in made_up.text  # the page says only its own words
    assert "(database: SQLite in" in log
    metrics = httpx.get(f"{live_server.url}/metrics").text
    assert "corral_http_requests_total" in metrics


def test_restart_keeps_token_and_does_not_rewrite_configs(tmp_path: Path) -> None:
    first = start_server(tmp_path, "--demo")
    token = first.token
    revisions = history_count(first)
    first.stop()
    second = start_server(tmp_path, "--demo", port=int(first.url.rsplit(":", 1)[1]))
    try:
        assert second.token == token
        assert history_count(second) == revisions
        assert (tmp_path / "server.log").read_text().count("Admin token written") == 1
    finally:
        second.stop()


def test_lost_token_file_gets_a_new_token(tmp_path: Path) -> None:
    first = start_server(tmp_path)
    old = first.token
    first.stop()
    (tmp_path / "config" / "credentials.json").unlink()
    second = start_server(tmp_path, port=int(first.url.rsplit(":", 1)[1]))
    try:
        assert second.token != old
        response = httpx.get(
            f"{second.url}/api/configs", headers={"Authorization": f"Bearer {old}"}
        )
        assert response.status_code == 401
        assert httpx.get(f"{second.url}/api/configs", headers=auth(second)).status_code == 200
    finally:
        second.stop()


def test_two_concurrent_http_writers_on_one_revision(live_server: LiveServer) -> None:
    url = f"{live_server.url}/api/configs/pool"
    base = int(httpx.get(url, headers=auth(live_server)).headers["X-Corral-Revision"])
    barrier = threading.Barrier(2)
    statuses: list[int] = []

    def writer(name: str) -> None:
        body = {"configs": {"backend": "default"}, "base_revision": base}
        with httpx.Client(timeout=30) as client:
            barrier.wait()
            statuses.append(
                client.put(f"{url}/{name}", json=body, headers=auth(live_server)).status_code
            )

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200, 409]


def test_server_on_postgresql(tmp_path: Path) -> None:
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"PostgreSQL not configured: set {POSTGRES_ENV} (./scripts/test does)")
    database = _postgres_database()
    url = next(database)
    server = start_server(tmp_path, "--demo", database_url=url)
    try:
        pools = httpx.get(f"{server.url}/api/configs/pool", headers=auth(server)).json()
        assert "heterogeneous_pool" in pools["pools"]
        assert "database: PostgreSQL" in (tmp_path / "server.log").read_text()
    finally:
        server.stop()
        database.close()


@pytest.mark.parametrize(
    "url, message",
    [
        (
            "mysql://nowhere/db",
            "error: --database-url mysql://... is not supported; use "
            "postgresql+psycopg://USER@HOST/DB (or omit it for SQLite).",
        ),
        ("postgresql+psycopg://nobody@127.0.0.1:1/db", "error: cannot open the database"),
    ],
)
def test_server_refuses_bad_database_url(tmp_path: Path, url: str, message: str) -> None:
    with pytest.raises(RuntimeError) as caught:
        start_server(tmp_path, database_url=url)
    assert "Traceback" not in str(caught.value)
    assert message in str(caught.value)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory"])
def test_a_sqlite_database_that_is_not_a_file_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(RuntimeError) as caught:
        start_server(tmp_path, "--database-url", url)
    assert " ".join(str(caught.value).split()).endswith(
        f"error: --database-url {url} is not a file, and the server's controller runs in a "
        "process of its own that must open the same database; give a file "
        "(sqlite:////PATH/corral.db) or omit --database-url."
    )


def test_single_sign_on_settings_that_cannot_work_stop_the_server_at_start(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    secret.chmod(0o644)
    cases = [
        (
            {"CORRAL_OIDC_CLIENT_ID": "corral"},
            "error: CORRAL_OIDC_CLIENT_ID is set without CORRAL_OIDC_ISSUER: set both.",
        ),
        (
            {
                "CORRAL_OIDC_ISSUER": "https://idp.example.test",
                "CORRAL_OIDC_CLIENT_ID": "corral",
                "CORRAL_OIDC_CLIENT_SECRET_FILE": str(secret),
            },
            f"error: CORRAL_OIDC_CLIENT_SECRET_FILE {secret} may be read by other users (mode "
            f"644); make it yours alone: chmod 600 {secret}.",
        ),
    ]
    for number, (settings, says) in enumerate(cases):
        home = tmp_path / str(number)
        home.mkdir()
        with pytest.raises(RuntimeError) as caught:
            start_server(home, extra_env=settings)
        assert " ".join(str(caught.value).split()).endswith(says)
        assert "s3cret" not in str(caught.value)


def test_a_database_password_on_the_command_line_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as caught:
        start_server(tmp_path, "--database-url", "postgresql+psycopg://corral:s3cret@db/corral")
    assert " ".join(str(caught.value).split()).endswith(
        "error: --database-url holds a password, and every user of this machine can read a "
        "command line (ps, /proc/PID/cmdline); put the URL in the environment "
        "(CORRAL_DATABASE_URL) or in a file only you can read (--database-url-file FILE, "
        "chmod 600 FILE)."
    )


def test_the_database_url_is_read_from_a_file_only_its_owner_may_read(tmp_path: Path) -> None:
    url_file = tmp_path / "database-url"
    url_file.write_text(f"sqlite:///{tmp_path / 'elsewhere.db'}\n")
    url_file.chmod(0o644)
    with pytest.raises(RuntimeError) as caught:
        start_server(tmp_path, "--database-url-file", str(url_file))
    assert " ".join(str(caught.value).split()).endswith(
        f"error: --database-url-file {url_file} may be read by other users (mode 644); make "
        f"it yours alone: chmod 600 {url_file}."
    )
    url_file.chmod(0o600)
    server = start_server(tmp_path, "--database-url-file", str(url_file))
    try:
        assert (tmp_path / "elsewhere.db").exists()
        assert str(tmp_path / "elsewhere.db") not in " ".join(server.process.args)
    finally:
        server.stop()


def test_credentials_file_is_keyed_by_server(live_server: LiveServer) -> None:
    data = json.loads((live_server.home / "config" / "credentials.json").read_text())
    assert list(data["servers"]) == [live_server.url]


def test_server_uses_the_cluster_it_is_given(tmp_path: Path) -> None:
    """``--cluster FILE``: node rules see exactly those nodes (here no GB200 tray at all)."""
    cluster = tmp_path / "cpu-only.yaml"
    cluster.write_text(
        "nodes:\n- name: cpu-0\n  allocatable: {cpu: '8', memory: 32Gi, ephemeral-storage: 100Gi}\n"
    )
    server = start_server(tmp_path, "--demo", "--cluster", str(cluster))
    try:
        spec = (REPO / "examples" / "workflows" / "nvl72-single-rack.yaml").read_text()
        response = httpx.post(
            f"{server.url}/api/pool/nvl72/workflow",
            params={"dry_run": "true"},
            json={"file": spec},
            headers={"Authorization": f"Bearer {server.token}"},
        )
        assert response.status_code == 400
        assert (
            response.json()["message"] == "There are no resources in platform gb200 and pool nvl72!"
        )
    finally:
        server.stop()


def test_server_refuses_a_bad_cluster_file(tmp_path: Path) -> None:
    cluster = tmp_path / "bad.yaml"
    cluster.write_text("nodes:\n- name: Bad_Name\n")
    with pytest.raises(RuntimeError) as caught:
        start_server(tmp_path, "--cluster", str(cluster))
    assert f"error: {cluster}:2:3: nodes[0].name: 'Bad_Name' is not a valid" in " ".join(
        str(caught.value).split()
    )


def test_a_port_in_use_is_named_before_the_database_is_touched(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data = str(tmp_path / "data")
        done = subprocess.run(
            [sys.executable, "-m", "corral", "server", "--port", str(port), "--data-dir", data],
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
            timeout=60,
        )
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        f"error: port {port} on 127.0.0.1 is in use (another corral server?); stop what uses "
        f"it, or choose another port: --port {port + 1}.\n",
    )
    assert not (tmp_path / "data").exists()


def test_the_cli_finds_the_one_server_the_credentials_name_and_the_banner_never_wraps(
    tmp_path: Path,
) -> None:
    """Started on another port with a long data directory: every banner line is whole, one
    says how to point another shell at the server, and the CLI finds it without CORRAL_URL."""
    home = tmp_path / ("a-rather-long-directory-name-" * 4)
    home.mkdir()
    server = start_server(home, "--demo")
    try:
        lines = (home / "server.log").read_text().splitlines()
        database = home / "data" / "corral.db"
        assert f"corral listening on {server.url} (database: SQLite in {database})" in lines
        assert f"  export CORRAL_URL={server.url}" in lines
        env = {k: v for k, v in server.env.items() if k != "CORRAL_URL"}
        found = subprocess.run(
            [sys.executable, "-m", "corral", "pool", "list", "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["node_sets"]
    finally:
        server.stop()


def test_the_start_script_says_what_it_installs_and_skips_it_once_done(tmp_path: Path) -> None:
    """``scripts/start`` in a checkout whose .venv holds stand-ins for python and corral: the
    first start says it installs before it does; the next one starts at once."""
    (tmp_path / "scripts").mkdir()
    for script in ("start", "venv.sh"):
        shutil.copy(REPO / "scripts" / script, tmp_path / "scripts" / script)
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, line in (("python", 'echo "python $*"'), ("corral", 'echo "corral $*"')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{line}\n")
        (bin_dir / name).chmod(0o755)
    runs = [
        subprocess.run(
            [str(tmp_path / "scripts" / "start"), "--port", "9000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=30,
        )
        for _ in range(2)
    ]
    starting = "== starting corral server --demo --port 9000"
    first = runs[0].stdout.splitlines()
    assert first[:5] == [
        "== installing corral and its dependencies into .venv (the first time takes about a "
        "minute)",
        "python -m pip install --quiet --upgrade pip",
        "python -m pip install --quiet -e .",
        "== installed",
        starting,
    ]
    assert first[-1] == "corral server --demo --port 9000"
    second = runs[1].stdout.splitlines()
    assert second[0] == starting
    assert not any("install" in line for line in second)
    # scripts/test's install (with the test extras) serves a start; the reverse does not.
    with_extras = ["bash", "-c", "source scripts/venv.sh && ensure_venv test"]
    tests_install = subprocess.run(
        with_extras, cwd=tmp_path, capture_output=True, text=True, timeout=30, check=True
    )
    assert "python -m pip install --quiet -e .[test]" in tests_install.stdout
    again = subprocess.run(
        with_extras, cwd=tmp_path, capture_output=True, text=True, timeout=30, check=True
    )
    assert (again.stdout, again.stderr) == ("", "")
    start = subprocess.run(
        [str(tmp_path / "scripts" / "start")], capture_output=True, text=True, timeout=30
    )
    assert "install" not in start.stderr
