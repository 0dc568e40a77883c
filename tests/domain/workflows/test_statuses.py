"""OSMO's status strings and their aggregation (``osmo-workflow.md`` §4.3, §4.4)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.workflows.record import (
    Changes,
    StoredGroup,
    StoredTask,
    StoredWorkflow,
    with_changes,
)
from corral.domain.workflows.statuses import (
    ALIVE,
    HOLDS_NODES,
    IN_QUEUE,
    QUEUED,
    TaskState,
    TaskStatus,
    WorkflowStatus,
    group_status,
    workflow_status,
)

T = TaskStatus


def lead(status: TaskStatus) -> TaskState:
    return TaskState(status, lead=True)


def other(status: TaskStatus) -> TaskState:
    return TaskState(status)


def test_status_strings_are_osmos() -> None:
    assert [s.value for s in WorkflowStatus][:5] == [
        "PENDING",
        "RUNNING",
        "WAITING",
        "COMPLETED",
        "FAILED",
    ]
    assert len(WorkflowStatus) == 16 and len(TaskStatus) == 20
    assert T.RESCHEDULED.finished and not T.RESCHEDULED.group_finished
    assert T.SCHEDULING.in_queue and not T.SCHEDULING.prescheduling
    assert T.INITIALIZING.prerunning and not T.INITIALIZING.in_queue
    assert T.FAILED_QUEUE_TIMEOUT.canceled and not T.FAILED.canceled
    assert WorkflowStatus.WAITING.alive and not WorkflowStatus.FAILED_CANCELED.alive


GROUPS = [
    # (tasks, ignore_non_lead_status, expected)
    ([lead(T.SCHEDULING), other(T.SCHEDULING)], True, T.INITIALIZING),
    ([lead(T.RUNNING), other(T.INITIALIZING)], True, T.RUNNING),
    ([lead(T.INITIALIZING), other(T.RESCHEDULED)], True, T.RUNNING),
    ([lead(T.COMPLETED), other(T.FAILED)], True, T.COMPLETED),
    ([lead(T.COMPLETED), other(T.FAILED)], False, T.FAILED),
    ([lead(T.COMPLETED), other(T.FAILED_UPSTREAM)], True, T.FAILED_UPSTREAM),
    ([lead(T.FAILED), other(T.FAILED_SERVER_ERROR)], True, T.FAILED_SERVER_ERROR),
    ([lead(T.COMPLETED), other(T.FAILED_PREEMPTED)], True, T.FAILED_PREEMPTED),
    ([lead(T.FAILED_EVICTED), other(T.COMPLETED)], True, T.FAILED_EVICTED),
    ([lead(T.COMPLETED), other(T.FAILED_EVICTED)], True, T.COMPLETED),
    ([lead(T.COMPLETED), other(T.FAILED_EVICTED)], False, T.FAILED_EVICTED),
    ([lead(T.FAILED_IMAGE_PULL)], True, T.FAILED),
    ([lead(T.COMPLETED), other(T.COMPLETED)], False, T.COMPLETED),
    ([other(T.COMPLETED)], True, T.RUNNING),  # no lead considered: OSMO's fallback
    ([], True, T.RUNNING),
]


@pytest.mark.parametrize(("tasks", "ignore", "expected"), GROUPS)
def test_group_status(tasks: list[TaskState], ignore: bool, expected: TaskStatus) -> None:
    assert group_status(tasks, ignore_non_lead_status=ignore) is expected


W = WorkflowStatus
WORKFLOWS = [
    ([T.WAITING, T.PROCESSING], W.PENDING),
    ([T.RUNNING, T.WAITING], W.RUNNING),
    ([T.COMPLETED, T.SCHEDULING], W.PENDING),
    ([T.COMPLETED, T.COMPLETED], W.COMPLETED),
    ([], W.COMPLETED),
    ([T.FAILED_CANCELED, T.FAILED_SERVER_ERROR], W.FAILED_CANCELED),
    ([T.FAILED_EXEC_TIMEOUT, T.FAILED_UPSTREAM], W.FAILED_EXEC_TIMEOUT),
    ([T.FAILED_BACKEND_ERROR, T.FAILED_UPSTREAM], W.FAILED_BACKEND_ERROR),
    ([T.FAILED_IMAGE_PULL, T.FAILED_BACKEND_ERROR], W.FAILED),
    ([T.FAILED_UPSTREAM], W.FAILED),
    ([T.FAILED, T.COMPLETED], W.FAILED),
    ([T.COMPLETED, T.RESCHEDULED], W.RUNNING),
    ([T.FAILED, T.RESCHEDULED], W.FAILED),
]


@pytest.mark.parametrize(("groups", "expected"), WORKFLOWS)
def test_workflow_status(groups: list[TaskStatus], expected: WorkflowStatus) -> None:
    assert workflow_status(groups) is expected


@given(st.lists(st.sampled_from(list(TaskStatus)), max_size=6))
def test_a_workflow_is_alive_while_a_group_is_unfinished_or_rescheduled(
    groups: list[TaskStatus],
) -> None:
    found = workflow_status(groups)
    unfinished = not all(status.finished for status in groups)
    rescheduled_only = not any(s.failed for s in groups) and T.RESCHEDULED in groups
    assert found.alive is (unfinished or rescheduled_only)
    if found is W.COMPLETED:
        assert all(status is T.COMPLETED for status in groups)


def test_the_sets_of_statuses_are_derived_from_the_enums() -> None:
    assert ALIVE == (WorkflowStatus.PENDING, WorkflowStatus.RUNNING, WorkflowStatus.WAITING)
    assert QUEUED == (WorkflowStatus.PENDING, WorkflowStatus.WAITING)
    assert {T.INITIALIZING, T.RUNNING} == HOLDS_NODES
    assert {T.SUBMITTING, T.WAITING, T.PROCESSING, T.SCHEDULING} == IN_QUEUE
    assert not HOLDS_NODES & IN_QUEUE


def test_a_record_holds_its_status_as_the_enum_after_a_change_named_it_by_its_string() -> None:
    task = StoredTask("a", "a-uuid", "pod-a", "gpu", True, T.WAITING, 0)
    group = StoredGroup("g", "g-uuid", T.SCHEDULING, [], [], [], [task])
    changes = Changes()
    changes.task("a-uuid", status="RUNNING")
    changes.group("g-uuid", status=T.RUNNING)
    (changed,) = with_changes(_workflow(group), changes).groups
    assert changed.status is T.RUNNING
    assert changed.tasks[0].status is T.RUNNING
    changes.workflows["w-1"] = {"status": "FAILED_CANCELED"}
    assert with_changes(_workflow(group), changes).status is WorkflowStatus.FAILED_CANCELED


def _workflow(group: StoredGroup) -> StoredWorkflow:
    now = datetime(2026, 12, 7, tzinfo=UTC)
    return StoredWorkflow(
        "w-1",
        "w",
        "u",
        "p",
        "b",
        "n",
        WorkflowStatus.RUNNING,
        "NORMAL",
        "me",
        now,
        1.0,
        1.0,
        "",
        None,
        [group],
    )
