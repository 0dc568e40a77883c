"""A lifecycle world whose ``default`` backend is a Kubernetes cluster: the fake API server with
the example cluster's nodes, a fake KAI and kubelet, and corral talking to it through lightkube."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral.backends.kubernetes.backend import KubernetesBackend
from corral.domain.topology.kai_objects import priority_class_manifests
from tests.backends.kubernetes.fake_apiserver import FakeKubeServer
from tests.backends.kubernetes.fake_kai import FakeKai, FakeKubelet, node_manifest
from tests.conftest import Api
from tests.services.lifecycle_world import Clock, World

BACKEND = "default"
NAMESPACE = "default"
#: What the stored manifests never hold and the API server or corral's backend adds.
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


@dataclass
class KubeWorld(World):
    fake: FakeKubeServer
    kai: FakeKai
    kubelet: FakeKubelet

    @property
    def backend(self) -> KubernetesBackend:
        found = self.runtime.backends.get(BACKEND)
        assert isinstance(found, KubernetesBackend)
        return found

    def settle(self, backend: KubernetesBackend | None = None) -> None:
        """Wait until corral's watches (``backend``'s, the world's own by default) have seen
        every write the fake made so far."""
        watching = backend or self.backend
        wait_until(lambda: self._watched_everything(watching), timeout_s=5.0)

    def _watched_everything(self, backend: KubernetesBackend) -> bool:
        pods = {
            (p["metadata"]["name"], p["metadata"]["resourceVersion"])
            for p in self.fake.objects("v1", "Pod")
        }
        seen = {
            (p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in backend.pods.items()
        }
        groups = {
            (g["metadata"]["name"], g["metadata"]["resourceVersion"])
            for g in self.fake.objects("scheduling.run.ai/v2alpha2", "PodGroup")
        }
        seen_groups = {
            (g["metadata"]["name"], g["metadata"]["resourceVersion"])
            for g in backend.pod_groups.items()
        }
        return pods == seen and groups == seen_groups

    def cycle(self, code_of: Callable[[Any], int] | None = None) -> None:
        """One round: corral ticks, KAI schedules, the kubelet ends running pods (when
        ``code_of`` is given), and corral's watches catch up."""
        self.controller.tick()
        self.kai.schedule()
        if code_of is not None:
            self.kubelet.finish(code_of)
        self.settle()
        self.clock.advance(2.0)

    def run_cycles(
        self, done: Callable[[], bool], code_of: Callable[[Any], int] | None = None
    ) -> int:
        for cycles in range(1, 60):
            self.cycle(code_of)
            if done():
                return cycles
        raise AssertionError("not done after 60 cycles")

    def group_objects(self) -> list[dict[str, Any]]:
        """Every object in the fake that belongs to a task group."""
        return [
            o
            for o in self.fake.objects()
            if "osmo.group_uuid" in (o.get("metadata") or {}).get("labels", {})
        ]


def wait_until(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def use_fake_cluster(api: Api, fake: FakeKubeServer, kubeconfig: Path, **access: Any) -> None:
    """Make the example ``default`` backend the fake cluster, with the example nodes and the
    PriorityClasses ``deploy/kubernetes`` installs."""
    for node in api.runtime.cluster.nodes:
        fake.put_object(node_manifest(node))
    for priority_class in priority_class_manifests():
        fake.put_object(priority_class)
    section = {"kubeconfig": str(kubeconfig), "api_timeout": "2s", **access}
    status, body = api.call(
        "POST", f"/api/configs/backend/{BACKEND}", json={"configs_dict": {"kubernetes": section}}
    )
    assert status == 200, body


def kube_world(api: Api, fake: FakeKubeServer, kubeconfig: Path) -> Iterator[KubeWorld]:
    use_fake_cluster(api, fake, kubeconfig)
    clock = Clock()
    world = KubeWorld(
        api, clock, api.runtime.lifecycle(clock), fake, FakeKai(fake), FakeKubelet(fake)
    )
    assert world.backend.wait_synced(5.0)
    yield world
    api.runtime.backends.close()


def stored_shape(manifest: dict[str, Any]) -> dict[str, Any]:
    """An object read back from the API server, reduced to what corral stored: no server
    metadata, no status, no corral finalizer, and CRD defaults the server filled dropped."""
    found = {k: v for k, v in manifest.items() if k != "status"}
    metadata = {k: v for k, v in found["metadata"].items() if k not in SERVER_FIELDS}
    finalizers = [f for f in metadata.pop("finalizers", []) if f != "corral.dev/cleanup"]
    if finalizers:
        metadata["finalizers"] = finalizers
    found["metadata"] = metadata
    return found
