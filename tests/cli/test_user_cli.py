"""``corral user``, ``corral profile`` and ``corral pool list`` against a real server."""

from __future__ import annotations

import json

import pytest

from tests.cli.results import failed
from tests.conftest import LiveServer


def ok(server: LiveServer, *args: str, token: str | None = None) -> str:
    env = {"CORRAL_TOKEN": token} if token else None
    done = server.cli(*args, extra_env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_user_lifecycle_and_access(live_server: LiveServer) -> None:
    server = live_server
    created = json.loads(
        ok(server, "user", "create", "alice", "--role", "osmo-user", "--format", "json")
    )
    assert (created["id"], [r["role_name"] for r in created["roles"]]) == ("alice", ["osmo-user"])
    listed = json.loads(ok(server, "user", "list", "--format", "json"))
    assert [u["id"] for u in listed["users"]] == ["admin", "alice"]
    assert "osmo-user" in ok(server, "user", "show", "alice")

    done = server.cli("user", "token", "alice")
    assert done.returncode == 0 and "cannot be shown again" in done.stderr
    token = done.stdout.strip()
    assert token.startswith("corral_") and "\n" not in token

    quota = json.loads(ok(server, "pool", "list", "--format", "json", token=token))
    pools = [pool for node_set in quota["node_sets"] for pool in node_set["pools"]]
    assert [p["name"] for p in pools] == ["default"]
    assert "default" in ok(server, "pool", "list", token=token)
    profile = json.loads(ok(server, "profile", "show", "--format", "json", token=token))
    assert (profile["profile"]["username"], profile["pools"]) == ("alice", ["default"])
    assert "default" in ok(server, "profile", "set-pool", "default", token=token)

    denied = server.cli("user", "list", extra_env={"CORRAL_TOKEN": token})
    assert (denied.returncode, denied.stdout) == (1, "")
    assert denied.stderr == (
        "error: alice may not list users: denied: no policy of osmo-user, osmo-default allows "
        "an unregistered request.\n"
    )

    unknown = server.cli("user", "roles", "add", "alice", "osmo-nope")
    assert unknown.stderr == (
        "error: role_name: Role osmo-nope does not exist; define it first (corral config set "
        "ROLE ...).\n"
    )
    ok(server, "user", "roles", "remove", "alice", "osmo-user")
    gone = server.cli("pool", "list", extra_env={"CORRAL_TOKEN": token})
    assert gone.stderr == (
        "error: alice may not pool:List: denied: no policy of osmo-default allows pool:List.\n"
    )

    assert ok(server, "user", "delete", "alice") == ("Deleted user alice and revoked 1 token.\n")
    revoked = server.cli("profile", "show", extra_env={"CORRAL_TOKEN": token})
    assert revoked.stderr == (
        "error: The bearer token is unknown or revoked. It came from CORRAL_TOKEN. Ask an admin "
        "for a new one (corral user token YOUR_NAME); on the server's machine, the admin token "
        "is in the credentials file of the user who started `corral server`.\n"
    )


def test_pool_role_from_config_set_grants_prefixed_pools(live_server: LiveServer) -> None:
    server = live_server
    ok(server, "config", "set", "ROLE", "osmo-heterogeneous", "pool")
    ok(server, "user", "create", "bob", "--role", "osmo-heterogeneous")
    token = ok(server, "user", "token", "bob").strip()
    profile = json.loads(ok(server, "profile", "show", "--format", "json", token=token))
    assert profile["pools"] == ["heterogeneous_pool"]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("127.0.0.1:8000", "it has no http:// or https:// in front"),
        ("http://127.0.0.1:8000/api", "it has a path (/api); corral adds /api/... itself"),
    ],
)
def test_a_corral_url_that_is_no_server_address_says_what_one_looks_like(
    live_server: LiveServer, url: str, problem: str
) -> None:
    refused = live_server.cli("profile", "show", extra_env={"CORRAL_URL": url})
    assert failed(refused) == (
        f"error: CORRAL_URL={url} is not a server address: {problem}. Write it as "
        "http://HOST:PORT, for example http://127.0.0.1:8000."
    )
