"""The dashboard's pages over HTTP (in process): login, sessions, CSRF, authorization, errors,
rollback, and the live-update stream."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from corral.api.browser_session import COOKIE, csrf_ok, csrf_token, local_target
from corral.domain.views.start_forecast import GroupForecast
from corral.domain.workflows.record import Changes
from corral.errors import TooManyRequestsError, UnavailableError
from corral.services.runtime import open_runtime
from corral.services.workflow_names import UNKNOWN, Owner, WorkflowNamer, opaque_tag
from corral.web import live
from corral.web.app import create_server_app
from corral.web.drawing import age
from corral.web.pages import _queue_positions
from tests.conftest import REPO, Api

PAGES = ["/ui", "/ui/pools", "/ui/topology", "/ui/workflows", "/ui/config"]


def logged_in(api: Api, token: str | None = None) -> TestClient:
    client = TestClient(api.client.app, raise_server_exceptions=False)
    answer = client.post(
        "/ui/login", data={"token": token or api.token, "next": "/ui"}, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/ui"
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    return client


def csrf_of(client: TestClient, path: str = "/ui") -> str:
    found = re.search(r'"X-Corral-CSRF": "([0-9a-f]+)"', client.get(path).text)
    assert found is not None
    return found.group(1)


def test_a_page_without_a_session_redirects_to_the_login(examples: Api) -> None:
    client = TestClient(examples.client.app)
    answer = client.get("/ui/workflows", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == ("/ui/login?next=%2Fui%2Fworkflows&why=login")
    assert client.get("/ui/static/htmx.min.js").status_code == 200  # public


def test_a_wrong_token_is_refused_on_the_login_page(examples: Api) -> None:
    client = TestClient(examples.client.app)
    answer = client.post("/ui/login", data={"token": "corral_nope"})
    assert answer.status_code == 401
    assert "The bearer token is unknown or revoked." in answer.text
    assert COOKIE not in answer.headers.get("set-cookie", "")
    empty = client.post("/ui/login", data={"token": ""})
    assert (
        "Paste an API token to log in (an admin makes one with: corral user token USER)."
        in empty.text
    )


@pytest.mark.parametrize("path", PAGES)
def test_every_page_answers_a_logged_in_admin(examples: Api, path: str) -> None:
    answer = logged_in(examples).get(path)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert '<span id="user">admin (admin)</span>' in answer.text
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


def test_the_rest_api_does_not_take_the_session_cookie(examples: Api) -> None:
    client = logged_in(examples)
    answer = client.get("/api/workflow")
    assert answer.status_code == 401  # bearer tokens only: no cross-site request can use it


def test_a_change_without_the_pages_csrf_token_is_refused(examples: Api) -> None:
    client = logged_in(examples)
    answer = client.post("/ui/config/pool/rollback", data={"revision": "1", "base": "2"})
    assert answer.status_code == 403
    assert answer.json()["message"] == (
        "The request lacks this page's CSRF token; reload the page and try again."
    )
    forged = client.post(
        "/ui/config/pool/rollback",
        data={"revision": "1", "base": "2"},
        headers={"X-Corral-CSRF": "0" * 40},
    )
    assert forged.status_code == 403


def test_rollback_refuses_a_stale_base_and_rolls_back_from_the_current_one(
    examples: Api,
) -> None:
    client = logged_in(examples)
    headers = {"X-Corral-CSRF": csrf_of(client, "/ui/config?type=POOL")}
    _, head = examples.call("GET", "/api/configs/history?config_types=POOL&order=DESC&limit=1")
    current = head["configs"][0]["revision"]
    stale = client.post(
        "/ui/config/pool/rollback",
        data={"revision": "1", "base": str(current - 1)},
        headers=headers,
    )
    assert stale.status_code == 409, stale.text
    done = client.post(
        "/ui/config/pool/rollback", data={"revision": "1", "base": str(current)}, headers=headers
    )
    assert done.status_code == 200, done.text
    target = done.headers["hx-location"]  # the page is drawn again at the new revision
    assert target == f"/ui/config?type=POOL&rolled_back=1&made={current + 1}"
    page = client.get(target).text
    assert f"Rolled back to r1: now r{current + 1}." in page
    assert f"POOL at r{current + 1}" in page
    assert "Rolled back from the dashboard to r1" in page


def test_a_user_may_not_roll_back_or_read_what_its_roles_do_not_allow(examples: Api) -> None:
    examples.call("POST", "/api/auth/user", json={"id": "bob", "roles": ["osmo-user"]})
    _, minted = examples.call("POST", "/api/auth/user/bob/token")
    client = logged_in(examples, minted["token"])
    config = client.get("/ui/config")
    assert config.status_code == 403
    assert "bob may not config:Read on config/pool" in config.text
    headers = {"X-Corral-CSRF": csrf_of(client)}
    refused = client.post(
        "/ui/config/pool/rollback", data={"revision": "1", "base": "1"}, headers=headers
    )
    assert refused.status_code == 403
    assert refused.json()["message"].startswith("bob may not config:Update on config/pool")
    assert client.get("/ui/topology?pool=nvl72").status_code == 404


def test_bad_query_values_are_user_errors_drawn_as_pages(examples: Api) -> None:
    client = logged_in(examples)
    domain = client.get("/ui/topology?pool=nvl72&domain=rack")
    assert domain.status_code == 400
    assert "domain=&#39;rack&#39;: give it as LABEL=VALUE" in domain.text
    status = client.get("/ui/workflows?status=sleepy")
    assert status.status_code == 400
    assert "status=&#39;sleepy&#39;: choose one of running, waiting, failed, completed." in (
        status.text
    )
    missing = client.get("/ui/workflows/nope-1")
    assert missing.status_code == 404
    assert "Workflow nope-1 not found." in missing.text
    assert client.get("/ui/static/..%2Fpages.py").status_code == 404
    assert client.get("/ui/static/.hidden").status_code == 404
    assert client.get("/ui/events?topic=everything").status_code == 400


@pytest.mark.parametrize(
    ("asked", "kept"),
    [
        ("/ui/workflows?status=failed", "/ui/workflows?status=failed"),
        ("/ui", "/ui"),
        ("/ui#top", "/ui#top"),
        ("https://evil.example/ui", "/ui"),
        ("//evil.example/ui", "/ui"),
        ("/ui//evil.example", "/ui"),
        ("/uievil", "/ui"),
        ("/ui\\evil.example", "/ui"),
        ("/ui/\\evil.example", "/ui"),
        ("/ui/x\r\nLocation: https://evil.example", "/ui"),
        ("/ui/\tx", "/ui"),
        ("javascript:alert(1)", "/ui"),
        ("", "/ui"),
    ],
)
def test_the_login_goes_back_only_to_the_dashboard(asked: str, kept: str) -> None:
    assert local_target(asked) == kept


def test_csrf_tokens_are_bound_to_the_session() -> None:
    key = b"k" * 32
    token = csrf_token(key, "session-a")
    assert csrf_ok(key, "session-a", token)
    assert not csrf_ok(key, "session-b", token)
    assert not csrf_ok(b"x" * 32, "session-a", token)


def test_queue_positions_follow_priority_then_age_per_pool() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    queued = [
        ("old-normal", "a", "NORMAL", start),
        ("new-high", "a", "HIGH", start + timedelta(minutes=5)),
        ("low", "a", "LOW", start - timedelta(hours=1)),
        ("other-pool", "b", "LOW", start),
    ]
    assert _queue_positions(queued) == {"new-high": 1, "old-normal": 2, "low": 3, "other-pool": 1}


def test_age_reads_naive_times_as_utc() -> None:
    now = datetime(2026, 1, 2, tzinfo=UTC)
    assert age(datetime(2026, 1, 1), now) == "1d"
    assert age(now - timedelta(seconds=90), now) == "1m"
    assert age(now - timedelta(seconds=5), now) == "5s"
    assert age(None, now) == ""


def test_a_stream_says_changed_when_its_marker_moves_and_ends_on_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    markers = iter([1, 1, 2, 2, 3])
    monkeypatch.setattr(live, "STREAM_SECONDS", 0.3)

    async def collect() -> list[str]:
        return [chunk async for chunk in live._stream(lambda: next(markers, 3), 0.05)]

    sent = asyncio.run(collect())
    assert sent == ["retry: 2000\n\n", "event: changed\ndata: 1\n\n", "event: changed\ndata: 1\n\n"]


def test_stream_slots_are_bounded_per_user_and_per_server() -> None:
    slots = live.StreamSlots(per_server=3, per_user=2)
    slots.take("ann")
    slots.take("ann")
    with pytest.raises(TooManyRequestsError) as per_user:
        slots.take("ann")
    assert str(per_user.value) == (
        "ann already has 2 live pages open; close some (a page that is not live still shows "
        "the state it was loaded in)."
    )
    slots.take("bob")
    with pytest.raises(UnavailableError) as per_server:
        slots.take("carl")
    assert str(per_server.value) == "This server already streams 3 live pages; the page retries."
    slots.release("ann")
    slots.take("carl")
    assert slots.open == {"ann": 1, "bob": 1, "carl": 1}


def test_a_workflows_stream_answers_as_an_event_stream(examples: Api) -> None:
    client = logged_in(examples)
    with client.stream("GET", "/ui/events?topic=workflows") as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        first = next(answer.iter_text())
    assert first == "retry: 2000\n\n"


def test_a_user_who_may_not_read_a_pools_workflows_sees_tags_not_their_ids() -> None:
    name = WorkflowNamer(b"k" * 32, "ann", lambda pool: pool == "open")
    assert name("train-3", Owner("open", "bob")) == "train-3"
    assert name("mine-1", Owner("closed", "ann")) == "mine-1"
    tag = name("theirs-2", Owner("closed", "bob"))
    assert tag.startswith("workflow-") and "theirs" not in tag
    assert name("theirs-2", Owner("closed", "bob")) == tag != name("theirs-3", UNKNOWN)
    assert name("gone-1", UNKNOWN) == opaque_tag(b"k" * 32, "gone-1")


def _reader_of(examples: Api, pool: str) -> str:
    """A token of ``bob``, who may submit to and read ``pool`` only."""
    role = {
        "description": "x",
        "policies": [
            {
                "actions": ["workflow:*", "pool:List", "resources:Read"],
                "resources": [f"pool/{pool}"],
            },
            {"actions": ["workflow:List", "pool:List", "resources:Read"]},
        ],
    }
    status, body = examples.call(
        "PUT", "/api/configs/role/only-my-pool", json={"configs_dict": role}
    )
    assert status == 200, body
    return examples.runtime.tokens.create(name="bob", username="bob", roles=["only-my-pool"])


def test_a_node_shared_between_pools_names_only_the_workflows_the_viewer_may_read(
    examples: Api,
) -> None:
    """my-pool and nvl72 share the GB200 racks: bob reads my-pool's page, whose trays hold
    the admin's nvl72 workflow. The page checked the chosen pool, and named it."""
    spec = (REPO / "examples" / "workflows" / "nvl72-single-rack.yaml").read_text()
    status, answer = examples.call("POST", "/api/pool/nvl72/workflow", json={"file": spec})
    assert status == 200, answer
    admins = answer["name"]
    examples.runtime.lifecycle().tick()  # binds it: its pods name their workflow and pool
    assert examples.runtime.workflows.get(admins).groups[0].status != "SCHEDULING"
    bob = logged_in(examples, _reader_of(examples, "my-pool"))
    page = bob.get("/ui/topology?pool=my-pool")
    assert page.status_code == 200
    assert admins not in page.text
    assert opaque_tag(examples.client.app.state.authorizer.sessions.key, admins) in page.text
    admin = logged_in(examples)
    assert admins in admin.get("/ui/topology?pool=my-pool").text


