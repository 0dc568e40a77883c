"""Node health on a Kubernetes backend (docs/health.md#on-kubernetes), against the fake API
server: a cordoned Node, a NotReady Node and a ComputeDomain that never becomes Ready each keep
new work off their trays in corral's views, its dry-run placement and its explanations, and in
KAI's placement (the fake honours cordons and NotReady as KAI does); ``corral node cordon``
patches the real Node, and a missing permission is named."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from corral.backends.kubernetes.node_health import CORDON_REASON, CORDONED_BY
from corral.backends.registry import connect_backend
from corral.domain.configs.backend_models import KubernetesAccess
from tests.backends.kubernetes.fake_apiserver import FakeKubeServer
from tests.backends.kubernetes.kube_world import KubeWorld, wait_until
from tests.services.lifecycle_world import CLIQUE, task, workflow_yaml

COMPUTE_DOMAIN = ("resource.nvidia.com/v1beta1", "ComputeDomain")


def whole_clique_gang() -> str:
    """A whole NVL72 rack: 18 trays of 4 GPUs sharing a clique (LOW: above the guarantee)."""
    tasks = [task(f"shard{i}", lead=i == 0, seconds=30) for i in range(18)]
    resources = {"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}}
    return workflow_yaml([{"name": "train", "tasks": tasks}], resources=resources)


def by_clique(w: KubeWorld) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for node in w.gb200_nodes():
        found.setdefault(w.node_labels(node)[CLIQUE], []).append(node)
    return {clique: sorted(trays) for clique, trays in found.items()}


def node_object(w: KubeWorld, name: str) -> dict[str, Any]:
    found = w.fake.get_object("v1", "Node", None, name)
    assert found is not None
    return found


def closed(w: KubeWorld, name: str) -> str | None:
    status, body = w.api.call("GET", f"/api/resources/{name}")
    assert status == 200, body
    (entry,) = [e for e in body["resources"] if e["backend"] == "default"]  # the real node
    return entry.get("closed")  # type: ignore[no-any-return]


def dry_run_placement(w: KubeWorld) -> dict[str, Any]:
    body = {"file": whole_clique_gang(), "source": "wf.yaml"}
    status, answer = w.api.call(
        "POST", "/api/pool/nvl72/workflow", json=body, params={"dry_run": True, "priority": "LOW"}
    )
    assert status == 200, answer
    return answer["groups"][0]["placement"]  # type: ignore[no-any-return]


def set_not_ready(w: KubeWorld, name: str) -> None:
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "PLEG is not healthy",
        "lastTransitionTime": "2026-11-27T10:00:00Z",
    }
    status = {**node_object(w, name).get("status", {}), "conditions": [condition]}
    w.fake.update_status("v1", "Node", None, name, status)


def test_a_cordon_patches_the_node_and_keeps_new_gangs_off_it(kube_world: KubeWorld) -> None:
    w = kube_world
    cliques = by_clique(w)
    *cordoned, free = sorted(cliques)
    for clique in cordoned:
        status, body = w.api.call(
            "POST", f"/api/nodes/{cliques[clique][0]}/cordon", json={"reason": "PSU swap"}
        )
        assert status == 200, body
    first = cliques[cordoned[0]][0]
    node = node_object(w, first)
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"][CORDONED_BY] == "admin"
    assert node["metadata"]["annotations"][CORDON_REASON] == "PSU swap"
    wait_until(lambda: closed(w, first) == "cordoned by admin: 'PSU swap'", timeout_s=5.0)
    placement = dry_run_placement(w)
    assert {w.node_labels(n)[CLIQUE] for n in placement["nodes"].values()} == {free}
    workflow_id = w.submit(whole_clique_gang(), priority="LOW")
    w.run_cycles(lambda: w.workflow(workflow_id).status == "RUNNING")
    nodes = {t.node for t in w.workflow(workflow_id).groups[0].tasks}
    assert {w.node_labels(n)[CLIQUE] for n in nodes if n} == {free}  # KAI agrees
    status, body = w.api.call("POST", f"/api/nodes/{first}/uncordon")
    assert status == 200, body
    assert not node_object(w, first)["spec"].get("unschedulable")
    assert CORDONED_BY not in (node_object(w, first)["metadata"].get("annotations") or {})
    status, history = w.api.call("GET", f"/api/nodes/{first}/history")
    assert status == 200, history
    assert [c["action"] for c in history["changes"]] == ["uncordon", "cordon"]


def test_a_not_ready_node_is_not_counted_and_a_waiting_gang_names_it(
    kube_world: KubeWorld,
) -> None:
    w = kube_world
    cliques = by_clique(w)
    for trays in cliques.values():
        set_not_ready(w, trays[0])
    first = cliques[sorted(cliques)[0]][0]
    wait_until(lambda: closed(w, first) is not None, timeout_s=5.0)
    why = "NotReady since 2026-11-27 10:00 UTC (KubeletNotReady PLEG is not healthy)"
    assert closed(w, first) == why
    placement = dry_run_placement(w)
    assert placement["nodes"] == {}
    assert placement["reason"].startswith("needs room for 18 pods with 4 GPUs each in one "), (
        placement["reason"]
    )
    assert f"(not counted: {first} {why}" in placement["reason"], placement["reason"]
    status, body = w.api.call("POST", f"/api/nodes/{first}/fail", json={"reason": "x"})
    assert status == 400, body
    assert body["message"] == (
        f"Node {first} is a node of Kubernetes backend default: fail only changes a simulated "
        "tray (its health is what the cluster says). Use cordon, drain or uncordon."
    )


def test_a_compute_domain_that_never_becomes_ready_fails_its_trays_fabric(
    kube_world: KubeWorld,
) -> None:
    w = kube_world
    w.backend.compute_domain_grace = timedelta(0)  # it never became Ready: at once
    cliques = by_clique(w)
    domain = {
        "apiVersion": COMPUTE_DOMAIN[0],
        "kind": COMPUTE_DOMAIN[1],
        "metadata": {"name": "stuck", "namespace": "default"},
        "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "stuck-channel"}}},
    }
    w.fake.put_object(domain)
    trays = [cliques[clique][0] for clique in sorted(cliques)]
    w.fake.update_status(
        *COMPUTE_DOMAIN,
        "default",
        "stuck",
        {
            "status": "NotReady",
            "nodes": [
                {"name": tray, "cliqueID": "c", "ipAddress": f"10.0.0.{i}", "status": "NotReady"}
                for i, tray in enumerate(trays)
            ],
        },
    )
    why = "NVLink fabric failed (ComputeDomain default/stuck: IMEX daemon NotReady)"
    wait_until(lambda: closed(w, trays[0]) == why, timeout_s=5.0)
    placement = dry_run_placement(w)
    assert placement["nodes"] == {}
    assert f"(not counted: {trays[0]} {why}" in placement["reason"], placement["reason"]


def test_without_patch_on_nodes_a_cordon_names_the_rule_to_add(kube_world: KubeWorld) -> None:
    w = kube_world
    tray = w.gb200_nodes()[0]
    w.fake.deny("patch", "", "nodes")
    status, body = w.api.call("POST", f"/api/nodes/{tray}/cordon")
    assert status == 503, body
    assert body["message"].startswith(
        "corral's service account on backend default may not patch nodes, which cordon, drain "
        "and uncordon need. Add this rule to its ClusterRole (docs/deploy.md#permissions):\n"
    )
    assert "resources: [nodes]" in body["message"] and "verbs: [patch]" in body["message"]
    assert not node_object(w, tray)["spec"].get("unschedulable")
    status, history = w.api.call("GET", f"/api/nodes/{tray}/history")
    assert status == 200 and history["changes"] == []  # nothing audited that did not happen


def test_drain_patches_the_node_and_stops_what_runs_there(kube_world: KubeWorld) -> None:
    w = kube_world
    workflow_id = w.submit(workflow_yaml([{"name": "g", "tasks": [task("t", seconds=3600)]}]))
    w.run_cycles(lambda: w.workflow(workflow_id).groups[0].status == "RUNNING")
    tray = w.workflow(workflow_id).groups[0].tasks[0].node
    assert tray is not None
    status, body = w.api.call(
        "POST", f"/api/nodes/{tray}/drain", json={"reason": "PSU swap", "grace_seconds": 5}
    )
    assert status == 200, body
    node = node_object(w, tray)
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"]["corral.dev/drain-grace-seconds"] == "5"
    wait_until(lambda: closed(w, tray) == "drained by admin: 'PSU swap'", timeout_s=5.0)
    w.run_cycles(lambda: w.workflow(workflow_id).groups[0].notice_deadline is not None)
    deadline = w.workflow(workflow_id).groups[0].notice_deadline
    assert _pod_of(w, workflow_id) is not None  # under notice: not deleted before its deadline
    w.run_cycles(lambda: w.workflow(workflow_id).status not in ("PENDING", "RUNNING"))
    assert deadline is not None and w.clock() >= deadline
    assert _pod_of(w, workflow_id) is None
    ended = w.workflow(workflow_id).groups[0].tasks[0]
    assert (ended.status, ended.exit_code) == ("FAILED_PREEMPTED", 3006)
    assert ended.message == (
        f"Preempted by the drain of node {tray} by admin: 'PSU swap'. Not placed again: on a "
        "Kubernetes backend corral cannot put a gang back in its queue yet "
        "(docs/kubernetes.md#not-yet)."
    )


def test_without_read_on_compute_domains_imex_status_is_not_a_source(
    fake_kube: FakeKubeServer, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_kube.deny("list", "resource.nvidia.com", "computedomains")
    access = KubernetesAccess(kubeconfig=str(kubeconfig))
    backend = connect_backend("b", access, "default")
    try:
        assert backend.compute_domains is None
        assert backend.nodes() == []  # no Nodes, and no error for the missing permission
    finally:
        backend.close()
    printed = capsys.readouterr().out
    assert "corral may not list and watch computedomains: IMEX status is not read" in printed
    assert "resources: [computedomains]" in printed


def _pod_of(w: KubeWorld, workflow_id: str) -> dict[str, Any] | None:
    stored = w.workflow(workflow_id)
    name = stored.groups[0].tasks[0].pod_name
    return w.fake.get_object("v1", "Pod", stored.namespace, name)


def test_a_drain_annotates_the_pod_with_its_notice_and_deletes_it_once_ready(
    kube_world: KubeWorld,
) -> None:
    """docs/checkpoints.md#the-notice: the notice is on the pod before the pod is deleted; the
    deletion waits for the task's "ready" (or the deadline: the test above)."""
    w = kube_world
    workflow_id = w.submit(workflow_yaml([{"name": "g", "tasks": [task("t", seconds=3600)]}]))
    w.run_cycles(lambda: w.workflow(workflow_id).groups[0].status == "RUNNING")
    tray = w.workflow(workflow_id).groups[0].tasks[0].node
    status, body = w.api.call(
        "POST", f"/api/nodes/{tray}/drain", json={"reason": "PSU swap", "grace_seconds": 60}
    )
    assert status == 200, body
    w.run_cycles(lambda: w.workflow(workflow_id).groups[0].notice_deadline is not None)
    started = w.clock()
    pod = _pod_of(w, workflow_id)
    assert pod is not None
    notice = json.loads(pod["metadata"]["annotations"]["corral.dev/stop-notice"])
    assert (notice["seconds"], notice["signal"]) == (60.0, "")  # no signal unless asked for
    assert notice["reason"] == f"Preempted by the drain of node {tray} by admin: 'PSU swap'."
    for _ in range(3):
        w.cycle()
    assert _pod_of(w, workflow_id) is not None  # it waits for the task
    status, body = w.api.call("GET", f"/api/workflow/{workflow_id}/task/t/notice")
    assert status == 200, body
    assert body["notice"]["deadline"] == notice["deadline"] and body["ready_at"] is None
    status, body = w.api.call("POST", f"/api/workflow/{workflow_id}/task/t/ready")
    assert status == 200, body
    w.run_cycles(lambda: w.workflow(workflow_id).status not in ("PENDING", "RUNNING"))
    assert (w.clock() - started).total_seconds() < 60  # before the deadline
    assert _pod_of(w, workflow_id) is None
    ended = w.workflow(workflow_id).groups[0].tasks[0]
    assert (ended.status, ended.exit_code) == ("FAILED_PREEMPTED", 3006)
    status, body = w.api.call("POST", f"/api/workflow/{workflow_id}/task/t/ready")
    assert status == 409, body  # it stopped already
