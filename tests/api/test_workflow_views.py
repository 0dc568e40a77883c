"""Following a workflow over HTTP: ``GET /api/workflow/{id}`` with its lifecycle fields,
``POST .../cancel``, ``GET .../logs`` and ``GET .../explain``, on both databases.

The lifecycle controller is simulated: the tests write what it would (statuses, times, nodes,
domains, exit codes) with ``WorkflowStore.commit``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from corral.domain.workflows.record import Changes, StoredWorkflow
from tests.conftest import REPO, Api

WORKFLOWS = REPO / "examples" / "workflows"
POOL = "heterogeneous_pool"
CLIQUE = "zone-a.zone-a-spine-0.zone-a-spine-0-rack-1.clique-zone-a-s0-r1"


def submit(
    api: Api, example: str = "heterogeneous.yaml", pool: str = POOL, token: str | None = None
) -> StoredWorkflow:
    body = {"file": (WORKFLOWS / example).read_text(), "source": example}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, answer = api.call("POST", f"/api/pool/{pool}/workflow", json=body, headers=headers)
    assert status == 200, answer
    return api.runtime.workflows.get(answer["name"])


def advance(
    api: Api,
    workflow: StoredWorkflow,
    run: dict[str, Any] | None = None,
    groups: dict[str, dict[str, Any]] | None = None,
    tasks: dict[str, dict[str, Any]] | None = None,
) -> StoredWorkflow:
    """Write what the lifecycle controller would, by workflow, group and task name."""
    changes = Changes()
    if run:
        changes.workflow(workflow.workflow_id, **run)
    for group in workflow.groups:
        if groups and group.name in groups:
            changes.group(group.uuid, **groups[group.name])
        for task in group.tasks:
            if tasks and task.name in tasks:
                changes.task(task.uuid, **tasks[task.name])
    api.runtime.workflows.commit(changes)
    return api.runtime.workflows.get(workflow.workflow_id)


def user(api: Api, name: str, *roles: str) -> str:
    return api.runtime.tokens.create(name=name, username=name, roles=list(roles))


def as_user(token: str) -> dict[str, Any]:
    return {"headers": {"Authorization": f"Bearer {token}"}}


def text(api: Api, path: str, token: str | None = None, **params: str) -> tuple[int, str, str]:
    headers = {"Authorization": f"Bearer {token or api.token}"}
    response = api.client.get(path, params=params, headers=headers)
    return response.status_code, response.headers["content-type"], response.text


def naive(moment: datetime) -> str:
    """How the API writes a time: UTC without a zone suffix, as OSMO's clients read it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f").removesuffix(".000000")


def now() -> datetime:
    """Times relative to the server's clock: explain counts minutes since them."""
    return datetime.now(UTC).replace(microsecond=0)


# --------------------------------------------------------------------------------- query


