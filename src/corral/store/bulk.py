"""Many rows in one statement on PostgreSQL.

An ``executemany`` is one INSERT or UPDATE per row, each parsed, planned and executed by
PostgreSQL and each bound by SQLAlchemy: a submission inserts a task per pod, and a controller
tick binds and updates thousands of pods at one go. On PostgreSQL these helpers send one array
per column and let ``unnest`` make the rows: one statement for any number of rows, whose text,
and so whose prepared plan, does not depend on how many. On SQLite they are the
``executemany`` they replace (a statement there is a function call, not a round trip).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON, Connection, Table, Text, bindparam, cast, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.expression import ColumnElement, Executable
from sqlalchemy.types import ARRAY, TypeEngine

from corral.store import json_columns

Row = Mapping[str, Any]


def insert_rows(
    connection: Connection,
    table: Table,
    rows: Sequence[Row],
    *,
    skip_existing: tuple[str, ...] = (),
) -> int:
    """Insert ``rows`` (each with the same columns); with ``skip_existing`` (the columns of a
    unique key), a row whose key is taken is left out, as ``ON CONFLICT DO NOTHING``. How many
    rows were inserted."""
    if not rows:
        return 0
    columns = tuple(rows[0])
    if connection.dialect.name != "postgresql":
        return int(connection.execute(_plain_insert(table, skip_existing), list(rows)).rowcount)
    statement = _unnest_insert(table, columns, skip_existing)
    return int(connection.execute(statement, _arrays(table, columns, rows)).rowcount)


def update_rows(
    connection: Connection, table: Table, key: tuple[str, ...], rows: Sequence[Row]
) -> None:
    """Set each row's other columns where the ``key`` columns equal its own (each row with the
    same columns)."""
    if not rows:
        return
    columns = tuple(rows[0])
    if connection.dialect.name != "postgresql":
        parameters = [{_array(name): value for name, value in row.items()} for row in rows]
        connection.execute(_bound_update(table, key, columns), parameters)
        return
    statement = _unnest_update(table, key, columns)
    connection.execute(statement, _arrays(table, columns, rows))


def _arrays(table: Table, columns: tuple[str, ...], rows: Sequence[Row]) -> dict[str, list[Any]]:
    arrays = {}
    for name in columns:
        values = [row[name] for row in rows]
        if _is_json(table.c[name].type):
            values = [json_columns.dumps(value) for value in values]
        arrays[_array(name)] = values
    return arrays


def _array(name: str) -> str:
    return f"rows_{name}"


def _is_json(kind: TypeEngine[Any]) -> bool:
    return isinstance(kind, JSON)


def _element(table: Table, name: str) -> TypeEngine[Any]:
    """The type of a column's array: JSON travels as text and is cast back per row."""
    kind: TypeEngine[Any] = table.c[name].type
    return Text() if _is_json(kind) else kind


def _unnested(table: Table, columns: tuple[str, ...]) -> Any:
    arrays = [bindparam(_array(name), type_=ARRAY(_element(table, name))) for name in columns]
    return func.unnest(*arrays).table_valued(*columns).render_derived(name="given")


def _value(table: Table, given: Any, name: str) -> ColumnElement[Any]:
    value: ColumnElement[Any] = given.c[name]
    return cast(value, table.c[name].type) if _is_json(table.c[name].type) else value


@lru_cache(maxsize=64)  # built once per table and set of columns: building cost more than running
def _unnest_insert(
    table: Table, columns: tuple[str, ...], skip_existing: tuple[str, ...]
) -> Executable:
    given = _unnested(table, columns)
    rows = select(*[_value(table, given, name) for name in columns])
    insert = postgresql.insert(table).from_select(list(columns), rows)
    if skip_existing:
        insert = insert.on_conflict_do_nothing(index_elements=list(skip_existing))
    return insert.execution_options(preserve_rowcount=True)  # SQLAlchemy keeps it for UPDATEs only


@lru_cache(maxsize=64)
def _unnest_update(table: Table, key: tuple[str, ...], columns: tuple[str, ...]) -> Executable:
    given = _unnested(table, columns)
    return (
        table.update()
        .where(*[table.c[name] == given.c[name] for name in key])
        .values({name: _value(table, given, name) for name in columns if name not in key})
    )


@lru_cache(maxsize=64)
def _plain_insert(table: Table, skip_existing: tuple[str, ...]) -> Executable:
    insert = sqlite.insert(table)
    if skip_existing:
        insert = insert.on_conflict_do_nothing(index_elements=list(skip_existing))
    return insert


@lru_cache(maxsize=64)
def _bound_update(table: Table, key: tuple[str, ...], columns: tuple[str, ...]) -> Executable:
    return (
        table.update()
        .where(*[table.c[name] == bindparam(_array(name)) for name in key])
        .values({name: bindparam(_array(name)) for name in columns if name not in key})
    )
