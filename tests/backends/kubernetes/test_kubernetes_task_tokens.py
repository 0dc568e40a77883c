"""Each pod's own task token on Kubernetes (docs/checkpoints.md#a-tasks-own-token): one Secret
per group, made before the group's pods and deleted with them; each pod mounts only its own
task's token; and that token speaks for its task on the API, and for nothing else."""

from __future__ import annotations

import base64
from typing import Any

from corral.api.auth import Authorizer
from corral.services.auth.task_tokens import TaskScope
from tests.backends.kubernetes.kube_world import KubeWorld
from tests.conftest import Api
from tests.services.lifecycle_world import task, workflow_yaml

SECRET_PREFIX = "corral-task-tokens-"


def with_task_tokens(world: KubeWorld) -> Authorizer:
    """Give ``world`` a controller that mints task tokens, as a server's does."""
    authorizer: Authorizer = world.api.client.app.state.authorizer
    world.controller = world.runtime.lifecycle(world.clock, task_tokens=authorizer.task_tokens)
    return authorizer


def token_secrets(world: KubeWorld) -> list[dict[str, Any]]:
    return [
        s
        for s in world.fake.objects("v1", "Secret")
        if s["metadata"]["name"].startswith(SECRET_PREFIX)
    ]


def test_each_pod_mounts_its_own_tasks_token_from_a_secret_made_first(
    kube_world: KubeWorld,
) -> None:
    w = kube_world
    authorizer = with_task_tokens(w)
    text = workflow_yaml([{"name": "g", "tasks": [task("a", lead=True), task("b")]}], name="tok")
    workflow_id = w.submit(text)
    w.run_until(lambda: w.workflow(workflow_id).groups[0].status == "SCHEDULING", max_ticks=5)
    group = w.workflow(workflow_id).groups[0]
    (secret,) = token_secrets(w)
    assert secret["metadata"]["name"] == SECRET_PREFIX + group.uuid
    assert secret["metadata"]["labels"] == {
        "osmo.workflow_uuid": w.workflow(workflow_id).uuid,
        "osmo.group_uuid": group.uuid,
    }
    assert sorted(secret["data"]) == sorted(t.uuid for t in group.tasks)
    made = [(j.kind, j.name) for j in w.fake.journal if j.kind in ("Secret", "Pod")]
    assert made.index(("Secret", secret["metadata"]["name"])) == 0, made
    pods = {p["metadata"]["labels"]["osmo.task_uuid"]: p for p in w.fake.objects("v1", "Pod")}
    for stored in group.tasks:
        pod = pods[stored.uuid]
        (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "corral-task-token"]
        assert volume["secret"] == {
            "secretName": secret["metadata"]["name"],
            "items": [{"key": stored.uuid, "path": "token"}],
            "defaultMode": 0o400,
        }
        for container in pod["spec"]["containers"]:
            assert {
                "name": "corral-task-token",
                "mountPath": "/var/run/corral",
                "readOnly": True,
            } in (container["volumeMounts"])
            assert {"name": "CORRAL_TASK_TOKEN_FILE", "value": "/var/run/corral/token"} in (
                container["env"]
            )
        token = base64.b64decode(secret["data"][stored.uuid]).decode()
        assert authorizer.task_tokens.verify(token) == TaskScope(
            workflow_id, stored.name, stored.uuid
        )


def test_the_tokens_secret_is_deleted_with_the_groups_pods(kube_world: KubeWorld) -> None:
    w = kube_world
    with_task_tokens(w)
    workflow_id = w.submit(workflow_yaml([{"name": "g", "tasks": [task("a", lead=True)]}]))
    w.run_cycles(lambda: w.workflow(workflow_id).status == "COMPLETED", code_of=lambda _: 0)
    w.run_cycles(lambda: not w.group_objects())
    assert token_secrets(w) == []
    deleted = [j.kind for j in w.fake.journal if j.verb == "delete" and j.kind in ("Secret", "Pod")]
    assert deleted[-1] == "Secret", deleted  # the pods went first


def test_a_pods_token_speaks_for_its_task_and_for_nothing_else(kube_world: KubeWorld) -> None:
    w = kube_world
    with_task_tokens(w)
    text = workflow_yaml([{"name": "g", "tasks": [task("a", lead=True), task("b")]}], name="tok")
    workflow_id = w.submit(text)
    w.run_cycles(lambda: w.workflow(workflow_id).status == "RUNNING")
    (secret,) = token_secrets(w)
    a = next(t for t in w.workflow(workflow_id).groups[0].tasks if t.name == "a")
    pod_of_a = Api(w.api.client, base64.b64decode(secret["data"][a.uuid]).decode(), w.runtime)
    own = f"/api/workflow/{workflow_id}/task/a"
    status, body = pod_of_a.call("POST", f"{own}/checkpoint", json={"step": 7})
    assert (status, body["step"]) == (200, 7)
    status, body = pod_of_a.call("GET", f"{own}/notice")
    assert (status, body["notice"], body["checkpoint_at"] is not None) == (200, None, True)
    status, body = pod_of_a.call("POST", f"{own}/ready")
    assert status == 409, body
    for other in (
        f"/api/workflow/{workflow_id}/task/b/checkpoint",
        "/api/workflow/x/task/a/notice",
    ):
        status, body = pod_of_a.call("GET" if other.endswith("notice") else "POST", other)
        assert status == 404, (other, body)
    for elsewhere in (f"/api/workflow/{workflow_id}", "/api/pool", "/api/auth/user"):
        status, body = pod_of_a.call("GET", elsewhere)
        assert status == 403, (elsewhere, body)
        assert body["message"] == (
            f"The token of task a of {workflow_id} is accepted only on that task's notice, "
            f"checkpoint and ready endpoints (/api/workflow/{workflow_id}/task/a/...), not on "
            f"{elsewhere}."
        )
