"""Workflows whose stored state cannot be read back (docs/lifecycle.md#a-workflow-that-cannot-
be-read): found one at a time among many, and repaired so that the controller can end them.

Every time that comes in is bounded now (``formats/wire_time.in_utc``), but a database may hold
one written before, or by hand: PostgreSQL keeps ``0001-01-01T00:00:00+14:00`` as a time in the
year 0, and psycopg refuses to read it back. One such row made every read of the alive
workflows fail, and with it every tick. Readers here isolate the workflow whose rows fail, and
the repair clears its times that no reader can read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnClause,
    Connection,
    DateTime,
    String,
    Table,
    and_,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy import column as sa_column
from sqlalchemy import table as sa_table
from sqlalchemy.exc import DataError
from sqlalchemy.sql.elements import ColumnElement

from corral.store.tables import workflow_groups, workflow_tasks, workflows

#: What reading a row that holds a value no reader can read raises: psycopg's refusal (as
#: SQLAlchemy's DataError), or the SQLite time parser's ValueError.
READ_ERRORS = (DataError, ValueError, OverflowError)
#: The readable times: a day inside the years 1 to 9999, whatever zone the reader uses.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)

_Found = TypeVar("_Found")


def read_isolating(
    ids: Sequence[str],
    read: Callable[[Sequence[str]], list[_Found]],
    unreadable: dict[str, str],
) -> list[_Found]:
    """``read(ids)``; when that fails on a value it cannot read, the halves are read alone, down
    to the one workflow that fails, which goes into ``unreadable`` (id -> the error's first
    line): k bad workflows among n cost about 2k log n reads."""
    try:
        return read(ids)
    except READ_ERRORS as err:
        if len(ids) <= 1:
            for found in ids:
                unreadable[found] = str(err).splitlines()[0][:300]
            return []
    half = len(ids) // 2
    return read_isolating(ids[:half], read, unreadable) + read_isolating(
        ids[half:], read, unreadable
    )


def unreadable_time(column: ColumnClause[Any], dialect: str) -> ColumnElement[bool]:
    """Whether ``column`` holds a time no reader can read: out of the years 1 to 9999 (on
    PostgreSQL), or text that is no time at all (SQLite keeps times as text)."""
    if dialect == "postgresql":
        return or_(column < EARLIEST, column > LATEST)
    earliest = literal(EARLIEST.date().isoformat(), String)
    return and_(column.is_not(None), or_(func.datetime(column).is_(None), column < earliest))


def clear_unreadable_times(connection: Connection, columns: Mapping[str, Sequence[str]]) -> None:
    """Set every unreadable time of ``columns`` (table name -> its time columns) to NULL, in
    every row (a migration's repair: it names the columns of its own time)."""
    dialect = connection.dialect.name
    for table_name, names in columns.items():
        for name in names:
            column = sa_column(name, DateTime(timezone=True))
            table = sa_table(table_name, column)
            connection.execute(
                update(table).where(unreadable_time(column, dialect)).values({name: None})
            )


def clear_workflow_times(connection: Connection, workflow_id: str) -> None:
    """:func:`clear_unreadable_times` for the rows of one workflow: it, its groups, its tasks."""
    dialect = connection.dialect.name
    groups = select(workflow_groups.c.group_uuid).where(
        workflow_groups.c.workflow_id == workflow_id
    )
    owned = {
        workflows: workflows.c.workflow_id == workflow_id,
        workflow_groups: workflow_groups.c.workflow_id == workflow_id,
        workflow_tasks: workflow_tasks.c.group_uuid.in_(groups),
    }
    for table, names in _time_columns().items():
        for name in names:
            column = table.c[name]
            connection.execute(
                update(table)
                .where(owned[table], unreadable_time(column, dialect))
                .values({name: None})
            )


def _time_columns() -> dict[Table, list[str]]:
    """The nullable time columns of a workflow's rows (the others are always written by
    corral itself, from its own clock)."""
    return {
        table: [c.name for c in table.c if isinstance(c.type, DateTime) and c.nullable]
        for table in (workflows, workflow_groups, workflow_tasks)
    }
