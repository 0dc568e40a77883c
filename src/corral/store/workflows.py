"""Accepted workflows: one row each, with their groups (and exact manifests) and tasks.

A workflow is written in one transaction, so it is either stored whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, func, or_, select
from sqlalchemy.exc import IntegrityError

from corral.domain.workflows.plan import WorkflowPlan
from corral.domain.workflows.spec import ExitAction, TaskFileContents
from corral.errors import ConflictError, NotFoundError
from corral.store.database import writing
from corral.store.tables import task_logs, workflow_groups, workflow_tasks, workflows

#: Statuses at acceptance (OSMO: workflow PENDING, groups SUBMITTING, tasks WAITING).
WORKFLOW_ACCEPTED = "PENDING"
GROUP_ACCEPTED = "SUBMITTING"
TASK_ACCEPTED = "WAITING"


#: Workflow statuses the controller still works on.
ALIVE = ("PENDING", "RUNNING", "WAITING")


@dataclass
class Changes:
    """Column updates by primary key, written together by :meth:`WorkflowStore.commit`."""

    workflows: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (task uuid, retry id) -> what the attempt printed, kept in the database.
    logs: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.workflows or self.groups or self.tasks or self.logs)

    def workflow(self, workflow_id: str, **values: Any) -> None:
        self.workflows.setdefault(workflow_id, {}).update(values)

    def group(self, group_uuid: str, **values: Any) -> None:
        self.groups.setdefault(group_uuid, {}).update(values)

    def task(self, task_uuid: str, **values: Any) -> None:
        self.tasks.setdefault(task_uuid, {}).update(values)


@dataclass(frozen=True)
class UncleanedGroup:
    uuid: str
    workflow_uuid: str
    backend: str
    namespace: str
    #: ``[apiVersion, kind]`` of every object the group was given, in creation order.
    kinds: list[list[str]]


@dataclass(frozen=True)
class StoredTask:
    name: str
    uuid: str
    pod_name: str
    platform: str
    lead: bool
    status: str
    retry_id: int
    node: str | None = None
    exit_code: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    message: str | None = None
    exit_actions: tuple[ExitAction, ...] = ()


@dataclass(frozen=True)
class StoredGroup:
    name: str
    uuid: str
    status: str
    upstream: list[str]
    resource_kinds: list[list[str]]
    manifests: list[dict[str, Any]]
    tasks: list[StoredTask]
    ignore_non_lead: bool = True
    scheduling_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    domains: dict[str, str] | None = None
    pending_reason: str | None = None
    cleaned: bool = False


@dataclass(frozen=True)
class StoredWorkflow:
    workflow_id: str
    name: str
    uuid: str
    pool: str
    backend: str
    namespace: str
    status: str
    priority: str
    submitted_by: str
    submitted_at: datetime
    exec_timeout_s: float
    queue_timeout_s: float
    spec: str
    template: str | None
    groups: list[StoredGroup]
    started_at: datetime | None = None
    ended_at: datetime | None = None
    cancel_requested_by: str | None = None
    message: str | None = None
    local_files: Mapping[str, TaskFileContents] = field(default_factory=dict)
    restarted_from: str | None = None


class WorkflowStore:
    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self._engine = engine
        self._clock = clock

    @property
    def engine(self) -> Engine:
        return self._engine

    def next_number(self, name: str) -> int:
        """The number the next workflow called ``name`` gets: 1, then one more than the last."""
        with self._engine.connect() as connection:
            last = connection.execute(
                select(func.max(workflows.c.number)).where(workflows.c.name == name)
            ).scalar()
        return int(last or 0) + 1

    def insert(
        self,
        plan: WorkflowPlan,
        *,
        name: str,
        number: int,
        spec: str,
        template: str | None,
        local_files: Mapping[str, TaskFileContents] | None = None,
        restarted_from: str | None = None,
    ) -> None:
        """Store the workflow whole; ConflictError if its id was taken meanwhile."""
        submitter = plan.submitter
        try:
            with writing(self._engine) as connection:
                connection.execute(
                    workflows.insert().values(
                        workflow_id=submitter.workflow_id,
                        name=name,
                        number=number,
                        uuid=submitter.workflow_uuid,
                        pool=submitter.pool,
                        backend=plan.backend,
                        namespace=plan.namespace,
                        status=WORKFLOW_ACCEPTED,
                        priority=submitter.priority,
                        submitted_by=submitter.user,
                        submitted_at=self._clock(),
                        exec_timeout_s=plan.exec_timeout.total_seconds(),
                        queue_timeout_s=plan.queue_timeout.total_seconds(),
                        spec=spec,
                        template=template,
                        local_files={
                            path: {"contents": found.contents, "base64": found.base64}
                            for path, found in (local_files or {}).items()
                        }
                        or None,
                        restarted_from=restarted_from,
                    )
                )
                connection.execute(workflow_groups.insert(), _group_rows(plan))
                connection.execute(workflow_tasks.insert(), _task_rows(plan))
        except IntegrityError:
            raise ConflictError(
                f"Workflow id {submitter.workflow_id} was taken by a concurrent submission"
            ) from None

    def get(self, workflow_id: str) -> StoredWorkflow:
        with self._engine.connect() as connection:
            row = (
                connection.execute(select(workflows).where(workflows.c.workflow_id == workflow_id))
                .mappings()
                .first()
            )
            if row is None:
                raise NotFoundError(f"Workflow {workflow_id} not found.")
            groups = (
                connection.execute(
                    select(workflow_groups)
                    .where(workflow_groups.c.workflow_id == workflow_id)
                    .order_by(workflow_groups.c.position)
                )
                .mappings()
                .all()
            )
            tasks = (
                connection.execute(
                    select(workflow_tasks)
                    .where(workflow_tasks.c.group_uuid.in_([g["group_uuid"] for g in groups]))
                    .order_by(workflow_tasks.c.position)
                )
                .mappings()
                .all()
            )
        return _workflow(
            row,
            [_group(g, [t for t in tasks if t["group_uuid"] == g["group_uuid"]]) for g in groups],
        )

    def alive_ids(self) -> list[str]:
        """Workflows the lifecycle controller still has work on, oldest first."""
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(workflows.c.workflow_id)
                .where(workflows.c.status.in_(ALIVE))
                .order_by(workflows.c.submitted_at, workflows.c.workflow_id)
            ).all()
        return [row[0] for row in rows]

    def uncleaned_groups(self, finished: Sequence[str]) -> list[UncleanedGroup]:
        """Groups in one of the ``finished`` statuses whose objects may still exist."""
        query = (
            select(
                workflows.c.backend,
                workflows.c.namespace,
                workflows.c.uuid,
                workflow_groups.c.group_uuid,
                workflow_groups.c.resource_kinds,
            )
            .join(workflows, workflows.c.workflow_id == workflow_groups.c.workflow_id)
            .where(workflow_groups.c.cleaned.is_(False))
            .where(workflow_groups.c.status.in_(list(finished)))
        )
        with self._engine.connect() as connection:
            rows = connection.execute(query).all()
        return [
            UncleanedGroup(row.group_uuid, row.uuid, row.backend, row.namespace, row.resource_kinds)
            for row in rows
        ]

    def request_cancel(self, workflow_id: str, username: str) -> bool:
        """Ask the controller to cancel; False when the workflow had already finished."""
        with writing(self._engine) as connection:
            done = connection.execute(
                workflows.update()
                .where(workflows.c.workflow_id == workflow_id)
                .where(workflows.c.status.in_(ALIVE))
                .where(workflows.c.cancel_requested_by.is_(None))
                .values(cancel_requested_by=username)
            ).rowcount
        return bool(done)

    def commit(
        self,
        changes: Changes,
        also: Callable[[Connection], None] | None = None,
        fence: Callable[[Connection], None] | None = None,
    ) -> None:
        """Write ``changes`` (and whatever ``also`` writes) in one transaction; ``fence`` runs
        first and may refuse the whole transaction (the controller's lease)."""
        if changes.empty and also is None:
            return
        with writing(self._engine) as connection:
            if fence is not None:
                fence(connection)
            for table, key, rows in (
                (workflows, workflows.c.workflow_id, changes.workflows),
                (workflow_groups, workflow_groups.c.group_uuid, changes.groups),
                (workflow_tasks, workflow_tasks.c.task_uuid, changes.tasks),
            ):
                for identifier, values in rows.items():
                    connection.execute(table.update().where(key == identifier).values(**values))
            for (task_uuid, retry_id), text in changes.logs.items():
                connection.execute(
                    task_logs.delete().where(
                        task_logs.c.task_uuid == task_uuid, task_logs.c.retry_id == retry_id
                    )
                )
                connection.execute(
                    task_logs.insert().values(task_uuid=task_uuid, retry_id=retry_id, text=text)
                )
            if also is not None:
                also(connection)

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
    ) -> list[dict[str, Any]]:
        """Newest first; only the summary columns. ``visible_to=(user, pools)`` keeps the
        user's own workflows and those in ``pools``."""
        query = select(
            workflows.c.workflow_id,
            workflows.c.pool,
            workflows.c.status,
            workflows.c.priority,
            workflows.c.submitted_by,
            workflows.c.submitted_at,
        ).order_by(workflows.c.submitted_at.desc(), workflows.c.workflow_id.desc())
        if users is not None:
            query = query.where(workflows.c.submitted_by.in_(list(users)))
        if pools is not None:
            query = query.where(workflows.c.pool.in_(list(pools)))
        if visible_to is not None:
            owner, readable = visible_to
            query = query.where(
                or_(workflows.c.submitted_by == owner, workflows.c.pool.in_(list(readable)))
            )
        with self._engine.connect() as connection:
            rows = connection.execute(query.limit(limit)).mappings().all()
        return [dict(row) for row in rows]


