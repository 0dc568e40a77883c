"""What a task's exit code means (docs/osmo-reference.md#exit-actions): the task's own
``exitActions`` first,
then the pool's ``default_exit_actions``; without a match 0 is COMPLETED and anything else FAILED.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from corral.domain.workflows.spec import ExitAction
from corral.domain.workflows.statuses import TaskStatus

_STATUS_OF = {
    "COMPLETE": TaskStatus.COMPLETED,
    "FAIL": TaskStatus.FAILED,
    "RESCHEDULE": TaskStatus.RESCHEDULED,
}


@dataclass(frozen=True)
class ExitOutcome:
    status: TaskStatus
    message: str = ""


def code_ranges(codes: str) -> tuple[tuple[int, int], ...]:
    """``"0,3-5"`` as inclusive ranges; the text was validated when the pool was written."""
    ranges = []
    for part in codes.split(","):
        low, _, high = part.strip().partition("-")
        ranges.append((int(low), int(high or low)))
    return tuple(ranges)


def pool_exit_actions(defaults: Mapping[str, str]) -> list[ExitAction]:
    """A pool's ``default_exit_actions`` (keys in any case) as exit actions."""
    return [ExitAction(key.upper(), code_ranges(codes)) for key, codes in defaults.items()]


def exit_outcome(
    code: int,
    task_actions: Sequence[ExitAction],
    pool_actions: Sequence[ExitAction],
    *,
    retry_id: int,
    max_retry: int,
    failed: TaskStatus = TaskStatus.FAILED,
) -> ExitOutcome:
    """The task's status after it exited with ``code``, and the note OSMO appends to its message.

    RESCHEDULE is not applied once ``retry_id`` reaches ``max_retry``: the plain rule decides,
    in which a code other than 0 is ``failed`` (FAILED_PREEMPTED for an evicted task).
    """
    for action in (*task_actions, *pool_actions):
        if not any(low <= code <= high for low, high in action.ranges):
            continue
        status = _STATUS_OF[action.action]
        if status is TaskStatus.RESCHEDULED and retry_id >= max_retry:
            return ExitOutcome(
                _plain(code, failed), f"No exit action applied due to retry limit {max_retry}."
            )
        return ExitOutcome(status, f"Exit Action: {action.action} the task for exit code {code}.")
    return ExitOutcome(_plain(code, failed))


#: How many times a group that corral stopped (a node fault under a gang, a drain) is placed
#: again when no exit action covers its exit code, if the workflow config allows fewer retries
#: (docs/health.md#running-work).
FAULT_RETRIES = 3


def stopped_outcome(
    code: int,
    task_actions: Sequence[ExitAction],
    pool_actions: Sequence[ExitAction],
    *,
    retry_id: int,
    max_retry: int,
    place_again: bool,
    failed: TaskStatus,
) -> ExitOutcome:
    """The task's status after corral stopped its group with exit ``code`` for a reason that
    is not the task's: a node fault (3001), a drain (3006).

    The exit actions decide, as for any exit. A group that none of them covers is placed again
    whole when ``place_again`` (a gang after a fault; any group after a drain), up to
    ``max(max_retry, FAULT_RETRIES)`` retries: its node failed or was taken away, its code did
    nothing wrong. Otherwise the task ends ``failed``."""
    covered = any(
        low <= code <= high
        for action in (*task_actions, *pool_actions)
        for low, high in action.ranges
    )
    if not place_again or covered:
        return exit_outcome(
            code, task_actions, pool_actions, retry_id=retry_id, max_retry=max_retry, failed=failed
        )
    limit = max(max_retry, FAULT_RETRIES)
    if retry_id >= limit:
        return ExitOutcome(failed, f"Not placed again: it was retried {limit} times.")
    return ExitOutcome(
        TaskStatus.RESCHEDULED,
        f"The group is placed again whole (retry {retry_id + 1} of {limit}).",
    )


def _plain(code: int, failed: TaskStatus) -> TaskStatus:
    return TaskStatus.COMPLETED if code == 0 else failed
