"""What a submission plans: the submitter, and each task group with its exact Kubernetes objects
(``planner.plan_workflow`` makes it; what it holds is what is stored and what a backend
applies)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from corral.domain.workflows.spec import ExitAction

PRIORITIES = ("HIGH", "NORMAL", "LOW")

#: Where task files are mounted from (one Secret per group, one key per file).
FILES_VOLUME = "corral-files"

NewId = Callable[[], str]


def random_id() -> str:
    """A new uuid for a workflow, group or task (32 hex digits)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Submitter:
    """Who submits what where: fixed before the plan is made."""

    workflow_id: str
    workflow_uuid: str
    user: str
    pool: str
    priority: str = "NORMAL"


@dataclass(frozen=True)
class PlannedTask:
    name: str
    uuid: str
    pod_name: str
    platform: str
    lead: bool
    exit_actions: tuple[ExitAction, ...] = ()


@dataclass(frozen=True)
class PlannedGroup:
    name: str
    uuid: str
    upstream: tuple[str, ...]
    tasks: tuple[PlannedTask, ...]
    #: Every object of the group, in creation order.
    manifests: tuple[dict[str, Any], ...]
    ignore_non_lead_status: bool = True

    @property
    def resource_kinds(self) -> list[tuple[str, str]]:
        """The distinct ``(apiVersion, kind)`` of the group's objects, for cleanup."""
        return list(dict.fromkeys((m["apiVersion"], m["kind"]) for m in self.manifests))


@dataclass(frozen=True)
class WorkflowPlan:
    submitter: Submitter
    namespace: str
    backend: str
    exec_timeout: timedelta
    queue_timeout: timedelta
    groups: tuple[PlannedGroup, ...]
    #: Why a group could never run, where a dry run asked to be told instead of refused: the
    #: first such group's reason, and each such group's by name.
    could_never_run: str | None = None
    never_runs: Mapping[str, str] = field(default_factory=dict)
