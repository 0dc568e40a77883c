"""The Kubernetes port's contract, checked against the fake API server and, when
``CORRAL_TEST_KUBECONFIG`` names one, a real cluster (kind with KAI's CRDs installed; see
docs/deploy.md#testing-against-a-real-cluster). The same assertions run on both, so the fake
stays honest: what passes here against the fake passes against a real API server.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.backends.kubernetes.api import KubeError, LightkubeApi, connect
from corral.backends.kubernetes.backend import CLEANUP_FINALIZER, KubernetesBackend
from corral.backends.kubernetes.informer import Informer
from corral.backends.kubernetes.node_health import CORDONED_BY, cordon_patch, node_health
from corral.domain.configs.backend_models import KubernetesAccess
from corral.domain.configs.snapshot import Configs
from corral.domain.platform.node_health import Cordon
from corral.domain.topology.kai_objects import NAMESPACE_LABEL, queue_manifests, topology_manifests
from tests.backends.kubernetes.fake_apiserver import FakeKubeServer

REAL_CLUSTER = os.environ.get("CORRAL_TEST_KUBECONFIG", "")
NAMESPACE = "corral-conformance"


@pytest.fixture(params=["fake", "real"])
def kubeconfig_path(
    request: pytest.FixtureRequest, fake_kube: FakeKubeServer, tmp_path: Path
) -> Path:
    if request.param == "fake":
        fake_kube.create_namespace(NAMESPACE)
        return fake_kube.write_kubeconfig(tmp_path / "kubeconfig")
    if not REAL_CLUSTER:
        pytest.skip(
            "no real cluster: set CORRAL_TEST_KUBECONFIG to a kind cluster with KAI installed "
            "(docs/deploy.md#testing-against-a-real-cluster) to run this check against it"
        )
    return Path(REAL_CLUSTER)


@pytest.fixture
def api(kubeconfig_path: Path) -> Iterator[LightkubeApi]:
    client = connect(KubernetesAccess(kubeconfig=str(kubeconfig_path)), NAMESPACE)
    if REAL_CLUSTER and "fake" not in str(kubeconfig_path):
        _ensure_namespace(client)
    yield client
    client.close()


def _ensure_namespace(api: LightkubeApi) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    api.apply(namespace, None)


def _config_map(name: str, run: str, **data: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"osmo.group_uuid": run}},
        "data": data,
    }


def test_apply_creates_then_changes_nothing_then_updates(api: LightkubeApi) -> None:
    run = uuid.uuid4().hex
    kind = api.kind("v1", "ConfigMap")
    first = api.apply(_config_map(f"cm-{run}", run, a="1"), NAMESPACE)
    again = api.apply(_config_map(f"cm-{run}", run, a="1"), NAMESPACE)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    changed = api.apply(_config_map(f"cm-{run}", run, a="2"), NAMESPACE)
    assert changed["data"] == {"a": "2"}
    managers = {m["manager"] for m in changed["metadata"]["managedFields"]}
    assert "corral" in managers
    items, version = api.list(kind, NAMESPACE, {"osmo.group_uuid": run})
    assert [i["metadata"]["name"] for i in items] == [f"cm-{run}"] and version
    api.delete(kind, NAMESPACE, f"cm-{run}")
    api.delete(kind, NAMESPACE, f"cm-{run}")  # gone already: not an error
    assert api.get(kind, NAMESPACE, f"cm-{run}") is None


def test_a_finalizer_keeps_an_object_until_corral_removes_it(api: LightkubeApi) -> None:
    run = uuid.uuid4().hex
    manifest = _config_map(f"fin-{run}", run)
    manifest["metadata"]["finalizers"] = [CLEANUP_FINALIZER]  # type: ignore[index]
    kind = api.kind("v1", "ConfigMap")
    api.apply(manifest, NAMESPACE)
    api.delete(kind, NAMESPACE, f"fin-{run}")
    kept = api.get(kind, NAMESPACE, f"fin-{run}")
    assert kept is not None and kept["metadata"]["deletionTimestamp"]
    api.remove_finalizer(kind, NAMESPACE, f"fin-{run}", CLEANUP_FINALIZER)
    assert api.get(kind, NAMESPACE, f"fin-{run}") is None


def test_an_invalid_object_is_refused_for_good(api: LightkubeApi) -> None:
    pod_group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": f"bad-{uuid.uuid4().hex[:8]}"},
        "spec": {"minMember": "four"},
    }
    with pytest.raises(KubeError) as refused:
        api.apply(pod_group, NAMESPACE)
    assert refused.value.status == 422 and not refused.value.transient
    assert "minMember" in refused.value.message


def test_discovery_finds_plurals_and_scopes(api: LightkubeApi) -> None:
    api._kinds.clear()  # force discovery even for kinds known without it
    found = api._discover("resource.nvidia.com/v1beta1", "ComputeDomain")
    assert (found.plural, found.namespaced) == ("computedomains", True)
    found = api._discover("kai.scheduler/v1alpha1", "Topology")
    assert (found.plural, found.namespaced) == ("topologies", False)
    with pytest.raises(KubeError) as unknown:
        api._discover("example.com/v1", "Widget")
    assert unknown.value.status == 404


def test_a_watch_sees_what_happens_after_the_list(api: LightkubeApi) -> None:
    run = uuid.uuid4().hex
    informer = Informer(api, api.kind("v1", "ConfigMap"), NAMESPACE, {"osmo.group_uuid": run})
    informer.start()
    try:
        assert informer.wait_synced(10.0)
        api.apply(_config_map(f"w-{run}", run, a="1"), NAMESPACE)
        _eventually(lambda: informer.get(NAMESPACE, f"w-{run}") is not None)
        api.apply(_config_map(f"w-{run}", run, a="2"), NAMESPACE)
        _eventually(lambda: (informer.get(NAMESPACE, f"w-{run}") or {}).get("data") == {"a": "2"})
        api.delete(api.kind("v1", "ConfigMap"), NAMESPACE, f"w-{run}")
        _eventually(lambda: informer.get(NAMESPACE, f"w-{run}") is None)
    finally:
        informer.stop()


def test_access_reviews_answer_for_this_client(api: LightkubeApi) -> None:
    assert api.allowed("create", "", "configmaps", NAMESPACE) is True


def test_scheduler_objects_sync_and_recreate_the_topology(api: LightkubeApi) -> None:
    namespace = f"conf-{uuid.uuid4().hex[:8]}"
    state = _state(namespace, ["topology.kubernetes.io/zone", "nvidia.com/gpu-clique"])
    backend = KubernetesBackend("b", api, api, namespace)
    try:
        desired = [*queue_manifests(state, "b"), *topology_manifests(state, "b")]
        assert backend.sync_scheduler_objects(desired) is True
        assert backend.sync_scheduler_objects(desired) is False  # unchanged: nothing asked
        topology = api.kind("kai.scheduler/v1alpha1", "Topology")
        [made], _ = api.list(topology, None, {NAMESPACE_LABEL: namespace})
        state = _state(namespace, ["nvidia.com/gpu-clique"])
        backend.sync_scheduler_objects(
            [*queue_manifests(state, "b"), *topology_manifests(state, "b")]
        )
        [remade], _ = api.list(topology, None, {NAMESPACE_LABEL: namespace})
        assert remade["metadata"]["uid"] != made["metadata"]["uid"]
        assert remade["spec"]["levels"] == [{"nodeLabel": "nvidia.com/gpu-clique"}]
    finally:
        backend.sync_scheduler_objects([])  # orphans: everything of this namespace goes
    queue = api.kind("scheduling.run.ai/v2", "Queue")
    assert api.list(queue, None, {NAMESPACE_LABEL: namespace})[0] == []


def _state(namespace: str, levels: list[str]) -> Configs:
    from corral.domain.configs.types import ConfigType

    keys = [{"key": label.rsplit("/", 1)[-1], "label": label} for label in levels]
    return Configs(
        {
            ConfigType.BACKEND: {"b": {"k8s_namespace": namespace}},
            ConfigType.POOL: {"p": {"backend": "b", "topology_keys": keys}},
        }
    )


def _eventually(condition: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_a_cordon_patch_sets_and_clears_the_node_and_its_annotations(api: LightkubeApi) -> None:
    kind = api.kind("v1", "Node")
    nodes, _ = api.list(kind, None)
    if not nodes:  # the fake starts empty; a real cluster has its own
        nodes = [api.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"}}, None)]
    name = nodes[0]["metadata"]["name"]
    was_cordoned = bool((nodes[0].get("spec") or {}).get("unschedulable"))
    try:
        cordon = Cordon("alice", "PSU swap", 30.0)
        patched = api.merge_patch(kind, None, name, cordon_patch(cordon))
        assert patched["spec"]["unschedulable"] is True
        assert node_health(patched, {}, {}).cordon == cordon
        cleared = api.merge_patch(kind, None, name, cordon_patch(None))
        assert not (cleared.get("spec") or {}).get("unschedulable")
        assert CORDONED_BY not in (cleared["metadata"].get("annotations") or {})
        assert node_health(cleared, {}, {}).cordon is None
    finally:
        if was_cordoned:
            api.merge_patch(kind, None, name, {"spec": {"unschedulable": True}})
