"""Group start order and upstream failures (``osmo-workflow.md`` §4.2)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from corral.domain.workflows.group_order import (
    GroupState,
    downstream_of,
    failed_downstream,
    ready_groups,
)
from corral.domain.workflows.statuses import TaskStatus

T = TaskStatus


def chain(*statuses: TaskStatus) -> dict[str, GroupState]:
    """prepare -> train -> evaluate, plus report after train."""
    names = ["prepare", "train", "evaluate", "report"]
    upstream = [(), ("prepare",), ("train",), ("train",)]
    return {
        name: GroupState(status, up)
        for name, status, up in zip(names, statuses, upstream, strict=True)
    }


def test_only_groups_whose_upstream_completed_are_ready() -> None:
    assert ready_groups(chain(T.WAITING, T.WAITING, T.WAITING, T.WAITING)) == ["prepare"]
    assert ready_groups(chain(T.RUNNING, T.WAITING, T.WAITING, T.WAITING)) == []
    assert ready_groups(chain(T.COMPLETED, T.WAITING, T.WAITING, T.WAITING)) == ["train"]
    assert ready_groups(chain(T.COMPLETED, T.COMPLETED, T.WAITING, T.SUBMITTING)) == [
        "evaluate",
        "report",
    ]


def test_a_failure_dooms_everything_downstream_transitively() -> None:
    groups = chain(T.FAILED, T.WAITING, T.WAITING, T.WAITING)
    assert failed_downstream(groups) == ["train", "evaluate", "report"]
    assert failed_downstream(chain(T.COMPLETED, T.FAILED_EXEC_TIMEOUT, T.WAITING, T.COMPLETED)) == [
        "evaluate"
    ]
    assert downstream_of(groups, ["prepare"]) == ["train", "evaluate", "report"]
    assert downstream_of(groups, ["evaluate"]) == []


@st.composite
def workflows(draw: st.DrawFn) -> dict[str, GroupState]:
    count = draw(st.integers(1, 6))
    groups: dict[str, GroupState] = {}
    for index in range(count):
        earlier = [f"g{i}" for i in range(index)]
        upstream = draw(st.lists(st.sampled_from(earlier), unique=True)) if earlier else []
        groups[f"g{index}"] = GroupState(draw(st.sampled_from(list(TaskStatus))), tuple(upstream))
    return groups


@given(workflows())
def test_ready_and_doomed_never_overlap(groups: dict[str, GroupState]) -> None:
    ready, doomed = set(ready_groups(groups)), set(failed_downstream(groups))
    assert not ready & doomed
    for name in doomed:
        assert set(downstream_of(groups, [name])) <= doomed | {
            n for n, g in groups.items() if g.status.group_finished
        }
