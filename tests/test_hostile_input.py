"""Hostile input against a real ``corral server`` process (issue 13, Done when).

One table: deep nesting for every parser (workflow file, config body, bundle), anchor bombs,
huge bodies, lone surrogates, NUL, huge integers, Jinja bombs in a workflow and in a pod
template; and issue 25's: a huge header without a token (item 1), a task asking for the host's
network (item 2), live streams nobody may open (item 4), dashboard numbers past 2^63 (item 5).
Each request is answered with its 4xx and a message that names the limit; after each
one the server answers ``/health`` within 1 s; over the whole table its resident memory grows by
less than 300 MiB. A cluster file (``corral server --cluster``) nested too deep stops the server
at start with the file, line and column. Below the table, what a row cannot send: headers a MiB
at a time, slow heads and bodies, too many connections (item 1), and streams over the cap
(item 4).
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, start_server

MiB = 2**20
#: A GB200 tray of the example cluster.
TRAY = "gb200-zone-a-s0-r0-g0-00"
MAX_RSS_GROWTH = 300 * MiB
DEEP = "nested more than 64 levels deep here; flatten the document"
BURN = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"
DOUBLE = "{% set s = 'x' * 100000 %}" + "{% set s = s ~ s %}" * 14 + "{{ s | length }}"
TOO_SLOW = "took longer than 2 s of CPU time; simplify the template"  # 0.5 s, rounded up, + 1
POD_TOO_SLOW = "took longer than 0.5 s of CPU time; simplify the template"
TOO_BIG = "needed more than 100 MiB; simplify the template"


@dataclass(frozen=True)
class Hostile:
    """One request: what is sent, and the status and message part it must be answered with."""

    name: str
    method: str
    path: str
    status: int
    says: str
    json_body: Any = None
    content: bytes | None = None
    params: dict[str, Any] = field(default_factory=dict)
    token: str | None = None  # None: the admin's; "": no Authorization header
    dashboard: bool = False  # sent with a dashboard session, answered with a page
    user: str = "admin"  # whose dashboard session: another name is a new user with no roles
    headers: dict[str, str] = field(default_factory=dict)


def workflow(file: str) -> dict[str, Any]:
    return {"file": file}


def task_workflow(script: str) -> str:
    """One task running ``script``, written as the workflow's Jinja source (a block scalar, so
    the template's quotes stay as they are)."""
    return (
        "workflow:\n  name: hostile\n  tasks:\n  - name: t\n    image: busybox\n"
        f"    command: [sh, -c]\n    args:\n    - |\n      {script}\n"
    )


def under_workflow(text: str) -> str:
    return f"workflow:\n  name: w\n  tasks: {text}"


