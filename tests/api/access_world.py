"""A small world for access tests: pools, roles and users with tokens, made through the API."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from corral.api.app import create_app
from corral.services.runtime import open_runtime
from tests.conftest import Api

POOLS = ["default", "other", "team-a", "team-b", "teamx"]


def allow(actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {"effect": "Allow", "actions": actions, "resources": resources}


def deny(actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {"effect": "Deny", "actions": actions, "resources": resources}


# What `corral config set ROLE osmo-team pool` writes (OSMO's pool-role helper).
GENERATED_TEAM_ROLE = {
    "name": "osmo-team",
    "description": "Generated Role for pool team",
    "policies": [allow(["workflow:*"], ["pool/team*"])],
    "immutable": False,
    "sync_mode": "import",
}

ROLES: dict[str, list[dict[str, Any]]] = {
    "deny-team-b": [deny(["workflow:*"], ["pool/team-b"])],
    "config-reader": [allow(["config:Read"], ["config/*"])],
    "pool-editor": [allow(["config:Read", "config:Update"], ["config/pool"])],
    "deny-config": [deny(["config:*"], ["*"])],
    "lister": [allow(["pool:List"], ["*"])],
}

USERS: dict[str, list[str]] = {
    "alice": ["osmo-user", "osmo-team"],
    "bob": ["osmo-user"],
    "carol": ["osmo-team", "deny-team-b", "lister"],
    "dave": [],
    "erin": ["config-reader"],
    "frank": ["pool-editor"],
    "gina": ["osmo-admin", "deny-config"],
}


@dataclass
class World:
    api: Api
    tokens: dict[str, str] = field(default_factory=dict)

    def call(self, user: str | None, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        """A request as ``user`` (``admin``: the fixture's admin; None: no token at all)."""
        if user == "admin":
            return self.api.call(method, path, **kwargs)
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}
        response = self.api.client.request(method, path, headers=headers, **kwargs)
        return response.status_code, (response.json() if response.content else None)

    def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        status, body = self.api.call(method, path, **kwargs)
        assert status in (200, 201), body
        return body


def build_world(api: Api) -> World:
    world = World(api)
    _, pool = api.call("GET", "/api/configs/pool/default")
    pools = {name: {**pool, "name": name, "description": f"Pool {name}"} for name in POOLS[1:]}
    roles = {"osmo-team": GENERATED_TEAM_ROLE}
    for name, policies in ROLES.items():
        roles[name] = {"name": name, "description": name, "policies": policies}
    world.ok("POST", "/api/configs/apply", json={"bundle": {"pools": pools, "roles": roles}})
    for name, roles in USERS.items():
        world.ok("POST", "/api/auth/user", json={"id": name, "roles": roles})
        world.tokens[name] = world.ok("POST", f"/api/auth/user/{name}/token", json={})["token"]
    return world


# ----------------------------------------------------------- one world per database, cloned


@dataclass(frozen=True)
class WorldTemplate:
    """A database holding the built world, and the tokens into it; cloned for every test (the
    world takes ~20 requests to build, a clone milliseconds)."""

    url: str
    admin_token: str
    tokens: dict[str, str]


def build_template(url: str) -> WorldTemplate:
    runtime = open_runtime(url)
    admin = runtime.tokens.create(name="test-admin", username="admin", roles=["osmo-admin"])
    client = TestClient(create_app(runtime), raise_server_exceptions=False)
    world = build_world(Api(client, admin, runtime))
    runtime.engine.dispose()  # PostgreSQL copies a template only while nobody is connected
    return WorldTemplate(url, admin, dict(world.tokens))


@contextmanager
def cloned_database(template: str, directory: Path) -> Iterator[str]:
    """A copy of the template database: a file copy for SQLite, ``CREATE DATABASE ... TEMPLATE``
    for PostgreSQL (dropped afterwards)."""
    if template.startswith("sqlite:///"):
        copy = directory / "world.db"
        shutil.copyfile(template.removeprefix("sqlite:///"), copy)
        yield f"sqlite:///{copy}"
        return
    import psycopg

    base, source = template.rsplit("/", 1)
    name = f"corral_world_{uuid.uuid4().hex[:12]}"
    admin = f"{base}/postgres".replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def world_from(template: WorldTemplate, directory: Path) -> Iterator[World]:
    with cloned_database(template.url, directory) as url:
        runtime = open_runtime(url)
        client = TestClient(create_app(runtime), raise_server_exceptions=False)
        try:
            yield World(Api(client, template.admin_token, runtime), dict(template.tokens))
        finally:
            runtime.engine.dispose()