def test_a_forecast_names_only_a_workflow_the_reader_may_read(examples: Api) -> None:
    """bob's my-pool workflow most likely starts after the admin's nvl72 workflow ends: the
    forecast named it to bob."""
    spec = (REPO / "examples" / "workflows" / "nvl72-single-rack.yaml").read_text()
    status, answer = examples.call("POST", "/api/pool/nvl72/workflow", json={"file": spec})
    assert status == 200, answer
    admins = answer["name"]
    token = _reader_of(examples, "my-pool")
    headers = {"Authorization": f"Bearer {token}"}
    mine = examples.client.post(
        "/api/pool/my-pool/workflow", json={"file": spec}, headers=headers
    ).json()["name"]
    group = examples.runtime.workflows.get(mine).groups[0].uuid
    waiting = Changes()
    waiting.group(group, status="SCHEDULING")  # as the controller leaves a group that waits
    examples.runtime.workflows.commit(waiting)
    now = datetime.now(UTC)
    examples.runtime.forecasts.replace(
        [GroupForecast(group, mine, now, now, now, now, "my-pool", 1, 1, waits_on=admins)]
    )
    explained = examples.client.get(f"/api/workflow/{mine}/explain", headers=headers).json()
    reason = explained["groups"][0]["reason"]
    tag = opaque_tag(examples.client.app.state.authorizer.sessions.key, admins)
    assert f"after {tag} ends" in reason and admins not in reason
    query = examples.client.get(f"/api/workflow/{mine}", headers=headers).json()
    assert f"after {tag} ends" in query["groups"][0]["start_forecast"]
    page = logged_in(examples, token).get(f"/ui/workflows/{mine}")
    assert f"after {tag} ends" in page.text and admins not in page.text
    status, mine_to_admin = examples.call("GET", f"/api/workflow/{mine}/explain")
    assert status == 200, mine_to_admin
    assert f"after {admins} ends" in mine_to_admin["groups"][0]["reason"]


