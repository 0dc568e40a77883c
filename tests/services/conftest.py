"""The lifecycle tests' world: example configs, simulated execution, a clock the test moves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Api
from tests.services.lifecycle_world import Clock, World, simulate


@pytest.fixture
def world(examples: Api) -> Iterator[World]:
    api = examples
    simulate(api)
    clock = Clock()
    api.runtime.node_admin.clock = clock  # a failure's time is on the test's clock
    yield World(api, clock, api.runtime.lifecycle(clock))
