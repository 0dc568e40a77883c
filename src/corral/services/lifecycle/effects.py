"""The effects of a workflow's step on the cluster (``step.py``), in the order they were
decided: what committing the step does."""

from __future__ import annotations

from dataclasses import dataclass

from corral.backends.execution import TaskRun
from corral.domain.workflows.notices import Notice
from corral.domain.workflows.record import StoredGroup


@dataclass(frozen=True)
class StartTask:
    run: TaskRun


@dataclass(frozen=True)
class StopTask:
    run: TaskRun
    #: An eviction's grace period (None: the executor's own stop).
    grace_seconds: float | None = None


@dataclass(frozen=True)
class NotifyTask:
    run: TaskRun
    notice: Notice


@dataclass(frozen=True)
class CreateGroup:
    group: StoredGroup


Effect = StartTask | StopTask | NotifyTask | CreateGroup
