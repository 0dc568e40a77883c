"""Which task groups may start, and which can no longer run (docs/osmo-reference.md#group-order).

A group starts when every group it takes input from has COMPLETED. When a group fails, every group
downstream of it, directly or through others, is FAILED_UPSTREAM (exit code 3000).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from corral.domain.workflows.statuses import TaskStatus


@dataclass(frozen=True)
class GroupState:
    status: TaskStatus
    upstream: tuple[str, ...] = ()


def ready_groups(groups: Mapping[str, GroupState]) -> list[str]:
    """Groups still waiting (SUBMITTING/WAITING) whose upstream groups all COMPLETED, in order."""
    return [
        name
        for name, group in groups.items()
        if group.status in (TaskStatus.SUBMITTING, TaskStatus.WAITING)
        and all(groups[up].status is TaskStatus.COMPLETED for up in group.upstream)
    ]


def failed_downstream(groups: Mapping[str, GroupState]) -> list[str]:
    """Unfinished groups that can never start because a group upstream of them failed, in order.

    Upstream groups are declared earlier (the spec enforces it), so one pass in declaration
    order sees every failure before the groups that depend on it.
    """
    doomed: set[str] = set()
    found: list[str] = []
    for name, group in groups.items():
        blocked = any(groups[up].status.failed or up in doomed for up in group.upstream)
        if blocked and not group.status.group_finished:
            doomed.add(name)
            found.append(name)
    return found


def downstream_of(groups: Mapping[str, GroupState], roots: Sequence[str]) -> list[str]:
    """Every group that depends on ``roots``, directly or through others, in declaration order."""
    reached = set(roots)
    found = []
    for name, group in groups.items():
        if name not in reached and reached.intersection(group.upstream):
            reached.add(name)
            found.append(name)
    return found
