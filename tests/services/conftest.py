"""The lifecycle tests' world: example configs, simulated execution, a clock the test moves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from corral.files import read_bundle_directory
from tests.conftest import REPO, Api
from tests.services.lifecycle_world import Clock, World, simulate


@pytest.fixture
def world(api: Api) -> Iterator[World]:
    bundle, _ = read_bundle_directory(REPO / "examples" / "configs")
    status, body = api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status == 200, body
    simulate(api)
    clock = Clock()
    yield World(api, clock, api.runtime.lifecycle(clock))
