"""A world for lifecycle tests: the example configs and cluster, an API client, a controller on a
clock the test moves, and helpers to occupy nodes and to run until something is true."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from corral.backends.embedded.objects import ClusterObjectStore
from corral.domain.workflows.record import StoredWorkflow
from corral.services.lifecycle.controller import LifecycleController
from corral.services.lifecycle.forecasting import Forecaster, Simulate, in_process
from tests.conftest import REPO, Api

WORKFLOWS = REPO / "examples" / "workflows"
ZONE = "topology.kubernetes.io/zone"
SPINE = "topology.kubernetes.io/spine"
RACK = "topology.kubernetes.io/rack"
CLIQUE = "nvidia.com/gpu-clique"
FILLER_BACKEND = "default"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class World:
    api: Api
    clock: Clock
    controller: LifecycleController

    @property
    def runtime(self) -> Any:
        return self.api.runtime

    def submit(self, text: str, pool: str = "nvl72", **params: Any) -> str:
        body = {"file": text, "source": "wf.yaml", "set_variables": params.pop("set", [])}
        status, found = self.api.call(
            "POST", f"/api/pool/{pool}/workflow", json=body, params=params
        )
        assert status == 200, found
        return str(found["name"])

    def submit_example(self, name: str, **params: Any) -> str:
        return self.submit((WORKFLOWS / name).read_text(), **params)

    def forecast_on_its_clock(self, simulate: Simulate = in_process) -> None:
        """Forecast after the ticks that change something, in the tick (no thread), at most
        every 30 s of the world's clock."""
        runtime = self.runtime
        self.controller.forecaster = Forecaster(
            runtime.forecasts,
            runtime.listings.completed_runtimes,
            background=False,
            monotonic=lambda: self.clock.now.timestamp(),
            simulate=simulate,
        )

    def workflow(self, workflow_id: str) -> StoredWorkflow:
        return self.runtime.workflows.get(workflow_id)  # type: ignore[no-any-return]

    def run_until(
        self, done: Callable[[], bool], *, step: float = 2.0, max_ticks: int = 200
    ) -> int:
        """Tick (moving the clock ``step`` seconds after each tick) until ``done``."""
        for ticks in range(1, max_ticks + 1):
            self.controller.tick()
            if done():
                return ticks
            self.clock.advance(step)
        raise AssertionError(f"not done after {max_ticks} ticks")

    def finish(self, *workflow_ids: str, step: float = 2.0) -> None:
        self.run_until(
            lambda: (
                all(self.workflow(w).status not in ("PENDING", "RUNNING") for w in workflow_ids)
                and self.uncleaned() == []
            ),
            step=step,
        )

    def uncleaned(self) -> list[str]:
        return [
            o.name
            for o in self.runtime.objects.all()
            if o.labels.get("osmo.group_uuid") is not None
        ]

    def node_labels(self, node: str) -> dict[str, str]:
        return dict(self.runtime.cluster.node(node).labels)

    def patch_pool(self, pool: str, patch: dict[str, Any]) -> None:
        status, body = self.api.call(
            "PATCH", f"/api/configs/pool/{pool}", json={"configs_dict": patch}
        )
        assert status == 200, body

    def occupy(self, nodes: Iterable[str], gpus: int) -> None:
        """Bind a pod that is not corral's (no group label) taking ``gpus`` on each node."""
        runtime = self.runtime
        bindings = {}
        for node in nodes:
            name = f"filler-{node}"
            runtime.objects.apply(FILLER_BACKEND, filler_pod(name, gpus), "default")
            bindings[name] = node
        with runtime.engine.begin() as connection:
            ClusterObjectStore.bind(connection, FILLER_BACKEND, "default", bindings)
        self.controller.invalidate()  # the cluster changed behind the controller's back

    def gb200_nodes(self, **labels: str) -> list[str]:
        """GB200 trays whose labels include ``labels`` (keys as ZONE/RACK... constants)."""
        return [
            node.name
            for node in self.runtime.cluster.nodes
            if CLIQUE in node.labels and all(node.labels.get(k) == v for k, v in labels.items())
        ]


def simulate(api: Api) -> None:
    """Run the default backend's tasks as simulations, on the test's clock."""
    status, body = api.call(
        "POST",
        "/api/configs/backend/default",
        json={"configs_dict": {"execution": {"mode": "simulate", "simulated_duration": "5s"}}},
    )
    assert status == 200, body


def filler_pod(name: str, gpus: int) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "filler"}},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]
        },
    }


def workflow_yaml(groups: list[dict[str, Any]], **extra: Any) -> str:
    """A workflow on the nvl72 pool: every task asks for 4 GPUs unless it says otherwise."""
    spec: dict[str, Any] = {
        "name": extra.pop("name", "wf"),
        "resources": extra.pop("resources", {"default": {"gpu": 4}}),
        "groups": groups,
        **extra,
    }
    return yaml.safe_dump({"workflow": spec}, sort_keys=False)


def task(
    name: str, *, lead: bool = False, seconds: float = 5, code: int = 0, **extra: Any
) -> dict[str, Any]:
    """A simulated task that runs ``seconds`` and exits with ``code``."""
    found: dict[str, Any] = {
        "name": name,
        "image": "busybox",
        "command": ["sh", "-c", f"exit {code}"],
        "environment": {
            "CORRAL_SIMULATED_DURATION": str(seconds),
            "CORRAL_SIMULATED_EXIT_CODE": str(code),
        },
        **extra,
    }
    if lead:
        found["lead"] = True
    return found
