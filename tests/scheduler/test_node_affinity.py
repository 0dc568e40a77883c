"""Node affinity (required: a filter; preferred: a score), ``pods`` capacity and extended
resources, with Kubernetes' meaning."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.platform.node_affinity import read_node_affinity
from corral.errors import UserError
from corral.scheduler import ClusterSnapshot, Pending, Placement, place_group
from tests.conftest import REPO
from tests.scheduler.helpers import CLIQUE, LEVELS, RACK, SPINE, ZONE, node, pod, pod_group


def _placed(outcome: Placement | Pending) -> dict[str, str]:
    assert isinstance(outcome, Placement), outcome
    return outcome.nodes()


def _place_and_bind(snapshot: ClusterSnapshot, one_pod: dict[str, Any]) -> dict[str, str]:
    outcome = place_group(snapshot, pod_group(1), [one_pod])
    assert isinstance(outcome, Placement), outcome
    snapshot.bind(outcome.bindings)
    return outcome.nodes()


def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": term} for term in terms]
        }
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    found: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    return found


NODES = [
    node("a1", labels={"zone": "a", "gen": "3"}),
    node("a2", labels={"zone": "a", "gen": "4", "fast": ""}),
    node("b1", labels={"zone": "b", "gen": "5"}),
    node("c1", labels={"gen": "x"}),
]


def _eligible(affinity: dict[str, Any]) -> list[str]:
    snapshot = ClusterSnapshot.from_nodes(NODES, ())
    parsed = read_node_affinity({"affinity": {"nodeAffinity": affinity}})
    flags = snapshot.eligible({}, (), parsed)
    return [n.name for n, ok in zip(NODES, flags, strict=True) if ok]


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        (required([expr("zone", "In", "a")]), ["a1", "a2"]),
        (required([expr("zone", "NotIn", "a")]), ["b1", "c1"]),  # no label: NotIn matches
        (required([expr("fast", "Exists")]), ["a2"]),
        (required([expr("zone", "DoesNotExist")]), ["c1"]),
        (required([expr("gen", "Gt", "3")]), ["a2", "b1"]),  # "x" is no integer: no match
        (required([expr("gen", "Lt", "4")]), ["a1"]),
        # expressions of a term are ANDed, terms are ORed
        (required([expr("zone", "In", "a"), expr("gen", "Gt", "3")]), ["a2"]),
        (required([expr("zone", "In", "b")], [expr("gen", "In", "x")]), ["b1", "c1"]),
        (
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["b1"]}
                            ]
                        }
                    ]
                }
            },
            ["b1"],
        ),
        # a term without requirements matches no node; no terms at all: none either
        ({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}, []),
        ({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}, []),
    ],
)
def test_required_node_affinity_filters_nodes(
    affinity: dict[str, Any], expected: list[str]
) -> None:
    assert _eligible(affinity) == expected


def test_required_affinity_and_node_selector_must_both_hold() -> None:
    snapshot = ClusterSnapshot.from_nodes(NODES, ())
    wanted = pod("p", selector={"zone": "a"}, affinity=required([expr("gen", "In", "4", "5")]))
    assert _placed(place_group(snapshot, pod_group(1), [wanted])) == {"p": "a2"}


def test_a_pod_no_node_allows_says_which_affinity() -> None:
    snapshot = ClusterSnapshot.from_nodes(NODES, ())
    lost = pod(
        "p",
        affinity=required(
            [expr("zone", "In", "z")], [expr("fast", "DoesNotExist"), expr("gen", "Gt", "9")]
        ),
    )
    outcome = place_group(snapshot, pod_group(1), [lost])
    assert outcome == Pending(
        "no node matches the required node affinity zone In (z) or fast DoesNotExist and "
        "gen Gt 9 and tolerates its taints"
    )


def test_preferred_affinity_picks_the_best_scoring_node_then_packs() -> None:
    nodes = [
        node("n1", gpu=8, labels={"kind": "old"}),
        node("n2", gpu=8, labels={"kind": "new"}),
        node("n3", gpu=8, labels={"kind": "new", "rack": "r1"}),
    ]
    preferred = {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [expr("kind", "In", "new")]}},
            {"weight": 5, "preference": {"matchExpressions": [expr("rack", "Exists")]}},
        ]
    }
    snapshot = ClusterSnapshot.from_nodes(nodes, ())
    assert _place_and_bind(snapshot, pod("p", gpu=8, affinity=preferred)) == {"p": "n3"}  # 15 > 10
    assert _place_and_bind(snapshot, pod("q", gpu=8, affinity=preferred)) == {"q": "n2"}
    # preferred, not required: the last node still serves
    assert _place_and_bind(snapshot, pod("r", gpu=8, affinity=preferred)) == {"r": "n1"}


def test_preferred_affinity_leads_the_descent_into_domains() -> None:
    def tray(name: str, clique: str, gpu: int, kind: str) -> Any:
        labels = {ZONE: "z", SPINE: "s", RACK: "r", CLIQUE: clique, "kind": kind}
        return node(name, gpu=gpu, labels=labels)

    # Without a preference the pod packs into the fuller clique c1; preferring "new" sends it
    # to c2, whose node carries the label.
    nodes = [tray("old", "c1", 2, "old"), tray("new", "c2", 8, "new")]
    snapshot = ClusterSnapshot.from_nodes(nodes, LEVELS)
    assert _placed(place_group(snapshot, pod_group(1), [pod("p", gpu=1)])) == {"p": "old"}
    preferred = {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [expr("kind", "In", "new")]}}
        ]
    }
    assert _placed(place_group(snapshot, pod_group(1), [pod("p", gpu=1, affinity=preferred)])) == {
        "p": "new"
    }


@pytest.mark.parametrize(
    ("affinity", "message"),
    [
        (
            required([expr("zone", "Near", "a")]),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
            "nodeSelectorTerms[0].matchExpressions[0].operator must be one of In, NotIn, Exists, "
            "DoesNotExist, Gt, Lt, not 'Near'",
        ),
        (
            required([expr("gen", "Gt", "three")]),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
            "nodeSelectorTerms[0].matchExpressions[0].values must be one integer with operator Gt",
        ),
        (
            required([expr("zone", "In")]),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
            "nodeSelectorTerms[0].matchExpressions[0].values must not be empty with operator In",
        ),
        (
            {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]},
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight "
            "must be an integer from 1 to 100, not 0",
        ),
    ],
)
def test_a_malformed_affinity_is_refused_naming_the_field(
    affinity: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserError) as refused:
        read_node_affinity({"affinity": {"nodeAffinity": affinity}})
    assert refused.value.message == message
    snapshot = ClusterSnapshot.from_nodes(NODES, ())
    outcome = place_group(snapshot, pod_group(1), [pod("p", affinity=affinity)])
    assert outcome == Pending(f"pod p: {message}")


def test_pods_capacity_limits_how_many_pods_a_node_takes() -> None:
    nodes = [node("small", gpu=0, extra={"pods": "2"}), node("unstated", gpu=0)]
    snapshot = ClusterSnapshot.from_nodes(nodes, ())
    tiny = [pod(f"p{i}", gpu=0, cpu="10m") for i in range(5)]
    placed = _placed(place_group(snapshot, pod_group(5), tiny))
    assert sorted(placed.values()).count("small") <= 2
    only_small = ClusterSnapshot.from_nodes(nodes[:1], ())
    outcome = place_group(only_small, pod_group(3), tiny[:3])
    assert outcome == Pending(
        "needs room for 3 pods with 0.01 CPUs each at once (gang scheduling); the cluster has "
        "room for 2 now"
    )


def test_extended_resources_are_checked_per_node() -> None:
    mig = "nvidia.com/mig-1g.10gb"
    nodes = [node("plain", gpu=0), node("mig", gpu=0, extra={mig: "7"})]
    snapshot = ClusterSnapshot.from_nodes(nodes, ())
    slices = [pod(f"s{i}", gpu=0, cpu="1", extra={mig: 3}) for i in range(2)]
    assert set(_placed(place_group(snapshot, pod_group(2), slices)).values()) == {"mig"}
    three = [pod(f"s{i}", gpu=0, cpu="1", extra={mig: 3}) for i in range(3)]
    assert isinstance(place_group(snapshot, pod_group(3), three), Pending)
    placement = place_group(snapshot, pod_group(2), slices)
    assert isinstance(placement, Placement)
    snapshot.bind(placement.bindings)
    assert snapshot.free(1).extended == ((mig, 1),)
    snapshot.release(placement.bindings)
    assert snapshot.free(1).extended == ((mig, 7),)
    too_big = pod("big", gpu=0, extra={mig: 8})
    assert place_group(snapshot, pod_group(1), [too_big]) == Pending(
        f"pod big needs 1 CPU, 1Gi memory, 8 {mig} on one node; no node it may use has that "
        "much even when empty"
    )


@given(
    labels=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2", "x"])),
    key=st.sampled_from(["a", "b", "c"]),
    values=st.lists(st.sampled_from(["1", "2", "x"]), min_size=1, max_size=2),
)
def test_notin_is_the_negation_of_in_and_doesnotexist_of_exists(
    labels: dict[str, str], key: str, values: list[str]
) -> None:
    def allows(*expression: dict[str, Any]) -> bool:
        parsed = read_node_affinity({"affinity": {"nodeAffinity": required(list(expression))}})
        return parsed.allows("n", labels)

    assert allows(expr(key, "In", *values)) != allows(expr(key, "NotIn", *values))
    assert allows(expr(key, "Exists")) != allows(expr(key, "DoesNotExist"))


def test_the_example_of_docs_scheduler_md_means_what_it_says() -> None:
    page = (REPO / "docs" / "scheduler.md").read_text()
    section = page.split("## Node affinity", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = yaml.safe_load(block)
    affinity = spec["affinity"]["nodeAffinity"]
    gb200 = {"nvidia.com/gpu.product": "NVIDIA-GB200"}
    nodes = [
        node("spot", labels={**gb200, "node.kubernetes.io/instance-type": "spot"}),
        node("reserved", labels={**gb200, "node.kubernetes.io/instance-type": "reserved"}),
        node("h100", labels={"nvidia.com/gpu.product": "NVIDIA-H100"}),
    ]
    snapshot = ClusterSnapshot.from_nodes(nodes, ())
    assert _place_and_bind(snapshot, pod("a", gpu=8, affinity=affinity)) == {"a": "reserved"}
    assert _place_and_bind(snapshot, pod("b", gpu=8, affinity=affinity)) == {"b": "spot"}
    pending = place_group(snapshot, pod_group(1), [pod("c", gpu=8, affinity=affinity)])
    assert pending == Pending(
        "needs room for 1 pods with 8 GPUs each at once (gang scheduling); the cluster has room "
        "for 0 now"
    )
    only_h100 = ClusterSnapshot.from_nodes(nodes[2:], ())
    message = place_group(only_h100, pod_group(1), [pod("c", gpu=8, affinity=affinity)])
    assert isinstance(message, Pending)
    quoted = " ".join(section.split("is pending with `", 1)[1].split("`.", 1)[0].split())
    assert message.reason == quoted