def test_query_shows_every_lifecycle_field(examples: Api) -> None:
    wf = submit(examples)
    t = now() - timedelta(minutes=30)
    wf = advance(
        examples,
        wf,
        run={"status": "RUNNING", "started_at": t},
        groups={
            "simulate": {
                "status": "COMPLETED",
                "scheduling_at": t,
                "started_at": t + timedelta(minutes=1),
                "ended_at": t + timedelta(minutes=2),
            },
            "train": {
                "status": "RUNNING",
                "scheduling_at": t + timedelta(minutes=2),
                "started_at": t + timedelta(minutes=3),
                "domains": {},
            },
        },
        tasks={
            "render-scenes": {
                "status": "COMPLETED",
                "node": "l40s-0",
                "exit_code": 0,
                "started_at": t + timedelta(minutes=1),
                "ended_at": t + timedelta(minutes=2),
            },
            "train-policy": {
                "status": "RUNNING",
                "node": "a100-1",
                "retry_id": 1,
                "started_at": t + timedelta(minutes=4),
                "message": "Exit Action: RESCHEDULE the task for exit code 137.",
            },
        },
    )
    status, found = examples.call("GET", f"/api/workflow/{wf.workflow_id}")
    assert status == 200, found
    simulate, train = wf.groups
    assert {k: v for k, v in found.items() if k not in ("spec", "groups")} == {
        "name": "simulate-then-train-1",
        "uuid": wf.uuid,
        "pool": POOL,
        "backend": "default",
        "namespace": "default",
        "status": "RUNNING",
        "priority": "NORMAL",
        "submitted_by": "admin",
        "submit_time": naive(wf.submitted_at),
        "exec_timeout_s": 7200.0,
        "queue_timeout_s": 1800.0,
        "start_time": naive(t),
        "end_time": None,
        "queued_time": (t - wf.submitted_at).total_seconds() if t > wf.submitted_at else 0.0,
        "overview": "http://testserver/ui/workflows/simulate-then-train-1",
        "logs": "http://testserver/api/workflow/simulate-then-train-1/logs",
        "labels": {},
        "cancel_requested_by": None,
        "message": None,
        "restarted_from": None,
    }
    assert found["groups"] == [
        {
            "name": "simulate",
            "uuid": simulate.uuid,
            "status": "COMPLETED",
            "upstream": [],
            "resource_kinds": [["scheduling.run.ai/v2alpha2", "PodGroup"], ["v1", "Pod"]],
            "domains": {},
            "scheduling_start_time": naive(t),
            "start_time": naive(t + timedelta(minutes=1)),
            "end_time": naive(t + timedelta(minutes=2)),
            "pending_reason": None,
            "tasks": [
                {
                    "name": "render-scenes",
                    "uuid": simulate.tasks[0].uuid,
                    "pod_name": simulate.tasks[0].pod_name,
                    "platform": "l40s_platform",
                    "lead": True,
                    "status": "COMPLETED",
                    "retry_id": 0,
                    "node": "l40s-0",
                    "exit_code": 0,
                    "start_time": naive(t + timedelta(minutes=1)),
                    "end_time": naive(t + timedelta(minutes=2)),
                    "message": None,
                    "attempts": [],
                }
            ],
        },
        {
            "name": "train",
            "uuid": train.uuid,
            "status": "RUNNING",
            "upstream": ["simulate"],
            "resource_kinds": [["scheduling.run.ai/v2alpha2", "PodGroup"], ["v1", "Pod"]],
            "domains": {},
            "scheduling_start_time": naive(t + timedelta(minutes=2)),
            "start_time": naive(t + timedelta(minutes=3)),
            "end_time": None,
            "pending_reason": None,
            "tasks": [
                {
                    "name": "train-policy",
                    "uuid": train.tasks[0].uuid,
                    "pod_name": train.tasks[0].pod_name,
                    "platform": "a100_platform",
                    "lead": True,
                    "status": "RUNNING",
                    "retry_id": 1,
                    "node": "a100-1",
                    "exit_code": None,
                    "start_time": naive(t + timedelta(minutes=4)),
                    "end_time": None,
                    "message": "Exit Action: RESCHEDULE the task for exit code 137.",
                    "attempts": [],
                }
            ],
        },
    ]
    status, explained = examples.call("GET", f"/api/workflow/{wf.workflow_id}/explain")
    assert (status, explained) == (
        200,
        {
            "workflow_id": "simulate-then-train-1",
            "status": "RUNNING",
            "summary": "running",
            "groups": [
                {
                    "name": "simulate",
                    "status": "COMPLETED",
                    "reason": "completed: render-scenes exited 0",
                    "details": [],
                },
                {
                    "name": "train",
                    "status": "RUNNING",
                    "reason": "running; train-policy on a100-1 (retry 1); "
                    "for 27m of the 2h exec timeout",
                    "details": [],
                },
            ],
        },
    )


def test_query_and_explain_show_the_domain_and_nodes_of_a_topology_group(examples: Api) -> None:
    wf = submit(examples, "nvl72-single-rack.yaml", pool="nvl72")
    t = now() - timedelta(minutes=3)
    nodes = {f"model1-shard{i}": f"gb200-zone-a-s0-r1-g0-0{i}" for i in range(1, 5)}
    wf = advance(
        examples,
        wf,
        run={"status": "PENDING"},
        groups={"group1": {"status": "INITIALIZING", "domains": {"": CLIQUE}, "scheduling_at": t}},
        tasks={name: {"status": "INITIALIZING", "node": node} for name, node in nodes.items()},
    )
    status, found = examples.call("GET", f"/api/workflow/{wf.workflow_id}")
    assert status == 200, found
    [group] = found["groups"]
    assert (group["status"], group["domains"]) == ("INITIALIZING", {"": CLIQUE})
    assert [(t["name"], t["node"]) for t in group["tasks"]] == list(nodes.items())
    status, explained = examples.call("GET", f"/api/workflow/{wf.workflow_id}/explain")
    assert status == 200, explained
    assert explained["groups"] == [
        {
            "name": "group1",
            "status": "INITIALIZING",
            "reason": f"initializing in domain {CLIQUE}; "
            + ", ".join(f"{name} on {node}" for name, node in nodes.items()),
            "details": [],
        }
    ]


