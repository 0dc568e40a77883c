"""The kubernetes backend end to end: workflows submitted over the API run on the fake API
server through lightkube, placed by a fake KAI, run by a fake kubelet (``fake_kai.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from corral.domain.schemas.objects import manifest_problems
from corral.domain.topology.kai_objects import queue_manifests, topology_manifests
from corral.scheduler.queues import pool_queues
from tests.backends.kubernetes.kube_world import NAMESPACE, KubeWorld, stored_shape
from tests.scheduler.helpers import queue_of
from tests.services.lifecycle_world import CLIQUE

USE_CASES = [
    "nvl72-single-rack.yaml",
    "nvl72-two-instances.yaml",
    "nvl72-one-zone.yaml",
    "nvl72-best-effort.yaml",
]
QUEUE = ("scheduling.run.ai/v2", "Queue")
TOPOLOGY = ("kai.scheduler/v1alpha1", "Topology")
NAMESPACED_TEMPLATE_KINDS = ("ComputeDomain",)


def _key(manifest: Mapping[str, Any]) -> tuple[str, str, str]:
    return (manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"])


def _as_applied(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A stored manifest as it lands in the backend's namespace."""
    metadata = {**manifest["metadata"], "namespace": NAMESPACE}
    return {**manifest, "metadata": metadata}


