"""The OpenAPI document is true (issue 13, item 12; issue 25, item 10): schemathesis runs every
check it has (``--checks all``: server errors, status codes, content types, headers, response
schemas, schema-valid requests accepted, schema-violating ones refused, ``Allow`` on a 405,
missing headers, stateful use of links...) against a real ``corral server`` process over HTTP,
once with an admin token and once with a pool user's token, every operation but the deletion of
a user (it would revoke the runs' own tokens).

``tests/api/schemathesis.toml`` holds the one allowance, and why: the operations that validate
a document (a workflow's YAML, a config item) may refuse a schema-valid one with 400. At least
5,000 requests are sent; the counts are printed (``pytest -s``). The seeds are fixed, so that a
failure is reproducible with ``st replay`` or the same command.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from corral.domain.formats.names import CONFIG_NAME_PATTERN
from tests.conftest import REPO, LiveServer, start_server

MIN_REQUESTS = 5_000
CONFIG = REPO / "tests" / "api" / "schemathesis.toml"
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
#: Examples per operation and phase, and the seed, per token.
RUNS = {"admin": (40, 25), "pool user": (40, 26)}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("schemathesis"), "--demo")
    yield live
    live.stop()


def pool_user_token(server: LiveServer, admin: dict[str, str]) -> str:
    """A user with the demo's pool role only (no config or user administration)."""
    with httpx.Client(base_url=server.url, headers=admin, timeout=10) as client:
        made = client.post("/api/auth/user", json={"id": "fuzzer", "roles": ["osmo-user"]})
        assert made.status_code == 200, made.text
        minted = client.post("/api/auth/user/fuzzer/token", json={"name": "fuzz"})
        assert minted.status_code == 201, minted.text
        return str(minted.json()["token"])


def schemathesis(server: LiveServer, token: str, examples: int, seed: int, cwd: Path) -> str:
    """One ``schemathesis run --checks all``; its output (it exits non-zero on a failure)."""
    done = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(CONFIG),
            "--no-color",
            "run",
            f"{server.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {token}",
            "--checks",
            "all",
            "--max-examples",
            str(examples),
            "--seed",
            str(seed),
            # Deleting a user (which it finds in the user list) revokes that user's tokens,
            # these runs' own included once it has made another admin; the last admin's
            # deletion is refused (409, tests/api/test_access.py).
            "--exclude-name",
            "DELETE /api/auth/user/{username}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stdout[-20_000:] + done.stderr[-5_000:]
    return done.stdout


def test_every_operation_keeps_to_the_document_under_every_check(
    server: LiveServer, tmp_path: Path
) -> None:
    admin = {"Authorization": f"Bearer {server.token}"}
    tokens = {"admin": server.token, "pool user": pool_user_token(server, admin)}
    sent = {}
    for who, token in tokens.items():
        examples, seed = RUNS[who]
        output = schemathesis(server, token, examples, seed, tmp_path)
        found = re.search(r"(\d+) generated, (\d+) passed", output)
        assert found is not None, output[-3_000:]
        assert found.group(1) == found.group(2), output[-3_000:]
        sent[who] = int(found.group(1))
    print(f"\nschemathesis --checks all: requests per token {sent}")
    assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
    assert sum(sent.values()) >= MIN_REQUESTS


def test_the_document_declares_400_not_422(server: LiveServer) -> None:
    admin = {"Authorization": f"Bearer {server.token}"}
    document = httpx.get(f"{server.url}/openapi.json", headers=admin, timeout=10).json()
    codes = {
        (path, method): set(operation["responses"])
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }
    assert not [key for key, found in codes.items() if "422" in found]
    assert codes[("/api/configs/{segment}/{name}", "put")] >= {"200", "400", "401", "403", "413"}
    assert codes[("/health", "get")] == {"200", "503"}
    assert "ErrorBody" in document["components"]["schemas"]


def test_the_document_declares_what_surrounds_a_document(server: LiveServer) -> None:
    """What schemathesis found refused though the document allowed it: an item name a config
    may not have, a bundle section that does not exist, a backend update that is no object,
    NUL in a submission's text, a PATCH of a whole type that is not one object."""
    admin = {"Authorization": f"Bearer {server.token}"}
    paths = httpx.get(f"{server.url}/openapi.json", headers=admin, timeout=10).json()["paths"]

    def parameter(path: str, method: str, name: str) -> dict[str, Any]:
        found = paths[path][method]["parameters"]
        return next(p["schema"] for p in found if p["name"] == name)

    for path, method in (
        ("/api/configs/{segment}/{name}", "put"),
        ("/api/configs/{segment}/{name}", "patch"),
        ("/api/configs/{segment}/{name}", "delete"),
        ("/api/configs/backend/{name}", "post"),
    ):
        assert parameter(path, method, "name")["pattern"] == CONFIG_NAME_PATTERN
    assert parameter("/api/configs/{segment}", "patch", "segment")["enum"] == [
        "WORKFLOW",
        "workflow",
    ]
    schemas = httpx.get(f"{server.url}/openapi.json", headers=admin).json()["components"]["schemas"]
    bundle = schemas["ApplyBody"]["properties"]["bundle"]
    assert bundle["additionalProperties"] is False
    assert set(bundle["properties"]) == {
        "pools",
        "pod_templates",
        "group_templates",
        "resource_validations",
        "roles",
        "backends",
        "workflow",
        "podTemplates",
        "groupTemplates",
        "resourceValidations",
    }
    assert schemas["PatchBody"]["properties"]["configs_dict"]["type"] == "object"
    texts = schemas["TemplateSpec"]["properties"]["set_string_variables"]["items"]
    assert texts["pattern"] == "^[^\\u0000]*$"


def test_a_wrong_method_says_what_the_path_allows(server: LiveServer) -> None:
    admin = {"Authorization": f"Bearer {server.token}"}
    answer = httpx.request("TRACE", f"{server.url}/api/auth/user", headers=admin)
    assert (answer.status_code, answer.headers["allow"]) == (405, "GET, POST")
    assert answer.json()["message"] == "TRACE is not a method of /api/auth/user; use GET, POST."
    answer = httpx.put(f"{server.url}/api/configs/apply", headers=admin, json={})
    assert (answer.status_code, answer.headers["allow"]) == (405, "POST")
