"""The workflow lists the API and the dashboard show: newest first, counts by status, recent
failures, queues, and the marker a live page polls (a part of :class:`WorkflowStore`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, case, func, or_, select

from corral.domain.views.stop_cost import StopCost
from corral.domain.workflows.statuses import ALIVE, QUEUED, TaskStatus
from corral.store.tables import (
    eviction_stops,
    node_faults,
    preemptions,
    task_logs,
    workflow_groups,
    workflow_tasks,
    workflows,
)
from corral.store.workflows.records import utc


class WorkflowListings:
    """Reads of many workflows' summaries for the API and the pages (the controller's reads
    and writes are :class:`WorkflowStore`'s)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def preempted_gpus(self, since: datetime) -> dict[str, int]:
        """Per pool, the GPUs of its gangs evicted by preemption or reclaim since ``since``."""
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(preemptions.c.pool, func.sum(preemptions.c.gpus))
                .where(preemptions.c.at >= since)
                .group_by(preemptions.c.pool)
            ).all()
        return {row[0]: int(row[1]) for row in rows}

    def node_fault_losses(self) -> dict[str, tuple[int, float]]:
        """Per pool, the groups node faults ended or requeued, and the GPU-seconds of work
        they lost (since the database was made)."""
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(
                    node_faults.c.pool, func.count(), func.sum(node_faults.c.gpu_seconds)
                ).group_by(node_faults.c.pool)
            ).all()
        return {row[0]: (int(row[1]), float(row[2] or 0.0)) for row in rows}

    def eviction_losses(self) -> dict[tuple[str, str], tuple[int, float, int]]:
        """Per (pool, cause), the gangs preemption, reclaim or drains stopped, the GPU-seconds
        they lost since their checkpoints, and how many acknowledged their notice (since the
        database was made; docs/checkpoints.md)."""
        table = eviction_stops
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(
                    table.c.pool,
                    table.c.cause,
                    func.count(),
                    func.sum(table.c.lost_gpu_seconds),
                    func.sum(case((table.c.acknowledged, 1), else_=0)),
                ).group_by(table.c.pool, table.c.cause)
            ).all()
        return {
            (row[0], row[1]): (int(row[2]), float(row[3] or 0.0), int(row[4] or 0)) for row in rows
        }

    def lost_to_preemption(self, since: datetime) -> dict[str, float]:
        """Per pool, the GPU-seconds its gangs preempted or reclaimed since ``since`` lost
        since their checkpoints (docs/checkpoints.md#what-a-stop-cost)."""
        table = eviction_stops
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(table.c.pool, func.sum(table.c.lost_gpu_seconds))
                .where(table.c.at >= since, table.c.cause != "drained")
                .group_by(table.c.pool)
            ).all()
        return {row[0]: float(row[1] or 0.0) for row in rows}

    def stop_costs(self, workflow_id: str) -> dict[str, StopCost]:
        """By group uuid, what the workflow's latest stop of each group cost."""
        table = eviction_stops
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(
                    table.c.group_uuid,
                    table.c.lost_gpu_seconds,
                    table.c.acknowledged,
                    table.c.stop_seconds,
                )
                .where(table.c.workflow_id == workflow_id)
                .order_by(table.c.id)
            ).all()
        return {row[0]: StopCost(float(row[1]), bool(row[2]), float(row[3])) for row in rows}

    def completed_runtimes(self, pool: str, limit: int = 2000) -> list[tuple[str, str, float]]:
        """The runtimes of the pool's groups that completed, the latest ``limit`` first:
        (workflow name, user, seconds from start to end), what a forecast samples from."""
        query = (
            select(
                workflows.c.name,
                workflows.c.submitted_by,
                workflow_groups.c.started_at,
                workflow_groups.c.ended_at,
            )
            .join(workflow_groups, workflow_groups.c.workflow_id == workflows.c.workflow_id)
            .where(
                workflows.c.pool == pool,
                workflow_groups.c.status == TaskStatus.COMPLETED,
                workflow_groups.c.started_at.is_not(None),
                workflow_groups.c.ended_at.is_not(None),
            )
            .order_by(workflow_groups.c.ended_at.desc())
            .limit(limit)
        )
        with self._engine.connect() as connection:
            rows = connection.execute(query).all()
        found = []
        for name, user, started, ended in rows:
            start, end = utc(started), utc(ended)
            if start is not None and end is not None:
                found.append((str(name), str(user), max((end - start).total_seconds(), 0.0)))
        return found

    def pools(self) -> list[str]:
        """Every pool some workflow was submitted to."""
        with self._engine.connect() as connection:
            rows = connection.execute(select(workflows.c.pool).distinct()).all()
        return sorted(row[0] for row in rows)

    def kept_log(self, task_uuid: str, retry_id: int) -> str | None:
        """The log kept for an attempt whose backend no longer has it, if any."""
        with self._engine.connect() as connection:
            return connection.execute(
                select(task_logs.c.text).where(
                    task_logs.c.task_uuid == task_uuid, task_logs.c.retry_id == retry_id
                )
            ).scalar()

    def list(
        self,
        *,
        users: Sequence[str] | None = None,
        pools: Sequence[str] | None = None,
        limit: int = 100,
        visible_to: tuple[str, Sequence[str]] | None = None,
        statuses: Sequence[str] | None = None,
        offset: int = 0,
        name_contains: str | None = None,
        oldest_first: bool = False,
    ) -> list[dict[str, Any]]:
        """Newest first (``oldest_first``: the other way); only the summary columns.
        ``visible_to=(user, pools)`` keeps the user's own workflows and those in ``pools``."""
        query = _visible(
            select(
                workflows.c.workflow_id,
                workflows.c.uuid,
                workflows.c.pool,
                workflows.c.status,
                workflows.c.priority,
                workflows.c.submitted_by,
                workflows.c.submitted_at,
                workflows.c.started_at,
                workflows.c.ended_at,
            ),
            visible_to,
        )
        if oldest_first:
            query = query.order_by(workflows.c.submitted_at, workflows.c.workflow_id)
        else:
            query = query.order_by(workflows.c.submitted_at.desc(), workflows.c.workflow_id.desc())
        if users is not None:
            query = query.where(workflows.c.submitted_by.in_(list(users)))
        if pools is not None:
            query = query.where(workflows.c.pool.in_(list(pools)))
        if statuses is not None:
            query = query.where(workflows.c.status.in_(list(statuses)))
        if name_contains:
            query = query.where(workflows.c.workflow_id.contains(name_contains, autoescape=True))
        with self._engine.connect() as connection:
            rows = connection.execute(query.limit(limit).offset(offset)).mappings().all()
        return [dict(row) for row in rows]

    def status_counts(
        self, since: datetime, visible_to: tuple[str, Sequence[str]] | None = None
    ) -> dict[str, int]:
        """How many workflows are in each status: every alive one, and those that ended since
        ``since``."""
        query = _visible(
            select(workflows.c.status, func.count()).where(
                or_(workflows.c.status.in_(ALIVE), workflows.c.ended_at >= since)
            ),
            visible_to,
        ).group_by(workflows.c.status)
        with self._engine.connect() as connection:
            return {row[0]: int(row[1]) for row in connection.execute(query).all()}

    def recent_failures(
        self, since: datetime, limit: int, visible_to: tuple[str, Sequence[str]] | None = None
    ) -> Sequence[dict[str, Any]]:
        """The workflows that ended FAILED* since ``since``, the latest first: id, pool,
        status, when and why they ended."""
        query = _visible(
            select(
                workflows.c.workflow_id,
                workflows.c.pool,
                workflows.c.status,
                workflows.c.ended_at,
                workflows.c.message,
            ).where(workflows.c.status.like("FAILED%"), workflows.c.ended_at >= since),
            visible_to,
        ).order_by(workflows.c.ended_at.desc(), workflows.c.workflow_id)
        with self._engine.connect() as connection:
            rows = connection.execute(query.limit(limit)).mappings().all()
        return [{**row, "ended_at": utc(row["ended_at"])} for row in rows]

    def queued(self, pools: Sequence[str]) -> Sequence[tuple[str, str, str, datetime]]:
        """The workflows of ``pools`` that wait to start (PENDING or WAITING): id, pool,
        priority and submission time, oldest first."""
        query = (
            select(
                workflows.c.workflow_id,
                workflows.c.pool,
                workflows.c.priority,
                workflows.c.submitted_at,
            )
            .where(workflows.c.status.in_(QUEUED), workflows.c.pool.in_(list(pools)))
            .order_by(workflows.c.submitted_at, workflows.c.workflow_id)
        )
        with self._engine.connect() as connection:
            rows = connection.execute(query).all()
        return [(row[0], row[1], row[2], utc(row[3]) or row[3]) for row in rows]

    def owners(self, workflow_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """The pool and submitter of each of ``workflow_ids`` that exists."""
        if not workflow_ids:
            return {}
        query = select(workflows.c.workflow_id, workflows.c.pool, workflows.c.submitted_by).where(
            workflows.c.workflow_id.in_(list(workflow_ids))
        )
        with self._engine.connect() as connection:
            return {row[0]: (row[1], row[2]) for row in connection.execute(query)}

    def change_marker(self, workflow_id: str | None = None) -> tuple[Any, ...]:
        """A value that changes when a workflow (``workflow_id``, or any) is submitted or
        changes status, or one of its groups or tasks does: what a live page polls."""
        with self._engine.connect() as connection:
            if workflow_id is None:
                return tuple(
                    connection.execute(
                        select(
                            func.count(),
                            func.max(workflows.c.submitted_at),
                            func.max(workflows.c.started_at),
                            func.max(workflows.c.ended_at),
                            func.count(workflows.c.cancel_requested_by),
                        )
                    ).one()
                ) + tuple(
                    connection.execute(
                        select(workflows.c.status, func.count()).group_by(workflows.c.status)
                    ).all()
                )
            groups = select(workflow_groups.c.group_uuid).where(
                workflow_groups.c.workflow_id == workflow_id
            )
            return (
                connection.execute(
                    select(workflows.c.status, workflows.c.cancel_requested_by).where(
                        workflows.c.workflow_id == workflow_id
                    )
                ).first(),
                tuple(
                    connection.execute(
                        select(workflow_groups.c.status, workflow_groups.c.pending_reason).where(
                            workflow_groups.c.workflow_id == workflow_id
                        )
                    ).all()
                ),
                tuple(
                    connection.execute(
                        select(
                            workflow_tasks.c.status,
                            workflow_tasks.c.retry_id,
                            workflow_tasks.c.node,
                        ).where(workflow_tasks.c.group_uuid.in_(groups))
                    ).all()
                ),
            )


def _visible(query: Any, visible_to: tuple[str, Sequence[str]] | None) -> Any:
    """``query`` kept to the user's own workflows and those in the pools it may read."""
    if visible_to is None:
        return query
    owner, readable = visible_to
    return query.where(or_(workflows.c.submitted_by == owner, workflows.c.pool.in_(list(readable))))
