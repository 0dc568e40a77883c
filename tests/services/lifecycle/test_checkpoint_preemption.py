"""Victims chosen by the work they would lose, end to end (docs/checkpoints.md): checkpoints
reported through ``POST /api/workflow/{id}/task/{task}/checkpoint``, read by the controller,
weighed by the embedded scheduler's preemption; and the endpoint's answers to bad input and to
callers who may not report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from corral.services.runtime import utc_now
from tests.conftest import Api
from tests.services.lifecycle.test_preemption_use_cases import (
    CLIQUES,
    clique_job,
    cliques_of,
    fill_every_clique,
    unlimited,
)
from tests.services.lifecycle_world import World


def report(world: World, workflow_id: str, task: str, **body: object) -> tuple[int, object]:
    return world.api.call("POST", f"/api/workflow/{workflow_id}/task/{task}/checkpoint", json=body)


def test_a_high_gang_evicts_the_gang_that_checkpointed_a_minute_ago(world: World) -> None:
    """Five LOW clique gangs started two hours ago; the oldest checkpointed a minute ago, the
    others 50 minutes ago. Without checkpoints the youngest would go (as in
    test_preemption_use_cases); with them, the one that loses least does."""
    now = utc_now()
    world.clock.now = now - timedelta(hours=2)
    unlimited(world, "nvl72")
    fillers = fill_every_clique(world, seconds=4 * 3600)
    world.clock.now = now
    fresh = fillers[0]
    for filler in fillers:
        ago = timedelta(minutes=1 if filler == fresh else 50)
        status, body = report(world, filler, "t0", at=(now - ago).isoformat(), step=1000)
        assert status == 200, body
        assert body == {
            "workflow_id": filler,
            "task": "t0",
            "at": (now - ago).isoformat(),
            "step": 1000,
            "description": None,
        }
    freed = cliques_of(world, fresh)
    urgent = world.submit(clique_job("urgent", 16), priority="HIGH")
    world.run_until(lambda: world.workflow(urgent).status == "RUNNING")
    assert cliques_of(world, urgent) == freed
    world.run_until(lambda: world.workflow(fresh).status != "RUNNING")
    assert world.workflow(fresh).status == "FAILED_PREEMPTED"
    assert [world.workflow(w).status for w in fillers[1:]] == ["RUNNING"] * (CLIQUES - 1)


def test_bad_reports_are_refused_with_what_to_do(world: World) -> None:
    job = world.submit(clique_job("job", 1))
    world.run_until(lambda: world.workflow(job).status == "RUNNING")
    future = datetime.now(UTC) + timedelta(hours=1)
    status, body = report(world, job, "t0", at=future.isoformat())
    assert status == 400, body
    assert "Field 'at'" in body["message"] and "is in the future" in body["message"]
    status, body = report(world, job, "nope")
    assert (status, body["message"]) == (404, f"Task nope not found in workflow {job}.")
    status, body = report(world, job, "t0", step=-1)
    assert status == 400 and "step" in body["message"], body
    status, body = report(world, job, "t0", extra=1)
    assert status == 400 and "extra" in body["message"], body
    status, body = report(world, "no-such-workflow", "t0")
    assert status == 404, body
    status, body = world.api.call("POST", f"/api/workflow/{job}/cancel")
    assert status == 200, body
    world.run_until(lambda: world.workflow(job).status == "FAILED_CANCELED")
    status, body = report(world, job, "t0")
    assert status == 400, body
    assert body["message"] == (
        f"Task t0 of {job} is FAILED_CANCELED, not RUNNING: only a running task reports "
        "checkpoints."
    )


def test_only_the_owner_and_admins_may_report(world: World) -> None:
    job = world.submit(clique_job("job", 1))
    world.run_until(lambda: world.workflow(job).status == "RUNNING")
    runtime = world.api.runtime
    other = runtime.tokens.create(name="other", username="mallory", roles=["osmo-user"])
    stranger = Api(world.api.client, other, runtime)
    status, body = stranger.call("POST", f"/api/workflow/{job}/task/t0/checkpoint", json={})
    assert (status, body["message"]) == (404, f"Workflow {job} not found.")
    status, body = report(world, job, "t0")  # the admin (who also submitted it)
    assert status == 200, body
    assert world.workflow(job).groups[0].tasks[0].checkpoint_at is not None


def test_the_preemptors_tasks_start_once_its_victims_stopped(world: World) -> None:
    """On the embedded cluster the preemptor is bound at once, but its tasks start only when
    the victims under notice (30 s, the pool's grace period) stopped: no GPU runs two tasks."""
    world.clock.now = datetime.now(UTC)
    unlimited(world, "nvl72")
    victim = fill_every_clique(world)[-1]
    urgent = world.submit(clique_job("urgent", 16), priority="HIGH")
    world.run_until(lambda: world.workflow(urgent).groups[0].status == "INITIALIZING")
    world.run_until(lambda: world.workflow(victim).groups[0].notice_deadline is not None)
    noticed = world.workflow(victim).groups[0]
    assert noticed.notice_deadline is not None and noticed.status == "RUNNING"
    waiting = world.workflow(urgent).groups[0]
    assert {(t.status, t.started_at) for t in waiting.tasks} == {("INITIALIZING", None)}
    held = world.run_until(lambda: world.workflow(urgent).groups[0].status == "RUNNING")
    assert held * 2.0 >= 28.0  # about the whole notice, in ticks of 2 s
    stopped = world.workflow(victim).groups[0]
    assert stopped.status == "FAILED_PREEMPTED" and stopped.ended_at is not None
    started = [t.started_at for t in world.workflow(urgent).groups[0].tasks]
    assert all(at is not None and at >= stopped.ended_at for at in started), started
    assert noticed.notice_deadline <= stopped.ended_at


def test_a_gang_bound_partly_to_free_trays_starts_whole_after_its_victim(world: World) -> None:
    """Each clique holds a LOW gang of 12 of its trays. A HIGH gang of 16 evicts one and is
    bound to the clique's free trays and some of the victim's: none of its tasks starts before
    the victim stopped (ranks of one job start together, as on Kubernetes)."""
    world.clock.now = datetime.now(UTC)
    unlimited(world, "nvl72")
    fillers = []
    for index in range(CLIQUES):
        fillers.append(world.submit(clique_job(f"low{index}", 12), priority="LOW"))
        world.controller.tick()
        world.clock.advance(1)
    world.run_until(lambda: all(world.workflow(w).status == "RUNNING" for w in fillers))
    victim = fillers[-1]
    urgent = world.submit(clique_job("urgent", 16), priority="HIGH")
    world.run_until(lambda: world.workflow(victim).groups[0].notice_deadline is not None)
    world.run_until(lambda: all(t.node for t in world.workflow(urgent).groups[0].tasks))
    victim_trays = {t.node for t in world.workflow(victim).groups[0].tasks}
    bound = {t.node for t in world.workflow(urgent).groups[0].tasks}
    assert bound - victim_trays and bound & victim_trays  # free trays, and the victim's
    for _ in range(5):  # through most of the 30 s notice
        world.controller.tick()
        world.clock.advance(5)
        tasks = world.workflow(urgent).groups[0].tasks
        assert {(t.status, t.started_at) for t in tasks} == {("INITIALIZING", None)}
    world.run_until(lambda: world.workflow(urgent).groups[0].status == "RUNNING")
    stopped = world.workflow(victim).groups[0]
    assert stopped.status == "FAILED_PREEMPTED" and stopped.ended_at is not None
    started = [t.started_at for t in world.workflow(urgent).groups[0].tasks]
    assert all(at is not None and at >= stopped.ended_at for at in started), started
