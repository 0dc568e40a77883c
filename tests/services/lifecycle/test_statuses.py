"""The lifecycle's status rules (``osmo-workflow.md`` §4, §7) on simulated tasks: failures and
FAILED_UPSTREAM, exit actions and retries, lead rules, cancel, queue and exec timeouts,
maintenance, priorities and fair share."""

from __future__ import annotations

from tests.services.lifecycle_world import World, task, workflow_yaml


def statuses(world: World, workflow_id: str) -> dict[str, object]:
    found = world.workflow(workflow_id)
    return {
        "workflow": found.status,
        **{g.name: g.status for g in found.groups},
        **{t.name: (t.status, t.exit_code) for g in found.groups for t in g.tasks},
    }


def chain(*codes: int) -> str:
    """Groups g1 -> g2 -> ... each with one task that consumes the previous group's task."""
    groups = []
    for index, code in enumerate(codes, start=1):
        inputs = [{"task": f"t{index - 1}"}] if index > 1 else []
        groups.append({"name": f"g{index}", "tasks": [task(f"t{index}", code=code, inputs=inputs)]})
    return workflow_yaml(groups)


def test_groups_run_in_order_and_complete(world: World) -> None:
    workflow_id = world.submit(chain(0, 0))
    world.controller.tick()
    assert statuses(world, workflow_id) == {
        "workflow": "PENDING",
        "g1": "INITIALIZING",
        "g2": "WAITING",
        "t1": ("INITIALIZING", None),
        "t2": ("WAITING", None),
    }
    world.finish(workflow_id)
    assert statuses(world, workflow_id) == {
        "workflow": "COMPLETED",
        "g1": "COMPLETED",
        "g2": "COMPLETED",
        "t1": ("COMPLETED", 0),
        "t2": ("COMPLETED", 0),
    }
    found = world.workflow(workflow_id)
    first, second = found.groups
    assert first.ended_at is not None and second.scheduling_at is not None
    assert first.ended_at <= second.scheduling_at
    assert found.started_at is not None and found.ended_at is not None


def test_a_failure_fails_every_group_downstream(world: World) -> None:
    workflow_id = world.submit(chain(0, 3, 0, 0))
    world.finish(workflow_id)
    assert statuses(world, workflow_id) == {
        "workflow": "FAILED",
        "g1": "COMPLETED",
        "g2": "FAILED",
        "g3": "FAILED_UPSTREAM",
        "g4": "FAILED_UPSTREAM",
        "t1": ("COMPLETED", 0),
        "t2": ("FAILED", 3),
        "t3": ("FAILED_UPSTREAM", 3000),
        "t4": ("FAILED_UPSTREAM", 3000),
    }
    messages = {t.name: t.message for g in world.workflow(workflow_id).groups for t in g.tasks}
    assert messages["t3"] == "Upstream group g2 failed."
    assert messages["t4"] == "Upstream group g3 failed."
    assert world.runtime.objects.all() == []


def test_reschedule_retries_up_to_the_limit(world: World) -> None:
    status, body = world.api.call(
        "PATCH", "/api/configs/workflow", json={"configs_dict": {"max_retry_per_task": 2}}
    )
    assert status == 200, body
    flaky = task("flaky", code=3, exitActions={"RESCHEDULE": "3", "FAIL": "1-2,4-255"})
    workflow_id = world.submit(workflow_yaml([{"name": "g", "tasks": [flaky]}]))
    world.finish(workflow_id)
    (found,) = world.workflow(workflow_id).groups[0].tasks
    assert (found.status, found.exit_code, found.retry_id) == ("FAILED", 3, 2)
    assert found.message == "No exit action applied due to retry limit 2."


def test_an_exit_action_can_complete_a_nonzero_exit(world: World) -> None:
    ok = task("ok", code=7, exitActions={"COMPLETE": "0,7"})
    workflow_id = world.submit(workflow_yaml([{"name": "g", "tasks": [ok]}]))
    world.finish(workflow_id)
    (found,) = world.workflow(workflow_id).groups[0].tasks
    assert (found.status, found.exit_code) == ("COMPLETED", 7)
    assert found.message == "Exit Action: COMPLETE the task for exit code 7."


def test_the_lead_ending_ends_its_group(world: World) -> None:
    tasks = [task("lead", lead=True, seconds=4), task("server", seconds=3600)]
    workflow_id = world.submit(workflow_yaml([{"name": "g", "tasks": tasks}]))
    world.finish(workflow_id)
    assert statuses(world, workflow_id) == {
        "workflow": "COMPLETED",
        "g": "COMPLETED",
        "lead": ("COMPLETED", 0),
        "server": ("COMPLETED", None),
    }
    server = world.workflow(workflow_id).groups[0].tasks[1]
    assert server.message == "Lead task lead ended COMPLETED."


def test_a_task_ending_in_the_same_tick_as_its_lead_keeps_its_own_exit(world: World) -> None:
    tasks = [task("lead", lead=True, seconds=4), task("helper", seconds=4, code=1)]
    workflow_id = world.submit(workflow_yaml([{"name": "g", "tasks": tasks}]))
    world.finish(workflow_id)
    assert statuses(world, workflow_id) == {
        "workflow": "COMPLETED",
        "g": "COMPLETED",
        "lead": ("COMPLETED", 0),
        "helper": ("FAILED", 1),
    }
    helper = world.workflow(workflow_id).groups[0].tasks[1]
    assert helper.message is None  # not "Lead task lead ended COMPLETED."


