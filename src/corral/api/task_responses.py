"""The answers of a task's side of a stop (``task_routes.py``, docs/checkpoints.md)."""

from __future__ import annotations

from corral.api.responses import Answer


class CheckpointRecorded(Answer):
    workflow_id: str
    task: str
    at: str
    step: int | None
    description: str | None


class NoticeView(Answer):
    given_at: str
    deadline: str
    seconds_left: float
    reason: str


class TaskNotice(Answer):
    workflow_id: str
    task: str
    status: str
    notice: NoticeView | None
    ready_at: str | None
    checkpoint_at: str | None


class TaskReady(Answer):
    workflow_id: str
    task: str
    ready_at: str
