"""Bulk inserts and updates (``store.bulk``): one statement for any number of rows on
PostgreSQL, and the rows read back exactly as an ``executemany`` would have written them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, select

from corral.store.bulk import insert_rows, update_rows
from corral.store.database import StatementCounter, writing
from corral.store.tables import cluster_objects

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
KEY = ("backend", "api_version", "kind", "namespace", "name")

#: What JSON columns hold: quotes, backslashes, braces and commas are what a text array
#: format must escape; None is JSON null.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _row(name: str, body: Any, node: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "backend": "default",
        "api_version": "v1",
        "kind": "Pod",
        "namespace": "ns",
        "name": name,
        "group_uuid": None,
        "labels": {"a": 'quote " and \\ backslash'},
        "body": body,
        "node": node,
        "created_at": NOW,
        **extra,
    }


def _stored(engine: Engine) -> dict[str, tuple[Any, ...]]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                cluster_objects.c.name,
                cluster_objects.c.labels,
                cluster_objects.c.body,
                cluster_objects.c.node,
                cluster_objects.c.group_uuid,
                cluster_objects.c.created_at,
            )
        ).all()
    # SQLite hands datetimes back without their zone (they were written in UTC)
    return {row[0]: (*row[1:5], row[5].replace(tzinfo=UTC)) for row in rows}


def _statements(engine: Engine, action: Any) -> int:
    counter = StatementCounter(engine)
    with counter.counting() as counted, writing(engine) as connection:
        action(connection)
        return counted()


def test_insert_skips_taken_keys_and_counts_the_new_rows(engine: Engine) -> None:
    with writing(engine) as connection:
        assert insert_rows(connection, cluster_objects, [_row("a", {"v": 1})]) == 1
    rows = [_row(name, {"v": 2, "name": name}) for name in ("a", "b", "c")]

    def insert(connection: Any) -> None:
        assert insert_rows(connection, cluster_objects, rows, skip_existing=KEY) == 2

    statements = _statements(engine, insert)
    assert statements == 1  # (SQLite's BEGIN IMMEDIATE goes to the driver directly)
    stored = _stored(engine)
    assert stored["a"][1] == {"v": 1}  # left as it was, as kubectl apply does
    assert stored["b"][1] == {"v": 2, "name": "b"}
    assert stored["c"][1] == {"v": 2, "name": "c"}


def test_update_sets_each_row_by_its_key(engine: Engine) -> None:
    names = [f"pod-{n}" for n in range(300)]
    with writing(engine) as connection:
        insert_rows(connection, cluster_objects, [_row(name, {}) for name in names])
    later = NOW + timedelta(seconds=5)
    changes = [
        {
            **{k: v for k, v in _row(name, {}).items() if k in KEY},
            "node": f"n{i}",
            "created_at": later,
        }
        for i, name in enumerate(names)
        if i % 3 != 0  # every third row is not named, and keeps its values
    ]

    def update(connection: Any) -> None:
        update_rows(connection, cluster_objects, KEY, changes)

    assert _statements(engine, update) == 1
    stored = _stored(engine)
    for i, name in enumerate(names):
        expected = (None, NOW) if i % 3 == 0 else (f"n{i}", later)
        assert (stored[name][2], stored[name][4]) == expected


def test_nothing_to_write_is_no_statement(engine: Engine) -> None:
    def nothing(connection: Any) -> None:
        assert insert_rows(connection, cluster_objects, []) == 0
        update_rows(connection, cluster_objects, KEY, [])

    assert _statements(engine, nothing) == 0


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    bodies=st.lists(json_values, min_size=1, max_size=6),
    # No NUL and no lone surrogate: no PostgreSQL text column holds either, and node names are
    # Kubernetes names (hypothesis found both in CI).
    nodes=st.lists(
        st.none()
        | st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8),
        min_size=6,
        max_size=6,
    ),
    groups=st.lists(
        st.none() | st.sampled_from(['g"1', "g{2}", "g,3", "NULL", ""]), min_size=6, max_size=6
    ),
)
def test_values_read_back_as_written(
    engine: Engine, bodies: list[Any], nodes: list[str | None], groups: list[str | None]
) -> None:
    """Whatever a value holds (null, quotes, braces, the word NULL), the row reads back as
    given: to insert, then to update."""
    with writing(engine) as connection:
        connection.execute(delete(cluster_objects))
        rows = [
            _row(f"p{i}", body, node=nodes[i], group_uuid=groups[i])
            for i, body in enumerate(bodies)
        ]
        assert insert_rows(connection, cluster_objects, rows, skip_existing=KEY) == len(rows)
    assert _stored(engine) == {
        row["name"]: (row["labels"], row["body"], row["node"], row["group_uuid"], NOW)
        for row in rows
    }
    reversed_bodies = list(reversed(bodies))
    with writing(engine) as connection:
        update_rows(
            connection,
            cluster_objects,
            KEY,
            [
                {**{k: row[k] for k in KEY}, "body": reversed_bodies[i], "node": nodes[-1 - i]}
                for i, row in enumerate(rows)
            ],
        )
    stored = _stored(engine)
    for i, row in enumerate(rows):
        assert stored[row["name"]][1:3] == (reversed_bodies[i], nodes[-1 - i])
