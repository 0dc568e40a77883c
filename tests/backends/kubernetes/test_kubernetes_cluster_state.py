"""What corral keeps in sync with and reads from a Kubernetes cluster: KAI queues and topologies
per pool, KAI's reasons for waiting, exit codes and logs of pods."""

from __future__ import annotations

from typing import Any

from corral.domain.topology.kai_objects import NAMESPACE_LABEL
from tests.backends.kubernetes.kube_world import NAMESPACE, KubeWorld

TOPOLOGY = ("kai.scheduler/v1alpha1", "Topology")
QUEUE = ("scheduling.run.ai/v2", "Queue")
NVL72_TOPOLOGY = "osmo-pool-default-nvl72-topology"
MY_POOL_TOPOLOGY = "osmo-pool-default-my-pool-topology"
ZONE = "topology.kubernetes.io/zone"
CLIQUE = "nvidia.com/gpu-clique"


def _topologies(w: KubeWorld) -> dict[str, dict[str, Any]]:
    return {t["metadata"]["name"]: t for t in w.fake.objects(*TOPOLOGY)}


def _writes(w: KubeWorld, since: int) -> list[tuple[str, str, str]]:
    return [(j.verb, j.kind, j.name) for j in w.fake.journal[since:]]


def test_topology_is_recreated_only_when_its_levels_change(kube_world: KubeWorld) -> None:
    w = kube_world
    w.controller.tick()
    assert set(_topologies(w)) == {NVL72_TOPOLOGY, MY_POOL_TOPOLOGY}
    topology = _topologies(w)[NVL72_TOPOLOGY]
    assert topology["metadata"]["labels"] == {NAMESPACE_LABEL: NAMESPACE, "osmo.pool": "nvl72"}

    start = len(w.fake.journal)
    w.controller.tick()
    assert _writes(w, start) == []  # unchanged: not even re-applied

    status, pool = w.api.call("GET", "/api/configs/pool/nvl72")
    assert status == 200, pool
    pool["topology_keys"] = [{"key": "zone", "label": ZONE}, {"key": "gpu-clique", "label": CLIQUE}]
    status, body = w.api.call("PUT", "/api/configs/pool/nvl72", json={"configs": pool})
    assert status == 200, body
    start = len(w.fake.journal)
    w.controller.tick()
    assert [e for e in _writes(w, start) if e[1] == "Topology"] == [
        ("delete", "Topology", NVL72_TOPOLOGY),
        ("apply", "Topology", NVL72_TOPOLOGY),
    ]
    topology = _topologies(w)[NVL72_TOPOLOGY]
    assert topology["spec"]["levels"] == [{"nodeLabel": ZONE}, {"nodeLabel": CLIQUE}]


def test_queues_follow_the_pool_quota_and_pools_that_go_away(kube_world: KubeWorld) -> None:
    w = kube_world
    w.controller.tick()
    queue = w.fake.get_object(*QUEUE, None, "osmo-pool-default-nvl72")
    assert queue is not None
    assert queue["spec"]["parentQueue"] == "osmo-default-default"
    assert queue["spec"]["resources"]["gpu"] == {"quota": 64, "limit": 72, "overQuotaWeight": 1}

    w.patch_pool("nvl72", {"resources": {"gpu": {"guarantee": 8, "maximum": 16, "weight": 2}}})
    w.controller.tick()
    queue = w.fake.get_object(*QUEUE, None, "osmo-pool-default-nvl72")
    assert queue is not None
    assert queue["spec"]["resources"]["gpu"] == {"quota": 8, "limit": 16, "overQuotaWeight": 2}

    status, body = w.api.call("DELETE", "/api/configs/pool/nvl72")
    assert status == 200, body
    w.controller.tick()
    assert w.fake.get_object(*QUEUE, None, "osmo-pool-default-nvl72") is None
    assert set(_topologies(w)) == {MY_POOL_TOPOLOGY}  # the other pool's stays


def test_a_cluster_without_the_topology_crd_still_gets_its_queues(kube_world: KubeWorld) -> None:
    w = kube_world
    w.fake.remove_crd("kai.scheduler", "topologies")
    w.controller.tick()
    assert {q["metadata"]["name"] for q in w.fake.objects(*QUEUE)} >= {"osmo-pool-default-nvl72"}


