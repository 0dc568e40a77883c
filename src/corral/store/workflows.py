"""Accepted workflows: one row each, with their groups (and exact manifests) and tasks.

A workflow is written in one transaction, so it is either stored whole or not at all, together
with a row of the controller's inbox (``controller_inbox``) that tells the controller about it.
The controller reads what it works on in set-based queries (:meth:`WorkflowStore.controller_view`,
:meth:`WorkflowStore.manifests`) and writes a tick's changes in one transaction of batched
statements (:meth:`WorkflowStore.commit`), never one query per workflow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    String,
    Table,
    any_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import IntegrityError

from corral.domain.workflows.plan import WorkflowPlan
from corral.domain.workflows.spec import ExitAction, TaskFileContents
from corral.errors import ConflictError, NotFoundError
from corral.store.bulk import insert_rows, update_rows
from corral.store.database import autocommit, writing
from corral.store.tables import (
    controller_inbox,
    idempotency_keys,
    pending_shapes,
    preemptions,
    task_logs,
    workflow_groups,
    workflow_numbers,
    workflow_tasks,
    workflows,
)

#: Statuses at acceptance (OSMO: workflow PENDING, groups SUBMITTING, tasks WAITING).
WORKFLOW_ACCEPTED = "PENDING"
GROUP_ACCEPTED = "SUBMITTING"
TASK_ACCEPTED = "WAITING"


#: Workflow statuses the controller still works on.
ALIVE = ("PENDING", "RUNNING", "WAITING")
#: Alive workflows none of whose groups started yet.
QUEUED = ("PENDING", "WAITING")
#: Group status while a scheduler may place it.
GROUP_SCHEDULING = "SCHEDULING"
#: What the inbox says of a workflow.
SUBMITTED, CANCEL = "submitted", "cancel"
#: Ids per ``IN (...)`` list: SQLite allows 32,766 variables per statement.
_CHUNK = 1000
#: Statements every submission runs, built once: building one from values costs more than
#: running it.
_KEPT = select(idempotency_keys.c.workflow_id, idempotency_keys.c.request_hash).where(
    idempotency_keys.c.username == bindparam("user"), idempotency_keys.c.key == bindparam("key")
)
_TAKE_NUMBER = (
    workflow_numbers.update()
    .where(workflow_numbers.c.name == bindparam("row_name"))
    .values(last=workflow_numbers.c.last + 1)
    .returning(workflow_numbers.c.last)
)
#: Rows given the same values are updated by one ``WHERE key IN (...)`` statement from this
#: many on (one array of keys instead of an array per column); fewer join the bulk update of
#: their columns (``store.bulk``), which costs no extra statement.
_ONE_STATEMENT_FROM = 8


@dataclass(frozen=True)
class SharedReason:
    """Why the waiting groups of one shape wait, written for the pods ``pod_names``."""

    reason: str
    pod_names: tuple[str, ...]


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


@dataclass
class Changes:
    """Column updates by primary key, written together by :meth:`WorkflowStore.commit`."""

    workflows: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (task uuid, retry id) -> what the attempt printed, kept in the database.
    logs: dict[tuple[str, int], str] = field(default_factory=dict)
    #: Shape -> why its groups wait (``pending_shapes``).
    shapes: dict[str, SharedReason] = field(default_factory=dict)
    #: Inbox rows the controller has read and acted on.
    inbox_done: list[int] = field(default_factory=list)
    #: Rows of ``preemptions``: gangs evicted by the scheduler.
    preemptions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.workflows
            or self.groups
            or self.tasks
            or self.logs
            or self.shapes
            or self.inbox_done
            or self.preemptions
        )

    def merge(self, other: Changes) -> None:
        """Add ``other``'s changes (a later one wins per column)."""
        for mine, theirs in (
            (self.workflows, other.workflows),
            (self.groups, other.groups),
            (self.tasks, other.tasks),
        ):
            for key, values in theirs.items():
                mine.setdefault(key, {}).update(values)
        self.logs.update(other.logs)
        self.shapes.update(other.shapes)
        self.inbox_done.extend(other.inbox_done)
        self.preemptions.extend(other.preemptions)

    def workflow(self, workflow_id: str, **values: Any) -> None:
        self.workflows.setdefault(workflow_id, {}).update(values)

    def group(self, group_uuid: str, **values: Any) -> None:
        self.groups.setdefault(group_uuid, {}).update(values)

    def task(self, task_uuid: str, **values: Any) -> None:
        self.tasks.setdefault(task_uuid, {}).update(values)


