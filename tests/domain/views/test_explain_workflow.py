"""``explain_workflow``: one line per group in the user's terms, for every kind of status."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from corral.domain.views.explain import (
    GroupExplanation,
    WorkflowExplanation,
    explain_workflow,
)
from corral.domain.workflows.record import StoredGroup, StoredTask, StoredWorkflow

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def task(name: str, status: str = "WAITING", **fields: object) -> StoredTask:
    values: dict[str, object] = {
        "name": name,
        "uuid": f"{name}-uuid",
        "pod_name": f"{name}-pod",
        "platform": "gb200",
        "lead": False,
        "status": status,
        "retry_id": 0,
        **fields,
    }
    return StoredTask(**values)


def group(
    name: str,
    status: str,
    tasks: list[StoredTask],
    upstream: tuple[str, ...] = (),
    **fields: object,
) -> StoredGroup:
    values: dict[str, object] = {
        "name": name,
        "uuid": f"{name}-uuid",
        "status": status,
        "upstream": list(upstream),
        "resource_kinds": [],
        "manifests": [],
        "tasks": tasks,
        **fields,
    }
    return StoredGroup(**values)


def workflow(status: str, *groups: StoredGroup, **fields: object) -> StoredWorkflow:
    values: dict[str, object] = {
        "workflow_id": "train-1",
        "name": "train",
        "uuid": "wf-uuid",
        "pool": "nvl72",
        "backend": "default",
        "namespace": "default",
        "status": status,
        "priority": "NORMAL",
        "submitted_by": "alice",
        "submitted_at": NOW - timedelta(hours=1),
        "exec_timeout_s": 7200.0,
        "queue_timeout_s": 1800.0,
        "spec": "",
        "template": None,
        "groups": list(groups),
        **fields,
    }
    return StoredWorkflow(**values)


def reasons(found: WorkflowExplanation) -> dict[str, str]:
    return {g.name: g.reason for g in found.groups}


def test_submitted_workflow_waits_for_its_upstream_groups() -> None:
    wf = workflow(
        "PENDING",
        group("prep", "SUBMITTING", [task("p")]),
        group("sim", "SUBMITTING", [task("s")]),
        group("train", "SUBMITTING", [task("t")], upstream=("prep", "sim")),
        group("eval", "WAITING", [task("e")], upstream=("train",)),
    )
    assert explain_workflow(wf, NOW) == WorkflowExplanation(
        "train-1",
        "PENDING",
        "no group is running yet",
        (
            GroupExplanation("prep", "SUBMITTING", "waiting to start"),
            GroupExplanation("sim", "SUBMITTING", "waiting to start"),
            GroupExplanation("train", "SUBMITTING", "waiting for upstream groups prep, sim"),
            GroupExplanation("eval", "WAITING", "waiting for upstream group train"),
        ),
    )


def test_waiting_group_with_its_upstream_done_waits_to_start_and_notes_maintenance() -> None:
    wf = workflow(
        "RUNNING",
        group("prep", "COMPLETED", [task("p", "COMPLETED", exit_code=0)]),
        group("train", "WAITING", [task("t")], upstream=("prep",)),
        group("pods", "PROCESSING", [task("q", "PROCESSING")], upstream=("prep",)),
    )
    assert reasons(explain_workflow(wf, NOW)) == {
        "prep": "completed: p exited 0",
        "train": "waiting to start",
        "pods": "its pods are being created",
    }
    in_maintenance = explain_workflow(wf, NOW, pool_in_maintenance=True)
    assert reasons(in_maintenance)["train"] == "waiting to start; pool nvl72 is in maintenance"
    assert in_maintenance.summary == "running"


def test_waiting_group_whose_upstream_failed_will_not_run() -> None:
    wf = workflow(
        "RUNNING",
        group("prep", "FAILED", [task("p", "FAILED", exit_code=2)]),
        group("train", "WAITING", [task("t")], upstream=("prep",)),
    )
    assert reasons(explain_workflow(wf, NOW))["train"] == "will not run: upstream group prep failed"


def test_scheduling_group_gives_the_schedulers_reason_and_the_queue_time() -> None:
    reason = (
        "needs room for 8 pods (4 GPUs each) at once (gang scheduling); "
        "the cluster has room for 4 now"
    )
    wf = workflow(
        "PENDING",
        group(
            "train",
            "SCHEDULING",
            [task("t", "SCHEDULING")],
            scheduling_at=NOW - timedelta(minutes=12, seconds=40),
            pending_reason=reason,
        ),
        group(
            "fresh",
            "SCHEDULING",
            [task("f", "SCHEDULING")],
            scheduling_at=NOW - timedelta(seconds=7),
        ),
        group("unknown", "SCHEDULING", [task("u", "SCHEDULING")]),
    )
    assert reasons(explain_workflow(wf, NOW)) == {
        "train": f"{reason}; queued for 12m of the 30m queue timeout",
        "fresh": "waiting for the scheduler; queued for 7s of the 30m queue timeout",
        "unknown": "waiting for the scheduler; the 30m queue timeout applies",
    }
    long_queue = replace(wf, queue_timeout_s=5400.0)
    assert reasons(explain_workflow(long_queue, NOW + timedelta(hours=1)))["fresh"] == (
        "waiting for the scheduler; queued for 1h of the 1h 30m queue timeout"
    )


def test_running_group_says_where_it_runs() -> None:
    wf = workflow(
        "RUNNING",
        group(
            "train",
            "RUNNING",
            [
                task("lead", "RUNNING", node="gb200-r1-n1", lead=True),
                task("w1", "RUNNING", node="gb200-r1-n2", retry_id=1),
                task("w2", "COMPLETED", node="gb200-r2-n1", exit_code=0),
            ],
            domains={"model-2-group": "clique-r2", "": "zone-a", "model-1-group": "clique-r1"},
            started_at=NOW - timedelta(minutes=5, seconds=59),
        ),
        group(
            "eval",
            "INITIALIZING",
            [task("e1", "INITIALIZING", node="gb200-r3-n1"), task("e2", "SCHEDULING")],
            domains={"": "clique-r3"},
        ),
        group("plain", "INITIALIZING", [task("x", "INITIALIZING", node="cpu-1")]),
    )
    assert reasons(explain_workflow(wf, NOW)) == {
        "train": (
            "running in domain zone-a (model-1-group in clique-r1, model-2-group in clique-r2); "
            "lead on gb200-r1-n1, w1 on gb200-r1-n2 (retry 1), w2 exited 0; "
            "for 5m of the 2h exec timeout"
        ),
        "eval": "initializing in domain clique-r3; e1 on gb200-r3-n1, e2 waiting for a node",
        "plain": "initializing; x on cpu-1",
    }


def test_subgroup_domains_without_a_group_domain() -> None:
    wf = workflow(
        "RUNNING",
        group("g", "RUNNING", [task("a", "RUNNING", node="n1")], domains={"s1": "rack-1"}),
    )
    assert reasons(explain_workflow(wf, NOW))["g"] == "running (s1 in rack-1); a on n1"


def test_finished_groups_say_how_they_ended() -> None:
    wf = workflow(
        "FAILED",
        group(
            "ok",
            "COMPLETED",
            [task("a", "COMPLETED", exit_code=0), task("b", "COMPLETED", exit_code=0)],
        ),
        group(
            "bad",
            "FAILED",
            [
                task("lead", "FAILED", exit_code=1, message="Traceback in train.py"),
                task("other", "FAILED", message="stopped: the lead failed"),
                task("quiet", "FAILED"),
            ],
        ),
        group(
            "after",
            "FAILED_UPSTREAM",
            [task("c", "FAILED_UPSTREAM", exit_code=3000)],
            upstream=("ok", "bad"),
        ),
        group("chained", "FAILED_UPSTREAM", [task("d", "FAILED_UPSTREAM")], upstream=("after",)),
        group("orphan", "FAILED_UPSTREAM", [task("o", "FAILED_UPSTREAM")]),
        group("evicted", "FAILED_EVICTED", [task("v", "FAILED_EVICTED", message="node drained")]),
        group("odd", "FAILED_START_TIMEOUT", [task("s", "FAILED_START_TIMEOUT")]),
        message="group bad failed",
    )
    found = explain_workflow(wf, NOW)
    assert found.summary == "ended FAILED: group bad failed"
    assert reasons(found) == {
        "ok": "completed: a exited 0, b exited 0",
        "bad": (
            "failed: lead exited 1 (Traceback in train.py), other FAILED (stopped: the lead failed)"
        ),
        "after": "did not run: upstream group bad failed",
        "chained": "did not run: upstream group after failed",
        "orphan": "did not run: an upstream group failed",
        "evicted": "evicted from its node: v FAILED_EVICTED (node drained)",
        "odd": "a task did not start in time",
    }


def test_timeouts_and_cancels() -> None:
    wf = workflow(
        "FAILED_CANCELED",
        group(
            "queued",
            "FAILED_QUEUE_TIMEOUT",
            [task("q", "FAILED_QUEUE_TIMEOUT")],
            pending_reason="no node matches nodeSelector pool=nvl72 and tolerates its taints",
        ),
        group("queued2", "FAILED_QUEUE_TIMEOUT", [task("q2", "FAILED_QUEUE_TIMEOUT")]),
        group("long", "FAILED_EXEC_TIMEOUT", [task("l", "FAILED_EXEC_TIMEOUT", exit_code=137)]),
        group("stopped", "FAILED_CANCELED", [task("s", "FAILED_CANCELED")]),
        cancel_requested_by="bob",
    )
    found = explain_workflow(wf, NOW)
    assert found.summary == "canceled by bob"
    assert reasons(found) == {
        "queued": (
            "not scheduled within the 30m queue timeout: last scheduler reason: "
            "no node matches nodeSelector pool=nvl72 and tolerates its taints"
        ),
        "queued2": "not scheduled within the 30m queue timeout",
        "long": "still running after the 2h exec timeout: l exited 137",
        "stopped": "canceled by bob",
    }
    anonymous = replace(wf, cancel_requested_by=None)
    assert explain_workflow(anonymous, NOW).summary == "ended FAILED_CANCELED"
    assert reasons(explain_workflow(anonymous, NOW))["stopped"] == "canceled"


def test_workflow_summaries() -> None:
    running = workflow("RUNNING", group("g", "SCHEDULING", [task("t", "SCHEDULING")]))
    assert explain_workflow(running, NOW).summary == "running"
    canceling = replace(running, cancel_requested_by="alice")
    assert explain_workflow(canceling, NOW).summary == (
        "cancel requested by alice; its groups are being stopped"
    )
    assert explain_workflow(replace(running, status="WAITING"), NOW).summary == (
        "started; nothing is running right now"
    )
    assert explain_workflow(replace(running, status="COMPLETED"), NOW).summary == "completed"
    assert explain_workflow(replace(running, status="MYSTERY"), NOW).summary == "status MYSTERY"
    odd_group = replace(running, groups=[group("g", "MYSTERY", [])])
    assert reasons(explain_workflow(odd_group, NOW)) == {"g": "status MYSTERY"}


def test_a_preempted_group_says_by_whom_and_why() -> None:
    by = "urgent-3 (queue nvl72 reclaimed its guarantee)"
    ended = task("a", "FAILED_PREEMPTED", exit_code=3006, message=f"Preempted by {by}.")
    requeued = task("b", "SCHEDULING", retry_id=1, exit_code=3006)
    wf = workflow(
        "RUNNING",
        group("victim", "FAILED_PREEMPTED", [ended], preempted_by=by),
        group("again", "SCHEDULING", [requeued], preempted_by=by, scheduling_at=NOW),
        group("plain", "FAILED_PREEMPTED", [task("c", "FAILED_PREEMPTED", exit_code=3006)]),
    )
    assert reasons(explain_workflow(wf, NOW)) == {
        "victim": f"preempted by {by}",
        "again": f"waiting for the scheduler; back in the queue after it was preempted by {by}; "
        "queued for 0s of the 30m queue timeout",
        "plain": "preempted by higher-priority work: c exited 3006",
    }


def test_a_group_requeued_after_a_node_fault_says_which_tray_failed_and_when() -> None:
    fault = "node n5 failed at 2026-11-27 12:00:00 UTC: NVLink fabric failed (IMEX down)"
    requeued = task("a", "SCHEDULING", retry_id=1, exit_code=3001)
    wf = workflow(
        "RUNNING", group("again", "SCHEDULING", [requeued], fault=fault, scheduling_at=NOW)
    )
    assert reasons(explain_workflow(wf, NOW)) == {
        "again": f"waiting for the scheduler; back in the queue after {fault}; "
        "queued for 0s of the 30m queue timeout",
    }