def test_the_ghost_of_a_waiting_workflow_is_one_clique_of_the_pool(examples: Api) -> None:
    file = (REPO / "examples" / "workflows" / "nvl72-single-rack.yaml").read_text()
    status, answer = examples.call("POST", "/api/pool/nvl72/workflow", json={"file": file})
    assert status == 200, answer
    waiting = answer["name"]  # no controller runs here: it waits
    client = logged_in(examples)
    page = client.get(f"/ui/topology?pool=nvl72&ghost={waiting}")
    assert page.status_code == 200
    assert f'hx-get="/ui/topology/ghost?pool=nvl72&amp;ghost={waiting}"' in page.text
    ghost = client.get(f"/ui/topology/ghost?pool=nvl72&ghost={waiting}")
    assert ghost.status_code == 200, ghost.text
    nodes = re.search(r'data-ghost-nodes="([^"]*)"', ghost.text)
    domains = re.search(r'data-ghost-domains="([^"]*)"', ghost.text)
    assert nodes is not None and domains is not None
    assert len(nodes.group(1).split()) == 4
    (clique,) = domains.group(1).split()
    for node in nodes.group(1).split():
        _, info = examples.call("GET", f"/api/resources/{node}")
        assert info["resources"][0]["labels"]["nvidia.com/gpu-clique"] == clique
    assert "Group <strong>group1</strong> of " + waiting + " would land now on 4 nodes" in (
        ghost.text
    )
    other = client.get(f"/ui/topology/ghost?pool=default&ghost={waiting}")
    assert f"{waiting} does not run in pool default. <a " in other.text  # a word apart