@dataclass(frozen=True)
class UncleanedGroup:
    uuid: str
    workflow_id: str
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
    #: While it waits for corral's scheduler: the shape whose reason it shares.
    pending_shape: str | None = None
    #: Evicted by the scheduler: the next step stops its tasks and ends or requeues it.
    evict: bool = False
    #: Why it was last evicted.
    preempted_by: str | None = None


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
        """The number the next workflow called ``name`` would get (a dry run's), not taken."""
        with self._engine.connect() as connection:
            last = connection.execute(
                select(workflow_numbers.c.last).where(workflow_numbers.c.name == name)
            ).scalar()
            if last is None:
                last = connection.execute(
                    select(func.max(workflows.c.number)).where(workflows.c.name == name)
                ).scalar()
        return int(last or 0) + 1

    def take_number(self, name: str) -> int:
        """Take the next number of ``name`` for a submission: 1, then one more than the last
        taken. Taken for good: a submission refused after this leaves a gap."""
        if self._engine.dialect.name == "postgresql":
            # One statement is atomic by itself: no BEGIN and COMMIT round trips for a name
            # already numbered (SQLite's writers must take its write lock first).
            with autocommit(self._engine) as connection:
                taken = connection.execute(_TAKE_NUMBER, {"row_name": name}).scalar()
            if taken is not None:
                return int(taken)
        for _ in range(3):  # two servers may create the row of a new name at once
            try:
                with writing(self._engine) as connection:
                    taken = connection.execute(_TAKE_NUMBER, {"row_name": name}).scalar()
                    if taken is None:
                        before = connection.execute(
                            select(func.max(workflows.c.number)).where(workflows.c.name == name)
                        ).scalar()
                        taken = int(before or 0) + 1
                        connection.execute(insert(workflow_numbers).values(name=name, last=taken))
                return int(taken)
            except IntegrityError:
                continue
        raise ConflictError(f"Could not number workflow {name}; submit again.")

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
        idempotency_key: IdempotencyKey | None = None,
    ) -> None:
        """Store the workflow whole, and tell the controller; ConflictError if its id was taken
        meanwhile, :class:`KeyTaken` if the submitter's ``idempotency_key`` was."""
        submitter = plan.submitter
        now = self._clock()
        try:
            with writing(self._engine) as connection:
                if idempotency_key is not None:
                    _take_key(
                        connection, submitter.user, idempotency_key, submitter.workflow_id, now
                    )
                connection.execute(
                    workflows.insert(),
                    {
                        "workflow_id": submitter.workflow_id,
                        "name": name,
                        "number": number,
                        "uuid": submitter.workflow_uuid,
                        "pool": submitter.pool,
                        "backend": plan.backend,
                        "namespace": plan.namespace,
                        "status": WORKFLOW_ACCEPTED,
                        "priority": submitter.priority,
                        "submitted_by": submitter.user,
                        "submitted_at": now,
                        "exec_timeout_s": plan.exec_timeout.total_seconds(),
                        "queue_timeout_s": plan.queue_timeout.total_seconds(),
                        "spec": spec,
                        "template": template,
                        "local_files": {
                            path: {"contents": found.contents, "base64": found.base64}
                            for path, found in (local_files or {}).items()
                        }
                        or None,
                        "restarted_from": restarted_from,
                    },
                )
                insert_rows(connection, workflow_groups, _group_rows(plan))
                insert_rows(connection, workflow_tasks, _task_rows(plan))
                _tell_controller(connection, submitter.workflow_id, SUBMITTED, now)
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
            shared = _shared_reasons(connection, groups)
        return _workflow(
            row,
            [
                _group(g, [t for t in tasks if t["group_uuid"] == g["group_uuid"]], shared)
                for g in groups
            ],
        )

    def controller_view(self, ids: Sequence[str] | None = None) -> list[StoredWorkflow]:
        """Alive workflows as the controller works on them, oldest first: every alive one, or
        those of ``ids`` that are alive. Three queries per thousand ids; without what the
        controller never reads (spec, template, local files) and without the groups'
        manifests (:meth:`manifests`), which are most of a workflow's bytes."""
        found: list[StoredWorkflow] = []
        if ids is None:
            with self._engine.connect() as connection:
                return _controller_rows(connection, None)
        for start in range(0, len(ids), _CHUNK):
            with self._engine.connect() as connection:
                found.extend(_controller_rows(connection, ids[start : start + _CHUNK]))
        return sorted(found, key=lambda w: (w.submitted_at, w.workflow_id))

    def manifests(self, group_uuids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """The stored objects of each group, by group uuid."""
        found: dict[str, list[dict[str, Any]]] = {}
        for start in range(0, len(group_uuids), _CHUNK):
            chunk = list(group_uuids[start : start + _CHUNK])
            with self._engine.connect() as connection:
                rows = connection.execute(
                    select(workflow_groups.c.group_uuid, workflow_groups.c.manifests).where(
                        workflow_groups.c.group_uuid.in_(chunk)
                    )
                ).all()
            found.update({row.group_uuid: list(row.manifests) for row in rows})
        return found

    def inbox(self, limit: int = 10_000) -> list[InboxEntry]:
        """What the controller has not seen yet, oldest first."""
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(
                    controller_inbox.c.id, controller_inbox.c.workflow_id, controller_inbox.c.kind
                )
                .order_by(controller_inbox.c.id)
                .limit(limit)
            ).all()
        return [InboxEntry(row.id, row.workflow_id, row.kind) for row in rows]

    def kept_submission(self, username: str, key: str) -> KeptSubmission | None:
        """What ``username`` submitted with the idempotency key ``key``, if anything."""
        with autocommit(self._engine) as connection:
            found = connection.execute(_KEPT, {"user": username, "key": key}).first()
        return None if found is None else KeptSubmission(found.workflow_id, found.request_hash)

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
                workflows.c.workflow_id,
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
            UncleanedGroup(
                row.group_uuid,
                row.workflow_id,
                row.uuid,
                row.backend,
                row.namespace,
                row.resource_kinds,
            )
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
            if done:
                _tell_controller(connection, workflow_id, CANCEL, self._clock())
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
                (workflows, "workflow_id", changes.workflows),
                (workflow_groups, "group_uuid", changes.groups),
                (workflow_tasks, "task_uuid", changes.tasks),
            ):
                _update_rows(connection, table, key, rows)
            _write_logs(connection, changes.logs)
            _write_shapes(connection, changes.shapes, self._clock())
            for start in range(0, len(changes.inbox_done), _CHUNK):
                done = changes.inbox_done[start : start + _CHUNK]
                connection.execute(delete(controller_inbox).where(controller_inbox.c.id.in_(done)))
            if changes.preemptions:
                connection.execute(insert(preemptions), changes.preemptions)
            if also is not None:
                also(connection)

    def forget_shapes(self) -> None:
        """Delete the reasons no waiting group refers to any more."""
        in_use = select(workflow_groups.c.pending_shape).where(
            workflow_groups.c.status == GROUP_SCHEDULING,
            workflow_groups.c.pending_shape.is_not(None),
        )
        with writing(self._engine) as connection:
            connection.execute(delete(pending_shapes).where(pending_shapes.c.shape.not_in(in_use)))

    def preempted_gpus(self, since: datetime) -> dict[str, int]:
        """Per pool, the GPUs of its gangs evicted by preemption or reclaim since ``since``."""
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(preemptions.c.pool, func.sum(preemptions.c.gpus))
                .where(preemptions.c.at >= since)
                .group_by(preemptions.c.pool)
            ).all()
        return {row[0]: int(row[1]) for row in rows}

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
    ) -> list[dict[str, Any]]:
        """Newest first; only the summary columns. ``visible_to=(user, pools)`` keeps the
        user's own workflows and those in ``pools``."""
        query = _visible(
            select(
                workflows.c.workflow_id,
                workflows.c.pool,
                workflows.c.status,
                workflows.c.priority,
                workflows.c.submitted_by,
                workflows.c.submitted_at,
            ),
            visible_to,
        ).order_by(workflows.c.submitted_at.desc(), workflows.c.workflow_id.desc())
        if users is not None:
            query = query.where(workflows.c.submitted_by.in_(list(users)))
        if pools is not None:
            query = query.where(workflows.c.pool.in_(list(pools)))
        if statuses is not None:
            query = query.where(workflows.c.status.in_(list(statuses)))
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
        return [{**row, "ended_at": _utc(row["ended_at"])} for row in rows]

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
        return [(row[0], row[1], row[2], _utc(row[3]) or row[3]) for row in rows]

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


