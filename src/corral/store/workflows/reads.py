"""Reading whole workflows back: one by its id, or every alive one the way the controller
works on them (a part of ``workflows.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from corral.domain.workflows.record import (
    SharedReason,
    StoredGroup,
    StoredWorkflow,
    TaskAttempt,
)
from corral.domain.workflows.statuses import ALIVE, TaskStatus
from corral.store.tables import (
    pending_shapes,
    task_attempts,
    workflow_groups,
    workflow_tasks,
    workflows,
)
from corral.store.workflows.records import group_record, shared_reason_for, utc, workflow_record


def read_workflow(connection: Connection, workflow_id: str) -> StoredWorkflow | None:
    """The whole workflow ``workflow_id`` (spec, groups with their objects, tasks), or None."""
    row = (
        connection.execute(select(workflows).where(workflows.c.workflow_id == workflow_id))
        .mappings()
        .first()
    )
    if row is None:
        return None
    groups = _rows(
        connection,
        select(workflow_groups)
        .where(workflow_groups.c.workflow_id == workflow_id)
        .order_by(workflow_groups.c.position),
    )
    tasks = _rows(
        connection,
        select(workflow_tasks)
        .where(workflow_tasks.c.group_uuid.in_([g["group_uuid"] for g in groups]))
        .order_by(workflow_tasks.c.position),
    )
    shared = _shared_reasons(connection, groups)
    attempts = _attempts(connection, [t["task_uuid"] for t in tasks])
    return workflow_record(
        row,
        [
            group_record(
                g, [t for t in tasks if t["group_uuid"] == g["group_uuid"]], shared, attempts
            )
            for g in groups
        ],
    )


def _attempts(connection: Connection, task_uuids: Sequence[str]) -> dict[str, list[TaskAttempt]]:
    """Each task's ended attempts, oldest first."""
    found: dict[str, list[TaskAttempt]] = {}
    if not task_uuids:
        return found
    rows = connection.execute(
        select(task_attempts)
        .where(task_attempts.c.task_uuid.in_(list(task_uuids)))
        .order_by(task_attempts.c.task_uuid, task_attempts.c.retry_id)
    ).mappings()
    for row in rows:
        found.setdefault(row["task_uuid"], []).append(
            TaskAttempt(
                task_uuid=row["task_uuid"],
                retry_id=int(row["retry_id"]),
                node=row["node"],
                started_at=utc(row["started_at"]),
                ended_at=utc(row["ended_at"]) or row["ended_at"],
                exit_code=row["exit_code"],
                message=row["message"],
            )
        )
    return found


def _shared_reasons(connection: Connection, groups: Sequence[Any]) -> dict[str, SharedReason]:
    """The reasons of the shapes that the waiting ``groups`` (rows) share."""
    shapes = {
        g["pending_shape"]
        for g in groups
        if g["pending_shape"] and g["status"] == TaskStatus.SCHEDULING and not g["pending_reason"]
    }
    if not shapes:
        return {}
    rows = connection.execute(select(pending_shapes).where(pending_shapes.c.shape.in_(shapes)))
    return {row.shape: SharedReason(row.reason, tuple(row.pod_names)) for row in rows.mappings()}


_CONTROLLER_WORKFLOW_COLUMNS = [
    c for c in workflows.c if c.name not in ("spec", "template", "local_files")
]
_CONTROLLER_GROUP_COLUMNS = [c for c in workflow_groups.c if c.name != "manifests"]


def controller_rows(connection: Connection, ids: Sequence[str] | None) -> list[StoredWorkflow]:
    """Every alive workflow (``ids`` None: three scans of what is alive), or the alive ones of
    ``ids``, found by their keys only: a filter on the status as well let SQLite walk every
    alive workflow to find a few."""
    alive = workflows.c.status.in_(ALIVE)
    if ids is None:
        rows = _rows(connection, select(*_CONTROLLER_WORKFLOW_COLUMNS).where(alive))
        owner = workflows.c.workflow_id == workflow_groups.c.workflow_id
        groups = _rows(
            connection, select(*_CONTROLLER_GROUP_COLUMNS).join(workflows, owner).where(alive)
        )
        tasks = _rows(
            connection,
            select(workflow_tasks)
            .join(workflow_groups, workflow_groups.c.group_uuid == workflow_tasks.c.group_uuid)
            .join(workflows, owner)
            .where(alive),
        )
    else:
        chosen = workflows.c.workflow_id.in_(list(ids))
        rows = [
            row
            for row in _rows(connection, select(*_CONTROLLER_WORKFLOW_COLUMNS).where(chosen))
            if row["status"] in ALIVE
        ]
        kept = [row["workflow_id"] for row in rows]
        groups = _rows(
            connection,
            select(*_CONTROLLER_GROUP_COLUMNS).where(workflow_groups.c.workflow_id.in_(kept)),
        )
        tasks = _rows(
            connection,
            select(workflow_tasks).where(
                workflow_tasks.c.group_uuid.in_([g["group_uuid"] for g in groups])
            ),
        )
    tasks_of: dict[str, list[Any]] = {}
    for task in sorted(tasks, key=lambda t: (t["group_uuid"], t["position"])):
        tasks_of.setdefault(task["group_uuid"], []).append(task)
    groups_of: dict[str, list[StoredGroup]] = {}
    for group in sorted(groups, key=lambda g: (g["workflow_id"], g["position"])):
        stored = group_record({**group, "manifests": []}, tasks_of.get(group["group_uuid"], []), {})
        groups_of.setdefault(group["workflow_id"], []).append(stored)
    rows = sorted(rows, key=lambda row: (row["submitted_at"], row["workflow_id"]))
    return [
        workflow_record(
            {**row, "spec": "", "template": None, "local_files": None},
            groups_of.get(row["workflow_id"], []),
        )
        for row in rows
    ]


def _rows(connection: Connection, query: Any) -> list[Any]:
    return list(connection.execute(query).mappings().all())


def waiting_reasons(connection: Connection, workflows: Sequence[StoredWorkflow]) -> dict[str, str]:
    """Group uuid -> why each waiting group of ``workflows`` waits, where its shape says so
    (``controller_rows`` leaves the shared reasons out: the controller never reads them)."""
    rows = [
        {"pending_shape": g.pending_shape, "status": g.status, "pending_reason": g.pending_reason}
        for w in workflows
        for g in w.groups
    ]
    shared = _shared_reasons(connection, rows)
    found = {}
    for workflow in workflows:
        for group in workflow.groups:
            reason = shared.get(group.pending_shape or "")
            waits = group.status == TaskStatus.SCHEDULING and group.pending_reason is None
            if waits and reason is not None:
                found[group.uuid] = shared_reason_for(reason, [t.pod_name for t in group.tasks])
    return found
