"""The queue: every waiting group in admission order, with its start-time forecast
(docs/forecast.md#the-queue). Groups the caller may not read still hold their place, as opaque
entries: a position and nothing else."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from corral.domain.formats.wire_time import optional_wire_time, read_wire_time
from corral.domain.views.capacity import BORROWING, QuotaRoom
from corral.domain.views.requested_shape import RequestedShape
from corral.domain.views.start_forecast import STALE_SECONDS, GroupForecast, duration_text
from corral.domain.workflows.record import StoredGroup, StoredWorkflow
from corral.domain.workflows.statuses import TaskStatus


def queue_entries(
    workflows: Sequence[StoredWorkflow],
    forecasts: Mapping[str, GroupForecast],
    may_read: Callable[[StoredWorkflow], bool],
    now: datetime,
    *,
    pools: Sequence[str] = (),
    users: Sequence[str] = (),
    reasons: Mapping[str, str] | None = None,
    shapes: Mapping[str, RequestedShape] | None = None,
    quotas: Mapping[str, QuotaRoom] | None = None,
) -> list[dict[str, Any]]:
    """Each waiting group of ``pools`` (all when empty), the forecast's admission order first
    (groups not forecast yet after, oldest first). With ``users``, only theirs that the caller
    may read: an opaque entry would say who waits. ``reasons``: why groups wait whose record
    has no reason of its own (their shape's). ``shapes``: what each group asks for, by uuid;
    ``quotas``: per pool, its queue now, as the scheduler counts it."""
    waiting = [
        (workflow, group)
        for workflow in workflows
        for group in workflow.groups
        if group.status == TaskStatus.SCHEDULING
        and (not pools or workflow.pool in pools)
        and (not users or (workflow.submitted_by in users and may_read(workflow)))
    ]

    def order(entry: tuple[StoredWorkflow, StoredGroup]) -> tuple[Any, ...]:
        found = forecasts.get(entry[1].uuid)
        group = entry[1]
        since = group.admitted_at or group.scheduling_at or entry[0].submitted_at
        return (found is None, found.position if found else 0, since, entry[1].uuid)

    entries: list[dict[str, Any]] = []
    for workflow, group in sorted(waiting, key=order):
        found = forecasts.get(group.uuid)
        position = found.position if found else None
        if not may_read(workflow):
            entries.append({"position": position, "hidden": True})
            continue
        since = group.scheduling_at or workflow.submitted_at
        row: dict[str, Any] = {
            "position": position,
            "hidden": False,
            "workflow_id": workflow.workflow_id,
            "group": group.name,
            "pool": workflow.pool,
            "user": workflow.submitted_by,
            "priority": workflow.priority,
            "tasks": len(group.tasks),
            "waiting_s": round(max((now - since).total_seconds(), 0.0)),
            "queue_position": found.queue_position if found else None,
            "p10": optional_wire_time(found.p10) if found else None,
            "p50": optional_wire_time(found.p50) if found else None,
            "p90": optional_wire_time(found.p90) if found else None,
            "on_timeouts": found.on_timeouts if found else None,
            "forecast_at": optional_wire_time(found.computed_at) if found else None,
            "reason": group.pending_reason or (reasons or {}).get(group.uuid),
            **_shape_fields(
                (shapes or {}).get(group.uuid),
                (quotas or {}).get(workflow.pool),
                workflow.priority,
            ),
        }
        entries.append(row)
    return entries


def _shape_fields(
    shape: RequestedShape | None, quota: QuotaRoom | None, priority: str
) -> dict[str, Any]:
    """What the group asks for, and how many of its GPUs it would borrow above its pool's
    guarantee if it started now: only LOW work borrows (HIGH and NORMAL work runs within the
    guarantee: ``scheduler/queues.py``); None where it cannot, or the pool has no guarantee."""
    if shape is None:
        return {"shape": None, "gpus": None, "borrows": None}
    borrows = None
    if quota is not None and priority == BORROWING:
        borrows = quota.borrowed_by(shape.gpus)
    return {"shape": shape.text, "gpus": shape.gpus, "borrows": borrows}


def start_text(entry: Mapping[str, Any], now: datetime) -> str:
    """An entry's forecast from ``now``: ``~40 min (25 min - 1 h 30 min)``, or ``unknown (at
    the latest 6 d 23 h)`` when the work it waits on has no past runs; its age when stale;
    ``-`` before its first forecast."""
    if entry.get("forecast_at") is None:
        return "-"
    p10, p50, p90 = (until_text(entry[key], now) for key in ("p10", "p50", "p90"))
    band = f"unknown (at the latest {p90})" if entry["on_timeouts"] else f"~{p50} ({p10} - {p90})"
    age = (now - read_wire_time(entry["forecast_at"])).total_seconds()
    if age > STALE_SECONDS:
        band += f", {duration_text(age)} old"
    return band


def until_text(value: str | None, now: datetime) -> str:
    """How long from ``now`` until ``value`` (a wire time): ``now`` when past, ``over 7 d``
    for None (not within the forecast's horizon)."""
    if value is None:
        return "over 7 d"
    seconds = (read_wire_time(value) - now).total_seconds()
    return "now" if seconds <= 0 else duration_text(seconds)
