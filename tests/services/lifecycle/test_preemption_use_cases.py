"""Preemption and reclaim end to end on the embedded cluster: workflows submitted through the API,
placed, evicted and run by the controller on the example cluster's five NVL72 cliques (18 trays
of 4 GPUs each)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from corral.domain.configs.models import Pool
from tests.conftest import REPO
from tests.services.lifecycle_world import CLIQUE, World, task, workflow_yaml

TRAYS = 18  # per clique: 72 GPUs
CLIQUES = 5


def clique_job(name: str, trays: int, *, seconds: float = 1000) -> str:
    tasks = [task(f"t{i}", lead=i == 0, seconds=seconds) for i in range(trays)]
    resources = {"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}}
    return workflow_yaml([{"name": "g", "tasks": tasks}], name=name, resources=resources)


def cliques_of(world: World, workflow_id: str) -> set[str]:
    nodes = [t.node for g in world.workflow(workflow_id).groups for t in g.tasks if t.node]
    return {world.node_labels(node)[CLIQUE] for node in nodes}


def explain(world: World, workflow_id: str) -> dict[str, str]:
    status, body = world.api.call("GET", f"/api/workflow/{workflow_id}/explain")
    assert status == 200, body
    return {group["name"]: group["reason"] for group in body["groups"]}


def fill_every_clique(world: World, pool: str = "nvl72", seconds: float = 1000) -> list[str]:
    """One LOW workflow of 18 trays per clique, submitted a tick apart (the last is youngest),
    each task running ``seconds``."""
    fillers = []
    for index in range(CLIQUES):
        job = clique_job(f"low{index}", TRAYS, seconds=seconds)
        fillers.append(world.submit(job, pool=pool, priority="LOW"))
        world.controller.tick()
        world.clock.advance(1)
    world.run_until(lambda: all(world.workflow(w).status == "RUNNING" for w in fillers))
    assert len({clique for w in fillers for clique in cliques_of(world, w)}) == CLIQUES
    return fillers


def unlimited(world: World, pool: str, **gpu: Any) -> None:
    world.patch_pool(pool, {"resources": {"gpu": {"guarantee": 64, "maximum": -1, **gpu}}})


def test_a_high_clique_gang_evicts_the_low_work_of_exactly_one_clique(world: World) -> None:
    world.clock.now = datetime.now(UTC)  # the pool views count the last 24 h of real time
    unlimited(world, "nvl72")
    fillers = fill_every_clique(world)
    victim = fillers[-1]  # every clique costs 72 GPUs: the youngest work goes
    freed = cliques_of(world, victim)
    urgent = world.submit(clique_job("urgent", 16), priority="HIGH")
    world.run_until(lambda: world.workflow(urgent).status == "RUNNING")
    assert cliques_of(world, urgent) == freed
    # the victim stops once its notice (the pool's grace period, 30 s) ends
    world.run_until(lambda: world.workflow(victim).status != "RUNNING")
    by = f"{urgent} (HIGH priority in queue nvl72)"
    evicted = world.workflow(victim)
    assert evicted.status == "FAILED_PREEMPTED"
    assert {(t.status, t.exit_code, t.message) for t in evicted.groups[0].tasks} == {
        ("FAILED_PREEMPTED", 3006, f"Preempted by {by}.")
    }
    assert [world.workflow(w).status for w in fillers[:-1]] == ["RUNNING"] * (CLIQUES - 1)
    world.run_until(lambda: not _objects_of(world, victim))  # its objects are cleaned up
    status, quota = world.api.call("GET", "/api/pool_quota", params={"pools": ["nvl72"]})
    assert status == 200, quota
    figures = quota["node_sets"][0]["pools"][0]["resource_usage"]
    # 4 cliques of LOW work (288 GPUs) and 64 HIGH GPUs: 288 borrowed above the guarantee of 64
    assert {k: figures[k] for k in ("total_usage", "quota_used", "borrowed", "preempted")} == {
        "total_usage": "352",
        "quota_used": "64",
        "borrowed": "288",
        "preempted": "72",
    }
    status, listed = world.api.call("GET", "/api/resources", params={"pools": ["nvl72"]})
    assert status == 200, listed
    # it never checkpointed: it lost all it ran, 72 GPUs from its start to its stop
    ran = evicted.groups[0]
    assert ran.started_at is not None and ran.ended_at is not None
    lost = round(72 * (ran.ended_at - ran.started_at).total_seconds() / 3600, 2)
    assert lost > 0
    assert listed["pool_queues"] == [
        {
            "pool": "nvl72",
            "guarantee": 64,
            "maximum": -1,
            "used": 352,
            "borrowed": 288,
            "preempted": 72,
            "lost_gpu_hours": lost,
        }
    ]
    assert explain(world, victim)["g"] == (
        f"preempted by {by}; lost {lost:.2f} GPU-h since its last checkpoint; stopped 30.0 s "
        "after its notice (at its deadline)"
    )


def test_a_pool_below_its_guarantee_reclaims_what_a_pool_sharing_its_nodes_borrows(
    world: World,
) -> None:
    unlimited(world, "nvl72")
    status, body = world.api.call("GET", "/api/configs/pool/nvl72")
    assert status == 200, body
    borrower = {
        **body,
        "name": "borrower",
        "description": "shares nvl72's trays",
        "resources": {"gpu": {"guarantee": 0}},
    }
    status, body = world.api.call(
        "PUT", "/api/configs/pool/borrower", json={"configs_dict": borrower}
    )
    assert status == 200, body
    fillers = fill_every_clique(world, pool="borrower")
    job = world.submit(clique_job("mine", 16))  # NORMAL, within nvl72's guarantee of 64
    world.run_until(lambda: world.workflow(job).status == "RUNNING")
    world.run_until(lambda: any(world.workflow(w).status != "RUNNING" for w in fillers))
    (victim,) = [w for w in fillers if world.workflow(w).status == "FAILED_PREEMPTED"]
    assert victim == fillers[-1]
    reason = explain(world, victim)["g"]
    assert reason.startswith(f"preempted by {job} (queue nvl72 reclaimed its guarantee); lost ")
    assert reason.endswith("stopped 30.0 s after its notice (at its deadline)")  # as a preemption
    assert cliques_of(world, job) <= {world.node_labels(n)[CLIQUE] for n in world.gb200_nodes()}


def test_a_preempted_gang_goes_back_to_the_queue_when_the_pool_reschedules_it(
    world: World,
) -> None:
    unlimited(world, "nvl72")
    world.patch_pool("nvl72", {"default_exit_actions": {"RESCHEDULE": "3006"}})
    status, body = world.api.call(
        "PATCH", "/api/configs/workflow", json={"configs_dict": {"max_retry_per_task": 1}}
    )
    assert status == 200, body
    fillers = fill_every_clique(world)
    victim = fillers[-1]
    urgent = world.submit(clique_job("urgent", 16, seconds=60), priority="HIGH")
    world.run_until(lambda: world.workflow(urgent).status == "RUNNING")
    world.run_until(lambda: world.workflow(victim).groups[0].status != "RUNNING")
    requeued = world.workflow(victim)
    assert requeued.status in ("PENDING", "WAITING", "RUNNING")
    group = requeued.groups[0]
    assert group.status == "SCHEDULING"
    assert {(t.status, t.retry_id, t.exit_code) for t in group.tasks} == {("SCHEDULING", 1, None)}
    attempts = [a for t in world.runtime.workflows.get(victim).groups[0].tasks for a in t.attempts]
    assert {(a.retry_id, a.exit_code) for a in attempts} == {(0, 3006)}
    assert "back in the queue after it was preempted by" in explain(world, victim)["g"]
    # once the urgent work ends, the requeued gang runs again (its second attempt)
    world.run_until(lambda: world.workflow(victim).groups[0].status == "RUNNING", step=5)
    assert world.workflow(urgent).status == "COMPLETED"


def test_young_work_is_protected_by_the_pools_minimum_runtime(world: World) -> None:
    unlimited(world, "nvl72")
    world.patch_pool("nvl72", {"preemption": {"min_runtime": "2m"}})
    fillers = fill_every_clique(world)
    urgent = world.submit(clique_job("urgent", 16), priority="HIGH")
    for _ in range(5):
        world.controller.tick()
        world.clock.advance(10)
    assert world.workflow(urgent).groups[0].status == "SCHEDULING"
    assert [world.workflow(w).status for w in fillers] == ["RUNNING"] * CLIQUES
    placed = world.run_until(
        lambda: world.workflow(urgent).groups[0].status != "SCHEDULING", step=10
    )
    assert 4 <= placed <= 12  # two minutes after the youngest started, not before
    world.run_until(lambda: world.workflow(fillers[-1]).status != "RUNNING")
    assert world.workflow(fillers[-1]).status == "FAILED_PREEMPTED"


def _objects_of(world: World, workflow_id: str) -> list[str]:
    return [
        o.name
        for o in world.runtime.objects.all()
        if o.labels.get("osmo.workflow_id") == workflow_id
    ]


def refusal(world: World, text: str, **params: Any) -> str:
    body = {"file": text, "source": "wf.yaml"}
    status, found = world.api.call("POST", "/api/pool/nvl72/workflow", json=body, params=params)
    assert status == 400, found
    return str(found["message"])


def test_what_could_never_run_is_refused_at_submission_and_nothing_is_stored(
    world: World,
) -> None:
    # nvl72: guarantee 64, maximum 72; five cliques of 18 trays of 4 GPUs
    assert refusal(world, clique_job("big", 18)) == (
        "Pool nvl72 has 64 GPUs guaranteed for NORMAL/HIGH priority workflows and group g "
        "requires 72 GPUs. Higher gpu counts must be submitted with LOW priority"
    )
    assert refusal(world, clique_job("huge", 20), priority="LOW") == (
        "Group g needs 80 GPUs at once, more than pool nvl72's maximum of 72: it could never "
        "run. Use fewer GPUs in the group, or ask an admin to raise the pool's "
        "resources.gpu.maximum."
    )
    unlimited(world, "nvl72")
    wide = clique_job("wide", 19)
    expected = (
        "Group g could never be placed in pool nvl72, not even on its empty cluster: needs room "
        f"for 19 pods with 4 GPUs each in one {CLIQUE}; the roomiest {CLIQUE}, "
        f"{CLIQUE}=zone-a-spine-0-rack-0-gpu-clique-0, has room for 18. Change the group's "
        "size or topology requirements (corral pool topology shows the domains)."
    )
    assert refusal(world, wide, priority="LOW") == expected
    assert refusal(world, wide, priority="LOW", validation_only="true") == expected
    # A dry run shows every object, then the verdict (issue 25, item 18).
    body = {"file": wide, "source": "wf.yaml"}
    params = {"priority": "LOW", "dry_run": "true"}
    status, shown = world.api.call("POST", "/api/pool/nvl72/workflow", json=body, params=params)
    assert status == 200, shown
    assert shown["could_never_run"] == expected
    kinds = [m["kind"] for m in shown["groups"][0]["manifests"]]
    assert kinds == ["ComputeDomain", "PodGroup", *["Pod"] * 19, "Service"]
    status, listed = world.api.call("GET", "/api/workflow", params={"all_users": True})
    assert status == 200 and listed["workflows"] == []
    # what fits one clique is accepted, LOW even while the cluster is full
    accepted = world.submit(clique_job("fits", 18), priority="LOW")
    assert world.workflow(accepted).status == "PENDING"


def dry_run(world: World, text: str, **params: Any) -> dict[str, Any]:
    body = {"file": text, "source": "wf.yaml"}
    status, found = world.api.call(
        "POST", "/api/pool/nvl72/workflow", json=body, params={"dry_run": "true", **params}
    )
    assert status == 200, found
    (group,) = found["groups"]
    return dict(group["placement"])


def test_a_dry_run_shows_where_the_workflow_would_run_now_or_why_it_would_wait(
    world: World,
) -> None:
    unlimited(world, "nvl72")
    empty = dry_run(world, clique_job("urgent", 16), priority="HIGH")
    assert empty["evicts"] == [] and empty["reason"] is None
    assert len(set(empty["nodes"].values())) == 16
    fillers = fill_every_clique(world)
    victim = fillers[-1]
    urgent = dry_run(world, clique_job("urgent", 16), priority="HIGH")
    assert urgent["evicts"] == [{"workflow_id": victim, "gpus": 72, "reclaimed": False}]
    assert {world.node_labels(n)[CLIQUE] for n in urgent["nodes"].values()} == cliques_of(
        world, victim
    )
    # nothing was evicted for real, and a NORMAL job of 16 trays waits, as explain would say
    world.controller.tick()
    assert [world.workflow(w).status for w in fillers] == ["RUNNING"] * CLIQUES
    waits = dry_run(world, clique_job("later", 16), priority="LOW")
    job = world.submit(clique_job("later", 16), priority="LOW")
    world.controller.tick()
    assert waits["reason"] == world.workflow(job).groups[0].pending_reason
    assert waits["reason"] == (
        f"needs room for 16 pods with 4 GPUs each in one {CLIQUE}; the roomiest {CLIQUE}, "
        f"{CLIQUE}=zone-a-spine-0-rack-0-gpu-clique-0, has room for 0"
    )


def test_the_pool_settings_of_docs_scheduler_md_are_a_valid_pool() -> None:
    page = (REPO / "docs" / "scheduler.md").read_text()
    section = page.split("## Queues, priorities and preemption", 1)[1]
    settings = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])
    pool = Pool.model_validate({"backend": "default", **settings})
    assert pool.preemption.min_runtime_seconds() == 600
    assert pool.preemption.grace_seconds() == 120
    quota = pool.resources.gpu
    assert quota is not None and (quota.guarantee, quota.maximum) == (64, 144)
