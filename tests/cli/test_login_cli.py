"""``corral login`` against a real server and the tests' OpenID Connect provider: the device
flow (the code printed, approved at the provider), then a submission with the ID token, a
silent renewal once it expired, and ``corral logout``; the browser flow through a loopback
redirect; a pasted token; and what a server without single sign-on says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.cli.results import failed, succeeded
from tests.conftest import REPO, LiveServer
from tests.oidc_support import CLI, Provider
from tests.test_osmo_cli import osmo_cli

WORKFLOW = (
    "workflow:\n  name: sso-hello\n  tasks:\n"
    "  - {name: hello, image: busybox, command: [sh, -c, 'echo hello']}\n"
)


@pytest.fixture
def server(sso_server: LiveServer) -> LiveServer:
    return sso_server


def researcher(server: LiveServer, home: Path) -> dict[str, str]:
    """A person's environment on their own machine: no admin credentials, no token."""
    env = {**server.env, "CORRAL_CONFIG_DIR": str(home / "config")}
    env.pop("CORRAL_TOKEN", None)
    return env


def corral(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corral", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=90,
    )


def killed_after(process: subprocess.Popen[str], seconds: float = 90) -> threading.Timer:
    """A watchdog: a login that waits on a line it never prints must not hang the suite."""
    timer = threading.Timer(seconds, process.kill)
    timer.start()
    return timer


