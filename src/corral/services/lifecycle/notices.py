"""The notice before a preemption, a reclaim or a drain stops a gang (docs/checkpoints.md#the-
notice), and what the stop cost.

An evicted group (its pods unbound by the scheduler) is not stopped at once. Its first step
gives each running task a notice with a deadline (the pool's ``preemption.notice``, or the
drain's grace period); later steps stop the gang at the first of: every task ready to stop (it
said so through the API, or a local task through its control directory), or the deadline.
Each stop is recorded: the GPU-seconds lost since the gang's latest checkpoint (or its start),
whether every task acknowledged, and the seconds from the notice to the stop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from corral.backends.execution import TaskExecutor, TaskRun
from corral.domain.labels import STOP_NOTICE_SECONDS, STOP_NOTICE_SIGNAL
from corral.domain.workflows.events import GangStopped, StopCause
from corral.domain.workflows.notices import (
    Acknowledgement,
    Checkpoint,
    Notice,
    checkpoint_refusal,
    stop_message,
)
from corral.domain.workflows.record import Changes, StoredGroup, StoredTask, StoredWorkflow, pod_of
from corral.scheduler.resources import pod_demand


@dataclass(frozen=True)
class Answers:
    """What the running tasks of a noticed group said: each one's ready time (None: not
    ready) and newest checkpoint, by task uuid."""

    ready: dict[str, datetime | None]
    checkpoints: dict[str, Checkpoint]

    @property
    def all_ready(self) -> bool:
        return bool(self.ready) and all(at is not None for at in self.ready.values())


def notice_of(
    workflow: StoredWorkflow, group: StoredGroup, pool_notice_s: float, signal: str, now: datetime
) -> Notice:
    """The notice ``group`` gets now: the drain's grace period for a drain, else the pool's,
    shortened to the least ``stopNotice`` of its tasks."""
    seconds = group.stop_grace_s if group.stop_grace_s is not None else pool_notice_s
    for task in group.tasks:
        wanted = _wanted_notice(pod_of(workflow, task))
        if wanted is not None:
            seconds = min(seconds, wanted)
    reason = stop_message(group.preempted_by)
    return Notice(now, now + timedelta(seconds=seconds), reason, signal)


def task_notice(notice: Notice, pod: Mapping[str, Any]) -> Notice:
    """``notice`` as one task gets it: with the signal its task asked for (``noticeSignal``),
    else its pool's."""
    wanted = ((pod.get("metadata") or {}).get("annotations") or {}).get(STOP_NOTICE_SIGNAL)
    return notice if wanted is None else dataclasses.replace(notice, signal=wanted)


def _wanted_notice(pod: Mapping[str, Any]) -> float | None:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(STOP_NOTICE_SECONDS)
    try:
        return max(float(text), 0.0) if text is not None else None
    except ValueError:
        return None


def answers(
    runs: Sequence[tuple[StoredTask, TaskRun]], executor: TaskExecutor, now: datetime
) -> Answers:
    """Each running task's answer: through the API (stored) or through the executor; a task
    that ended since its notice is ready."""
    ready: dict[str, datetime | None] = {}
    checkpoints: dict[str, Checkpoint] = {}
    for task, run in runs:
        said = executor.acknowledgement(run) or Acknowledgement()
        ended = now if executor.poll(run, now) is not None else None
        ready[task.uuid] = task.ready_at or said.ready_at or ended
        checkpoints.update(_newer(task, said.checkpoint, now))
    return Answers(ready, checkpoints)


def relayed_checkpoint(
    task: StoredTask, run: TaskRun, executor: TaskExecutor, now: datetime
) -> dict[str, Checkpoint]:
    """The task's checkpoint relayed by the executor (a local task's control directory), when
    newer than the one stored, by task uuid."""
    said = executor.acknowledgement(run)
    return _newer(task, said.checkpoint if said is not None else None, now)


def _newer(task: StoredTask, found: Checkpoint | None, now: datetime) -> dict[str, Checkpoint]:
    """``found`` by task uuid when it is newer than the stored one and could be this run's
    (``notices.checkpoint_refusal``: a task's file may say anything).

    The runner stamps a report when it relays it, which may be after the tick's ``now`` was
    taken: the report is held to the clock when it was read, and kept as committed no later
    than ``now`` (refused as "in the future", a checkpoint saved just before a ready was lost,
    and the stop counted the work since the gang's start)."""
    if found is None or (task.checkpoint_at is not None and found.at <= task.checkpoint_at):
        return {}
    read_at = max(now, datetime.now(UTC))
    if checkpoint_refusal(found.at, task.started_at, read_at) is not None:
        return {}
    return {task.uuid: dataclasses.replace(found, at=min(found.at, now))}


def keep_checkpoints(changes: Changes, found: Mapping[str, Checkpoint]) -> None:
    """Write the checkpoints ``found`` (by task uuid) on their tasks."""
    for task_uuid, checkpoint in found.items():
        changes.task(
            task_uuid,
            checkpoint_at=checkpoint.at,
            checkpoint_step=checkpoint.step,
            checkpoint_note=checkpoint.description,
        )


def stop_due(group: StoredGroup, said: Answers, now: datetime) -> bool:
    """Whether a noticed group stops now: every task is ready, or the deadline came."""
    deadline = group.notice_deadline
    return said.all_ready or deadline is None or now >= deadline


def eviction_stop(
    workflow: StoredWorkflow, group: StoredGroup, said: Answers, now: datetime
) -> GangStopped:
    """The stop of ``group``, now."""
    marks = [t.checkpoint_at for t in group.tasks if t.checkpoint_at is not None]
    marks.extend(checkpoint.at for checkpoint in said.checkpoints.values())
    since = max([m for m in (group.started_at, *marks) if m is not None], default=now)
    gpus = sum(
        pod_demand(pod_of(workflow, task).get("spec") or {}).gpu
        for task in group.tasks
        if task.uuid in said.ready
    )
    noticed = group.notice_at or now
    return GangStopped(
        at=now,
        pool=workflow.pool,
        workflow_id=workflow.workflow_id,
        group_uuid=group.uuid,
        cause=eviction_cause(group),
        gpus=gpus,
        lost_gpu_seconds=gpus * max((now - since).total_seconds(), 0.0),
        acknowledged=said.all_ready,
        stop_seconds=max((now - noticed).total_seconds(), 0.0),
    )


def eviction_cause(group: StoredGroup) -> StopCause:
    """Drained (a drain sets the grace period), reclaimed or preempted."""
    if group.stop_grace_s is not None:
        return StopCause.DRAINED
    if (group.preempted_by or "").endswith("reclaimed its guarantee)"):
        return StopCause.RECLAIMED
    return StopCause.PREEMPTED