def test_a_non_lead_failure_counts_only_without_ignore_non_lead_status(world: World) -> None:
    tasks = [task("lead", lead=True, seconds=10), task("helper", seconds=2, code=1)]
    strict = world.submit(
        workflow_yaml([{"name": "g", "ignoreNonleadStatus": False, "tasks": tasks}])
    )
    lenient = world.submit(workflow_yaml([{"name": "g", "tasks": tasks}], name="lenient"))
    world.finish(strict, lenient)
    assert statuses(world, strict) == {
        "workflow": "FAILED",
        "g": "FAILED",
        "lead": ("FAILED", None),
        "helper": ("FAILED", 1),
    }
    assert statuses(world, lenient) == {
        "workflow": "COMPLETED",
        "g": "COMPLETED",
        "lead": ("COMPLETED", 0),
        "helper": ("FAILED", 1),
    }


def test_cancel_stops_running_and_waiting_groups(world: World) -> None:
    workflow_id = world.submit(
        workflow_yaml(
            [
                {"name": "g1", "tasks": [task("t1", seconds=3600)]},
                {"name": "g2", "tasks": [task("t2", inputs=[{"task": "t1"}])]},
            ]
        )
    )
    world.run_until(lambda: world.workflow(workflow_id).status == "RUNNING")
    status, body = world.api.call(
        "POST", f"/api/workflow/{workflow_id}/cancel", params={"message": "wrong data", "force": 1}
    )
    assert status == 200, body
    assert world.runtime.workflows.request_cancel(workflow_id, "admin") is False
    world.finish(workflow_id)
    assert statuses(world, workflow_id) == {
        "workflow": "FAILED_CANCELED",
        "g1": "FAILED_CANCELED",
        "g2": "FAILED_CANCELED",
        "t1": ("FAILED_CANCELED", None),
        "t2": ("FAILED_CANCELED", None),
    }
    assert world.workflow(workflow_id).groups[0].tasks[0].message == "Canceled by admin. wrong data"
    assert world.runtime.objects.all() == []


def test_queue_timeout_when_the_group_never_fits(world: World) -> None:
    world.occupy(world.gb200_nodes(), gpus=4)
    spec = workflow_yaml([{"name": "g", "tasks": [task("t")]}], timeout={"queue_timeout": "30s"})
    workflow_id = world.submit(spec)
    world.controller.tick()
    group = world.workflow(workflow_id).groups[0]
    assert group.status == "SCHEDULING"
    assert group.pending_reason is not None and "GPU" in group.pending_reason
    ticks = world.run_until(lambda: world.workflow(workflow_id).status != "PENDING", step=5)
    assert 6 <= ticks <= 8  # 30 s of 5 s steps
    assert statuses(world, workflow_id)["workflow"] == "FAILED_QUEUE_TIMEOUT"
    assert world.uncleaned() == []


def test_exec_timeout_ends_a_running_group(world: World) -> None:
    spec = workflow_yaml(
        [{"name": "g", "tasks": [task("t", seconds=3600)]}], timeout={"exec_timeout": "1m"}
    )
    workflow_id = world.submit(spec)
    world.finish(workflow_id, step=10)
    assert statuses(world, workflow_id) == {
        "workflow": "FAILED_EXEC_TIMEOUT",
        "g": "FAILED_EXEC_TIMEOUT",
        "t": ("FAILED_EXEC_TIMEOUT", None),
    }


def test_maintenance_holds_new_groups_and_lets_running_ones_finish(world: World) -> None:
    workflow_id = world.submit(chain(0, 0))
    world.controller.tick()
    world.patch_pool("nvl72", {"enable_maintenance": True})
    world.run_until(lambda: world.workflow(workflow_id).groups[0].status == "COMPLETED")
    for _ in range(5):
        world.controller.tick()
        world.clock.advance(10)
    assert statuses(world, workflow_id)["g2"] == "WAITING"
    world.patch_pool("nvl72", {"enable_maintenance": False})
    world.finish(workflow_id)
    assert statuses(world, workflow_id)["workflow"] == "COMPLETED"


def test_high_priority_goes_first_within_the_queue(world: World) -> None:
    # The nvl72 queue allows 72 GPUs: one 16-tray (64-GPU) group at a time.
    big = [task(f"t{i}", seconds=30, lead=i == 0) for i in range(16)]
    first = world.submit(workflow_yaml([{"name": "g", "tasks": big}], name="first"))
    world.controller.tick()
    normal = world.submit(workflow_yaml([{"name": "g", "tasks": big}], name="normal"))
    high = world.submit(workflow_yaml([{"name": "g", "tasks": big}], name="high"), priority="HIGH")
    world.run_until(lambda: world.workflow(first).status == "COMPLETED", step=10)
    world.controller.tick()
    assert world.workflow(high).groups[0].status in ("INITIALIZING", "RUNNING")
    assert world.workflow(normal).groups[0].status == "SCHEDULING"
    assert "over its maximum of 72" in (world.workflow(normal).groups[0].pending_reason or "")
    world.finish(normal, high, step=10)
