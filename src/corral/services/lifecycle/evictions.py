"""Evicted groups (docs/lifecycle.md#preemption, docs/health.md#running-work): how the
scheduler's evictions are recorded for their workflows' next step, and how that step ends the
tasks of a group evicted by a preemption, a drain or a node fault."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog

from corral.domain.workflows.events import GangEvicted
from corral.domain.workflows.exit_actions import ExitOutcome, exit_outcome, stopped_outcome
from corral.domain.workflows.notices import stop_message
from corral.domain.workflows.record import Changes, StoredGroup, StoredTask, StoredWorkflow
from corral.domain.workflows.spec import ExitAction
from corral.domain.workflows.statuses import TaskStatus
from corral.scheduler.records import Evicted
from corral.services.lifecycle.working_set import WorkingSet

log = structlog.get_logger("corral.lifecycle")

#: OSMO's exit code of a backend error: a task whose node failed under it.
BACKEND_ERROR_CODE = 3001
#: OSMO's exit code of a preempted task.
PREEMPTED_CODE = 3006


def record_evictions(
    working: WorkingSet, evictions: Sequence[Evicted], now: datetime, changes: Changes
) -> dict[str, StoredWorkflow]:
    """Record each eviction: the group is marked for its workflow's next step (which stops
    its tasks), says who evicted it, and a ``preemptions`` row counts its GPUs."""
    evicted: dict[str, StoredWorkflow] = {}
    for eviction in evictions:
        owner = working.bound.pop(eviction.group, None)
        workflow = working.workflows.get(owner) if owner else None
        preemptor = working.workflows.get(working.owners.get(eviction.by, ""))
        if workflow is None or preemptor is None:  # never: both are alive and indexed
            log.warning("eviction of an unknown group", group_uuid=eviction.group)
            continue
        by = (
            f"{preemptor.workflow_id} (queue {preemptor.pool} reclaimed its guarantee)"
            if eviction.reclaimed
            else f"{preemptor.workflow_id} ({preemptor.priority} priority in queue "
            f"{preemptor.pool})"
        )
        changes.group(eviction.group, evict=True, preempted_by=by, fault=None, stop_grace_s=None)
        working.noticed[eviction.group] = workflow.workflow_id  # its tasks run until notice ends
        changes.preemptions.append(
            GangEvicted(
                at=now,
                pool=workflow.pool,
                workflow_id=workflow.workflow_id,
                group_uuid=eviction.group,
                gpus=eviction.gpus,
                by_workflow=preemptor.workflow_id,
                reclaimed=eviction.reclaimed,
            )
        )
        evicted[workflow.workflow_id] = workflow
        log.info(
            "group evicted",
            workflow_id=workflow.workflow_id,
            group_uuid=eviction.group,
            by=preemptor.workflow_id,
            reclaimed=eviction.reclaimed,
            gpus=eviction.gpus,
        )
    return evicted


def drained(group: StoredGroup) -> bool:
    """Whether ``group`` was evicted by a drain (which alone gives a grace period of its own;
    ``node_faults.py``), not by the scheduler."""
    return group.stop_grace_s is not None


@dataclass(frozen=True)
class Eviction:
    """How an evicted group's tasks end: their exit code, the status a failure ends in, the
    note, the grace period to stop (None: at once) and each task's outcome."""

    code: int
    failed: TaskStatus
    message: str
    grace_s: float | None
    outcome: Callable[[StoredTask], ExitOutcome]


def eviction_of(
    group: StoredGroup,
    pool_actions: Sequence[ExitAction],
    *,
    max_retry: int,
    pool_grace_s: float,
) -> Eviction:
    """A node fault ends the tasks at once with 3001 (a gang that no exit action covers is
    placed again); a drain with 3006 after its grace period (a group that no exit action covers
    is placed again: the drain is the operator's, not the task's); a preemption with 3006
    after its grace period, as its exit actions say."""
    if group.fault:
        gang = len({task.node for task in group.tasks if task.node}) > 1
        return Eviction(
            BACKEND_ERROR_CODE,
            TaskStatus.FAILED_BACKEND_ERROR,
            f"Stopped: {group.fault}.",
            None,
            lambda task: stopped_outcome(
                BACKEND_ERROR_CODE,
                task.exit_actions,
                pool_actions,
                retry_id=task.retry_id,
                max_retry=max_retry,
                place_again=gang,
                failed=TaskStatus.FAILED_BACKEND_ERROR,
            ),
        )
    if drained(group):
        return Eviction(
            PREEMPTED_CODE,
            TaskStatus.FAILED_PREEMPTED,
            stop_message(group.preempted_by),
            group.stop_grace_s,
            lambda task: stopped_outcome(
                PREEMPTED_CODE,
                task.exit_actions,
                pool_actions,
                retry_id=task.retry_id,
                max_retry=max_retry,
                place_again=True,
                failed=TaskStatus.FAILED_PREEMPTED,
            ),
        )
    return Eviction(
        PREEMPTED_CODE,
        TaskStatus.FAILED_PREEMPTED,
        stop_message(group.preempted_by),
        pool_grace_s,
        lambda task: exit_outcome(
            PREEMPTED_CODE,
            task.exit_actions,
            pool_actions,
            retry_id=task.retry_id,
            max_retry=max_retry,
            failed=TaskStatus.FAILED_PREEMPTED,
        ),
    )
