"""Times that no reader can read never reach the database, and one that is there anyway (written
before, or by hand) costs its own workflow, never the controller
(docs/lifecycle.md#a-workflow-that-cannot-be-read).

On PostgreSQL, ``0001-01-01T00:00:00+14:00`` was stored as a time of the year 0, which psycopg
cannot read back: every tick failed from then on, an unrelated ``echo`` stayed PENDING, the
workflow answered 500 even to an admin's cancel, and a restart did not help."""

from __future__ import annotations

import importlib
from datetime import timedelta

from sqlalchemy import text

from corral.store.database import make_engine
from corral.store.workflows.unreadable import clear_unreadable_times
from tests.services.lifecycle.test_preemption_use_cases import clique_job
from tests.services.lifecycle_world import World, task, workflow_yaml

YEAR_ZERO = "0001-01-01T00:00:00+14:00"
MIGRATION = importlib.import_module("corral.store.migrations.versions.0017_unreadable_workflows")


def report(world: World, workflow_id: str, **body: object) -> tuple[int, object]:
    return world.api.call("POST", f"/api/workflow/{workflow_id}/task/t0/checkpoint", json=body)


def running(world: World, name: str) -> str:
    job = world.submit(clique_job(name, 1))
    world.run_until(lambda: world.workflow(job).status == "RUNNING")
    return job


def echo(world: World) -> str:
    return world.submit(workflow_yaml([{"name": "g", "tasks": [task("echo", lead=True)]}]))


def test_a_checkpoint_time_utc_does_not_have_or_before_the_task_is_refused(world: World) -> None:
    job = running(world, "job")
    started = world.workflow(job).groups[0].tasks[0].started_at
    assert started is not None
    status, body = report(world, job, at=YEAR_ZERO)
    assert status == 400, body
    assert body["message"].startswith("at: ")
    assert (
        "0001-01-01T00:00:00+14:00 is not a time between the years 1 and 9999 in UTC"
        in (body["message"])
    )
    before = (started - timedelta(seconds=1)).isoformat()
    status, body = report(world, job, at=before)
    assert (status, body["message"]) == (
        400,
        f"Field 'at' ({before}) is before the task started ({started.isoformat()}): report a "
        "checkpoint this run of the task committed, with its time or none (now).",
    )
    status, body = report(world, job, at=started.isoformat())
    assert status == 200, body
    other = echo(world)
    world.run_until(lambda: world.workflow(other).status == "COMPLETED")


def _damage(world: World, workflow_id: str) -> None:
    """Write a time no reader can read into the task of ``workflow_id``, behind the API."""
    engine = world.runtime.engine
    bad = YEAR_ZERO if engine.dialect.name == "postgresql" else "not a time"
    with engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE workflow_tasks SET checkpoint_at = :bad WHERE group_uuid IN "
                "(SELECT group_uuid FROM workflow_groups WHERE workflow_id = :id)"
            ),
            {"bad": bad, "id": workflow_id},
        )


def test_an_unreadable_workflow_is_failed_alone_and_the_controller_carries_on(
    world: World,
) -> None:
    damaged, healthy = running(world, "damaged"), running(world, "healthy")
    _damage(world, damaged)
    world.controller.invalidate()  # read everything again, as after a restart
    other = echo(world)
    world.run_until(lambda: world.workflow(other).status == "COMPLETED")
    found = world.workflow(damaged)
    assert found.status == "FAILED_SERVER_ERROR"
    message = found.groups[0].tasks[0].message or ""
    assert message.startswith("corral could not read this workflow's stored state (")
    assert message.endswith(
        ") and stopped it; times no reader can read were cleared. Submit it again; tell your "
        "admin if this happens again."
    )
    assert found.groups[0].tasks[0].checkpoint_at is None
    assert world.workflow(healthy).status == "RUNNING"
    status, body = world.api.call("POST", f"/api/workflow/{damaged}/cancel")
    assert (status, body["message"]) == (
        409,
        f"Workflow {damaged} already finished (FAILED_SERVER_ERROR); there is nothing to cancel.",
    )
    status, body = world.api.call("GET", f"/api/workflow/{damaged}")
    assert status == 200, body
    status, body = world.api.call("POST", f"/api/workflow/{healthy}/cancel")
    assert status == 200, body
    world.finish(damaged, healthy)  # the objects of both are cleaned up


def test_the_upgrade_clears_times_no_reader_can_read(world: World) -> None:
    """A database damaged before this version is repaired when the server starts."""
    job = running(world, "job")
    _damage(world, job)
    url = world.runtime.engine.url
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        with engine.begin() as connection:
            clear_unreadable_times(connection, MIGRATION._TIMES)
    finally:
        engine.dispose()
    assert world.workflow(job).groups[0].tasks[0].checkpoint_at is None
