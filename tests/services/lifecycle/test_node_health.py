"""Node health changed on a running server (docs/health.md), end to end on both databases: a
whole-clique gang avoids the cliques with a failed tray, a cordon keeps new work off a tray
until it is lifted (the could-never-run check unchanged, the wait reason naming the tray), and
every change is audited and needs node:Update on a pool the node serves."""

from __future__ import annotations

from typing import Any

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
            "Node no-such-node is not a node of the embedded cluster; `corral resource list` "
            "lists the nodes."
        )