def test_a_page_number_beyond_any_column_is_a_400_page(examples: Api) -> None:
    """``?page=2^63-1`` was a 500 on both databases (an offset past 64 bits)."""
    client = logged_in(examples)
    answer = client.get("/ui/workflows", params={"page": 2**63 - 1})
    assert answer.status_code == 400
    assert "page: Input should be less than or equal to 1000000" in answer.text
    assert "<html" in answer.text  # a page, not JSON
    answer = client.get("/ui/config", params={"first": -1})
    assert answer.status_code == 400
    assert "first: Input should be greater than or equal to 1" in answer.text
    assert client.get("/ui/workflows", params={"page": 3}).status_code == 200


def test_a_pool_without_platforms_is_shown_with_what_it_lacks(examples: Api) -> None:
    """It used to answer 400 for everyone whose first pool it was."""
    status, _ = examples.call(
        "PUT", "/api/configs/pool/aaa-bare", json={"configs": {"backend": "default"}}
    )
    assert status == 200
    client = logged_in(examples)
    answer = client.get("/ui/pools")
    assert answer.status_code == 200
    assert (
        "Pool aaa-bare has no platforms: every submission to it fails until it has one; give the "
        "pool a platforms entry (for example platforms: {default: {}}) and set default_platform "
        "to it (docs/configs/pool.md)."
    ) in answer.text
    for pool in ("default", "nvl72", "heterogeneous_pool"):
        assert f'/ui/pools?pool={pool}"' in answer.text
    assert "Simulation and training pool" in answer.text  # descriptions are shown
    assert client.get("/ui/pools", params={"pool": "nvl72"}).status_code == 200


