"""Rows of the workflow tables as the domain's records (``domain/workflows/record.py``), and
what only the store keeps: idempotency keys, the inbox, groups left to clean up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from corral.domain.formats.wire_time import as_utc
from corral.domain.workflows.record import (
    SharedReason,
    StoredGroup,
    StoredTask,
    StoredWorkflow,
    TaskAttempt,
)
from corral.domain.workflows.spec import ExitAction, TaskFileContents
from corral.domain.workflows.statuses import TaskStatus, WorkflowStatus


@dataclass(frozen=True)
class IdempotencyKey:
    """A submission's ``Idempotency-Key`` and a digest of the request it came with."""

    key: str
    request_hash: str


@dataclass(frozen=True)
class KeptSubmission:
    """What a user's idempotency key was used for."""

    workflow_id: str
    request_hash: str


@dataclass(frozen=True)
class InboxEntry:
    id: int
    workflow_id: str
    kind: str  # SUBMITTED or CANCEL


@dataclass(frozen=True)
class UncleanedGroup:
    uuid: str
    workflow_id: str
    workflow_uuid: str
    backend: str
    namespace: str
    #: ``[apiVersion, kind]`` of every object the group was given, in creation order.
    kinds: list[list[str]]


def shared_reason_for(found: SharedReason, pod_names: Sequence[str]) -> str:
    """The shape's reason as it reads for a group whose pods are ``pod_names`` (in the same
    order): where it names a pod of the group it was written for, the group's own."""
    if len(found.pod_names) != len(pod_names):
        return found.reason
    reason = found.reason
    for theirs, mine in zip(found.pod_names, pod_names, strict=True):
        reason = reason.replace(f"pod {theirs} ", f"pod {mine} ")
    return reason


def group_record(
    row: Any,
    tasks: Sequence[Any],
    shared: Mapping[str, SharedReason],
    attempts: Mapping[str, Sequence[TaskAttempt]] | None = None,
) -> StoredGroup:
    """A group's rows as its record; ``attempts``: each task's ended attempts, by task uuid
    (left out where nobody reads them)."""
    attempts = attempts or {}
    reason = row["pending_reason"]
    found = shared.get(row["pending_shape"] or "")
    if reason is None and found is not None and row["status"] == TaskStatus.SCHEDULING:
        reason = shared_reason_for(found, [t["pod_name"] for t in tasks])
    return StoredGroup(
        name=row["name"],
        uuid=row["group_uuid"],
        status=TaskStatus(row["status"]),
        upstream=list(row["upstream"]),
        resource_kinds=[list(kind) for kind in row["resource_kinds"]],
        manifests=list(row["manifests"]),
        ignore_non_lead=bool(row["ignore_non_lead"]),
        scheduling_at=utc(row["scheduling_at"]),
        admitted_at=utc(row["admitted_at"]),
        started_at=utc(row["started_at"]),
        ended_at=utc(row["ended_at"]),
        domains=row["domains"],
        pending_reason=reason,
        pending_shape=row["pending_shape"],
        cleaned=bool(row["cleaned"]),
        evict=bool(row["evict"]),
        preempted_by=row["preempted_by"],
        fault=row["fault"],
        stop_grace_s=row["stop_grace_s"],
        notice_at=utc(row["notice_at"]),
        notice_deadline=utc(row["notice_deadline"]),
        tasks=[
            StoredTask(
                name=t["name"],
                uuid=t["task_uuid"],
                pod_name=t["pod_name"],
                platform=t["platform"],
                lead=bool(t["lead"]),
                status=TaskStatus(t["status"]),
                retry_id=int(t["retry_id"]),
                node=t["node"],
                exit_code=t["exit_code"],
                started_at=utc(t["started_at"]),
                ended_at=utc(t["ended_at"]),
                message=t["message"],
                exit_actions=tuple(
                    ExitAction(action, tuple((low, high) for low, high in ranges))
                    for action, ranges in t["exit_actions"] or ()
                ),
                checkpoint_at=utc(t["checkpoint_at"]),
                checkpoint_step=t["checkpoint_step"],
                checkpoint_note=t["checkpoint_note"],
                ready_at=utc(t["ready_at"]),
                attempts=tuple(attempts.get(t["task_uuid"], ())),
            )
            for t in tasks
        ],
    )


def workflow_record(row: Any, groups: list[StoredGroup]) -> StoredWorkflow:
    return StoredWorkflow(
        workflow_id=row["workflow_id"],
        name=row["name"],
        uuid=row["uuid"],
        pool=row["pool"],
        backend=row["backend"],
        namespace=row["namespace"],
        status=WorkflowStatus(row["status"]),
        priority=row["priority"],
        submitted_by=row["submitted_by"],
        submitted_at=utc(row["submitted_at"]) or row["submitted_at"],
        exec_timeout_s=float(row["exec_timeout_s"]),
        queue_timeout_s=float(row["queue_timeout_s"]),
        spec=row["spec"],
        template=row["template"],
        groups=groups,
        started_at=utc(row["started_at"]),
        ended_at=utc(row["ended_at"]),
        cancel_requested_by=row["cancel_requested_by"],
        message=row["message"],
        local_files={
            path: TaskFileContents(str(found["contents"]), bool(found.get("base64")))
            for path, found in (row["local_files"] or {}).items()
        },
        restarted_from=row["restarted_from"],
        failure=row["failure"],
    )


def utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every time corral stores is UTC."""
    return None if value is None else as_utc(value)