def _group_rows(plan: WorkflowPlan) -> list[dict[str, Any]]:
    return [
        {
            "group_uuid": group.uuid,
            "workflow_id": plan.submitter.workflow_id,
            "position": position,
            "name": group.name,
            "status": GROUP_ACCEPTED,
            "upstream": list(group.upstream),
            "resource_kinds": [list(kind) for kind in group.resource_kinds],
            "manifests": list(group.manifests),
            "ignore_non_lead": group.ignore_non_lead_status,
            "cleaned": False,
        }
        for position, group in enumerate(plan.groups)
    ]


def _task_rows(plan: WorkflowPlan) -> list[dict[str, Any]]:
    return [
        {
            "task_uuid": task.uuid,
            "group_uuid": group.uuid,
            "position": position,
            "name": task.name,
            "pod_name": task.pod_name,
            "platform": task.platform,
            "lead": task.lead,
            "status": TASK_ACCEPTED,
            "retry_id": 0,
            "exit_actions": [
                [action.action, [list(r) for r in action.ranges]] for action in task.exit_actions
            ],
        }
        for group in plan.groups
        for position, task in enumerate(group.tasks)
    ]


def _group(row: Any, tasks: Sequence[Any]) -> StoredGroup:
    return StoredGroup(
        name=row["name"],
        uuid=row["group_uuid"],
        status=row["status"],
        upstream=list(row["upstream"]),
        resource_kinds=[list(kind) for kind in row["resource_kinds"]],
        manifests=list(row["manifests"]),
        ignore_non_lead=bool(row["ignore_non_lead"]),
        scheduling_at=_utc(row["scheduling_at"]),
        started_at=_utc(row["started_at"]),
        ended_at=_utc(row["ended_at"]),
        domains=row["domains"],
        pending_reason=row["pending_reason"],
        cleaned=bool(row["cleaned"]),
        tasks=[
            StoredTask(
                name=t["name"],
                uuid=t["task_uuid"],
                pod_name=t["pod_name"],
                platform=t["platform"],
                lead=bool(t["lead"]),
                status=t["status"],
                retry_id=int(t["retry_id"]),
                node=t["node"],
                exit_code=t["exit_code"],
                started_at=_utc(t["started_at"]),
                ended_at=_utc(t["ended_at"]),
                message=t["message"],
                exit_actions=tuple(
                    ExitAction(action, tuple((low, high) for low, high in ranges))
                    for action, ranges in t["exit_actions"] or ()
                ),
            )
            for t in tasks
        ],
    )


