"""Accepted workflows: one row each, with their groups (and exact manifests) and tasks.

A workflow is written in one transaction, so it is either stored whole or not at all, together
with a row of the controller's inbox (``controller_inbox``) that tells the controller about it.
The controller reads what it works on in set-based queries (:meth:`WorkflowStore.controller_view`,
:meth:`WorkflowStore.manifests`) and writes a tick's changes in one transaction of batched
statements (:meth:`WorkflowStore.commit`), never one query per workflow.

The records read back are ``records.py``; reading whole workflows ``reads.py``; the lists the
API and the dashboard show ``listings.py``; the statements that write ``writes.py``; the
controller's inbox ``inbox.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    bindparam,
    delete,
    func,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError

from corral.domain.workflows.notices import Checkpoint
from corral.domain.workflows.plan import WorkflowPlan
from corral.domain.workflows.record import (
    Changes,
    StoredWorkflow,
)
from corral.domain.workflows.spec import TaskFileContents
from corral.domain.workflows.statuses import ALIVE, WORKFLOW_ACCEPTED, TaskStatus
from corral.errors import ConflictError, NotFoundError
from corral.store.bulk import insert_rows
from corral.store.database import autocommit, writing
from corral.store.tables import (
    idempotency_keys,
    pending_shapes,
    workflow_groups,
    workflow_numbers,
    workflow_tasks,
    workflows,
)
from corral.store.workflows.checkpoints import record_checkpoint, record_ready
from corral.store.workflows.events import write_events
from corral.store.workflows.inbox import (
    CANCEL,
    FAILED,
    SUBMITTED,
    mark_seen,
    read_inbox,
    tell_controller,
)
from corral.store.workflows.reads import controller_rows, read_workflow, waiting_reasons
from corral.store.workflows.records import (
    IdempotencyKey,
    InboxEntry,
    KeptSubmission,
    UncleanedGroup,
)
from corral.store.workflows.unreadable import READ_ERRORS, clear_workflow_times, read_isolating
from corral.store.workflows.writes import (
    CHUNK,
    group_rows,
    take_key,
    task_rows,
    update_changed_rows,
    write_attempts,
    write_logs,
    write_shapes,
)

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
                    take_key(
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
                insert_rows(connection, workflow_groups, group_rows(plan))
                insert_rows(connection, workflow_tasks, task_rows(plan))
                tell_controller(connection, submitter.workflow_id, SUBMITTED, now)
        except IntegrityError:
            raise ConflictError(
                f"Workflow id {submitter.workflow_id} was taken by a concurrent submission"
            ) from None

    def get(self, workflow_id: str) -> StoredWorkflow:
        with self._engine.connect() as connection:
            found = read_workflow(connection, workflow_id)
        if found is None:
            raise NotFoundError(f"Workflow {workflow_id} not found.")
        return found

    def waiting_reasons(self, workflows: Sequence[StoredWorkflow]) -> dict[str, str]:
        """Group uuid -> why it waits, for the waiting groups whose reason is their shape's."""
        with self._engine.connect() as connection:
            return waiting_reasons(connection, workflows)

    def controller_view(
        self, ids: Sequence[str] | None = None, unreadable: dict[str, str] | None = None
    ) -> list[StoredWorkflow]:
        """Alive workflows as the controller works on them, oldest first: every alive one, or
        those of ``ids`` that are alive. Three queries per thousand ids; without what the
        controller never reads (spec, template, local files) and without the groups'
        manifests (:meth:`manifests`), which are most of a workflow's bytes. A workflow whose
        rows cannot be read is left out, and named with why in ``unreadable``
        (``unreadable.read_isolating``)."""
        if ids is None:
            try:
                with self._engine.connect() as connection:
                    return controller_rows(connection, None)
            except READ_ERRORS:
                ids = self.alive_ids()
        found: list[StoredWorkflow] = []
        missed = {} if unreadable is None else unreadable
        for start in range(0, len(ids), CHUNK):
            found.extend(read_isolating(ids[start : start + CHUNK], self._alive_rows, missed))
        return sorted(found, key=lambda w: (w.submitted_at, w.workflow_id))

    def _alive_rows(self, ids: Sequence[str]) -> list[StoredWorkflow]:
        with self._engine.connect() as connection:
            return controller_rows(connection, ids)

    def fail_unreadable(
        self, workflow_id: str, reason: str, fence: Callable[[Connection], None] | None = None
    ) -> bool:
        """Clear the times of ``workflow_id`` that no reader can read, and have the controller
        end it FAILED_SERVER_ERROR with ``reason`` (once: False when it was asked before, or
        the workflow ended)."""
        with writing(self._engine) as connection:
            if fence is not None:
                fence(connection)
            clear_workflow_times(connection, workflow_id)
            asked = connection.execute(
                workflows.update()
                .where(workflows.c.workflow_id == workflow_id)
                .where(workflows.c.status.in_(ALIVE))
                .where(workflows.c.failure.is_(None))
                .values(failure=reason)
            ).rowcount
            if asked:
                tell_controller(connection, workflow_id, FAILED, self._clock())
        return bool(asked)

    def manifests(self, group_uuids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """The stored objects of each group, by group uuid."""
        found: dict[str, list[dict[str, Any]]] = {}
        for start in range(0, len(group_uuids), CHUNK):
            chunk = list(group_uuids[start : start + CHUNK])
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
        return read_inbox(self._engine, limit)

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

    def request_cancel(self, workflow_id: str, username: str, message: str | None = None) -> bool:
        """Ask the controller to cancel (``message``: why, kept as the workflow's message);
        False when the workflow had already finished."""
        with writing(self._engine) as connection:
            done = connection.execute(
                workflows.update()
                .where(workflows.c.workflow_id == workflow_id)
                .where(workflows.c.status.in_(ALIVE))
                .where(workflows.c.cancel_requested_by.is_(None))
                .values(cancel_requested_by=username, message=message)
            ).rowcount
            if done:
                tell_controller(connection, workflow_id, CANCEL, self._clock())
        return bool(done)

    def record_checkpoint(self, workflow_id: str, task_uuid: str, checkpoint: Checkpoint) -> bool:
        """Record a running task's checkpoint (False: the task is not RUNNING)."""
        return record_checkpoint(self._engine, workflow_id, task_uuid, checkpoint, self._clock())

    def record_ready(self, workflow_id: str, task_uuid: str) -> datetime | None:
        """Mark a running task ready to stop; when (None: it no longer runs)."""
        return record_ready(self._engine, workflow_id, task_uuid, self._clock())

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
                update_changed_rows(connection, table, key, rows)
            write_logs(connection, changes.logs)
            write_attempts(connection, changes.attempts)
            write_shapes(connection, changes.shapes, self._clock())
            mark_seen(connection, changes.inbox_done)
            write_events(
                connection, [*changes.preemptions, *changes.node_faults, *changes.eviction_stops]
            )
            if also is not None:
                also(connection)

    def forget_shapes(self) -> None:
        """Delete the reasons no waiting group refers to any more."""
        in_use = select(workflow_groups.c.pending_shape).where(
            workflow_groups.c.status == TaskStatus.SCHEDULING,
            workflow_groups.c.pending_shape.is_not(None),
        )
        with writing(self._engine) as connection:
            connection.execute(delete(pending_shapes).where(pending_shapes.c.shape.not_in(in_use)))
