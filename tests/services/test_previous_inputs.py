"""``inputs: [{task: "<workflow_id>:<task>"}]`` is checked at submission (issue 13, item 15): the
workflow and its task must exist, the task must have finished, and the submitter must be allowed
to read that workflow."""

from __future__ import annotations

from tests.services.lifecycle_world import World, task, workflow_yaml


def consumer(reference: str) -> str:
    reader = task("reader", inputs=[{"task": reference}])
    return workflow_yaml([{"name": "g", "tasks": [reader]}], name="consumer")


def refusal(world: World, text: str) -> tuple[int, str]:
    status, body = world.api.call(
        "POST", "/api/pool/nvl72/workflow", json={"file": text, "source": "wf.yaml"}
    )
    return status, body.get("message", "")


def test_inputs_from_earlier_workflows_must_exist_and_have_finished(world: World) -> None:
    producer = world.submit(workflow_yaml([{"name": "g", "tasks": [task("t", seconds=10)]}]))
    world.run_until(lambda: world.workflow(producer).status == "RUNNING")
    where = "wf.yaml:19:9: workflow.groups[0].tasks[0].inputs[0].task"
    assert refusal(world, consumer(f"{producer}:t")) == (
        400,
        f"{where}: Input tasks from previous workflows must be finished: {producer}:t is "
        "RUNNING; submit once it has finished.",
    )
    assert refusal(world, consumer(f"{producer}:nope")) == (
        400,
        f"{where}: input task {producer}:nope: workflow {producer} has no task nope; its tasks: t.",
    )
    assert refusal(world, consumer("ghost-7:t")) == (
        400,
        f"{where}: input task ghost-7:t: there is no workflow ghost-7.",
    )
    world.finish(producer)
    assert world.submit(consumer(f"{producer}:t")) == "consumer-1"


def test_an_input_from_a_workflow_the_submitter_may_not_read_is_refused_as_missing(
    world: World,
) -> None:
    producer = world.submit(workflow_yaml([{"name": "g", "tasks": [task("t", seconds=2)]}]))
    world.finish(producer)
    api = world.api
    policy = {"effect": "Allow", "actions": ["workflow:Create"], "resources": ["pool/nvl72"]}
    assert (
        api.call("PUT", "/api/configs/role/submit-only", json={"configs": {"policies": [policy]}})[
            0
        ]
        == 200
    )
    assert (
        api.call("POST", "/api/auth/user", json={"id": "sam", "roles": ["submit-only"]})[0] == 200
    )
    token = api.call("POST", "/api/auth/user/sam/token", json={})[1]["token"]
    response = api.client.post(
        "/api/pool/nvl72/workflow",
        json={"file": consumer(f"{producer}:t")},
        headers={"Authorization": f"Bearer {token}"},
    )
    where = "workflow.yaml:19:9: workflow.groups[0].tasks[0].inputs[0].task"
    assert (response.status_code, response.json()["message"]) == (  # as if it did not exist
        400,
        f"{where}: input task {producer}:t: there is no workflow {producer}.",
    )