# ------------------------------------------------------------------------------- explain


def test_explain_follows_a_workflow_from_submission_to_failure(examples: Api) -> None:
    wf = submit(examples)
    path = f"/api/workflow/{wf.workflow_id}/explain"

    def reasons() -> list[tuple[str, str, str]]:
        status, body = examples.call("GET", path)
        assert status == 200, body
        return [(g["name"], g["status"], g["reason"]) for g in body["groups"]]

    assert reasons() == [
        ("simulate", "SUBMITTING", "waiting to start"),
        ("train", "SUBMITTING", "waiting for upstream group simulate"),
    ]
    pending = (
        "no node matches nodeSelector nvidia.com/gpu.product=NVIDIA-L40S and tolerates its taints"
    )
    wf = advance(
        examples,
        wf,
        groups={
            "simulate": {
                "status": "SCHEDULING",
                "scheduling_at": now() - timedelta(minutes=3, seconds=5),
                "pending_reason": pending,
            },
            "train": {"status": "WAITING"},
        },
    )
    assert reasons() == [
        ("simulate", "SCHEDULING", f"{pending}; queued for 3m of the 30m queue timeout"),
        ("train", "WAITING", "waiting for upstream group simulate"),
    ]
    wf = advance(examples, wf, groups={"simulate": {"status": "COMPLETED"}})
    status, body = examples.call(
        "PATCH", f"/api/configs/pool/{POOL}", json={"configs_dict": {"enable_maintenance": True}}
    )
    assert status == 200, body
    assert reasons()[1] == (
        "train",
        "WAITING",
        f"waiting to start; pool {POOL} is in maintenance",
    )
    advance(
        examples,
        wf,
        run={"status": "FAILED", "message": "group simulate failed"},
        groups={"simulate": {"status": "FAILED"}, "train": {"status": "FAILED_UPSTREAM"}},
        tasks={
            "render-scenes": {"status": "FAILED", "exit_code": 2, "message": "scene 17: bad mesh"},
            "train-policy": {"status": "FAILED_UPSTREAM", "exit_code": 3000},
        },
    )
    status, body = examples.call("GET", path)
    assert (status, body) == (
        200,
        {
            "workflow_id": "simulate-then-train-1",
            "status": "FAILED",
            "summary": "ended FAILED: group simulate failed",
            "groups": [
                {
                    "name": "simulate",
                    "status": "FAILED",
                    "reason": "failed: render-scenes exited 2 (scene 17: bad mesh)",
                    "details": [],
                },
                {
                    "name": "train",
                    "status": "FAILED_UPSTREAM",
                    "reason": "did not run: upstream group simulate failed",
                    "details": [],
                },
            ],
        },
    )


# -------------------------------------------------------------------------------- cancel


def test_cancel_once_then_conflict(examples: Api) -> None:
    wf = submit(examples)
    path = f"/api/workflow/{wf.workflow_id}/cancel"
    assert examples.call("POST", path) == (
        200,
        {
            "name": "simulate-then-train-1",
            "message": "Cancel requested for workflow simulate-then-train-1; its tasks will be "
            "stopped and it will end FAILED_CANCELED.",
        },
    )
    assert examples.call("POST", path) == (
        409,
        {
            "message": "Workflow simulate-then-train-1 is already being canceled "
            "(requested by admin).",
            "error_code": "CONFLICT",
        },
    )
    status, found = examples.call("GET", f"/api/workflow/{wf.workflow_id}")
    assert (status, found["status"], found["cancel_requested_by"]) == (200, "PENDING", "admin")
    status, explained = examples.call("GET", f"/api/workflow/{wf.workflow_id}/explain")
    assert explained["summary"] == "cancel requested by admin; its groups are being stopped"


def test_cancel_of_a_finished_workflow_is_a_conflict(examples: Api) -> None:
    wf = advance(examples, submit(examples), run={"status": "COMPLETED"})
    assert examples.call("POST", f"/api/workflow/{wf.workflow_id}/cancel") == (
        409,
        {
            "message": "Workflow simulate-then-train-1 already finished (COMPLETED); "
            "there is nothing to cancel.",
            "error_code": "CONFLICT",
        },
    )


def test_cancel_of_an_unknown_workflow_is_404(examples: Api) -> None:
    assert examples.call("POST", "/api/workflow/nope-1/cancel") == (
        404,
        {"message": "Workflow nope-1 not found.", "error_code": "NOT_FOUND"},
    )


