"""Arbitrary query values on every dashboard page: a page or a 4xx, never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.files import read_bundle_directory
from corral.services.runtime import open_runtime
from corral.web.app import create_server_app
from tests.conftest import REPO

WORKFLOW = (REPO / "examples" / "workflows" / "nvl72-single-rack.yaml").read_text()
texts = st.text(min_size=0, max_size=30)
PARAMETERS = [
    "pool",
    "platform",
    "domain",
    "ghost",
    "status",
    "user",
    "page",
    "task",
    "type",
    "first",
    "second",
    "topic",
    "next",
    "why",
]
#: Numbers far beyond any column's range, both ways (a page of 2^63 was a 500 once).
numbers = st.integers(min_value=-(2**80), max_value=2**80).map(str)
values = st.one_of(
    texts, numbers, st.sampled_from(["nvl72", "POOL", "single-nvl72-rack-1", "1", "-1"])
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    path: Path = tmp_path_factory.mktemp("pages") / "corral.db"
    runtime = open_runtime(f"sqlite:///{path}")
    token = runtime.tokens.create(name="fuzz", username="admin", roles=["osmo-admin"])
    client = TestClient(create_server_app(runtime), raise_server_exceptions=False)
    headers = {"Authorization": f"Bearer {token}"}
    bundle, _ = read_bundle_directory(REPO / "examples" / "configs")
    client.post("/api/configs/apply", json={"bundle": bundle}, headers=headers)
    client.post("/api/pool/nvl72/workflow", json={"file": WORKFLOW}, headers=headers)
    assert client.post("/ui/login", data={"token": token}, follow_redirects=False).is_redirect
    yield client
    runtime.engine.dispose()


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    page=st.sampled_from(
        [
            "/ui",
            "/ui/pools",
            "/ui/topology",
            "/ui/topology/ghost",
            "/ui/workflows",
            "/ui/workflows/{}",
            "/ui/workflows/{}/log",
            "/ui/config",
            "/ui/events",
            "/ui/static/{}",
            "/ui/login",
        ]
    ),
    segment=values,
    query=st.dictionaries(
        st.sampled_from(PARAMETERS),
        values,
        max_size=4,
    ),
)
def test_no_query_makes_a_page_fail_with_500(
    client: TestClient, page: str, segment: str, query: dict[str, str]
) -> None:
    path = page.format(quote(segment, safe="")) if "{}" in page else page
    if path == "/ui/events":
        query = {**query, "topic": "nope:"}  # a stream would not end: its answers are checked apart
    response = client.get(path, params=query)
    assert response.status_code < 500, (path, query, response.text[:300])


@settings(max_examples=100, deadline=None)
@given(
    page=st.sampled_from(["/ui/workflows", "/ui/config"]),
    name=st.sampled_from(["page", "first", "second"]),
    number=st.integers(min_value=-(2**80), max_value=2**80),
)
def test_every_number_parameter_is_bounded(
    client: TestClient, page: str, name: str, number: int
) -> None:
    response = client.get(page, params={name: str(number)})
    assert response.status_code in (200, 400, 404), (page, name, number, response.text[:300])
