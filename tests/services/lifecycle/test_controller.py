"""The controller's working set: a tick costs what changed, not what is alive; what other servers
write reaches it (the inbox), a workflow it never heard of is found by the resync, and the
groups that wait alike share one reason."""

from __future__ import annotations

from sqlalchemy import func, select

from corral.services.lifecycle.controller import RESYNC_SECONDS
from corral.services.runtime import open_runtime
from corral.store.tables import controller_inbox, pending_shapes
from tests.services.lifecycle_world import CLIQUE, World, task, workflow_yaml

WAITING = workflow_yaml(
    [{"name": "g", "tasks": [task("t0", lead=True), task("t1")]}],
    name="waits",
    resources={"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}},
)


def fill_cluster(world: World) -> None:
    """Every GB200 tray taken by a pod that is not corral's."""
    world.occupy(world.gb200_nodes(), gpus=4)


def submit_waiting(world: World, count: int) -> list[str]:
    accepted = [world.submit(WAITING) for _ in range(count)]
    world.run_until(
        lambda: all(world.workflow(w).groups[0].status == "SCHEDULING" for w in accepted)
    )
    return accepted


def statements(world: World) -> tuple[int, int]:
    """SQL statements of one tick, and how many workflows it stepped."""
    with world.controller.counting() as counted:
        report = world.controller.tick()
        return counted(), report.stepped


def test_a_tick_costs_what_changed_not_what_is_alive(world: World) -> None:
    # The config heads and the node changes are read again every second: frozen here, so that
    # each tick counts the same queries for them whenever it runs.
    world.runtime.configs._store._monotonic = lambda: 0.0
    world.runtime.node_admin._monotonic = lambda: 0.0
    fill_cluster(world)
    few = submit_waiting(world, 3)
    quiet_few = statements(world)
    world.api.call("POST", f"/api/workflow/{few[0]}/cancel")
    cancel_few = statements(world)

    submit_waiting(world, 30)
    assert world.controller.tick().alive == 32
    quiet_many = statements(world)
    world.api.call("POST", f"/api/workflow/{few[1]}/cancel")
    cancel_many = statements(world)

    assert quiet_few == quiet_many
    # The inbox query; nothing stepped.
    assert quiet_few == (1, 0)
    assert cancel_few == cancel_many
    assert cancel_few[1] == 1  # only the canceled one
    assert world.workflow(few[1]).status == "FAILED_CANCELED"


def test_a_cancel_asked_on_another_server_reaches_the_controller(world: World) -> None:
    fill_cluster(world)
    [workflow_id] = submit_waiting(world, 1)
    url = world.runtime.engine.url.render_as_string(hide_password=False)
    other = open_runtime(url)  # another server on the same database
    try:
        assert other.workflows.request_cancel(workflow_id, "bob")
    finally:
        other.engine.dispose()
    world.controller.tick()
    found = world.workflow(workflow_id)
    assert found.status == "FAILED_CANCELED"
    assert found.groups[0].tasks[0].message == "Canceled by bob."
    with world.runtime.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(controller_inbox)).scalar() == 0


def test_a_workflow_the_inbox_never_announced_is_found_by_the_resync(world: World) -> None:
    now = [0.0]
    world.controller._monotonic = lambda: now[0]
    world.controller.tick()
    [workflow_id] = [world.submit(workflow_yaml([{"name": "g", "tasks": [task("t", lead=True)]}]))]
    with world.runtime.engine.begin() as connection:
        connection.execute(controller_inbox.delete())  # as if the hint were lost
    world.controller.tick()
    assert world.workflow(workflow_id).groups[0].status == "SUBMITTING"
    now[0] += RESYNC_SECONDS
    world.run_until(lambda: world.workflow(workflow_id).status == "COMPLETED")


def test_groups_that_wait_alike_share_one_reason_with_their_own_pod_names(world: World) -> None:
    fill_cluster(world)
    accepted = submit_waiting(world, 4)
    world.controller.tick()
    with world.runtime.engine.connect() as connection:
        shapes = connection.execute(select(pending_shapes.c.shape)).all()
    assert len(shapes) == 1
    reasons = {w: world.workflow(w).groups[0].pending_reason for w in accepted}
    assert len(set(reasons.values())) == 1
    (reason,) = set(reasons.values())
    assert reason == (
        f"needs room for 2 pods with 4 GPUs each in one {CLIQUE}; the roomiest {CLIQUE}, "
        f"{CLIQUE}=zone-a-spine-0-rack-0-gpu-clique-0, has room for 0"
    )
    for workflow_id in accepted:
        status, body = world.api.call("GET", f"/api/workflow/{workflow_id}/explain")
        assert status == 200
        assert reason in body["groups"][0]["reason"]
