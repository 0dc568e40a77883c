"""The runtimes a forecast samples from (docs/forecast.md): each completed group of a pool, by
workflow name and user, on both databases."""

from __future__ import annotations

from tests.services.lifecycle_world import World, task, workflow_yaml


def test_completed_groups_give_their_runtimes_by_name_and_user(world: World) -> None:
    done = world.submit(workflow_yaml([{"name": "g", "tasks": [task("t", seconds=30)]}]))
    failed = world.submit(
        workflow_yaml([{"name": "g", "tasks": [task("t", seconds=30, code=1)]}], name="bad")
    )
    world.finish(done, failed, step=10.0)
    assert world.workflow(done).status == "COMPLETED"
    group = world.workflow(done).groups[0]
    assert group.started_at is not None and group.ended_at is not None
    seconds = (group.ended_at - group.started_at).total_seconds()
    assert seconds >= 30
    assert world.runtime.listings.completed_runtimes("nvl72") == [("wf", "admin", seconds)]
    assert world.runtime.listings.completed_runtimes("default") == []