def test_who_may_cancel(examples: Api) -> None:
    """The submitter, or whoever may workflow:Cancel on the workflow's pool; not others."""
    submitter_role = {
        "name": "submit-only",
        "policies": [{"actions": ["workflow:Create"], "resources": [f"pool/{POOL}"]}],
    }
    status, body = examples.call(
        "POST", "/api/configs/apply", json={"bundle": {"roles": {"submit-only": submitter_role}}}
    )
    assert status == 200, body
    erin = user(examples, "erin", "submit-only")
    carol = user(examples, "carol", "osmo-user")
    dave = user(examples, "dave", f"osmo-{POOL}")
    mine = submit(examples, token=erin)
    status, body = examples.call(
        "POST", f"/api/workflow/{mine.workflow_id}/cancel", **as_user(carol)
    )
    assert status == 403, body
    assert body["error_code"] == "FORBIDDEN"
    assert body["message"].startswith(f"carol may not workflow:Cancel on pool/{POOL}: ")
    status, body = examples.call(
        "POST", f"/api/workflow/{mine.workflow_id}/cancel", **as_user(erin)
    )
    assert status == 200, body
    other = submit(examples)
    status, body = examples.call(
        "POST", f"/api/workflow/{other.workflow_id}/cancel", **as_user(dave)
    )
    assert status == 200, body
    assert examples.runtime.workflows.get(other.workflow_id).cancel_requested_by == "dave"


# ---------------------------------------------------------------------------------- logs


def test_logs_of_one_task_and_of_every_task(examples: Api) -> None:
    status, body = examples.call(
        "PATCH",
        "/api/configs/backend/default",
        json={"configs_dict": {"execution": {"mode": "simulate", "simulated_duration": "10s"}}},
    )
    assert status == 200, body
    wf = submit(examples)
    started = datetime(2025, 3, 1, 12, 0, 5, tzinfo=UTC)
    wf = advance(
        examples, wf, tasks={"render-scenes": {"status": "RUNNING", "started_at": started}}
    )
    path = f"/api/workflow/{wf.workflow_id}/logs"
    # SimulatedExecution.logs of the stored pod: its command and args, the default 10s, exit 0.
    render = (
        "corral: simulated task (retry 0) started at 2025-03-01T12:00:05+00:00: "
        "sh -c echo rendering into /osmo/data/output; sleep 5\n"
        "corral: runs for 10s, then exits with code 0\n"
    )
    assert text(examples, path, task_name="render-scenes") == (
        200,
        "text/plain; charset=utf-8",
        render,
    )
    # OSMO's last_n_lines keeps the end of the log
    assert text(examples, path, task_name="render-scenes", last_n_lines=1) == (
        200,
        "text/plain; charset=utf-8",
        "corral: runs for 10s, then exits with code 0\n",
    )
    assert text(examples, path, task_name="train-policy") == (
        200,
        "text/plain; charset=utf-8",
        "corral: task train-policy has not started (WAITING)\n",
    )
    assert text(examples, path) == (
        200,
        "text/plain; charset=utf-8",
        f"==> render-scenes (retry 0) <==\n{render}\n"
        "==> train-policy (retry 0) <==\n"
        "corral: task train-policy has not started (WAITING)\n",
    )


def test_logs_errors(examples: Api) -> None:
    wf = submit(examples)
    path = f"/api/workflow/{wf.workflow_id}/logs"
    assert examples.call("GET", path, params={"task_name": "nope"}) == (
        404,
        {
            "message": "Workflow simulate-then-train-1 has no task nope. "
            "Its tasks: render-scenes, train-policy.",
            "error_code": "NOT_FOUND",
        },
    )
    assert examples.call("GET", "/api/workflow/nope-1/logs") == (
        404,
        {"message": "Workflow nope-1 not found.", "error_code": "NOT_FOUND"},
    )
    # A workflow nobody may not read is answered as one that does not exist (no oracle).
    nobody = user(examples, "nobody")
    hidden = (404, {"message": f"Workflow {wf.workflow_id} not found.", "error_code": "NOT_FOUND"})
    assert examples.call("GET", path, **as_user(nobody)) == hidden
    for suffix in ("", "/explain"):
        assert (
            examples.call("GET", f"/api/workflow/{wf.workflow_id}{suffix}", **as_user(nobody))
            == hidden
        )
    assert (
        examples.call("POST", f"/api/workflow/{wf.workflow_id}/cancel", **as_user(nobody)) == hidden
    )
    reader = user(examples, "carol", "osmo-user")
    assert text(examples, path, token=reader)[0] == 200
