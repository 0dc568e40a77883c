"""Writing workflows: a submission's rows, a tick's changed rows in batched statements, the
task logs kept, the pending reasons of shapes, and the idempotency keys."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, String, Table, any_, bindparam, delete, insert
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import IntegrityError

from corral.domain.workflows.plan import WorkflowPlan
from corral.domain.workflows.record import SharedReason, TaskAttempt
from corral.domain.workflows.statuses import GROUP_ACCEPTED, TASK_ACCEPTED
from corral.store.bulk import update_rows
from corral.store.tables import (
    idempotency_keys,
    pending_shapes,
    task_attempts,
    task_logs,
)
from corral.store.workflows.records import IdempotencyKey

#: Ids per ``IN (...)`` list: SQLite allows 32,766 variables per statement.
CHUNK = 1000
#: Rows given the same values are updated by one ``WHERE key IN (...)`` statement from this
#: many on (one array of keys instead of an array per column); fewer join the bulk update of
#: their columns (``store.bulk``), which costs no extra statement.
_ONE_STATEMENT_FROM = 8


class KeyTaken(Exception):
    """The submitter already used this idempotency key (for the workflow it names)."""


def take_key(
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


def update_changed_rows(
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
        for start in range(0, len(identifiers), CHUNK):
            connection.execute(
                table.update()
                .where(_one_of(connection, table.c[key], identifiers[start : start + CHUNK]))
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


def write_logs(connection: Connection, logs: Mapping[tuple[str, int], str]) -> None:
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


def write_attempts(connection: Connection, attempts: Sequence[TaskAttempt]) -> None:
    """Record ended attempts; one written before (a tick done again after a crash) is
    replaced, not doubled."""
    if not attempts:
        return
    rows = [dataclasses.asdict(attempt) for attempt in attempts]
    connection.execute(
        task_attempts.delete().where(
            task_attempts.c.task_uuid == bindparam("row_task"),
            task_attempts.c.retry_id == bindparam("row_retry"),
        ),
        [{"row_task": row["task_uuid"], "row_retry": row["retry_id"]} for row in rows],
    )
    connection.execute(task_attempts.insert(), rows)


def write_shapes(connection: Connection, shapes: Mapping[str, SharedReason], now: datetime) -> None:
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


def group_rows(plan: WorkflowPlan) -> list[dict[str, Any]]:
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


def task_rows(plan: WorkflowPlan) -> list[dict[str, Any]]:
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