class KeyTaken(Exception):
    """The submitter already used this idempotency key (for the workflow it names)."""


def _take_key(
    connection: Connection, username: str, key: IdempotencyKey, workflow_id: str, now: datetime
) -> None:
    """Record the key first in the submission's transaction: a second use of it fails here,
    and the whole transaction with it (the caller answers the first workflow)."""
    try:
        connection.execute(
            idempotency_keys.insert(),
            {
                "username": username,
                "key": key.key,
                "workflow_id": workflow_id,
                "request_hash": key.request_hash,
                "created_at": now,
            },
        )
    except IntegrityError:
        raise KeyTaken(key.key) from None


def _tell_controller(connection: Connection, workflow_id: str, kind: str, now: datetime) -> None:
    connection.execute(
        controller_inbox.insert(), {"workflow_id": workflow_id, "kind": kind, "created_at": now}
    )


def _update_rows(
    connection: Connection, table: Table, key: str, rows: Mapping[str, Mapping[str, Any]]
) -> None:
    """Rows given the same values are one ``UPDATE ... WHERE key IN (...)`` (a tick starts or
    ends a thousand tasks at the same instant); the rest, one bulk update per set of columns
    changed (``store.bulk``)."""
    same: dict[tuple[tuple[str, Any], ...], list[str]] = {}
    several: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for identifier, values in rows.items():
        items = tuple(sorted(values.items()))
        try:
            same.setdefault(items, []).append(identifier)
        except TypeError:  # a JSON value: not hashable, written on its own
            _add_row(several, key, identifier, items)
    for items, identifiers in same.items():
        if len(identifiers) < _ONE_STATEMENT_FROM:
            for identifier in identifiers:
                _add_row(several, key, identifier, items)
            continue
        for start in range(0, len(identifiers), _CHUNK):
            connection.execute(
                table.update()
                .where(_one_of(connection, table.c[key], identifiers[start : start + _CHUNK]))
                .values(dict(items))
            )
    for batch in several.values():
        update_rows(connection, table, (key,), batch)


