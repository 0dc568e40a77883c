"""Requests that used to crash or poison the server (issue 13, items 1, 9 and 10): each is
answered 4xx naming the field and the limit, and nothing is stored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from corral.api.app import create_app
from tests.conftest import Api

DEEP = "lists and mappings are nested more than 64 levels deep here; flatten the document"
INT64 = 2**63


def error(status: int, message: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    return status, {"message": message, "error_code": "USER", **extra}


def test_a_workflow_file_nested_30000_deep_is_refused_and_the_server_lives(api: Api) -> None:
    spec = "workflow:\n  name: w\n  tasks: " + "[" * 30_000
    status, body = api.call(
        "POST",
        "/api/pool/default/workflow",
        params={"validation_only": "true"},
        json={"file": spec},
    )
    assert (status, body["message"]) == (400, f"workflow.yaml:3:72: {DEEP}")
    assert api.call("GET", "/health")[0] == 200


def test_a_request_body_nested_30000_deep_is_refused(api: Api) -> None:
    raw = '{"configs": ' + "[" * 30_000 + "]" * 30_000 + "}"
    status, body = api.call("PUT", "/api/configs/pool/p", content=raw.encode())
    assert (status, body) == error(400, f"request body:1:76: {DEEP}")


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_config_values_nested_250_deep_are_refused(api: Api, method: str) -> None:
    value: Any = "x"
    for _ in range(250):
        value = {"a": value}
    document = {"backend": "default", "common_default_variables": {"X": value}}
    status, body = api.call(method, "/api/configs/pool/default", json={"configs": document})
    assert (status, body) == error(400, f"request body:1:370: {DEEP}")
    assert "X" not in api.call("GET", "/api/configs/pool/default")[1]["common_default_variables"]


def test_a_lone_surrogate_is_refused_and_reads_keep_working(api: Api) -> None:
    raw = b'{"configs": {"backend": "default", "description": "bad \\ud800 text"}}'
    status, body = api.call("PUT", "/api/configs/pool/p", content=raw)
    assert (status, body) == error(
        400,
        "request body:1:36: configs.description: text holds a lone surrogate code point (such "
        "as \\ud800), which is not valid Unicode; remove it or escape the character it was "
        "meant to be",
    )
    assert api.call("GET", "/api/configs/pool")[0] == 200
    assert api.call("GET", "/api/configs/history")[0] == 200


@pytest.mark.parametrize(
    ("method", "path", "params", "json_body", "field"),
    [
        ("GET", "/api/configs/history", {"revision": INT64}, None, "query.revision"),
        ("GET", "/api/configs/history", {"offset": INT64}, None, "query.offset"),
        (
            "GET",
            "/api/configs/diff",
            {"config_type": "POOL", "first_revision": INT64},
            None,
            "query.first_revision",
        ),
        ("DELETE", f"/api/configs/history/pool/revision/{INT64}", {}, None, "path.revision"),
        (
            "POST",
            f"/api/configs/history/pool/revision/{INT64}/tags",
            {},
            {"set_tags": ["a"]},
            "path.revision",
        ),
    ],
)
def test_integers_beyond_the_columns_are_refused(
    api: Api, method: str, path: str, params: dict[str, Any], json_body: Any, field: str
) -> None:
    status, body = api.call(method, path, params=params, json=json_body)
    assert (status, body["message"]) == (
        400,
        f"{field}: Input should be less than or equal to 2147483647",
    )


def test_a_rollback_to_a_revision_beyond_64_bits_is_refused(api: Api) -> None:
    raw = b'{"config_type": "POOL", "revision": 9223372036854775808}'
    status, body = api.call("POST", "/api/configs/history/rollback", content=raw)
    assert (status, body) == error(
        400,
        "request body:1:25: revision: the integer 9223372036854775808 does not fit in 64 bits; "
        "use a smaller number",
    )


def test_a_nul_in_a_token_name_is_refused(api: Api) -> None:
    status, body = api.call("POST", "/api/auth/user/admin/token", json={"name": "a\x00b"})
    assert (status, body) == error(
        400,
        "name: text must not contain NUL characters (\\u0000)",
        field="name",
        path=["name"],
    )


def test_a_nul_in_a_workflow_file_is_refused(api: Api) -> None:
    status, body = api.call(
        "POST", "/api/pool/default/workflow", json={"file": "workflow:\n  name: a\x00b\n"}
    )
    assert (status, body) == error(
        400,
        "file: text must not contain NUL characters (\\u0000)",
        field="file",
        path=["file"],
    )


# ------------------------------------------------------------------------- body size


@pytest.fixture
def small(api: Api) -> Iterator[TestClient]:
    """The app with a 1,000-byte body limit."""
    from corral.api.guard import RequestLimits

    app = create_app(api.runtime, limits=RequestLimits(max_body_bytes=1000))
    yield TestClient(app, raise_server_exceptions=False)


TOO_LARGE = (
    "larger than this server's limit of 1,000 bytes; send less (split a bundle, leave large "
    "files out of the workflow), or ask an admin to raise corral server --max-body-bytes."
)


def test_a_body_over_the_limit_is_413(api: Api, small: TestClient) -> None:
    big = json.dumps({"configs": {"backend": "default", "description": "x" * 2000}})
    response = small.put(
        "/api/configs/pool/p", content=big, headers={"Authorization": f"Bearer {api.token}"}
    )
    assert (response.status_code, response.json()) == (
        413,
        {
            "message": f"The request body ({len(big):,} bytes) is {TOO_LARGE}",
            "error_code": "TOO_LARGE",
        },
    )

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while read
        yield big.encode()[:600]
        yield big.encode()[600:]

    response = small.put(
        "/api/configs/pool/p", content=chunks(), headers={"Authorization": f"Bearer {api.token}"}
    )
    assert (response.status_code, response.json()["message"]) == (
        413,
        f"The request body is {TOO_LARGE}",
    )
    assert api.call("GET", "/api/configs/pool/p")[0] == 404


def test_authentication_comes_before_the_body_is_read(api: Api) -> None:
    """A request with a bad token is refused without reading a byte of its body."""
    from corral.api.guard import RequestLimits

    app = create_app(api.runtime, limits=RequestLimits(max_body_bytes=1000))
    read: list[bytes] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        read.append(b"x" * 10**6)
        return {"type": "http.request", "body": read[-1], "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": "/api/configs/pool/p",
        "raw_path": b"/api/configs/pool/p",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"authorization", b"Bearer corral_wrong"), (b"content-length", b"200000000")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 401
    assert json.loads(sent[1]["body"])["message"] == "The bearer token is unknown or revoked."
    assert read == []


def test_a_body_key_called_body_is_an_unknown_key_not_a_crash(api: Api) -> None:
    status, body = api.call(
        "POST", "/api/configs/history/pool/revision/1/tags", json={"body": None}
    )
    assert (status, body) == error(
        400, "body: Unknown key 'body' in the request", field="body", path=["body"]
    )
