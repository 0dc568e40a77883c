"""A workflow's group graph: columns by depth, arrows from upstream groups, landed domains."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from corral.web.dag import COLUMN_WIDTH, dag_svg, domain_lines


def group(name: str, upstream: list[str], domains: dict[str, str] | None = None) -> Any:
    return SimpleNamespace(name=name, status="WAITING", upstream=upstream, domains=domains)


def test_groups_sit_in_columns_by_depth_with_an_arrow_per_upstream_group() -> None:
    workflow: Any = SimpleNamespace(
        groups=[
            group("prep", []),
            group("train-a", ["prep"]),
            group("train-b", ["prep"]),
            group("eval", ["train-a", "train-b"]),
        ]
    )
    drawn = dag_svg(workflow)
    columns = {box["name"]: (box["x"] - 10) // COLUMN_WIDTH for box in drawn["boxes"]}
    assert columns == {"prep": 0, "train-a": 1, "train-b": 1, "eval": 2}
    edges = {(edge["from"]["name"], edge["to"]["name"]) for edge in drawn["edges"]}
    assert edges == {
        ("prep", "train-a"),
        ("prep", "train-b"),
        ("train-a", "eval"),
        ("train-b", "eval"),
    }
    a, b = (box for box in drawn["boxes"] if box["name"].startswith("train"))
    assert b["y"] >= a["y"] + a["height"]  # stacked, not overlapping


def test_a_cycle_or_a_missing_upstream_does_not_loop() -> None:
    workflow: Any = SimpleNamespace(groups=[group("a", ["b"]), group("b", ["a", "gone"])])
    assert len(dag_svg(workflow)["boxes"]) == 2


def test_each_subgroup_shows_its_finest_domain() -> None:
    domains = {"": "cluster", "model-1": "za.s0.r0.clique-0", "model-2": "za.s0.r1.clique-1"}
    assert domain_lines(domains) == ["model-1: clique-0", "model-2: clique-1"]
    assert domain_lines({"": "za.s0.r0.clique-3"}) == ["in clique-3"]
    assert domain_lines(None) == []
