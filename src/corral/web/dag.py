"""A workflow's group graph for its page: boxes in columns by depth, arrows from upstream
groups, and where each (sub)group landed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.domain.workflows.record import StoredWorkflow

BOX_WIDTH = 300
COLUMN_WIDTH = 350


def domain_lines(domains: Mapping[str, str] | None) -> list[str]:
    """Where a group landed, one line per subgroup (else for the group): its finest domain."""
    found = sorted((domains or {}).items())
    named = [f"{name}: {path.rsplit('.', 1)[-1]}" for name, path in found if name]
    whole = dict(found).get("")
    return named or ([f"in {whole.rsplit('.', 1)[-1]}"] if whole else [])


def dag_svg(workflow: StoredWorkflow) -> dict[str, Any]:
    """The group DAG laid out in columns by depth: boxes and upstream edges for the SVG."""
    by_name = {group.name: group for group in workflow.groups}
    depth: dict[str, int] = {}

    def depth_of(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name not in depth:
            ups = [u for u in by_name[name].upstream if u in by_name and u not in seen]
            depth[name] = 1 + max((depth_of(u, seen | {name}) for u in ups), default=-1)
        return depth[name]

    bottoms: dict[int, int] = {}
    boxes = []
    for group in workflow.groups:
        column = depth_of(group.name)
        lines = domain_lines(group.domains)
        top = bottoms.get(column, 10)
        height = 48 + 16 * len(lines)
        bottoms[column] = top + height + 20
        boxes.append(
            {
                "name": group.name,
                "status": group.status,
                "lines": lines,
                "x": 10 + column * COLUMN_WIDTH,
                "y": top,
                "height": height,
            }
        )
    at = {box["name"]: box for box in boxes}
    edges = [
        {"from": at[up], "to": at[group.name]}
        for group in workflow.groups
        for up in group.upstream
        if up in at
    ]
    width = 20 + (max(bottoms, default=0) + 1) * COLUMN_WIDTH
    height = max(bottoms.values(), default=30)
    return {"boxes": boxes, "edges": edges, "width": width, "height": height, "box": BOX_WIDTH}
