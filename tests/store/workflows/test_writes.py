"""A controller commit writes rows given the same values with one statement, and every other
row as before (issue 15: a tick starts or ends thousands of tasks at one instant)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, insert, select, text, update

from corral.domain.workflows.record import Changes
from corral.services.runtime import utc_now
from corral.store.database import StatementCounter
from corral.store.tables import workflow_groups, workflow_tasks
from corral.store.workflows import WorkflowStore
from tests.store.rows import insert_workflow

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
SAME = 2500  # more than one chunk of identifiers


def _store_tasks(engine: Engine, count: int) -> list[str]:
    with engine.begin() as connection:
        insert_workflow(connection, NOW)
        connection.execute(
            insert(workflow_groups),
            [
                {
                    "group_uuid": f"g{n}",
                    "workflow_id": "w-1",
                    "position": n,
                    "name": f"g{n}",
                    "status": "SCHEDULING",
                    "upstream": [],
                    "resource_kinds": [],
                    "manifests": [],
                }
                for n in range(2)
            ],
        )
        uuids = [f"t{n}" for n in range(count)]
        connection.execute(
            insert(workflow_tasks),
            [
                {
                    "task_uuid": uuid,
                    "group_uuid": "g0",
                    "position": n,
                    "name": uuid,
                    "pod_name": uuid,
                    "platform": "x",
                    "lead": False,
                    "status": "INITIALIZING",
                    "retry_id": 0,
                }
                for n, uuid in enumerate(uuids)
            ],
        )
    return uuids


def test_rows_with_the_same_values_are_one_statement_per_chunk_and_the_rest_as_before(
    engine: Engine,
) -> None:
    uuids = _store_tasks(engine, SAME + 3)
    changes = Changes()
    for uuid in uuids[:SAME]:
        changes.task(uuid, status="RUNNING", started_at=NOW)
    for n, uuid in enumerate(uuids[SAME:]):  # a value each: written one row at a time
        changes.task(uuid, status="RUNNING", node=f"node-{n}")
    changes.group("g0", status="RUNNING", domains={"": "rack-1"})  # JSON: not hashable
    changes.group("g1", status="RUNNING", domains={"": "rack-2"})
    counter = StatementCounter(engine)
    with counter.counting() as statements:
        WorkflowStore(engine, utc_now).commit(changes)
    # 3 chunks of the 2,500 same values, 1 executemany for the 3 nodes, 1 for the 2 groups
    # (SQLite's BEGIN IMMEDIATE goes to the driver directly, not counted)
    assert statements() == 5
    with engine.connect() as connection:
        tasks = {
            row.task_uuid: (row.status, row.started_at, row.node)
            for row in connection.execute(select(workflow_tasks))
        }
        groups = {
            uuid: domains
            for uuid, domains in connection.execute(
                select(workflow_groups.c.group_uuid, workflow_groups.c.domains)
            )
        }
    started = {uuid: tasks[uuid] for uuid in uuids[:SAME]}
    assert {(s, t.astimezone(UTC) if t else t, n) for s, t, n in started.values()} == {
        ("RUNNING", NOW, None)
    }
    assert [tasks[uuid] for uuid in uuids[SAME:]] == [
        ("RUNNING", None, "node-0"),
        ("RUNNING", None, "node-1"),
        ("RUNNING", None, "node-2"),
    ]
    assert groups == {"g0": {"": "rack-1"}, "g1": {"": "rack-2"}}


def test_task_status_updates_on_postgresql_write_no_index_entries(postgres_engine: Engine) -> None:
    """Task pages are half empty (migration 0007): updating every task's status, as a tick
    does, finds room on each row's own page, so nearly every update is HOT. With full pages
    (the default) the first update of nearly every row moves it to another page."""
    uuids = _store_tasks(postgres_engine, 2000)
    with postgres_engine.begin() as connection:
        connection.execute(
            update(workflow_tasks)
            .where(workflow_tasks.c.task_uuid.in_(uuids))
            .values(status="RUNNING", started_at=NOW)
        )
        updated, hot = connection.execute(
            text(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
                "WHERE relname = 'workflow_tasks'"
            )
        ).one()
    assert updated == 2000
    assert hot >= 0.95 * updated, f"{hot} of {updated} updates were HOT"