def test_explain_shows_kai_reason_while_a_group_waits(kube_world: KubeWorld) -> None:
    w = kube_world
    w.controller.tick()  # topologies synced
    # Someone deletes the pool's Topology behind corral's back (corral re-syncs within 5 min).
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    store = w.fake.store
    store.delete(store.type_of(*TOPOLOGY), None, NVL72_TOPOLOGY)
    w.run_cycles(lambda: w.workflow(workflow_id).groups[0].pending_reason is not None)
    code, body = w.api.call("GET", f"/api/workflow/{workflow_id}/explain")
    assert code == 200, body
    assert f"Requested topology {NVL72_TOPOLOGY} does not exist" in str(body)


def test_exit_codes_and_logs_come_from_the_pods(kube_world: KubeWorld) -> None:
    w = kube_world
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    w.run_cycles(lambda: w.workflow(workflow_id).status == "RUNNING")
    [group] = w.workflow(workflow_id).groups
    lead = next(t for t in group.tasks if t.lead)
    w.fake.set_pod_log(NAMESPACE, lead.pod_name, "step 1\nstep 2\n")
    response = w.api.client.get(
        f"/api/workflow/{workflow_id}/logs",
        params={"task_name": lead.name},
        headers={"Authorization": f"Bearer {w.api.token}"},
    )
    assert response.status_code == 200, response.text
    assert response.text == "step 1\nstep 2\n"

    w.kubelet.finish(lambda pod: 7 if pod["metadata"]["name"] == lead.pod_name else 0)
    w.settle()
    w.run_cycles(lambda: w.workflow(workflow_id).status != "RUNNING")
    [group] = w.workflow(workflow_id).groups
    lead = next(t for t in group.tasks if t.lead)
    assert (lead.status, lead.exit_code) == ("FAILED", 7)
    assert w.workflow(workflow_id).status == "FAILED"


def test_logs_outlive_the_pods(kube_world: KubeWorld) -> None:
    """A task that ended by itself and one stopped by its lead's end keep their logs after
    cleanup deleted every pod."""
    w = kube_world
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    w.run_cycles(lambda: w.workflow(workflow_id).status == "RUNNING")
    [group] = w.workflow(workflow_id).groups
    lead = next(t for t in group.tasks if t.lead)
    for task in group.tasks:
        w.fake.set_pod_log(NAMESPACE, task.pod_name, f"{task.name} says hello\n")
    w.kubelet.finish(lambda pod: 0, only=lambda pod: pod["metadata"]["name"] == lead.pod_name)
    w.settle()
    w.run_cycles(lambda: w.workflow(workflow_id).status == "COMPLETED" and not w.group_objects())
    assert w.fake.objects("v1", "Pod") == []
    for task in group.tasks:
        response = w.api.client.get(
            f"/api/workflow/{workflow_id}/logs",
            params={"task_name": task.name},
            headers={"Authorization": f"Bearer {w.api.token}"},
        )
        assert (response.status_code, response.text) == (200, f"{task.name} says hello\n")


def test_a_pod_deleted_outside_corral_ends_its_task(kube_world: KubeWorld) -> None:
    w = kube_world
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    w.run_cycles(lambda: w.workflow(workflow_id).status == "RUNNING")
    [group] = w.workflow(workflow_id).groups
    lead = next(t for t in group.tasks if t.lead)
    pod = w.fake.get_object("v1", "Pod", NAMESPACE, lead.pod_name)
    assert pod is not None
    pod["metadata"]["finalizers"] = []
    w.fake.put_object(pod)
    w.fake.store.delete(w.fake.store.type_of("v1", "Pod"), NAMESPACE, lead.pod_name)
    w.run_cycles(lambda: w.workflow(workflow_id).status != "RUNNING")
    [group] = w.workflow(workflow_id).groups
    lead = next(t for t in group.tasks if t.lead)
    assert (lead.status, lead.exit_code) == ("FAILED", 3003)
    assert lead.message is not None and "deleted outside corral" in lead.message
