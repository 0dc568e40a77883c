"""What the controller reads of the stored workflows (docs/lifecycle.md): the alive ones, each
read alone when a read fails so that one whose stored state cannot be read is left out and
ended (docs/lifecycle.md#a-workflow-that-cannot-be-read), and the checkpoints their tasks
reported, for preemption to weigh."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from corral.domain.workflows.record import StoredWorkflow
from corral.scheduler.cache import SchedulerCache
from corral.store.workflows import WorkflowStore

log = structlog.get_logger("corral.lifecycle")


def readable_workflows(
    workflows: WorkflowStore,
    ids: Sequence[str] | None,
    fence: Callable[[Any], None] | None,
) -> list[StoredWorkflow]:
    """The alive workflows (of ``ids``) as the controller works on them; one whose stored
    state cannot be read is left out, and ended FAILED_SERVER_ERROR once its unreadable times
    are cleared (writes ``fence``d by the lease): one bad row never stops the tick of every
    other workflow."""
    unreadable: dict[str, str] = {}
    found = workflows.controller_view(ids, unreadable)
    for workflow_id, error in unreadable.items():
        reason = (
            f"corral could not read this workflow's stored state ({error}) and stopped it; "
            "times no reader can read were cleared. Submit it again; tell your admin if this "
            "happens again."
        )
        asked = workflows.fail_unreadable(workflow_id, reason, fence)
        log.error(
            "workflow cannot be read; it is left out of the tick",
            workflow_id=workflow_id,
            error=error,
            failing=asked,
        )
    return found


def note_checkpoints(cache: SchedulerCache, alive: Sequence[StoredWorkflow]) -> None:
    """Each bound group's latest checkpoint, of any of its tasks, for preemption to weigh
    (docs/checkpoints.md)."""
    for workflow in alive:
        for group in workflow.groups:
            marks = [task.checkpoint_at for task in group.tasks if task.checkpoint_at]
            if marks:
                cache.checkpoint(group.uuid, max(marks))
