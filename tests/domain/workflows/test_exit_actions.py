"""Exit codes to task statuses (``osmo-workflow.md`` §7)."""

from __future__ import annotations

import pytest

from corral.domain.workflows.exit_actions import (
    ExitOutcome,
    code_ranges,
    exit_outcome,
    pool_exit_actions,
)
from corral.domain.workflows.spec import ExitAction
from corral.domain.workflows.statuses import TaskStatus

TASK = [ExitAction("COMPLETE", ((0, 0), (3, 3))), ExitAction("RESCHEDULE", ((137, 137),))]
POOL = pool_exit_actions({"fail": "1-10", "reschedule": "20-29,255"})


@pytest.mark.parametrize(
    ("code", "retry_id", "expected"),
    [
        (
            0,
            0,
            ExitOutcome(TaskStatus.COMPLETED, "Exit Action: COMPLETE the task for exit code 0."),
        ),
        (
            3,
            0,
            ExitOutcome(TaskStatus.COMPLETED, "Exit Action: COMPLETE the task for exit code 3."),
        ),
        (5, 0, ExitOutcome(TaskStatus.FAILED, "Exit Action: FAIL the task for exit code 5.")),
        (
            137,
            0,
            ExitOutcome(
                TaskStatus.RESCHEDULED, "Exit Action: RESCHEDULE the task for exit code 137."
            ),
        ),
        (137, 2, ExitOutcome(TaskStatus.FAILED, "No exit action applied due to retry limit 2.")),
        (
            255,
            1,
            ExitOutcome(
                TaskStatus.RESCHEDULED, "Exit Action: RESCHEDULE the task for exit code 255."
            ),
        ),
        (42, 0, ExitOutcome(TaskStatus.FAILED)),
    ],
)
def test_task_actions_first_then_the_pool_then_the_plain_rule(
    code: int, retry_id: int, expected: ExitOutcome
) -> None:
    assert exit_outcome(code, TASK, POOL, retry_id=retry_id, max_retry=2) == expected


def test_without_actions_zero_completes_and_anything_else_fails() -> None:
    assert exit_outcome(0, [], [], retry_id=0, max_retry=0) == ExitOutcome(TaskStatus.COMPLETED)
    assert exit_outcome(1, [], [], retry_id=0, max_retry=0) == ExitOutcome(TaskStatus.FAILED)


def test_code_ranges() -> None:
    assert code_ranges("0,1-10, 16,20-21") == ((0, 0), (1, 10), (16, 16), (20, 21))
