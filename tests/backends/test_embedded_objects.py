"""The embedded cluster's objects are found by their group's index when a group's objects are
deleted: a search by any other index reads every object of the backend, and the controller's
tick then grew with what is alive (docs/deploy.md#sizing)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, text

from corral.backends.cluster_writes import ClusterWrites
from corral.backends.embedded.objects import ClusterObjectStore
from corral.store.database import make_engine, migrate, writing


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    found = make_engine(f"sqlite:///{tmp_path / 'objects.db'}")
    migrate(found)
    yield found
    found.dispose()


def pod(group: str, index: int) -> dict[str, Any]:
    labels = {"osmo.group_uuid": group, "osmo.workflow_uuid": "w"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{group}-{index}", "labels": labels},
    }


def plans_of(engine: Engine, run: Any) -> list[str]:
    """SQLite's query plan of every SELECT and DELETE that ``run`` executes."""
    seen: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("DELETE", "SELECT")):
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", note)
    try:
        run()
    finally:
        event.remove(engine, "before_cursor_execute", note)
    with engine.connect() as connection:
        return [
            str(row[3])
            for statement, parameters in seen
            for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        ]


def test_a_groups_objects_are_deleted_through_the_groups_index(engine: Engine) -> None:
    store = ClusterObjectStore(engine, lambda: datetime.now(UTC))
    created = ClusterWrites()
    created.create("default", [pod(g, i) for g in ("a", "b") for i in range(3)], "default")
    with writing(engine) as connection:
        store.write(connection, created)

    def delete_staged() -> None:
        deleted = ClusterWrites(deletes=["a", "gone"])  # several, as a tick deletes
        with writing(engine) as connection:
            store.write(connection, deleted)

    def delete_collection() -> None:
        labels = {"osmo.group_uuid": "b"}
        assert store.delete_collection("default", "v1", "Pod", "default", labels) == 3

    for run in (delete_staged, delete_collection):  # each one fails on the old statements
        plans = plans_of(engine, run)
        assert any("USING INDEX ix_cluster_objects_group" in p for p in plans), plans
        assert not [p for p in plans if "autoindex" in p or p.startswith("SCAN")], plans
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM cluster_objects")).scalar() == 0
