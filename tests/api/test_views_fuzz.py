"""Arbitrary ids, task names and filters on the view and cancel routes: 4xx or 200, never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.api.app import create_app
from corral.files import read_bundle_directory
from corral.services.runtime import open_runtime
from tests.conftest import REPO

WORKFLOW = (REPO / "examples" / "workflows" / "nvl72-single-rack.yaml").read_text()
texts = st.text(min_size=0, max_size=40)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    path: Path = tmp_path_factory.mktemp("views") / "corral.db"
    runtime = open_runtime(f"sqlite:///{path}")
    token = runtime.tokens.create(name="fuzz", username="admin", roles=["osmo-admin"])
    client = TestClient(create_app(runtime), raise_server_exceptions=False)
    headers = {"Authorization": f"Bearer {token}"}
    bundle, _ = read_bundle_directory(REPO / "examples" / "configs")
    assert (
        client.post("/api/configs/apply", json={"bundle": bundle}, headers=headers).status_code
        == 200
    )
    submitted = client.post("/api/pool/nvl72/workflow", json={"file": WORKFLOW}, headers=headers)
    assert submitted.status_code == 200, submitted.text
    yield client, token
    runtime.engine.dispose()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    workflow_id=st.one_of(texts, st.just("single-nvl72-rack-1")),
    task=st.one_of(st.none(), texts),
    route=st.sampled_from(["logs", "explain", "cancel", ""]),
)
def test_workflow_views_never_fail_with_500(
    client: tuple[TestClient, str], workflow_id: str, task: str | None, route: str
) -> None:
    http, token = client
    path = f"/api/workflow/{quote(workflow_id, safe='')}" + (f"/{route}" if route else "")
    params = {"task": task} if task is not None and route == "logs" else {}
    method = "POST" if route == "cancel" else "GET"
    response = http.request(
        method, path, params=params, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code < 500, (path, response.text)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pools=st.lists(texts, max_size=3),
    platforms=st.lists(texts, max_size=3),
    show_all=st.booleans(),
    node=texts,
)
def test_resource_views_never_fail_with_500(
    client: tuple[TestClient, str],
    pools: list[str],
    platforms: list[str],
    show_all: bool,
    node: str,
) -> None:
    http, token = client
    headers = {"Authorization": f"Bearer {token}"}
    params = {"pools": pools, "platforms": platforms, "all": show_all}
    for response in (
        http.get("/api/resources", params=params, headers=headers),
        http.get("/api/pool_quota", params={"pools": pools}, headers=headers),
        http.get(f"/api/resources/{quote(node, safe='')}", headers=headers),
    ):
        assert response.status_code < 500, (response.url, response.text)