def device_login(env: dict[str, str], url: str, provider: Provider, user: str) -> tuple[str, str]:
    """Run ``corral login URL``, approve the code it prints at the provider as ``user``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "corral", "login", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert process.stderr is not None
    watchdog = killed_after(process)
    printed = [process.stderr.readline() for _ in range(3)]
    assert printed[0].startswith(f"To sign in, open {provider.issuer}/device?user_code="), printed
    code = re.fullmatch(r"and check that it shows the code (\S+)\.\n", printed[1])
    assert code is not None, printed
    assert printed[2] == "Waiting for you to sign in… (Ctrl-C to stop)\n"
    provider.approve_device(code.group(1), user)
    out, err = process.communicate(timeout=60)
    watchdog.cancel()
    assert process.returncode == 0, err
    return out, err


def stored(env: dict[str, str]) -> dict[str, object]:
    path = Path(env["CORRAL_CONFIG_DIR"]) / "credentials.json"
    assert path.stat().st_mode & 0o777 == 0o600
    return dict(next(iter(json.loads(path.read_text())["servers"].values())))


def test_device_login_submit_renew_and_logout(
    server: LiveServer, oidc_provider: Provider, tmp_path: Path
) -> None:
    oidc_provider.put_user("cli-bob", ["osmo-user"], token_seconds=4)
    env = researcher(server, tmp_path)
    out, _ = device_login(env, server.url, oidc_provider, "cli-bob")
    assert out == f"Logged in to {server.url} as cli-bob (roles: osmo-user).\n"
    profile = succeeded(corral(env, "profile", "show", "--format", "json"))
    assert json.loads(profile)["roles"] == ["osmo-user"]  # the roles login named, no other
    first = stored(env)
    assert first["client_id"] == CLI and first["refresh_token"]
    spec = tmp_path / "hello.yaml"
    spec.write_text(WORKFLOW)
    assert "sso-hello-1" in succeeded(
        corral(env, "workflow", "submit", str(spec), "--pool", "default")
    )

    renewals = len(oidc_provider.events("token"))
    time.sleep(4.5)  # the ID token has expired
    listed = succeeded(corral(env, "workflow", "list", "--format", "json"))
    assert [row["name"] for row in json.loads(listed)["workflows"]] == ["sso-hello-1"]
    grants = [e["grant_type"] for e in oidc_provider.events("token")[renewals:]]
    assert grants == ["refresh_token"]
    renewed = stored(env)
    assert renewed["token"] != first["token"] and renewed["refresh_token"] != first["refresh_token"]

    assert succeeded(corral(env, "logout")) == f"Logged out of {server.url}.\n"
    assert "No token found" in failed(corral(env, "workflow", "list"))
    assert succeeded(corral(env, "logout")).startswith(f"Not logged in to {server.url}")


def test_browser_login_comes_back_to_the_loopback_address(
    server: LiveServer, oidc_provider: Provider, tmp_path: Path
) -> None:
    oidc_provider.put_user("cli-carol", ["osmo-user"])
    env = {
        **researcher(server, tmp_path),
        "BROWSER": f"{sys.executable} -m tests.fake_browser %s",
        "FAKE_BROWSER_USER": "cli-carol",
        "PYTHONPATH": str(REPO),
    }
    result = corral(env, "login", server.url, "--method", "browser")
    assert succeeded(result) == f"Logged in to {server.url} as cli-carol (roles: osmo-user).\n"
    assert result.stderr.startswith(
        f"Opening a browser to sign in. If none opens, visit:\n{oidc_provider.issuer}/authorize?"
    )
    assert stored(env)["refresh_token"]


def test_a_user_in_no_mapped_group_is_warned(
    server: LiveServer, oidc_provider: Provider, tmp_path: Path
) -> None:
    oidc_provider.put_user("cli-dave", ["finance"])
    env = researcher(server, tmp_path)
    out, err = device_login(env, server.url, oidc_provider, "cli-dave")
    assert out == f"Logged in to {server.url} as cli-dave (roles: none).\n"
    assert err == (
        "WARNING: cli-dave holds no corral role, so most requests will be refused: an admin "
        "maps one of your groups to a role (its external_roles), or grants one: corral user "
        "roles add cli-dave osmo-user\n"
    )


def test_a_pasted_token_is_read_from_standard_input(server: LiveServer, tmp_path: Path) -> None:
    env = researcher(server, tmp_path)
    refused = failed(corral(env, "login", server.url, "--token", stdin="corral_not-a-token\n"))
    assert refused == "error: The bearer token is unknown or revoked."
    assert not (tmp_path / "config" / "credentials.json").exists()
    result = corral(env, "login", server.url, "--token", stdin=server.token + "\n")
    assert succeeded(result) == f"Logged in to {server.url} as admin (roles: osmo-admin).\n"
    assert stored(env) == {"token": server.token}


def test_login_to_a_server_without_single_sign_on_says_how(
    live_server: LiveServer, tmp_path: Path
) -> None:
    env = researcher(live_server, tmp_path)
    assert failed(corral(env, "login", live_server.url)) == (
        "error: This server has no single sign-on (CORRAL_OIDC_CLIENT_ID is not set): log in "
        "with an API token, corral login --token."
    )


def test_osmos_own_cli_logs_in_by_the_device_flow(
    server: LiveServer, oidc_provider: Provider, tmp_path: Path
) -> None:
    """``osmo login URL --method code`` reads ``GET /api/auth/login`` as OSMO's server answers
    it, signs in at the provider, and its ID token works as the bearer token."""
    folder, python = osmo_cli()
    oidc_provider.put_user("osmo-erin", ["osmo-user"])
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TZ": "UTC"}
    env["XDG_CONFIG_HOME"] = str(tmp_path / ".config")
    env["PYTHONUNBUFFERED"] = "1"  # it prints the code without flushing
    process = subprocess.Popen(
        [str(python), "-m", "src.cli.cli", "login", server.url, "--method", "code"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    watchdog = killed_after(process)
    lines = [process.stdout.readline() for _ in range(2)]
    visit = re.fullmatch(r"Visit (\S+) and complete authentication\.\n", lines[1])
    assert lines[0] == f"Logging in to {server.url}\n" and visit is not None, lines
    oidc_provider.approve_device(
        parse_qs(urlsplit(visit.group(1)).query)["user_code"][0], "osmo-erin"
    )
    out, err = process.communicate(timeout=60)
    watchdog.cancel()
    assert process.returncode == 0, out + err
    profile = subprocess.run(
        [str(python), "-m", "src.cli.cli", "profile", "list"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert profile.returncode == 0, profile.stderr
    assert "osmo-erin" in profile.stdout and "osmo-user" in profile.stdout
