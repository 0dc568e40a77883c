"""A task's own token at the door (docs/checkpoints.md#a-tasks-own-token): it speaks for one
task on that task's three endpoints; it is no login anywhere else, cannot be exchanged for
one, grants no role, and a token not signed by the server's key is refused."""

from __future__ import annotations

from corral.api.auth import Authorizer
from corral.services.auth.task_tokens import TaskScope, TaskTokens
from tests.conftest import Api
from tests.services.lifecycle.test_preemption_use_cases import clique_job
from tests.services.lifecycle_world import World


def running_task(world: World) -> tuple[str, str]:
    job = world.submit(clique_job("job", 1))
    world.run_until(lambda: world.workflow(job).status == "RUNNING")
    return job, world.workflow(job).groups[0].tasks[0].uuid


def authorizer_of(world: World) -> Authorizer:
    found: Authorizer = world.api.client.app.state.authorizer
    return found


def test_its_own_tasks_endpoints_accept_it_and_a_stale_or_forged_one_is_refused(
    world: World,
) -> None:
    job, uuid = running_task(world)
    tokens = authorizer_of(world).task_tokens
    own = Api(world.api.client, tokens.mint(TaskScope(job, "t0", uuid)), world.runtime)
    status, body = own.call("POST", f"/api/workflow/{job}/task/t0/checkpoint", json={"step": 3})
    assert (status, body["step"]) == (200, 3)
    status, body = own.call("GET", f"/api/workflow/{job}/task/t0/notice")
    assert (status, body["task"], body["notice"]) == (200, "t0", None)
    # A token of an earlier attempt of the same name (another uuid) speaks for nothing.
    stale = Api(world.api.client, tokens.mint(TaskScope(job, "t0", "old-uuid")), world.runtime)
    status, body = stale.call("GET", f"/api/workflow/{job}/task/t0/notice")
    assert (status, body["message"]) == (404, f"Workflow {job} not found.")
    forged_token = TaskTokens(b"x" * 32).mint(TaskScope(job, "t0", uuid))
    forged = Api(world.api.client, forged_token, world.runtime)
    status, body = forged.call("GET", f"/api/workflow/{job}/task/t0/notice")
    assert status == 401, body
    assert body["message"] == (
        "The task token is not valid: it was not signed by this server's key (a new session "
        "key revokes every task token)."
    )


def test_it_is_no_login_and_grants_no_role(world: World) -> None:
    job, uuid = running_task(world)
    authorizer = authorizer_of(world)
    token = authorizer.task_tokens.mint(TaskScope(job, "t0", uuid))
    refusal = (
        "A task's token is accepted only as the bearer token of that task's notice, "
        "checkpoint and ready endpoints."
    )
    exchange = world.api.client.post("/api/auth/jwt/access_token", json={"token": token})
    assert (exchange.status_code, exchange.json()["message"]) == (401, refusal)
    page = world.api.client.get(
        "/ui/workflows", headers={"cookie": f"corral_session={token}"}, follow_redirects=False
    )
    assert page.status_code == 303 and page.headers["location"].startswith("/ui/login?")
    principal = authorizer._task(token, f"/api/workflow/{job}/task/t0/notice")
    assert (principal.username, principal.roles, principal.method) == (
        f"task t0 of {job}",
        (),
        "task",
    )
    assert authorizer.roles_of(principal) == []
    assert not authorizer.allows(principal, "workflow:Read", f"pool/{world.workflow(job).pool}")