def _one_of(connection: Connection, column: Any, values: list[str]) -> Any:
    """``column IN values``: on PostgreSQL one array parameter (one statement text and plan
    for any number of values), elsewhere a list of parameters."""
    if connection.dialect.name == "postgresql":
        return column == any_(bindparam("one_of", values, type_=ARRAY(String)))
    return column.in_(values)


def _add_row(
    batches: dict[tuple[str, ...], list[dict[str, Any]]],
    key: str,
    identifier: str,
    items: tuple[tuple[str, Any], ...],
) -> None:
    """Add a row to the bulk update of its set of columns."""
    columns = tuple(name for name, _ in items)
    batches.setdefault(columns, []).append({key: identifier, **dict(items)})


def _write_logs(connection: Connection, logs: Mapping[tuple[str, int], str]) -> None:
    if not logs:
        return
    keys = [{"row_task": task, "row_retry": retry} for task, retry in logs]
    connection.execute(
        task_logs.delete().where(
            task_logs.c.task_uuid == bindparam("row_task"),
            task_logs.c.retry_id == bindparam("row_retry"),
        ),
        keys,
    )
    connection.execute(
        task_logs.insert(),
        [
            {"task_uuid": task, "retry_id": retry, "text": text}
            for (task, retry), text in logs.items()
        ],
    )


def _write_shapes(
    connection: Connection, shapes: Mapping[str, SharedReason], now: datetime
) -> None:
    if not shapes:
        return
    connection.execute(delete(pending_shapes).where(pending_shapes.c.shape.in_(list(shapes))))
    connection.execute(
        insert(pending_shapes),
        [
            {
                "shape": shape,
                "reason": found.reason,
                "pod_names": list(found.pod_names),
                "updated_at": now,
            }
            for shape, found in shapes.items()
        ],
    )


