"""Node health changed on a running server (docs/health.md), end to end on both databases: a
whole-clique gang avoids the cliques with a failed tray, a cordon keeps new work off a tray
until it is lifted (the could-never-run check unchanged, the wait reason naming the tray), and
every change is audited and needs node:Update on a pool the node serves."""

from __future__ import annotations

from typing import Any

from corral.domain.platform.node_health import NOT_READY_GRACE
from corral.domain.views.node_ranges import node_ranges
from tests.services.lifecycle_world import CLIQUE, World, task, workflow_yaml


def cliques(world: World) -> dict[str, list[str]]:
    """The example cluster's GB200 trays by clique (18 trays of 4 GPUs each)."""
    found: dict[str, list[str]] = {}
    for node in world.gb200_nodes():
        found.setdefault(world.node_labels(node)[CLIQUE], []).append(node)
    return found


def whole_clique_gang() -> str:
    """18 tasks of 4 GPUs that must share one NVLink clique: a whole NVL72 rack (LOW: above
    the nvl72 pool's guarantee of 64)."""
    tasks = [task(f"shard{i}", lead=i == 0, seconds=30) for i in range(18)]
    resources = {"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}}
    return workflow_yaml([{"name": "train", "tasks": tasks}], resources=resources)


def node_call(world: World, node: str, action: str, **body: Any) -> dict[str, Any]:
    status, answer = world.api.call("POST", f"/api/nodes/{node}/{action}", json=body)
    assert status == 200, answer
    return dict(answer)


def placed_cliques(world: World, workflow_id: str) -> set[str]:
    nodes = [t.node for g in world.workflow(workflow_id).groups for t in g.tasks if t.node]
    assert len(nodes) == 18
    return {world.node_labels(node)[CLIQUE] for node in nodes}


def test_a_whole_clique_gang_avoids_every_clique_with_a_failed_tray(world: World) -> None:
    by_clique = cliques(world)
    healthy, *others = sorted(by_clique)
    for clique in others:
        node_call(world, by_clique[clique][3], "fail", reason="PSU")
    workflow_id = world.submit(whole_clique_gang(), priority="LOW")
    world.run_until(lambda: world.workflow(workflow_id).status == "RUNNING")
    assert placed_cliques(world, workflow_id) == {healthy}


def test_a_cordon_keeps_new_work_off_a_tray_until_it_is_lifted(world: World) -> None:
    by_clique = cliques(world)
    cordoned = {clique: trays[0] for clique, trays in by_clique.items()}
    for node in cordoned.values():
        node_call(world, node, "cordon", reason="PSU swap")
    workflow_id = world.submit(whole_clique_gang(), priority="LOW")  # waits for the trays
    world.run_until(lambda: world.workflow(workflow_id).groups[0].pending_reason is not None)
    reason = world.workflow(workflow_id).groups[0].pending_reason
    assert reason is not None
    first = sorted(cordoned.values())[0]
    assert f"{first} cordoned by admin: 'PSU swap'" in reason, reason
    assert world.workflow(workflow_id).status == "PENDING"
    chosen = sorted(by_clique)[1]
    node_call(world, cordoned[chosen], "uncordon")
    world.run_until(lambda: world.workflow(workflow_id).status == "RUNNING")
    assert placed_cliques(world, workflow_id) == {chosen}


def test_changes_are_audited_and_need_node_update_on_a_pool_of_the_node(world: World) -> None:
    node = world.gb200_nodes()[0]
    changed = node_call(world, node, "fail", fabric=True, reason="IMEX down")
    assert {k: changed[k] for k in ("node", "action", "by", "reason")} == {
        "node": node,
        "action": "fail",
        "by": "admin",
        "reason": "IMEX down",
    }
    assert changed["before"]["fabric"] == "healthy"
    assert changed["after"]["fabric"] == "failed" and changed["after"]["ready"] is True
    node_call(world, node, "heal")
    status, history = world.api.call("GET", f"/api/nodes/{node}/history")
    assert status == 200
    assert [c["action"] for c in history["changes"]] == ["heal", "fail"]
    assert history["changes"][0]["after"]["fabric"] == "healthy"

    runtime = world.runtime
    user = runtime.tokens.create(name="bob-token", username="bob", roles=["osmo-user"])
    refused = world.api.client.post(
        f"/api/nodes/{node}/cordon", headers={"Authorization": f"Bearer {user}"}
    )
    assert refused.status_code == 403
    assert refused.json()["message"] == (
        f"Node {node} serves no pool you may administer (node:Update on "
        "pool/robotics-training, pool/my-pool, pool/nvl72); ask an admin."
    )
    status, wrong = world.api.call("POST", f"/api/nodes/{node}/cordon", json={"fabric": True})
    assert (status, wrong["message"]) == (400, "fabric: Unknown key 'fabric' in the request")
    for method, action in (("POST", "cordon"), ("GET", "history")):
        status, missing = world.api.call(method, f"/api/nodes/no-such-node/{action}")
        assert status == 404
        assert missing["message"] == (
            "Node no-such-node is not a node of the embedded cluster or of a Kubernetes "
            "backend; `corral resource list` "
            "lists the nodes."
        )


def test_node_update_on_one_pool_does_not_reach_the_nodes_of_another(world: World) -> None:
    """A user holding node:Update on pool/team-development (and on a pool that does not
    exist) drained an admin's nvl72 tray: the check asked for ``pool/*``, and a wildcard
    request matched any policy under ``pool/``. A request names one pool now."""
    status, body = world.api.call(
        "PUT",
        "/api/configs/role/l4-admins",
        json={
            "configs_dict": {
                "description": "administers the L4 nodes of team-development",
                "policies": [
                    {"actions": ["node:Update"], "resources": ["pool/team-development"]},
                    {"actions": ["node:Update"], "resources": ["pool/no-such-pool"]},
                ],
            }
        },
    )
    assert status == 200, body
    token = world.runtime.tokens.create(name="eve", username="eve", roles=["l4-admins"])
    headers = {"Authorization": f"Bearer {token}"}
    tray = world.gb200_nodes()[0]
    for action in ("cordon", "drain", "fail"):
        refused = world.api.client.post(f"/api/nodes/{tray}/{action}", headers=headers)
        assert refused.status_code == 403, (action, refused.json())
        assert refused.json()["message"] == (
            f"Node {tray} serves no pool you may administer (node:Update on "
            "pool/robotics-training, pool/my-pool, pool/nvl72); ask an admin."
        )
    assert world.runtime.node_admin.history(tray) == []
    allowed = world.api.client.post("/api/nodes/l4-0/cordon", headers=headers)
    assert allowed.status_code == 200, allowed.json()


def eight_tray_gang(seconds: float = 3600) -> str:
    """8 tasks of 4 GPUs that must share one NVLink clique."""
    tasks = [task(f"shard{i}", lead=i == 0, seconds=seconds) for i in range(8)]
    resources = {"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}}
    return workflow_yaml([{"name": "train", "tasks": tasks}], resources=resources)


def gang_nodes(world: World, workflow_id: str) -> list[str]:
    return [t.node for t in world.workflow(workflow_id).groups[0].tasks if t.node]


def test_a_running_gang_whose_tray_fails_is_placed_again_whole_in_another_clique(
    world: World,
) -> None:
    workflow_id = world.submit(eight_tray_gang())
    world.run_until(lambda: world.workflow(workflow_id).groups[0].status == "RUNNING")
    first = gang_nodes(world, workflow_id)
    first_clique = {world.node_labels(node)[CLIQUE] for node in first}
    failed = first[3]
    node_call(world, failed, "fail", reason="PSU")
    world.controller.tick()
    assert world.workflow(workflow_id).groups[0].status == "RUNNING"  # within the grace period
    world.clock.advance(NOT_READY_GRACE.total_seconds())
    ticks = world.run_until(
        lambda: (
            world.workflow(workflow_id).groups[0].status == "RUNNING"
            and all(t.retry_id == 1 for t in world.workflow(workflow_id).groups[0].tasks)
        )
    )
    assert ticks <= 3
    group = world.workflow(workflow_id).groups[0]
    again = gang_nodes(world, workflow_id)
    assert len(again) == 8 and failed not in again
    cliques_now = {world.node_labels(node)[CLIQUE] for node in again}
    assert len(cliques_now) == 1 and cliques_now != first_clique
    task0 = group.tasks[0]
    assert task0.exit_code is None  # retry 1 runs: the exit code is its first attempt's
    (attempt,) = world.runtime.workflows.get(workflow_id).groups[0].tasks[0].attempts
    assert (attempt.retry_id, attempt.exit_code, attempt.node) == (0, 3001, first[0])
    assert attempt.message is not None
    assert attempt.message.startswith(f"Stopped: node {failed} failed at 2026-11-21 12:")
    assert attempt.message.endswith(
        "NotReady for 5 min (PSU). The group is placed again whole (retry 1 of 3)."
    )
    assert task0.message == f"Attempt 0 stopped: {attempt.message}"
    assert group.fault is not None and group.fault.startswith(f"node {failed} failed at")
    count, gpu_seconds = world.runtime.listings.node_fault_losses()["nvl72"]
    assert count == 1 and gpu_seconds >= 32 * NOT_READY_GRACE.total_seconds()  # 32 GPUs
    metrics = world.api.client.get("/metrics").text
    assert 'corral_node_fault_groups{pool="nvl72"} 1.0' in metrics
    assert f'corral_node_fault_gpu_seconds_lost{{pool="nvl72"}} {gpu_seconds}' in metrics


def test_a_gang_back_in_the_queue_shows_its_attempts_and_each_attempts_log(world: World) -> None:
    """A gang knocked back into the queue read as if it never ran: "no group is running yet",
    exit code 3001 on tasks that wait, and nothing of what retry 0 printed."""
    workflow_id = world.submit(eight_tray_gang())
    world.run_until(lambda: world.workflow(workflow_id).groups[0].status == "RUNNING")
    status, explained = world.api.call("GET", f"/api/workflow/{workflow_id}/explain")
    (group,) = explained["groups"]
    first = sorted(gang_nodes(world, workflow_id))
    assert group["reason"].startswith(  # eight tasks: summed up, each one behind a toggle
        f"running in domain {world.workflow(workflow_id).groups[0].domains['']}; 8 tasks on "
        f"{node_ranges(first)}; for "
    )
    assert sorted(group["details"]) == sorted(
        f"shard{i} on {t.node}" for i, t in enumerate(world.workflow(workflow_id).groups[0].tasks)
    )
    for trays in cliques(world).values():  # nowhere else to go
        world.occupy([t for t in trays if t not in first], gpus=4)
    node_call(world, first[2], "fail", fabric=True, reason="IMEX down")
    world.controller.tick()
    status, found = world.api.call("GET", f"/api/workflow/{workflow_id}")
    assert status == 200 and found["status"] == "PENDING"
    tasks = found["groups"][0]["tasks"]
    assert {(t["status"], t["retry_id"], t["exit_code"], t["node"]) for t in tasks} == {
        ("SCHEDULING", 1, None, None)
    }
    shard0 = tasks[0]
    (attempt,) = shard0["attempts"]
    assert (attempt["retry_id"], attempt["exit_code"], attempt["node"]) == (0, 3001, first[0])
    assert attempt["message"].startswith(f"Stopped: node {first[2]} failed at ")
    assert shard0["message"] == f"Attempt 0 stopped: {attempt['message']}"
    status, explained = world.api.call("GET", f"/api/workflow/{workflow_id}/explain")
    assert explained["summary"].startswith(
        f"group train ran before and is back in the queue after node {first[2]} failed at "
    )
    assert explained["summary"].endswith("; retry 1 waits")
    logs = world.api.client.get(
        f"/api/workflow/{workflow_id}/logs",
        params={"task_name": "shard0", "retry_id": 0},
        headers={"Authorization": f"Bearer {world.api.token}"},
    )
    assert logs.status_code == 200 and "simulated task (retry 0) started at" in logs.text
    status, missing = world.api.call(
        "GET", f"/api/workflow/{workflow_id}/logs", params={"task_name": "shard0", "retry_id": 5}
    )
    assert (status, missing["message"]) == (404, "Task shard0 has no retry 5; its retries: 0, 1.")
    status, alone = world.api.call(
        "GET", f"/api/workflow/{workflow_id}/logs", params={"retry_id": 0}
    )
    assert (status, alone["message"]) == (
        400,
        "retry_id: name the task too (task_name): retries are per task.",
    )


def sixteen_tray_gang(name: str) -> str:
    """16 tasks of 4 GPUs (64 GPUs, the nvl72 pool's guarantee) in one NVLink clique."""
    tasks = [task(f"shard{i}", lead=i == 0, seconds=3600) for i in range(16)]
    resources = {"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}}
    return workflow_yaml([{"name": "train", "tasks": tasks}], name=name, resources=resources)


def test_a_gang_a_fault_puts_back_keeps_its_place_ahead_of_younger_work(world: World) -> None:
    """big-train-1 runs on the pool's whole guarantee; the younger big-train-2 waits for it.
    A tray of big-train-1 fails: it goes back to the queue and is placed again first, in the
    same tick. (Its requeue set its place to now: big-train-2 took the freed clique.)"""
    first = world.submit(sixteen_tray_gang("big-train"))
    world.run_until(lambda: world.workflow(first).groups[0].status == "RUNNING")
    second = world.submit(sixteen_tray_gang("big-train"))
    world.run_until(lambda: world.workflow(second).groups[0].pending_reason is not None)
    world.clock.advance(600)  # big-train-2 has waited ten minutes
    tray = gang_nodes(world, first)[5]
    node_call(world, tray, "fail", fabric=True, reason="IMEX down")
    world.controller.tick()
    again = world.runtime.workflows.get(first).groups[0]
    assert again.status == "INITIALIZING" and {t.retry_id for t in again.tasks} == {1}
    assert tray not in gang_nodes(world, first)
    assert again.admitted_at is not None and again.admitted_at < again.scheduling_at  # type: ignore[operator]
    waiting = world.workflow(second).groups[0]
    assert waiting.status == "SCHEDULING"
    assert waiting.pending_reason is not None
    assert "pool nvl72 would use 128 GPUs, over its maximum of 72" in waiting.pending_reason


def test_a_lost_fabric_requeues_a_gang_at_once_and_fails_a_single_tray_task_as_backend_error(
    world: World,
) -> None:
    gang = world.submit(eight_tray_gang())
    single = world.submit(workflow_yaml([{"name": "one", "tasks": [task("solo", seconds=3600)]}]))
    world.run_until(
        lambda: all(world.workflow(w).groups[0].status == "RUNNING" for w in (gang, single))
    )
    gang_tray = gang_nodes(world, gang)[0]
    solo_tray = gang_nodes(world, single)[0]
    node_call(world, gang_tray, "fail", fabric=True, reason="IMEX down")
    node_call(world, solo_tray, "fail", fabric=True, reason="IMEX down")
    world.controller.tick()
    tasks = world.runtime.workflows.get(gang).groups[0].tasks
    assert {t.retry_id for t in tasks} == {1} and {t.exit_code for t in tasks} == {None}
    assert {(a.retry_id, a.exit_code) for t in tasks for a in t.attempts} == {(0, 3001)}
    solo = world.workflow(single)
    assert solo.status == "FAILED"  # OSMO's aggregation: the task's status is the precise one
    solo_task = solo.groups[0].tasks[0]
    assert (solo_task.status, solo_task.exit_code) == ("FAILED_BACKEND_ERROR", 3001)
    assert solo_task.message is not None
    assert solo_task.message.startswith(f"Stopped: node {solo_tray} failed at 2026-11-21 12:")
    assert solo_task.message.endswith(" UTC: NVLink fabric failed (IMEX down).")


def test_drain_moves_work_off_a_node_and_nothing_new_lands_there_until_uncordon(
    world: World,
) -> None:
    status, body = world.api.call(
        "PATCH", "/api/configs/workflow", json={"configs_dict": {"max_retry_per_task": 1}}
    )
    assert status == 200, body
    # A drain is the operator's: by default the work is placed again whole, as after a fault
    # (the drain used to end it FAILED_PREEMPTED: 10.68 GPU-hours lost); its exit actions can
    # still say otherwise.
    mover = task("mover", seconds=3600)
    stayer = task("stayer", seconds=3600, exitActions={"FAIL": "3006"})
    moved = world.submit(workflow_yaml([{"name": "g", "tasks": [mover]}], name="moved"))
    ended = world.submit(workflow_yaml([{"name": "g", "tasks": [stayer]}], name="ended"))
    world.run_until(
        lambda: all(world.workflow(w).groups[0].status == "RUNNING" for w in (moved, ended))
    )
    trays = {gang_nodes(world, w)[0] for w in (moved, ended)}
    for tray in sorted(trays):
        drained = node_call(world, tray, "drain", reason="PSU swap", grace_seconds=0)
        assert drained["after"]["drain_grace_s"] == 0 and drained["after"]["cordoned"]
    mover_tray = gang_nodes(world, moved)[0]
    world.controller.tick()
    mover_task = world.runtime.workflows.get(moved).groups[0].tasks[0]
    assert (mover_task.retry_id, mover_task.exit_code) == (1, None)  # placed again at once
    (attempt,) = mover_task.attempts
    assert (attempt.retry_id, attempt.node, attempt.exit_code, attempt.message) == (
        0,
        mover_tray,
        3006,
        f"Preempted by the drain of node {mover_tray} by admin: 'PSU swap'. The group is placed "
        "again whole (retry 1 of 3).",
    )
    stayer_task = world.workflow(ended).groups[0].tasks[0]
    assert (stayer_task.status, stayer_task.exit_code) == ("FAILED", 3006)
    assert stayer_task.message == (
        f"Preempted by the drain of node {gang_nodes(world, ended)[0]} by admin: 'PSU swap'. "
        "Exit Action: FAIL the task for exit code 3006."
    )
    world.run_until(lambda: world.workflow(moved).groups[0].status == "RUNNING")
    assert gang_nodes(world, moved)[0] not in trays
    newcomers = [
        world.submit(workflow_yaml([{"name": "g", "tasks": [task("t", seconds=3600)]}]))
        for _ in range(4)
    ]
    world.run_until(lambda: all(world.workflow(w).status == "RUNNING" for w in newcomers))
    assert not {gang_nodes(world, w)[0] for w in newcomers} & trays
    for tray in trays:
        node_call(world, tray, "uncordon")
    late = world.submit(workflow_yaml([{"name": "g", "tasks": [task("t", seconds=3600)]}]))
    world.run_until(lambda: world.workflow(late).status == "RUNNING")
    assert gang_nodes(world, late)[0] in trays  # the emptiest trays are packed first again


def test_a_gang_waits_for_a_whole_nvlink_domain_unless_the_pool_allows_partial_ones(
    world: World,
) -> None:
    by_clique = cliques(world)
    for trays in by_clique.values():
        node_call(world, trays[0], "fail", fabric=True, reason="IMEX down")
    workflow_id = world.submit(eight_tray_gang())
    world.run_until(lambda: world.workflow(workflow_id).groups[0].pending_reason is not None)
    reason = world.workflow(workflow_id).groups[0].pending_reason
    first_clique = sorted(by_clique)[0]
    first_tray = by_clique[first_clique][0]
    assert reason is not None and reason.startswith(
        f"needs 8 pods with 4 GPUs each in one {CLIQUE} whose NVLink fabric is whole; every "
        f"{CLIQUE} with room has a faulty tray: {CLIQUE}={first_clique} has 17 healthy trays "
        f"of 18 ({first_tray} NVLink fabric failed (IMEX down)). The pool's "
        "fabric.partial_domains would let the gang use the healthy part (not counted: "
    ), reason
    world.patch_pool("nvl72", {"fabric": {"nvlink_key": "gpu-clique", "partial_domains": True}})
    world.run_until(lambda: world.workflow(workflow_id).status == "RUNNING")
    placed = gang_nodes(world, workflow_id)
    assert len({world.node_labels(node)[CLIQUE] for node in placed}) == 1
    assert not set(placed) & {trays[0] for trays in by_clique.values()}


def test_the_could_never_run_check_is_unchanged_by_cordoning_every_tray(world: World) -> None:
    trays = sorted(world.gb200_nodes())
    for tray in trays:
        node_call(world, tray, "cordon", reason="rack move")
    body = {"file": eight_tray_gang(), "source": "wf.yaml"}
    status, answer = world.api.call(
        "POST", "/api/pool/nvl72/workflow", json=body, params={"dry_run": True}
    )
    assert status == 200, answer
    assert "could_never_run" not in answer  # judged against the whole configured cluster
    assert answer["groups"][0]["placement"]["nodes"] == {}
    workflow_id = world.submit(eight_tray_gang())  # accepted: it waits for the trays
    world.run_until(lambda: world.workflow(workflow_id).groups[0].pending_reason is not None)
    reason = world.workflow(workflow_id).groups[0].pending_reason
    assert reason is not None and f"{trays[0]} cordoned by admin: 'rack move'" in reason
    assert f"; and {len(trays) - 5} more)" in reason, reason
