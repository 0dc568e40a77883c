"""Seed 003's four topology use cases and the ComputeDomain group template, end to end: submitted
through the API, placed by the scheduler on the example cluster, run (simulated), cleaned up."""

from __future__ import annotations

from tests.services.lifecycle_world import CLIQUE, RACK, SPINE, ZONE, World


def nodes_by_task(world: World, workflow_id: str) -> dict[str, str]:
    return {
        task.name: task.node
        for group in world.workflow(workflow_id).groups
        for task in group.tasks
        if task.node is not None
    }


def label_values(world: World, nodes: list[str], label: str) -> set[str]:
    return {world.node_labels(node)[label] for node in nodes}


def run_to_running(world: World, workflow_id: str) -> dict[str, str]:
    world.run_until(lambda: world.workflow(workflow_id).status == "RUNNING")
    placed = nodes_by_task(world, workflow_id)
    assert len(placed) == sum(len(g.tasks) for g in world.workflow(workflow_id).groups)
    return placed


def shards(placed: dict[str, str], model: int) -> list[str]:
    return [node for task, node in placed.items() if task.startswith(f"model{model}-")]


def test_uc1_single_rack_runs_in_one_clique_and_leaves_nothing(world: World) -> None:
    workflow_id = world.submit_example("nvl72-single-rack.yaml")
    placed = run_to_running(world, workflow_id)
    assert len(label_values(world, list(placed.values()), CLIQUE)) == 1
    world.finish(workflow_id)
    found = world.workflow(workflow_id)
    assert found.status == "COMPLETED"
    assert [t.status for g in found.groups for t in g.tasks] == ["COMPLETED"] * 4
    assert world.runtime.objects.all() == []


def test_uc2_each_instance_in_its_own_clique(world: World) -> None:
    workflow_id = world.submit_example("nvl72-two-instances.yaml")
    placed = run_to_running(world, workflow_id)
    for model in (1, 2):
        assert len(shards(placed, model)) == 4
        assert len(label_values(world, shards(placed, model), CLIQUE)) == 1
    world.finish(workflow_id)
    assert world.workflow(workflow_id).status == "COMPLETED"
    assert world.runtime.objects.all() == []


def test_uc3_lands_in_the_only_zone_big_enough(world: World) -> None:
    # zone-b has one rack; leave it 6 free trays: room for one model instance, not both.
    zone_b = world.gb200_nodes(**{ZONE: "zone-b"})
    world.occupy(zone_b[6:], gpus=4)
    workflow_id = world.submit_example("nvl72-one-zone.yaml")
    placed = run_to_running(world, workflow_id)
    assert label_values(world, list(placed.values()), ZONE) == {"zone-a"}
    for model in (1, 2):
        assert len(label_values(world, shards(placed, model), CLIQUE)) == 1
    group = world.workflow(workflow_id).groups[0]
    assert group.domains is not None and group.domains[""] == "zone-a"
    world.finish(workflow_id)
    assert world.workflow(workflow_id).status == "COMPLETED"
    assert {o.labels.get("app") for o in world.runtime.objects.all()} == {"filler"}


def test_uc4_best_effort_schedules_when_no_preference_can_be_met(world: World) -> None:
    # Every rack keeps 3 free trays: no model instance fits in one rack, and no spine holds 8.
    for rack in sorted({world.node_labels(n)[RACK] for n in world.gb200_nodes()}):
        world.occupy(world.gb200_nodes(**{RACK: rack})[3:], gpus=4)
    workflow_id = world.submit_example("nvl72-best-effort.yaml")
    placed = run_to_running(world, workflow_id)
    nodes = list(placed.values())
    assert len(nodes) == 8 and len(set(nodes)) == 8
    for model in (1, 2):
        assert len(label_values(world, shards(placed, model), RACK)) > 1
    assert len(label_values(world, nodes, SPINE)) > 1
    world.finish(workflow_id)
    assert world.workflow(workflow_id).status == "COMPLETED"


def test_a_compute_domain_exists_before_the_pods_and_is_gone_after(world: World) -> None:
    workflow_id = world.submit_example("compute-domain.yaml", set=["trays=3"])
    world.controller.tick()
    group = world.workflow(workflow_id).groups[0]
    objects = world.runtime.objects.of_group(group.uuid)
    kinds = [o.kind for o in objects]
    assert kinds == ["ComputeDomain", "PodGroup", "Pod", "Pod", "Pod", "Service"]
    domain_id = objects[0].id
    assert all(domain_id < o.id for o in objects if o.kind == "Pod")
    assert {o.node is not None for o in objects if o.kind == "Pod"} == {True}

    # The admin drops the group template while the workflow runs: cleanup must not need it.
    world.patch_pool("nvl72", {"common_group_templates": []})
    status, pool = world.api.call("GET", "/api/configs/pool/nvl72")
    assert status == 200 and pool["common_group_templates"] == []
    world.run_until(lambda: world.workflow(workflow_id).status == "RUNNING")
    assert world.runtime.objects.of_group(group.uuid)[0].kind == "ComputeDomain"

    world.finish(workflow_id)
    assert world.workflow(workflow_id).status == "COMPLETED"
    assert world.runtime.objects.of_group(group.uuid) == []
    assert world.runtime.objects.all() == []
