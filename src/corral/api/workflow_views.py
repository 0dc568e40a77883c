"""The workflow objects of ``/api/workflow``, in OSMO's shape (docs/api.md#workflows).

OSMO's CLI reads a list item's ``name, user, workflow_uuid, submit_time, start_time, end_time,
queued_time, status, overview, logs, pool, priority, labels`` and a workflow's ``name, uuid,
submitted_by, submit_time, overview, groups[].tasks[].{name, retry_id, start_time, status}``;
corral's own fields (placement domains, pod names, nodes, exit codes) stand beside them. Times
are naive UTC (:func:`corral.domain.formats.wire_time.wire_time`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

from corral.domain.formats.wire_time import as_utc, optional_wire_time, wire_time
from corral.domain.views.start_forecast import GroupForecast, forecast_text
from corral.domain.workflows.record import (
    StoredGroup,
    StoredTask,
    StoredWorkflow,
)
from corral.domain.workflows.statuses import TaskStatus


def dashboard_page(base_url: str, workflow_id: str) -> str:
    """The workflow's page in the dashboard (OSMO's ``overview``), under ``base_url``."""
    return f"{base_url.rstrip('/')}/ui/workflows/{quote(workflow_id, safe='')}"


def logs_url(base_url: str, workflow_id: str) -> str:
    """Where every task's log of the workflow is read (OSMO's ``logs``)."""
    return f"{base_url.rstrip('/')}/api/workflow/{quote(workflow_id, safe='')}/logs"


def queued_seconds(submitted: datetime, started: datetime | None, now: datetime) -> float:
    """OSMO's ``queued_time``: seconds from submission to the first start (or to now)."""
    return max(0.0, (as_utc(started or now) - as_utc(submitted)).total_seconds())


def summary(
    workflow_id: str,
    row: Mapping[str, Any],
    times: tuple[datetime, datetime | None, datetime | None],
    base_url: str,
    now: datetime,
) -> dict[str, Any]:
    """What the list and the workflow both say; ``row`` holds ``pool, status, priority``,
    ``times`` the submission, start and end."""
    submitted, started, ended = times
    return {
        "name": workflow_id,
        "pool": row["pool"],
        "status": row["status"],
        "priority": row["priority"],
        "submit_time": wire_time(submitted),
        "start_time": optional_wire_time(started),
        "end_time": optional_wire_time(ended),
        "queued_time": queued_seconds(submitted, started, now),
        "overview": dashboard_page(base_url, workflow_id),
        "logs": logs_url(base_url, workflow_id),
        "labels": {},
    }


def workflow_row(row: Mapping[str, Any], base_url: str, now: datetime) -> dict[str, Any]:
    """One item of ``GET /api/workflow`` from a row of :meth:`WorkflowStore.list`."""
    times = (row["submitted_at"], row["started_at"], row["ended_at"])
    return {
        **summary(str(row["workflow_id"]), row, times, base_url, now),
        "workflow_uuid": row["uuid"],
        "user": row["submitted_by"],
    }


def workflow_view(
    workflow: StoredWorkflow,
    base_url: str,
    now: datetime,
    *,
    verbose: bool,
    forecasts: Mapping[str, GroupForecast] | None = None,
) -> dict[str, Any]:
    """``GET /api/workflow/{id}``: the workflow, its groups and tasks, and each waiting
    group's forecast (``forecasts``, by group uuid)."""
    own = {"pool": workflow.pool, "status": workflow.status, "priority": workflow.priority}
    times = (workflow.submitted_at, workflow.started_at, workflow.ended_at)
    return {
        **summary(workflow.workflow_id, own, times, base_url, now),
        "uuid": workflow.uuid,
        "submitted_by": workflow.submitted_by,
        "backend": workflow.backend,
        "namespace": workflow.namespace,
        "exec_timeout_s": workflow.exec_timeout_s,
        "queue_timeout_s": workflow.queue_timeout_s,
        "spec": workflow.spec,
        "cancel_requested_by": workflow.cancel_requested_by,
        "message": workflow.message,
        "restarted_from": workflow.restarted_from,
        "groups": [
            group_view(group, verbose=verbose, forecast=_waiting(group, forecasts or {}), now=now)
            for group in workflow.groups
        ],
    }


def _waiting(group: StoredGroup, forecasts: Mapping[str, GroupForecast]) -> GroupForecast | None:
    return forecasts.get(group.uuid) if group.status == TaskStatus.SCHEDULING else None


def group_view(
    group: StoredGroup,
    *,
    verbose: bool,
    forecast: GroupForecast | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    view: dict[str, Any] = {
        "name": group.name,
        "uuid": group.uuid,
        "status": group.status,
        "upstream": group.upstream,
        "resource_kinds": group.resource_kinds,
        "domains": dict(sorted((group.domains or {}).items())),
        "scheduling_start_time": optional_wire_time(group.scheduling_at),
        "start_time": optional_wire_time(group.started_at),
        "end_time": optional_wire_time(group.ended_at),
        "pending_reason": group.pending_reason,
        "tasks": [task_view(task) for task in group.tasks],
    }
    if forecast is not None and now is not None:
        view["start_forecast"] = forecast_text(forecast, now)
    if verbose:
        view["manifests"] = group.manifests
    return view


def task_view(task: StoredTask) -> dict[str, Any]:
    return {
        "name": task.name,
        "uuid": task.uuid,
        "pod_name": task.pod_name,
        "platform": task.platform,
        "lead": task.lead,
        "status": task.status,
        "retry_id": task.retry_id,
        "node": task.node,
        "exit_code": task.exit_code,
        "start_time": optional_wire_time(task.started_at),
        "end_time": optional_wire_time(task.ended_at),
        "message": task.message,
        "attempts": [
            {
                "retry_id": attempt.retry_id,
                "node": attempt.node,
                "start_time": optional_wire_time(attempt.started_at),
                "end_time": wire_time(attempt.ended_at),
                "exit_code": attempt.exit_code,
                "message": attempt.message,
            }
            for attempt in task.attempts
        ],
    }
