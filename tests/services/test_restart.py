"""Restarting a failed workflow (issue 13, item 17): a new workflow re-runs the groups that did
not complete; tasks that consumed a completed group read it from the old workflow."""

from __future__ import annotations

from typing import Any

from tests.services.lifecycle_world import World, task, workflow_yaml


def chain() -> str:
    groups = [
        {"name": "prepare", "tasks": [task("prep", seconds=2)]},
        {"name": "train", "tasks": [task("fit", seconds=60, inputs=[{"task": "prep"}])]},
        {"name": "report", "tasks": [task("summary", seconds=2, inputs=[{"task": "fit"}])]},
    ]
    return workflow_yaml(groups, name="chain")


def restart(world: World, workflow_id: str, pool: str = "nvl72") -> tuple[int, Any]:
    return world.api.call("POST", f"/api/pool/{pool}/workflow/{workflow_id}/restart")


def test_a_canceled_workflow_restarts_from_the_first_unfinished_group(world: World) -> None:
    first = world.submit(chain())
    world.run_until(lambda: world.workflow(first).groups[1].status == "RUNNING")
    status, body = world.api.call("POST", f"/api/workflow/{first}/cancel")
    assert status == 200, body
    world.finish(first)
    assert [g.status for g in world.workflow(first).groups] == [
        "COMPLETED",
        "FAILED_CANCELED",
        "FAILED_CANCELED",
    ]

    status, body = restart(world, first)
    assert (status, body["name"], body["restarted_from"]) == (200, "chain-2", first)
    second = world.workflow("chain-2")
    assert [g.name for g in second.groups] == ["train", "report"]
    assert second.restarted_from == first
    assert "task: chain-1:prep" in second.spec
    world.finish("chain-2")
    assert world.workflow("chain-2").status == "COMPLETED"


def test_only_failed_workflows_restart(world: World) -> None:
    done = world.submit(workflow_yaml([{"name": "g", "tasks": [task("t", seconds=2)]}]))
    world.finish(done)
    assert restart(world, done) == (
        409,
        {
            "message": f"Restart can only be used on FAILED workflows: Workflow {done} has "
            "status COMPLETED.",
            "error_code": "CONFLICT",
        },
    )
    assert restart(world, "nope-1")[0] == 404