def nested_mapping(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


def billion_laughs() -> str:
    lines = ["workflow:", "  name: w", "  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, 9):
        previous = f"*a{level - 1}"
        lines.append(f"  a{level}: &a{level} [{', '.join([previous] * 10)}]")
    return "\n".join(lines) + "\n  tasks: *a8\n"


BLOCKS = "\n" + "".join(f"{'  ' * i}a:\n" for i in range(2, 200))
SUBMIT = "/api/pool/default/workflow"
CHECK = {"validation_only": "true"}
PUT_POOL = "/api/configs/pool/hostile"

TABLE = [
    Hostile(
        "workflow file: 30,000 [",
        "POST",
        SUBMIT,
        400,
        DEEP,
        json_body=workflow(under_workflow("[" * 30_000)),
        params=CHECK,
    ),
    Hostile(
        "workflow file: 30,000 {",
        "POST",
        SUBMIT,
        400,
        DEEP,
        json_body=workflow(under_workflow("{a: " * 30_000)),
        params=CHECK,
    ),
    Hostile(
        "workflow file: block mappings 200 deep",
        "POST",
        SUBMIT,
        400,
        DEEP,
        json_body=workflow(under_workflow(BLOCKS)),
        params=CHECK,
    ),
    Hostile(
        "workflow file: billion laughs",
        "POST",
        SUBMIT,
        400,
        "its aliases (*name) make the document more than 10 times larger",
        json_body=workflow(billion_laughs()),
        params=CHECK,
    ),
    Hostile(
        "workflow file: 2 MiB",
        "POST",
        SUBMIT,
        400,
        "file: String should have at most 1000000 characters",
        json_body=workflow("#" * (2 * MiB)),
        params=CHECK,
    ),
    Hostile(
        "workflow file: NUL",
        "POST",
        SUBMIT,
        400,
        "file: text must not contain NUL characters",
        json_body=workflow("workflow:\n  name: a\x00b\n"),
    ),
    Hostile(
        "workflow Jinja: nested range loops",
        "POST",
        SUBMIT,
        400,
        TOO_SLOW,
        json_body=workflow(task_workflow(BURN)),
        params=CHECK,
    ),
    Hostile(
        "workflow Jinja: doubled string",
        "POST",
        SUBMIT,
        400,
        TOO_BIG,
        json_body=workflow(task_workflow(DOUBLE)),
        params=CHECK,
    ),
    Hostile(
        "config body: 30,000 [",
        "PUT",
        PUT_POOL,
        400,
        DEEP,
        content=('{"configs": ' + "[" * 30_000 + "]" * 30_000 + "}").encode(),
    ),
    Hostile(
        "config values: 250 deep",
        "PATCH",
        "/api/configs/pool/default",
        400,
        DEEP,
        json_body={"configs_dict": {"common_default_variables": {"X": nested_mapping(250)}}},
    ),
    Hostile(
        "bundle: 30,000 {",
        "POST",
        "/api/configs/apply",
        400,
        DEEP,
        content=('{"bundle": ' + '{"a": ' * 30_000 + "1" + "}" * 30_001).encode(),
    ),
    Hostile(
        "config body: lone surrogate",
        "PUT",
        PUT_POOL,
        400,
        "text holds a lone surrogate code point",
        content=b'{"configs": {"backend": "default", "description": "bad \\ud800 text"}}',
    ),
    Hostile(
        "user name: NUL",
        "POST",
        "/api/auth/user",
        400,
        "text must not contain NUL characters",
        json_body={"id": "a\x00b", "roles": []},
    ),
    Hostile(
        "query: revision 2^63",
        "GET",
        "/api/configs/history",
        400,
        "query.revision: Input should be less than or equal to 2147483647",
        params={"revision": 2**63},
    ),
    Hostile(
        "body: rollback to revision 2^63",
        "POST",
        "/api/configs/history/rollback",
        400,
        "does not fit in 64 bits",
        content=b'{"config_type": "POOL", "revision": 9223372036854775808}',
    ),
    Hostile(
        "body: integer with 5,000 digits",
        "PUT",
        PUT_POOL,
        400,
        "request body:1:41: the integer 99999999999999999999... (5,000 characters) does not fit",
        content=b'{"configs": {"backend": "default", "x": ' + b"9" * 5000 + b"}}",
    ),
    Hostile(
        "body: 20 MiB",
        "PUT",
        PUT_POOL,
        413,
        "is larger than this server's limit of 10,485,760 bytes",
        content=json.dumps({"configs": {"description": "x" * (20 * MiB)}}).encode(),
    ),
    Hostile(
        "body: 20 MiB with a bad token",
        "PUT",
        PUT_POOL,
        401,
        "",
        content=b"x" * (20 * MiB),
        token="not-a-token",
    ),
    Hostile(  # issue 25, item 1 (the slow and many-connection cases are tests below)
        "head: a 100 KiB header without a token",
        "GET",
        "/api/pool",
        431,
        "The request's headers are larger than this server's limit of 65,536 bytes",
        token="",
        headers={"X-Big": "a" * 100_000},
    ),
    Hostile(  # issue 25, item 2 (what an isolated task reaches: tests/test_task_trust.py)
        "task: the host's network on a platform that does not allow it",
        "POST",
        SUBMIT,
        400,
        "Task with platform: default does not have hostNetwork flag enabled. Task t",
        json_body=workflow(
            "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: busybox\n"
            "    command: [true]\n    hostNetwork: true\n"
        ),
    ),
    Hostile(  # issue 25, item 4 (the caps on streams: a test below)
        "live stream: a user with no roles",
        "GET",
        "/ui/events",
        403,
        "nobody may not workflow:List",
        params={"topic": "workflows"},
        dashboard=True,
        user="nobody",
    ),
    Hostile(
        "live stream: a workflow that does not exist",
        "GET",
        "/ui/events",
        404,
        "Workflow nope-1 not found.",
        params={"topic": "workflow:nope-1"},
        dashboard=True,
        user="nobody",
    ),
    Hostile(  # issue 25, item 5
        "dashboard: page 2^63 - 1",
        "GET",
        "/ui/workflows",
        400,
        "page: Input should be less than or equal to 1000000",
        params={"page": 2**63 - 1},
        dashboard=True,
    ),
    Hostile(
        "dashboard: revision -2^80",
        "GET",
        "/ui/config",
        400,
        "first: Input should be greater than or equal to 1",
        params={"first": -(2**80)},
        dashboard=True,
    ),
    # Issue 44, part 3, item 6: lax input.
    Hostile(
        "node fail: fabric 'yes'",
        "POST",
        f"/api/nodes/{TRAY}/fail",
        400,
        "fabric: Input should be a valid boolean",
        json_body={"fabric": "yes"},
    ),
    Hostile(
        "checkpoint: step '5'",
        "POST",
        "/api/workflow/nobody-1/task/t0/checkpoint",
        400,
        "step: Input should be a valid integer",
        json_body={"step": "5"},
    ),
    Hostile(
        "node cordon: a right-to-left override in the reason",
        "POST",
        f"/api/nodes/{TRAY}/cordon",
        400,
        "reason: text must not contain the bidirectional control U+202E",
        json_body={"reason": "PSU swap \u202etoor yb"},
    ),
    Hostile(
        "config write: a right-to-left override in the description",
        "PUT",
        "/api/configs/pool/hostile",
        400,
        "description: text must not contain the bidirectional control U+202E",
        json_body={"configs": {"backend": "default"}, "description": "fix \u202eevil"},
    ),
    Hostile(
        "cancel: a right-to-left isolate in the message",
        "POST",
        "/api/workflow/nobody-1/cancel",
        400,
        "message: text must not contain the bidirectional control U+2067",
        params={"message": "oops \u2067x"},
    ),
    Hostile(
        "node cordon: a 20,000-character unknown key",
        "POST",
        f"/api/nodes/{TRAY}/cordon",
        400,
        "Unknown key 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk'… (20,000 "
        "characters) in the request",
        json_body={"k" * 20_000: 1},
    ),
]

POD_TEMPLATE_BOMBS = [("pod template: nested range loops", BURN, POD_TOO_SLOW)]
POD_TEMPLATE_BOMBS += [("pod template: doubled string", DOUBLE, TOO_BIG)]


_sessions: dict[tuple[str, str], str] = {}


def dashboard_session(server: LiveServer, username: str) -> str:
    """A dashboard session cookie of ``username``: the admin, or a new user with no roles."""
    if username == "admin":
        key = (server.url, username)
        if key not in _sessions:
            login = httpx.post(f"{server.url}/ui/login", data={"token": server.token})
            assert login.status_code == 303, login.text
            _sessions[key] = f"corral_session={login.cookies['corral_session']}"
        return _sessions[key]
    return session_cookie(server, username, [])


def session_cookie(server: LiveServer, username: str, roles: list[str]) -> str:
    """A dashboard session of a new user holding ``roles`` (one per name and server)."""
    key = (server.url, username)
    if key in _sessions:
        return _sessions[key]
    admin = {"Authorization": f"Bearer {server.token}"}
    made = httpx.post(
        f"{server.url}/api/auth/user", json={"id": username, "roles": roles}, headers=admin
    )
    assert made.status_code == 200, made.text
    token = httpx.post(f"{server.url}/api/auth/user/{username}/token", json={}, headers=admin)
    login = httpx.post(f"{server.url}/ui/login", data={"token": token.json()["token"]})
    assert login.status_code == 303, login.text
    _sessions[key] = f"corral_session={login.cookies['corral_session']}"
    return _sessions[key]


def rss(server: LiveServer) -> int:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def health_seconds(server: LiveServer) -> float:
    started = time.monotonic()
    response = httpx.get(f"{server.url}/health", timeout=1)
    assert response.status_code == 200, response.text
    return time.monotonic() - started


def send(client: httpx.Client, server: LiveServer, case: Hostile) -> httpx.Response:
    headers = {"Authorization": f"Bearer {case.token or server.token}"}
    if case.token == "":
        headers = {}
    if case.dashboard:
        headers = {"Cookie": dashboard_session(server, case.user)}
    headers.update(case.headers)
    if case.content is not None:
        headers["Content-Type"] = "application/json"
    try:
        return client.request(
            case.method,
            case.path,
            params=case.params,
            json=case.json_body if case.content is None else None,
            content=case.content,
            headers=headers,
        )
    except httpx.WriteError:
        # The server answered before the body was sent and closed the connection: that is the
        # point of checking the token first. The answer itself is read with a small body.
        return client.request(case.method, case.path, content=b"{}", headers=headers)


#: The module's server answers slow clients sooner than the defaults (10 s and 30 s).
#: How early an asyncio timer may fire (its loop runs what is due within the clock's resolution).
EARLY = 0.05
HEADER_TIMEOUT = 2.0
BODY_TIMEOUT = 2.0
CONNECTIONS_PER_CLIENT = 16


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        tmp_path_factory.mktemp("hostile"),
        "--demo",
        f"--header-timeout={HEADER_TIMEOUT}",
        f"--body-timeout={BODY_TIMEOUT}",
        f"--max-connections-per-client={CONNECTIONS_PER_CLIENT}",
    )
    yield live
    live.stop()


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def baseline_rss(server: LiveServer, client: httpx.Client) -> int:
    """The server's RSS once a valid submission and a pool render have loaded everything."""
    admin = {"Authorization": f"Bearer {server.token}"}
    ok = client.post(SUBMIT, params=CHECK, json=workflow(task_workflow("true")), headers=admin)
    assert ok.status_code == 200, ok.text
    assert client.get("/api/pool/default/render", headers=admin).status_code == 200
    return rss(server)


@pytest.mark.parametrize("case", TABLE, ids=[case.name for case in TABLE])
def test_hostile_request_is_refused_and_the_server_lives(
    server: LiveServer, client: httpx.Client, baseline_rss: int, case: Hostile
) -> None:
    response = send(client, server, case)
    assert response.status_code == case.status, response.text[:500]
    if not case.dashboard:
        assert len(response.content) < 4_096, "an answer never echoes a value whole"
    assert case.says in (response.text if case.dashboard else response.json()["message"])
    assert health_seconds(server) < 1
    assert (
        client.get(
            "/api/configs/pool/hostile", headers={"Authorization": f"Bearer {server.token}"}
        ).status_code
        == 404
    ), "nothing of a refused write is stored"


@pytest.mark.parametrize(
    ("name", "text", "says"), POD_TEMPLATE_BOMBS, ids=[b[0] for b in POD_TEMPLATE_BOMBS]
)
def test_a_pod_template_bomb_is_refused_when_a_pool_uses_it(
    server: LiveServer, client: httpx.Client, baseline_rss: int, name: str, text: str, says: str
) -> None:
    admin = {"Authorization": f"Bearer {server.token}"}
    template = {"metadata": {"annotations": {"a": text}}}
    stored = client.put("/api/configs/pod_template/bomb", json={"configs": template}, headers=admin)
    assert stored.status_code == 200, stored.text  # a template alone is not rendered
    pool = client.get("/api/configs/pool/default", headers=admin).json()
    uses = {"configs_dict": {"common_pod_template": [*pool["common_pod_template"], "bomb"]}}
    refused = client.patch("/api/configs/pool/default", json=uses, headers=admin)
    assert refused.status_code == 400, refused.text
    assert says in refused.json()["message"], name
    assert health_seconds(server) < 1
    after = client.get("/api/configs/pool/default", headers=admin).json()
    assert after["common_pod_template"] == pool["common_pod_template"]


def test_memory_grew_by_less_than_300_mib(
    server: LiveServer, client: httpx.Client, baseline_rss: int
) -> None:
    """The whole table once more (under xdist this worker may not have run the cases above),
    measured against the RSS of the warmed-up server."""
    for case in TABLE:
        send(client, server, case)
    growth = rss(server) - baseline_rss
    print(f"\nserver RSS: {baseline_rss / MiB:.0f} MiB, then +{growth / MiB:.0f} MiB")
    assert growth < MAX_RSS_GROWTH
    assert health_seconds(server) < 1


def test_a_cluster_file_nested_too_deep_stops_the_server_at_start(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("nodes: " + "[" * 30_000)
    with pytest.raises(RuntimeError) as failed:
        start_server(tmp_path, "--cluster", str(cluster))
    assert f"{cluster}:1:71: lists and mappings are {DEEP}" in str(failed.value)


# -- connections: sizes and timeouts before authentication (issue 25, item 1) ------------------


def connect(server: LiveServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    found = socket.create_connection((host, int(port)), timeout=30)
    return found


def answer(connection: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of the one answer the server sends before closing."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_twenty_32_mib_headers_get_431_and_the_memory_stays(
    server: LiveServer, baseline_rss: int
) -> None:
    """Each request, without a token, sends one 32 MiB header a MiB at a time: each is
    answered 431 once the head passes 64 KiB, and the server keeps none of it."""
    before = rss(server)
    for _ in range(20):
        with connect(server) as connection:
            connection.sendall(b"GET /api/pool HTTP/1.1\r\nHost: corral\r\nX-Big: ")
            with contextlib.suppress(OSError):  # the server may close before all is sent
                for _ in range(32):
                    connection.sendall(b"a" * MiB)
                connection.sendall(b"\r\n\r\n")
            status, body = answer(connection)
        assert (status, body["error_code"]) == (431, "REQUEST_HEADER_FIELDS_TOO_LARGE")
        assert body["message"] == (
            "The request's headers are larger than this server's limit of 65,536 bytes; "
            "send fewer or shorter headers (corral server --max-header-bytes)."
        )
    growth = rss(server) - before
    print(f"\nserver RSS: {before / MiB:.0f} MiB, then +{growth / MiB:.1f} MiB")
    assert growth < 50 * MiB
    assert health_seconds(server) < 1


def test_a_head_sent_a_line_at_a_time_is_cut_off_at_the_header_timeout(
    server: LiveServer,
) -> None:
    started = time.monotonic()
    with connect(server) as connection:
        connection.sendall(b"GET /health HTTP/1.1\r\n")
        connection.setblocking(False)
        closed_after = None
        while closed_after is None:
            with contextlib.suppress(BlockingIOError):
                connection.sendall(b"X-Slow: 1\r\n")
                if connection.recv(1, socket.MSG_PEEK):
                    closed_after = time.monotonic() - started
            time.sleep(0.1)
        connection.setblocking(True)
        status, body = answer(connection)
    assert (status, body["message"]) == (
        408,
        "The request's headers did not arrive within 2 s (corral server --header-timeout).",
    )
    assert HEADER_TIMEOUT <= closed_after < HEADER_TIMEOUT + 1


def test_a_connection_that_says_nothing_is_closed_at_the_header_timeout(
    server: LiveServer,
) -> None:
    started = time.monotonic()
    with connect(server) as connection:
        assert connection.recv(1) == b""  # closed without an answer
    # asyncio runs a timer up to its clock's resolution early: EARLY allows for that
    assert HEADER_TIMEOUT - EARLY <= time.monotonic() - started < HEADER_TIMEOUT + 1


def test_a_body_that_stops_arriving_gets_408_at_the_body_timeout(server: LiveServer) -> None:
    started = time.monotonic()
    with connect(server) as connection:
        connection.sendall(
            f"PUT {PUT_POOL} HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer {server.token}\r\n"
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"configs"'.encode()
        )
        status, body = answer(connection)
    assert (status, body["message"]) == (
        408,
        "No part of the request body arrived for 2 s (corral server --body-timeout).",
    )
    assert BODY_TIMEOUT - EARLY <= time.monotonic() - started < BODY_TIMEOUT + 1
    admin = {"Authorization": f"Bearer {server.token}"}
    assert httpx.get(f"{server.url}{PUT_POOL}", headers=admin).status_code == 404


def test_connections_beyond_the_bound_per_client_get_429(server: LiveServer) -> None:
    held = [connect(server) for _ in range(CONNECTIONS_PER_CLIENT)]
    try:
        with connect(server) as refused:
            status, body = answer(refused)
        assert (status, body["message"]) == (
            429,
            f"Too many open connections from 127.0.0.1 (this server allows "
            f"{CONNECTIONS_PER_CLIENT} per address); reuse or close the ones you have.",
        )
    finally:
        for connection in held:
            connection.close()
    time.sleep(0.2)  # the server sees them closed
    assert health_seconds(server) < 1


# -- live-update streams (issue 25, item 4) -----------------------------------------------------


def open_stream(server: LiveServer, cookie: str) -> tuple[int, socket.socket]:
    """A ``/ui/events`` request; its status, and the connection (open while it streams)."""
    connection = connect(server)
    request = f"GET /ui/events?topic=workflows HTTP/1.1\r\nHost: corral\r\nCookie: {cookie}\r\n"
    connection.sendall((request + "\r\n").encode())
    head = b""
    while b"\r\n" not in head:
        head += connection.recv(1)
    return int(head.split()[1]), connection


def test_live_streams_need_the_topics_permission_and_are_capped_per_user(
    server: LiveServer,
) -> None:
    """``nobody`` (no roles) may open none; a user opening 12 at once gets exactly 8 (counted
    atomically), and the admin still gets one."""
    status, connection = open_stream(server, session_cookie(server, "nobody", []))
    connection.close()
    assert status == 403
    reader = session_cookie(server, "reader", ["osmo-user"])
    with ThreadPoolExecutor(12) as pool:
        opened = list(pool.map(lambda _: open_stream(server, reader), range(12)))
    try:
        assert sorted(status for status, _ in opened) == [200] * 8 + [429] * 4
        admin_cookie = session_cookie(server, "streamer", ["osmo-admin"])
        status, admin_stream = open_stream(server, admin_cookie)
        admin_stream.close()
        assert status == 200
    finally:
        for _, connection in opened:
            connection.close()
    deadline = time.monotonic() + 5  # slots come back when their streams end
    while True:
        status, connection = open_stream(server, reader)
        connection.close()
        if status == 200:
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