def _contains(actual: Any, expected: Any, path: str = "") -> list[str]:
    """Where ``actual`` differs from ``expected``, ignoring keys only ``actual`` has (the API
    server's schema defaults)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return [
            problem
            for key, value in expected.items()
            for problem in (
                [f"{path}.{key} missing"]
                if key not in actual
                else _contains(actual[key], value, f"{path}.{key}")
            )
        ]
    if isinstance(expected, list) and isinstance(actual, list) and len(actual) == len(expected):
        return [
            p
            for i, (a, e) in enumerate(zip(actual, expected, strict=True))
            for p in _contains(a, e, f"{path}[{i}]")
        ]
    return [] if actual == expected else [f"{path}: {actual!r} != {expected!r}"]


@pytest.mark.parametrize("example", USE_CASES)
def test_use_cases_put_exactly_the_stored_objects_in_the_cluster(
    kube_world: KubeWorld, example: str
) -> None:
    w = kube_world
    workflow_id = w.submit_example(example)
    # The first tick syncs queues and topologies, then creates the first groups' objects; a
    # transient error (a timeout from the fake API server on a loaded machine) is retried at
    # the next tick, up to 5 times.
    w.run_until(
        lambda: any(g.status == "SCHEDULING" for g in w.workflow(workflow_id).groups),
        max_ticks=5,
    )
    w.settle()
    workflow = w.workflow(workflow_id)
    created = [g for g in workflow.groups if g.status == "SCHEDULING"]
    assert created, [g.status for g in workflow.groups]
    stored = sorted((_as_applied(m) for g in created for m in g.manifests), key=_key)
    in_cluster = sorted((stored_shape(o) for o in w.group_objects()), key=_key)

    # Pods, PodGroups, Services and Secrets are exactly what was stored (what the embedded
    # scheduler places); a ComputeDomain gains the DRA CRD's defaults, as on a real server.
    assert [_key(o) for o in in_cluster] == [_key(m) for m in stored]
    for found, expected in zip(in_cluster, stored, strict=True):
        if found["kind"] in NAMESPACED_TEMPLATE_KINDS:
            assert _contains(found, expected) == []
        else:
            assert found == expected
        assert manifest_problems(found) == []

    state = w.runtime.configs.state()
    queues = sorted((stored_shape(q) for q in w.fake.objects(*QUEUE)), key=_key)
    assert queues == sorted(queue_manifests(state, "default"), key=_key)
    pool_queue_names = {q.name for q in pool_queues(state)}
    consumed = [q for q in pool_queues(state) if q.name in {x["metadata"]["name"] for x in queues}]
    assert [queue_of(q) for q in queues if q["metadata"]["name"] in pool_queue_names] == consumed
    topologies = [stored_shape(t) for t in w.fake.objects(*TOPOLOGY)]
    assert topologies == topology_manifests(state, "default")
    levels = [level["nodeLabel"] for level in topologies[0]["spec"]["levels"]]
    assert levels == [key["label"] for key in state_pool(w, "nvl72")["topology_keys"]]
    assert all(manifest_problems(o) == [] for o in [*queues, *topologies])

    w.run_cycles(
        lambda: w.workflow(workflow_id).status == "COMPLETED" and not w.group_objects(),
        code_of=lambda _pod: 0,
    )
    for group in w.workflow(workflow_id).groups:
        assert group.status == "COMPLETED"
        assert {t.status for t in group.tasks} == {"COMPLETED"}
        # The lead's exit code ends the group; tasks ended by it may not have reported one.
        assert [t.exit_code for t in group.tasks if t.lead] == [0]
        assert {t.exit_code for t in group.tasks} <= {0, None}


def state_pool(w: KubeWorld, name: str) -> Mapping[str, Any]:
    from corral.domain.configs.types import ConfigType

    return w.runtime.configs.state()[ConfigType.POOL][name]  # type: ignore[no-any-return]


def test_uc1_runs_in_one_clique_with_nodes_shown_per_task(kube_world: KubeWorld) -> None:
    w = kube_world
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    w.run_cycles(lambda: w.workflow(workflow_id).status == "RUNNING")
    [group] = w.workflow(workflow_id).groups
    nodes = [task.node for task in group.tasks]
    assert None not in nodes and len(set(nodes)) == 4
    assert len({w.node_labels(str(node))[CLIQUE] for node in nodes}) == 1
    pods = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in w.fake.objects("v1", "Pod")}
    assert {task.pod_name: task.node for task in group.tasks} == pods


def test_compute_domain_exists_before_pods_and_is_deleted_after_template_removal(
    kube_world: KubeWorld,
) -> None:
    w = kube_world
    workflow_id = w.submit_example("compute-domain.yaml", set=["trays=3"])
    w.controller.tick()
    [group] = w.workflow(workflow_id).groups
    setup = ("Node", "Queue", "Topology", "PriorityClass")
    mine = [j for j in w.fake.journal if j.kind not in setup]
    assert [(j.verb, j.kind) for j in mine] == [
        ("apply", "ComputeDomain"),
        ("apply", "PodGroup"),
        ("apply", "Pod"),
        ("apply", "Pod"),
        ("apply", "Pod"),
        ("apply", "Service"),
    ]
    domain = w.fake.get_object(
        "resource.nvidia.com/v1beta1", "ComputeDomain", NAMESPACE, mine[0].name
    )
    assert domain is not None
    assert domain["metadata"]["labels"]["osmo.group_uuid"] == group.uuid

    # The admin drops the group template while the workflow runs: cleanup must not need it.
    w.patch_pool("nvl72", {"common_group_templates": []})
    w.run_cycles(lambda: w.workflow(workflow_id).status == "RUNNING")
    assert w.fake.get_object(*_key_of(mine[0])) is not None

    start = len(w.fake.journal)
    w.run_cycles(
        lambda: w.workflow(workflow_id).status == "COMPLETED" and not w.group_objects(),
        code_of=lambda _pod: 0,
    )
    deletes = [(j.verb, j.kind) for j in w.fake.journal[start:] if j.verb == "delete"]
    assert deletes == [
        ("delete", "Pod"),
        ("delete", "Pod"),
        ("delete", "Pod"),
        ("delete", "Service"),
        ("delete", "PodGroup"),
        ("delete", "ComputeDomain"),
    ]
    assert w.fake.get_object(*_key_of(mine[0])) is None
    assert w.group_objects() == []


def _key_of(entry: Any) -> tuple[str, str, str, str]:
    return (entry.api_version, entry.kind, entry.namespace, entry.name)