def test_a_log_out_ends_the_session_on_every_server(api: Api, database_url: str) -> None:
    """A copied cookie stops working after the log-out, on this server and on another one
    sharing the database (sessions are signed; the log-out is recorded)."""
    client = logged_in(api)
    cookie = client.cookies.get(COOKIE)
    assert cookie is not None
    other_runtime = open_runtime(database_url)
    other = TestClient(create_server_app(other_runtime, api.client.app.state.auth_settings))
    other.cookies.set(COOKIE, cookie, path="/ui")
    assert other.get("/ui", follow_redirects=False).status_code == 200  # one session, two servers
    answer = client.post("/ui/logout", headers={"X-Corral-CSRF": csrf_of(client)})
    assert answer.status_code in (200, 303)
    ended = "The session was ended by a log-out; log in again."
    for server in (client, other):
        server.cookies.set(COOKIE, cookie, path="/ui")
        page = server.get("/ui", follow_redirects=False)
        assert page.status_code == 303
        assert page.headers["location"] == "/ui/login?next=%2Fui&why=expired"
    bearer = other.get("/api/pool", headers={"Authorization": f"Bearer {cookie}"})
    assert (bearer.status_code, bearer.json()["message"]) == (401, ended)
    other_runtime.engine.dispose()


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"Origin": "https://evil.example"}, "it comes from the page of https://evil.example"),
        ({"Sec-Fetch-Site": "cross-site"}, "the browser says it comes from a cross-site page"),
        ({"Origin": "null"}, "it comes from the page of null"),
    ],
)
def test_a_login_posted_from_another_site_is_refused(
    examples: Api, headers: dict[str, str], reason: str
) -> None:
    client = TestClient(examples.client.app)
    answer = client.post(
        "/ui/login", data={"token": examples.token}, headers=headers, follow_redirects=False
    )
    assert (answer.status_code, answer.json()["message"]) == (
        403,
        f"Refused: {reason}, not from this dashboard. Open the dashboard at its own address "
        "and try again.",
    )
    assert COOKIE not in answer.headers.get("set-cookie", "")
    same = client.post(
        "/ui/login",
        data={"token": examples.token},
        headers={"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"},
        follow_redirects=False,
    )
    assert same.status_code == 303


def test_a_browser_at_the_servers_address_is_sent_to_the_dashboard(examples: Api) -> None:
    """``http://127.0.0.1:8000/`` in a browser answered a raw JSON 401."""
    client = TestClient(examples.client.app, raise_server_exceptions=False)
    page = client.get("/", headers={"Accept": "text/html,*/*"}, follow_redirects=False)
    assert (page.status_code, page.headers["location"]) == (303, "/ui")
    api = client.get("/", headers={"Accept": "application/json"})
    assert api.status_code == 401 and api.json()["error_code"] == "UNAUTHORIZED"