def _workflow(row: Any, groups: list[StoredGroup]) -> StoredWorkflow:
    return StoredWorkflow(
        workflow_id=row["workflow_id"],
        name=row["name"],
        uuid=row["uuid"],
        pool=row["pool"],
        backend=row["backend"],
        namespace=row["namespace"],
        status=row["status"],
        priority=row["priority"],
        submitted_by=row["submitted_by"],
        submitted_at=_utc(row["submitted_at"]) or row["submitted_at"],
        exec_timeout_s=float(row["exec_timeout_s"]),
        queue_timeout_s=float(row["queue_timeout_s"]),
        spec=row["spec"],
        template=row["template"],
        groups=groups,
        started_at=_utc(row["started_at"]),
        ended_at=_utc(row["ended_at"]),
        cancel_requested_by=row["cancel_requested_by"],
        message=row["message"],
        local_files={
            path: TaskFileContents(str(found["contents"]), bool(found.get("base64")))
            for path, found in (row["local_files"] or {}).items()
        },
        restarted_from=row["restarted_from"],
    )


def _utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every time corral stores is UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def pod_of(workflow: StoredWorkflow, task: StoredTask) -> dict[str, Any]:
    """The stored Pod manifest of ``task``."""
    for group in workflow.groups:
        for manifest in group.manifests:
            if manifest["kind"] == "Pod" and manifest["metadata"]["name"] == task.pod_name:
                return manifest
    raise LookupError(f"task {task.name} of {workflow.workflow_id} has no stored pod")