def _shared_reasons(connection: Connection, groups: Sequence[Any]) -> dict[str, SharedReason]:
    """The reasons of the shapes that the waiting ``groups`` (rows) share."""
    shapes = {
        g["pending_shape"]
        for g in groups
        if g["pending_shape"] and g["status"] == GROUP_SCHEDULING and not g["pending_reason"]
    }
    if not shapes:
        return {}
    rows = connection.execute(select(pending_shapes).where(pending_shapes.c.shape.in_(shapes)))
    return {row.shape: SharedReason(row.reason, tuple(row.pod_names)) for row in rows.mappings()}


def shared_reason_for(found: SharedReason, pod_names: Sequence[str]) -> str:
    """The shape's reason as it reads for a group whose pods are ``pod_names`` (in the same
    order): where it names a pod of the group it was written for, the group's own."""
    if len(found.pod_names) != len(pod_names):
        return found.reason
    reason = found.reason
    for theirs, mine in zip(found.pod_names, pod_names, strict=True):
        reason = reason.replace(f"pod {theirs} ", f"pod {mine} ")
    return reason


_CONTROLLER_WORKFLOW_COLUMNS = [
    c for c in workflows.c if c.name not in ("spec", "template", "local_files")
]
_CONTROLLER_GROUP_COLUMNS = [c for c in workflow_groups.c if c.name != "manifests"]


def _controller_rows(connection: Connection, ids: Sequence[str] | None) -> list[StoredWorkflow]:
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
        stored = _group({**group, "manifests": []}, tasks_of.get(group["group_uuid"], []), {})
        groups_of.setdefault(group["workflow_id"], []).append(stored)
    rows = sorted(rows, key=lambda row: (row["submitted_at"], row["workflow_id"]))
    return [
        _workflow(
            {**row, "spec": "", "template": None, "local_files": None},
            groups_of.get(row["workflow_id"], []),
        )
        for row in rows
    ]


def _rows(connection: Connection, query: Any) -> list[Any]:
    return list(connection.execute(query).mappings().all())


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
            "evict": False,
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


def _group(row: Any, tasks: Sequence[Any], shared: Mapping[str, SharedReason]) -> StoredGroup:
    reason = row["pending_reason"]
    found = shared.get(row["pending_shape"] or "")
    if reason is None and found is not None and row["status"] == GROUP_SCHEDULING:
        reason = shared_reason_for(found, [t["pod_name"] for t in tasks])
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
        pending_reason=reason,
        pending_shape=row["pending_shape"],
        cleaned=bool(row["cleaned"]),
        evict=bool(row["evict"]),
        preempted_by=row["preempted_by"],
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


def with_changes(workflow: StoredWorkflow, changes: Changes) -> StoredWorkflow:
    """``workflow`` as it reads once ``changes`` are written (the controller's memory follows
    the database this way instead of reading the workflow again)."""
    groups = []
    for group in workflow.groups:
        changed = [task.uuid in changes.tasks for task in group.tasks]
        values = changes.groups.get(group.uuid, {})
        if any(changed):
            tasks = [
                _updated(task, changes.tasks[task.uuid]) if hit else task
                for task, hit in zip(group.tasks, changed, strict=True)
            ]
            values = {**values, "tasks": tasks}
        groups.append(_updated(group, values) if values else group)
    return _updated(workflow, {**changes.workflows.get(workflow.workflow_id, {}), "groups": groups})


_Record = TypeVar("_Record", StoredTask, StoredGroup, StoredWorkflow)


def _updated(record: _Record, values: Mapping[str, Any]) -> _Record:
    """``dataclasses.replace`` for these plain records, without its per-call introspection (a
    tick updates thousands of tasks in memory)."""
    unknown = set(values) - _FIELDS[type(record)]
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {sorted(unknown)}")
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__)
    new.__dict__.update(values)
    return new


_FIELDS = {
    kind: {f.name for f in dataclasses.fields(kind)}
    for kind in (StoredTask, StoredGroup, StoredWorkflow)
}


def pod_of(workflow: StoredWorkflow, task: StoredTask) -> dict[str, Any]:
    """The stored Pod manifest of ``task``."""
    for group in workflow.groups:
        for manifest in group.manifests:
            if manifest["kind"] == "Pod" and manifest["metadata"]["name"] == task.pod_name:
                return manifest
    raise LookupError(f"task {task.name} of {workflow.workflow_id} has no stored pod")
