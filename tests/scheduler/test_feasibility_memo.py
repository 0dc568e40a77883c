"""The could-never-run check remembers the shapes that fitted an empty cluster: a group of a
shape that fitted is not placed again (whatever its pods are called), a group that did not fit
is placed each time (its reason names its own pods), and another node list starts afresh."""

from __future__ import annotations

from typing import Any

import pytest

from corral.scheduler import feasibility
from corral.scheduler.podgroup import PodSet, read_pod_group
from tests.scheduler.helpers import CLIQUE, constraint, node, pod, pod_group

NODES = [node(f"t{i}", labels={CLIQUE: "a"}) for i in range(4)]


def gang(name: str, trays: int) -> PodSet:
    group = pod_group(trays, topology=constraint(required=CLIQUE))
    return read_pod_group(group, [pod(f"{name}-{i}", gpu=8) for i in range(trays)])


@pytest.fixture
def placements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    placed: list[str] = []
    real = feasibility.place_pod_set

    def counted(snapshot: Any, root: PodSet, name: str) -> Any:
        placed.append(next(root.all_pods()).name)
        return real(snapshot, root, name)

    monkeypatch.setattr(feasibility, "place_pod_set", counted)
    return placed


def test_a_shape_that_fitted_is_not_placed_again(placements: list[str]) -> None:
    nodes = list(NODES)
    empty = feasibility._empty(nodes, (CLIQUE,))
    assert feasibility._never_fits(empty, gang("first", 4)) is None
    assert feasibility._never_fits(empty, gang("second", 4)) is None
    assert feasibility._never_fits(empty, gang("third", 3)) is None
    assert placements == ["first-0", "third-0"]


def test_a_shape_that_did_not_fit_is_placed_each_time_and_named_for_its_own_pods(
    placements: list[str],
) -> None:
    empty = feasibility._empty(list(NODES), (CLIQUE,))
    first = feasibility._never_fits(empty, gang("first", 5))
    second = feasibility._never_fits(empty, gang("second", 5))
    assert first is not None and second is not None
    assert first.startswith("needs room for 5 pods with 8 GPUs each in one nvidia.com/gpu-clique")
    assert placements == ["first-0", "second-0"]


def test_another_node_list_is_judged_afresh(placements: list[str]) -> None:
    assert feasibility._never_fits(feasibility._empty(list(NODES), (CLIQUE,)), gang("a", 4)) is None
    smaller = [node(f"s{i}", labels={CLIQUE: "b"}) for i in range(2)]
    reason = feasibility._never_fits(feasibility._empty(smaller, (CLIQUE,)), gang("b", 4))
    assert reason is not None
    assert placements == ["a-0", "b-0"]
