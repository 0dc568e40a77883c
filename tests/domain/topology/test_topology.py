"""Task group topology -> KAI PodGroup (osmo-topology.md A6-A9, seed 003's use cases)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain.topology.podgroup import (
    GangTask,
    PodGroupPlan,
    PoolTopologyKey,
    TopologyRequirement,
    build_pod_group,
    pod_group_of,
    queue_name,
    topology_crd_name,
    validate_requirements,
    validate_uniform_keys,
)
from corral.errors import UserError
from tests.k8s_schemas import assert_valid_manifest

Z, S, R, C = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/spine",
    "topology.kubernetes.io/rack",
    "nvidia.com/gpu-clique",
)
POOL_KEYS = (
    PoolTopologyKey("zone", Z),
    PoolTopologyKey("spine", S),
    PoolTopologyKey("rack", R),
    PoolTopologyKey("gpu-clique", C),
)
T = "osmo-pool-osmo-prod-gb200-topology"
UUID = "3f2a9c1e7b4d4e0f9a8b6c5d4e3f2a1b"
QUEUE = "osmo-pool-osmo-prod-gb200"
QUEUE_LABELS = {"kai.scheduler/queue": QUEUE, "runai/queue": QUEUE}
LABEL_VALUE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def req(key: str, group: str = "default", *, required: bool = True) -> TopologyRequirement:
    return TopologyRequirement(key=key, group=group, required=required)


def tasks(prefix: str, count: int, *requirements: TopologyRequirement) -> list[GangTask]:
    return [
        GangTask(f"{prefix}-shard{i}", f"{prefix}-shard{i}-pod", tuple(requirements))
        for i in range(1, count + 1)
    ]


def build(group: list[GangTask], **extra: Any) -> PodGroupPlan:
    plan = build_pod_group(
        group_uuid=UUID,
        namespace="osmo-prod",
        queue=QUEUE,
        priority_class="osmo-normal",
        pool_keys=POOL_KEYS,
        tasks=group,
        topology_name=T,
        **extra,
    )
    assert_valid_manifest(plan.manifest)
    return plan


def pod_group(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": UUID, "namespace": "osmo-prod", "labels": QUEUE_LABELS},
        "spec": {"queue": QUEUE, "priorityClassName": "osmo-normal", **spec},
    }


def required(label: str) -> dict[str, str]:
    return {"topology": T, "requiredTopologyLevel": label}


def preferred(label: str) -> dict[str, str]:
    return {"topology": T, "preferredTopologyLevel": label}


def subgroup_of(plan: PodGroupPlan) -> dict[str, str | None]:
    return {
        task: labels.get("kai.scheduler/subgroup-name") for task, labels in plan.pod_labels.items()
    }


def test_topology_crd_name_embeds_namespace_and_pool() -> None:
    assert topology_crd_name("osmo-prod", "gb200") == T


# -- seed 003's use cases, exactly as osmo-topology.md A8 -------------------------------------


def test_uc1_single_nvl72_rack() -> None:
    group = tasks("model1", 4, req("gpu-clique"))
    plan = build(group)
    assert plan.manifest == pod_group({"minMember": 4, "topologyConstraint": required(C)})
    assert plan.pod_labels == {task.name: QUEUE_LABELS for task in group}
    assert plan.pod_annotations == {task.name: {"pod-group-name": UUID} for task in group}


def test_uc2_two_model_instances_each_in_its_own_clique() -> None:
    group = tasks("model1", 4, req("gpu-clique", "model-1-group")) + tasks(
        "model2", 4, req("gpu-clique", "model-2-group")
    )
    plan = build(group)
    assert plan.manifest == pod_group(
        {
            "subGroups": [
                {"name": "model-1-group", "minMember": 4, "topologyConstraint": required(C)},
                {"name": "model-2-group", "minMember": 4, "topologyConstraint": required(C)},
            ]
        }
    )
    assert plan.pod_labels["model1-shard3"] == {
        **QUEUE_LABELS,
        "kai.scheduler/subgroup-name": "model-1-group",
    }
    assert subgroup_of(plan) == {
        **{f"model1-shard{i}": "model-1-group" for i in range(1, 5)},
        **{f"model2-shard{i}": "model-2-group" for i in range(1, 5)},
    }
    assert plan.pod_annotations["model2-shard4"] == {"pod-group-name": UUID}


def test_uc3_whole_workflow_in_one_zone_each_instance_in_a_clique() -> None:
    # Entries are listed finest first, as in the reference: their order does not matter.
    group = tasks(
        "model1", 4, req("gpu-clique", "model-1-group"), req("zone", "workflow-group")
    ) + tasks("model2", 4, req("gpu-clique", "model-2-group"), req("zone", "workflow-group"))
    plan = build(group)
    assert plan.manifest == pod_group(
        {
            "topologyConstraint": required(Z),
            "subGroups": [
                {
                    "name": "workflow-group-model-1-group",
                    "minMember": 4,
                    "topologyConstraint": required(C),
                },
                {
                    "name": "workflow-group-model-2-group",
                    "minMember": 4,
                    "topologyConstraint": required(C),
                },
            ],
        }
    )
    assert set(subgroup_of(plan).values()) == {
        "workflow-group-model-1-group",
        "workflow-group-model-2-group",
    }


def test_uc4_best_effort_preferred_rack_per_instance_and_spine_for_all() -> None:
    def spec(model: str) -> tuple[TopologyRequirement, ...]:
        return (
            req("rack", f"{model}-group", required=False),
            req("spine", "workflow-group", required=False),
        )

    group = tasks("model1", 4, *spec("model-1")) + tasks("model2", 4, *spec("model-2"))
    plan = build(group)
    assert plan.manifest == pod_group(
        {
            "topologyConstraint": preferred(S),
            "subGroups": [
                {
                    "name": "workflow-group-model-1-group",
                    "minMember": 4,
                    "topologyConstraint": preferred(R),
                },
                {
                    "name": "workflow-group-model-2-group",
                    "minMember": 4,
                    "topologyConstraint": preferred(R),
                },
            ],
        }
    )


def test_uc5_scoped_group_names_and_pass_through_zone() -> None:
    group = [
        GangTask("task-1", "p1", (req("zone", "zone-a"), req("rack", "rack-group-1"))),
        GangTask("task-2", "p2", (req("zone", "zone-a"), req("rack", "rack-group-1"))),
        GangTask("task-3", "p3", (req("zone", "zone-b"), req("rack", "rack-group-1"))),
        GangTask("task-4", "p4", (req("zone", "zone-b"), req("rack", "rack-group-2"))),
    ]
    plan = build(group)
    assert plan.manifest["spec"] == {
        "queue": QUEUE,
        "priorityClassName": "osmo-normal",
        "subGroups": [
            {"name": "zone-a-rack-group-1", "minMember": 2, "topologyConstraint": required(R)},
            {"name": "zone-b", "minMember": 2, "topologyConstraint": required(Z)},
            {
                "name": "zone-b-rack-group-1",
                "parent": "zone-b",
                "minMember": 1,
                "topologyConstraint": required(R),
            },
            {
                "name": "zone-b-rack-group-2",
                "parent": "zone-b",
                "minMember": 1,
                "topologyConstraint": required(R),
            },
        ],
    }
    assert subgroup_of(plan) == {
        "task-1": "zone-a-rack-group-1",
        "task-2": "zone-a-rack-group-1",
        "task-3": "zone-b-rack-group-1",
        "task-4": "zone-b-rack-group-2",
    }


def test_three_levels_branching_at_several_depths() -> None:
    def path(spine: str, rack: str) -> tuple[TopologyRequirement, ...]:
        return (req("zone", "w"), req("spine", spine), req("rack", rack))

    group = (
        tasks("a", 2, *path("s1", "r0"))
        + tasks("b", 2, *path("s1", "r1"))
        + tasks("c", 2, *path("s2", "r0"))
    )
    spec = build(group).manifest["spec"]
    assert spec["topologyConstraint"] == required(Z)
    assert "minMember" not in spec
    assert spec["subGroups"] == [
        {"name": "w-s1", "minMember": 4, "topologyConstraint": required(S)},
        {"name": "w-s1-r0", "parent": "w-s1", "minMember": 2, "topologyConstraint": required(R)},
        {"name": "w-s1-r1", "parent": "w-s1", "minMember": 2, "topologyConstraint": required(R)},
        {"name": "w-s2-r0", "minMember": 2, "topologyConstraint": required(R)},
    ]


def test_no_topology_and_empty_topology_give_a_plain_gang() -> None:
    for group in (tasks("t", 3), tasks("t", 3, *())):
        plan = build(group, labels={"osmo.group_uuid": UUID, "kai.scheduler/queue": "user"})
        assert plan.manifest["spec"] == {
            "queue": QUEUE,
            "priorityClassName": "osmo-normal",
            "minMember": 3,
        }
        # System labels are kept; the scheduler's queue labels win over colliding ones.
        assert plan.manifest["metadata"]["labels"] == {"osmo.group_uuid": UUID, **QUEUE_LABELS}
        assert all(labels == QUEUE_LABELS for labels in plan.pod_labels.values())


def test_no_topology_needs_no_pool_keys() -> None:
    plan = build_pod_group(
        group_uuid=UUID,
        namespace="osmo-prod",
        queue=QUEUE,
        priority_class="osmo-low",
        pool_keys=(),
        tasks=tasks("t", 1),
        topology_name=T,
    )
    assert plan.manifest["spec"]["minMember"] == 1


def test_single_task_with_topology_gets_a_top_level_constraint() -> None:
    plan = build(tasks("solo", 1, req("rack")))
    assert plan.manifest["spec"]["topologyConstraint"] == required(R)
    assert plan.manifest["spec"]["minMember"] == 1


def test_same_group_at_every_level_collapses_to_the_finest_level() -> None:
    plan = build(tasks("t", 4, req("zone"), req("rack"), req("gpu-clique")))
    assert plan.manifest["spec"]["topologyConstraint"] == required(C)
    assert "subGroups" not in plan.manifest["spec"]


def test_task_without_topology_joins_a_non_branching_group() -> None:
    group = [*tasks("t", 3, req("rack", "r")), GangTask("helper", "helper-pod", ())]
    spec = build(group).manifest["spec"]
    assert spec["minMember"] == 4
    assert spec["topologyConstraint"] == required(R)
    assert "subGroups" not in spec


# -- A9 fixes, one test each ------------------------------------------------------------------


def test_a9_required_coarse_and_preferred_fine_in_one_chain_keep_both() -> None:
    plan = build(tasks("t", 4, req("zone"), req("rack", required=False)))
    assert plan.manifest["spec"]["topologyConstraint"] == {
        "topology": T,
        "requiredTopologyLevel": Z,
        "preferredTopologyLevel": R,
    }


def test_a9_pass_through_chain_below_a_branch_keeps_its_required_level() -> None:
    group = tasks("a", 2, req("zone", "za"), req("rack", "r1", required=False)) + tasks(
        "b", 2, req("zone", "zb"), req("rack", "r1", required=False)
    )
    assert build(group).manifest["spec"]["subGroups"] == [
        {
            "name": "za-r1",
            "minMember": 2,
            "topologyConstraint": {
                "topology": T,
                "requiredTopologyLevel": Z,
                "preferredTopologyLevel": R,
            },
        },
        {
            "name": "zb-r1",
            "minMember": 2,
            "topologyConstraint": {
                "topology": T,
                "requiredTopologyLevel": Z,
                "preferredTopologyLevel": R,
            },
        },
    ]


def test_a9_preferred_coarse_under_required_fine_keeps_only_the_required_level() -> None:
    plan = build(tasks("t", 2, req("zone", required=False), req("rack")))
    assert plan.manifest["spec"]["topologyConstraint"] == required(R)


def test_a9_tasks_without_topology_in_a_branching_group_get_an_unconstrained_leaf() -> None:
    group = [
        *tasks("m1", 2, req("gpu-clique", "m1")),
        GangTask("logger", "logger-pod", ()),
        *tasks("m2", 2, req("gpu-clique", "m2")),
        GangTask("monitor", "monitor-pod", ()),
    ]
    plan = build(group)
    assert plan.manifest["spec"]["subGroups"] == [
        {"name": "m1", "minMember": 2, "topologyConstraint": required(C)},
        {"name": "m2", "minMember": 2, "topologyConstraint": required(C)},
        {"name": "no-topology", "minMember": 2},
    ]
    assert subgroup_of(plan)["logger"] == "no-topology"
    assert subgroup_of(plan)["monitor"] == "no-topology"


def test_a9_unconstrained_leaf_under_a_shared_prefix_and_beside_a_user_group_of_its_name() -> None:
    group = [
        *tasks("a", 1, req("zone", "w"), req("rack", "no-topology")),
        *tasks("b", 1, req("zone", "w"), req("rack", "x")),
        GangTask("helper", "helper-pod", ()),
    ]
    plan = build(group)
    spec = plan.manifest["spec"]
    assert spec["topologyConstraint"] == required(Z)
    names = [subgroup["name"] for subgroup in spec["subGroups"]]
    assert names == ["w-no-topology", "w-x", "no-topology"]
    assert subgroup_of(plan)["helper"] == "no-topology"


def test_a9_group_names_that_join_to_the_same_string_do_not_collide() -> None:
    group = [
        GangTask("t1", "p1", (req("zone", "a"), req("rack", "b-c"))),
        GangTask("t2", "p2", (req("zone", "a-b"), req("rack", "c"))),
    ]
    plan = build(group)
    assert plan.manifest["spec"]["subGroups"] == [
        {"name": "a-b-c-8d61c0d4f8", "minMember": 1, "topologyConstraint": required(R)},
        {"name": "a-b-c-0ad33c09e7", "minMember": 1, "topologyConstraint": required(R)},
    ]
    assert subgroup_of(plan) == {"t1": "a-b-c-8d61c0d4f8", "t2": "a-b-c-0ad33c09e7"}


def test_a9_subgroup_names_are_lowercase_labels_of_at_most_63_characters() -> None:
    long = "x" * 70
    group = [
        GangTask("t1", "p1", (req("zone", "Model_A"),)),
        GangTask("t2", "p2", (req("zone", long),)),
        GangTask("t3", "p3", (req("zone", "-.-"),)),
    ]
    names = [subgroup["name"] for subgroup in build(group).manifest["spec"]["subGroups"]]
    assert names[0] == "model-a-a5270abf2d"
    assert names[1] == "x" * 52 + "-5c3fe00f41"
    assert len(names[1]) == 63
    assert re.fullmatch(r"[0-9a-f]{10}", names[2])


def test_a9_duplicate_key_in_one_resource_spec_is_rejected() -> None:
    with pytest.raises(UserError) as error:
        validate_requirements("model-1", [req("rack", "a"), req("rack", "b")], POOL_KEYS, "gb200")
    assert error.value.message == (
        'Topology key "rack" appears more than once in resource "model-1" (groups "a" and "b"); '
        "list each key once. To put tasks into different groups, give them different resource "
        "specs."
    )


def test_a9_conflicting_requirement_types_in_one_resource_spec_are_rejected() -> None:
    with pytest.raises(UserError) as error:
        validate_requirements(
            "model-1", [req("rack"), req("rack", required=False)], POOL_KEYS, "gb200"
        )
    assert error.value.message == (
        'Topology key "rack" in resource "model-1" is both required and preferred; '
        "list each key once with one requirementType."
    )


def test_a9_conflicting_requirement_types_across_tasks_of_one_node_are_rejected() -> None:
    group = [
        GangTask("t1", "p1", (req("zone", "w"), req("rack", "a"))),
        GangTask("t2", "p2", (req("zone", "w", required=False), req("rack", "b"))),
    ]
    with pytest.raises(UserError) as error:
        build(group)
    assert error.value.message == (
        'Topology key "zone" group "w" is required for task "t1" but preferred for task "t2"; '
        "tasks that share a topology group must use the same requirementType."
    )


def test_same_group_name_under_different_parents_may_differ_in_requirement_type() -> None:
    group = [
        GangTask("t1", "p1", (req("zone", "a"), req("rack", "r"))),
        GangTask("t2", "p2", (req("zone", "b"), req("rack", "r", required=False))),
    ]
    assert [sg["topologyConstraint"] for sg in build(group).manifest["spec"]["subGroups"]] == [
        required(R),
        {"topology": T, "requiredTopologyLevel": Z, "preferredTopologyLevel": R},
    ]


# -- every other error, with its exact message ------------------------------------------------


def test_unknown_key_in_a_resource_spec_uses_osmo_message() -> None:
    with pytest.raises(UserError) as error:
        validate_requirements("default", [req("row")], POOL_KEYS, "gb200")
    assert error.value.message == (
        'Topology key "row" in resource "default" is not available in pool "gb200". '
        "Available topology keys: ['gpu-clique', 'rack', 'spine', 'zone']"
    )


def test_any_key_is_unknown_in_a_pool_without_keys() -> None:
    with pytest.raises(UserError) as error:
        validate_requirements("default", [req("gpu-clique")], (), "cpu-pool")
    assert error.value.message == (
        'Topology key "gpu-clique" in resource "default" is not available in pool "cpu-pool". '
        "Available topology keys: []"
    )


def test_valid_requirements_pass() -> None:
    validate_requirements("model-1", [req("zone", "w"), req("rack", "m1")], POOL_KEYS, "gb200")
    validate_requirements("default", [], (), "cpu-pool")


def test_different_key_sets_are_rejected_with_osmo_message() -> None:
    group = [
        GangTask("m1", "p1", (req("zone"), req("rack", "a"))),
        GangTask("m2", "p2", (req("zone"),)),
        GangTask("cpu", "p3", ()),
    ]
    expected = (
        "Topology validation failed: All tasks must use the same topology keys. "
        "Found different key sets: ['rack, zone', 'zone'] (first used by tasks \"m1\", \"m2\"). "
        "Either all tasks should have topology requirements with the same keys, "
        "or no tasks should have topology requirements."
    )
    with pytest.raises(UserError) as error:
        validate_uniform_keys(group)
    assert error.value.message == expected
    with pytest.raises(UserError) as error:
        build(group)
    assert error.value.message == expected


def test_tasks_without_topology_are_exempt_from_the_uniform_key_rule() -> None:
    validate_uniform_keys([GangTask("m1", "p1", (req("zone"),)), GangTask("cpu", "p2", ())])


def test_unknown_key_in_a_task_uses_osmo_message() -> None:
    with pytest.raises(UserError) as error:
        build([GangTask("t1", "p1", (req("row"),))])
    assert error.value.message == (
        'Topology validation failed: Topology key "row" in task "t1" not found in pool. '
        "Available keys: ['gpu-clique', 'rack', 'spine', 'zone']"
    )


def test_duplicate_key_in_a_task_is_rejected() -> None:
    with pytest.raises(UserError) as error:
        build([GangTask("t1", "p1", (req("rack", "a"), req("rack", "a")))])
    assert error.value.message == (
        'Topology key "rack" appears more than once in task "t1" (groups "a" and "a"); '
        "list each key once. To put tasks into different groups, give them different resource "
        "specs."
    )


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ([], "A task group needs at least one task to build its PodGroup."),
        (
            [GangTask("t", "p1"), GangTask("t", "p2")],
            'Duplicate task name "t" in the task group; make it unique.',
        ),
        (
            [GangTask("t1", "p"), GangTask("t2", "p")],
            'Duplicate pod name "p" in the task group; make it unique.',
        ),
    ],
)
def test_malformed_groups_are_rejected(group: list[GangTask], message: str) -> None:
    with pytest.raises(UserError) as error:
        build(group)
    assert error.value.message == message


# -- property: every task in exactly one leaf, a well-formed tree -----------------------------

GROUP_NAMES = st.sampled_from(["a", "b", "a-b", "b-c", "c", "Model_1", "default", "z" * 70, ""])


@st.composite
def random_groups(draw: st.DrawFn) -> list[GangTask]:
    keys = draw(st.lists(st.sampled_from(POOL_KEYS), min_size=1, max_size=4, unique=True))
    # One requirementType per key keeps every tree node consistent (A9: conflicts are rejected).
    kinds = {pool_key.key: draw(st.booleans()) for pool_key in keys}
    count = draw(st.integers(min_value=1, max_value=8))
    group = []
    for i in range(count):
        if draw(st.booleans()) and draw(st.booleans()):
            requirements: tuple[TopologyRequirement, ...] = ()
        else:
            requirements = tuple(
                req(pool_key.key, draw(GROUP_NAMES), required=kinds[pool_key.key])
                for pool_key in draw(st.permutations(keys))
            )
        group.append(GangTask(f"task-{i}", f"pod-{i}", requirements))
    return group


@settings(max_examples=150, deadline=None)
@given(random_groups())
def test_property_every_task_lands_in_exactly_one_leaf(group: list[GangTask]) -> None:
    plan = build(group)  # also validates the manifest against the PodGroup CRD
    spec = plan.manifest["spec"]
    assigned = subgroup_of(plan)
    assert set(assigned) == {task.name for task in group}
    subgroups = spec.get("subGroups", [])
    if not subgroups:
        assert spec["minMember"] == len(group)
        assert all(name is None for name in assigned.values())
        return
    assert "minMember" not in spec
    names = [subgroup["name"] for subgroup in subgroups]
    assert len(names) == len(set(names))
    for name in names:
        assert len(name) <= 63
        assert LABEL_VALUE.fullmatch(name)
    parents = {subgroup["parent"] for subgroup in subgroups if "parent" in subgroup}
    assert parents <= set(names)
    leaves = {sg["name"]: sg["minMember"] for sg in subgroups if sg["name"] not in parents}
    assert sum(leaves.values()) == len(group)
    assert all(name in leaves for name in assigned.values())
    assert Counter(assigned.values()) == leaves


def test_scheduler_object_names_keep_osmo_names_when_valid_and_hash_otherwise() -> None:
    assert queue_name("osmo-prod", "gb200") == QUEUE
    # OSMO would emit osmo-pool-default-heterogeneous_pool: not a valid object name.
    hashed = queue_name("default", "heterogeneous_pool")
    assert re.fullmatch(r"osmo-pool-default-heterogeneous-pool-[0-9a-f]{10}", hashed)
    assert hashed != queue_name("default", "heterogeneous-pool")
    long_pool = "p" * 80
    assert len(topology_crd_name("default", long_pool)) <= 63


def test_the_pod_group_found_is_kais_not_another_apis_of_that_name() -> None:
    """A group template may add the scheduler-plugins' PodGroup: it is not the gang."""
    plugins = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup"}
    kai = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "spec": {}}
    pod = {"apiVersion": "v1", "kind": "Pod"}
    assert pod_group_of([plugins, pod, kai]) is kai
    assert pod_group_of([plugins, pod]) is None
