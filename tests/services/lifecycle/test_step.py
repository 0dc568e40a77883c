"""A workflow's step on its own: deciding changes nothing on the cluster; applying does the
effects in decision order and folds in what creating a group answered; the controller writes
the changes (tests/services/test_controller.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from corral.backends.execution import Exit, TaskRun
from corral.backends.port import BackendError, ClusterBackend, Rule
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.workflows.events import GangStopped, StopCause
from corral.domain.workflows.notices import Acknowledgement, Checkpoint, Notice
from corral.domain.workflows.record import StoredGroup, StoredTask, StoredWorkflow
from corral.domain.workflows.statuses import TaskStatus, WorkflowStatus
from corral.services.auth.task_tokens import TaskTokens
from corral.services.lifecycle.step import WorkflowStep
from corral.services.lifecycle.step_base import StepContext
from corral.services.lifecycle.tick_report import TickReport

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
CONFIGS = Configs({ConfigType.POOL: {"p": {"backend": "default"}}})


@dataclass
class Cluster:
    """The backend and the executor at once: every call, in order."""

    calls: list[str] = field(default_factory=list)
    exits: dict[str, Exit] = field(default_factory=dict)
    refuse: BackendError | None = None
    said: dict[str, Acknowledgement] = field(default_factory=dict)
    name: str = "default"
    schedules_itself: bool = False
    takes_task_tokens: bool = False
    keeps_logs: bool = True

    def start(self, run: TaskRun) -> None:
        self.calls.append(f"start {run.task_uuid}")

    def stop(self, run: TaskRun, grace_seconds: float | None = None) -> None:
        grace = "" if grace_seconds is None else f" (grace {grace_seconds:g} s)"
        self.calls.append(f"stop {run.task_uuid}{grace}")

    def poll(self, run: TaskRun, now: datetime) -> Exit | None:
        self.calls.append(f"poll {run.task_uuid}")
        return self.exits.get(run.task_uuid)

    def logs(self, run: TaskRun) -> str:
        return ""

    def notify(self, run: TaskRun, notice: Notice) -> None:
        seconds = (notice.deadline - notice.given_at).total_seconds()
        self.calls.append(f"notify {run.task_uuid} ({seconds:g} s, {notice.signal or 'no signal'})")

    def acknowledgement(self, run: TaskRun) -> Acknowledgement | None:
        self.calls.append(f"ask {run.task_uuid}")
        return self.said.get(run.task_uuid)

    def missing_rules(self, kinds: Sequence[Sequence[str]], namespace: str) -> list[Rule]:
        return []

    def missing_priority_classes(self, names: Sequence[str]) -> list[str]:
        return []

    def apply_all(
        self,
        manifests: Sequence[Mapping[str, Any]],
        namespace: str,
        task_tokens: Mapping[str, str] | None = None,
    ) -> None:
        for manifest in manifests:
            self.calls.append(f"apply {manifest['metadata']['name']}")
            if self.refuse is not None:
                raise self.refuse


@dataclass
class Controller:
    """What the tick gives every step (``StepContext``) besides the configs, time and cluster."""

    create_failures: dict[str, int] = field(default_factory=dict)
    task_tokens: TaskTokens | None = None
    nodes_under_notice: frozenset[tuple[str, str]] = frozenset()

    def check_leading(self) -> None:
        pass


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {}}


def task(name: str, status: str, *, lead: bool = False) -> StoredTask:
    return StoredTask(name, f"{name}-uuid", f"pod-{name}", "gpu", lead, TaskStatus(status), 0)


def group(
    name: str, status: str, tasks: list[StoredTask], upstream: Sequence[str] = ()
) -> StoredGroup:
    manifests = [pod(t.pod_name) for t in tasks]
    return StoredGroup(
        name, f"{name}-uuid", TaskStatus(status), list(upstream), [], manifests, tasks
    )


def workflow(*groups: StoredGroup) -> StoredWorkflow:
    return StoredWorkflow(
        "w-1",
        "w",
        "w-uuid",
        "p",
        "default",
        "default",
        WorkflowStatus.RUNNING,
        "NORMAL",
        "u",
        NOW,
        3600.0,
        3600.0,
        "",
        None,
        list(groups),
    )


def step(
    cluster: Cluster,
    controller: Controller,
    stored: StoredWorkflow,
    now: datetime = NOW,
    configs: Configs = CONFIGS,
) -> WorkflowStep:
    context = StepContext(
        configs,
        now,
        cast(ClusterBackend, cluster),
        cluster,
        TickReport(),
        controller.task_tokens,
        controller.nodes_under_notice,
        controller.create_failures,
        controller.check_leading,
    )
    return WorkflowStep(context, stored)


def noticed(stored: StoredGroup, step: WorkflowStep) -> StoredGroup:
    """``stored`` as the step that gave its notice left it."""
    values = step.changes.groups[stored.uuid]
    return replace(stored, notice_at=values["notice_at"], notice_deadline=values["notice_deadline"])


def test_deciding_only_reads_and_applying_follows_decision_order() -> None:
    first = group("a", "RUNNING", [task("lead", "RUNNING", lead=True), task("b", "INITIALIZING")])
    second = group("next", "WAITING", [task("c", "WAITING")], upstream=["a"])
    cluster, controller = Cluster(exits={"lead-uuid": Exit(0)}), Controller()
    taken = step(cluster, controller, workflow(first, second))
    taken.decide()
    assert cluster.calls == ["poll lead-uuid"]  # reads only
    taken.apply()
    # b is started (it was bound), then stopped: its lead completed in the same step.
    assert cluster.calls == ["poll lead-uuid", "start b-uuid", "stop b-uuid", "apply pod-c"]
    changes = taken.changes
    assert changes.tasks["lead-uuid"]["status"] == "COMPLETED"
    assert changes.tasks["b-uuid"]["status"] == "COMPLETED"
    assert changes.groups["a-uuid"]["status"] == "COMPLETED"
    assert changes.groups["next-uuid"]["status"] == "SCHEDULING"
    assert changes.tasks["c-uuid"] == {"status": "SCHEDULING"}


def test_a_refused_group_is_decided_when_applying() -> None:
    ready = group("a", "SUBMITTING", [task("t", "SUBMITTING")])
    transient = Cluster(refuse=BackendError("the API server is busy", transient=True))
    controller = Controller()
    taken = step(transient, controller, workflow(ready))
    taken.decide()
    assert transient.calls == []
    taken.apply()
    assert transient.calls == ["apply pod-t"]
    assert taken.changes.groups == {"a-uuid": {"status": "WAITING"}}  # retried on the next tick
    assert controller.create_failures == {"a-uuid": 1}
    refused = Cluster(refuse=BackendError("pods is forbidden", transient=False))
    controller = Controller()
    failed = step(refused, controller, workflow(ready))
    failed.decide()
    failed.apply()
    changes = failed.changes
    assert changes.groups["a-uuid"]["status"] == "FAILED_BACKEND_ERROR"
    assert changes.tasks["t-uuid"]["message"] == (
        "The cluster refused the group's objects: pods is forbidden"
    )
    assert changes.workflows["w-1"]["status"] == "FAILED_BACKEND_ERROR"


def test_a_failing_start_reaches_the_controller() -> None:
    bound = group("a", "INITIALIZING", [task("t", "INITIALIZING")])

    class Down(Cluster):
        def start(self, run: TaskRun) -> None:
            raise BackendError("node unreachable", transient=True)

    controller = Controller()
    taken = step(Down(), controller, workflow(bound))
    taken.decide()
    try:
        taken.apply()
    except BackendError:
        pass  # the controller drops the step's changes (tests/services/test_controller.py)
    else:
        raise AssertionError("the start error must reach the tick")


def test_an_evicted_group_gets_notice_then_stops_at_its_deadline_and_ends_preempted() -> None:
    by = "urgent-1 (HIGH priority in queue p)"
    evicted = replace(
        group("a", "RUNNING", [task("lead", "RUNNING", lead=True), task("b", "RUNNING")]),
        evict=True,
        preempted_by=by,
    )
    cluster = Cluster()
    taken = step(cluster, Controller(), workflow(evicted))
    taken.decide()
    assert cluster.calls == []  # nothing polled: the eviction decides
    taken.apply()
    # the notice is the grace period (the pool sets no notice of its own), and no signal comes
    # with it: a task that does not handle one would die of it
    assert cluster.calls == [
        "notify lead-uuid (30 s, no signal)",
        "notify b-uuid (30 s, no signal)",
    ]
    assert taken.changes.groups["a-uuid"] == {
        "notice_at": NOW,
        "notice_deadline": NOW + timedelta(seconds=30),
    }
    assert taken.changes.tasks == {}
    evicted = noticed(evicted, taken)
    cluster.calls.clear()
    before = step(cluster, Controller(), workflow(evicted), NOW + timedelta(seconds=29))
    before.decide()
    before.apply()
    assert (before.changes.tasks, before.changes.groups) == ({}, {})  # one second left
    cluster.calls.clear()
    taken = step(cluster, Controller(), workflow(evicted), NOW + timedelta(seconds=30))
    taken.decide()
    taken.apply()
    assert cluster.calls == [
        "ask lead-uuid",
        "poll lead-uuid",
        "ask b-uuid",
        "poll b-uuid",
        "stop lead-uuid (grace 0 s)",
        "stop b-uuid (grace 0 s)",
    ]
    changes = taken.changes
    for name in ("lead", "b"):
        assert {
            k: changes.tasks[f"{name}-uuid"][k] for k in ("status", "exit_code", "message")
        } == {
            "status": "FAILED_PREEMPTED",
            "exit_code": 3006,
            "message": f"Preempted by {by}.",
        }
    assert changes.groups["a-uuid"]["status"] == "FAILED_PREEMPTED"
    assert changes.groups["a-uuid"]["evict"] is False
    assert changes.workflows["w-1"]["status"] == "FAILED_PREEMPTED"
    assert changes.eviction_stops == [
        GangStopped(
            at=NOW + timedelta(seconds=30),
            pool="p",
            workflow_id="w-1",
            group_uuid="a-uuid",
            cause=StopCause.PREEMPTED,
            gpus=0,
            lost_gpu_seconds=0.0,
            acknowledged=False,
            stop_seconds=30.0,
        )
    ]


def test_a_noticed_group_stops_once_every_task_is_ready() -> None:
    evicted = replace(
        group("a", "RUNNING", [task("lead", "RUNNING", lead=True), task("b", "RUNNING")]),
        evict=True,
        notice_at=NOW,
        notice_deadline=NOW + timedelta(seconds=30),
    )
    later = NOW + timedelta(seconds=3)
    cluster = Cluster(said={"lead-uuid": Acknowledgement(ready_at=later)})
    waits = step(cluster, Controller(), workflow(evicted), later)
    waits.decide()
    assert "status" not in waits.changes.groups.get("a-uuid", {})  # b is not ready
    cluster.exits["b-uuid"] = Exit(0)  # b saved and ended by itself: ready too
    taken = step(cluster, Controller(), workflow(evicted), later)
    taken.decide()
    assert taken.changes.groups["a-uuid"]["status"] == "FAILED_PREEMPTED"
    assert taken.changes.eviction_stops[0].acknowledged is True
    assert taken.changes.eviction_stops[0].stop_seconds == 3.0


def test_a_node_fault_stops_at_once_without_notice() -> None:
    evicted = replace(
        group("a", "RUNNING", [task("lead", "RUNNING", lead=True)]),
        evict=True,
        fault="node n1 failed at 2026-11-27 00:00:00 UTC: NotReady",
    )
    cluster = Cluster()
    taken = step(cluster, Controller(), workflow(evicted))
    taken.decide()
    taken.apply()
    assert cluster.calls == ["stop lead-uuid"]
    assert taken.changes.eviction_stops == []


def test_an_evicted_group_whose_tasks_all_reschedule_goes_back_to_the_queue() -> None:
    configs = Configs(
        {
            ConfigType.POOL: {
                "p": {"backend": "default", "default_exit_actions": {"RESCHEDULE": "3006"}}
            },
            ConfigType.WORKFLOW: {"max_retry_per_task": 1},
        }
    )
    evicted = replace(
        group("a", "RUNNING", [task("lead", "RUNNING", lead=True), task("b", "INITIALIZING")]),
        evict=True,
        preempted_by="x-1 (queue p reclaimed its guarantee)",
    )
    cluster = Cluster()
    taken = step(cluster, Controller(), workflow(evicted), NOW, configs)
    taken.decide()
    taken.apply()
    assert cluster.calls == [
        "notify lead-uuid (30 s, no signal)",
        "notify b-uuid (30 s, no signal)",
    ]
    evicted = noticed(evicted, taken)
    cluster.calls.clear()
    later = NOW + timedelta(seconds=30)
    taken = step(cluster, Controller(), workflow(evicted), later, configs)
    taken.decide()
    taken.apply()
    assert cluster.calls == [
        "ask lead-uuid",
        "poll lead-uuid",
        "ask b-uuid",
        "poll b-uuid",
        "stop lead-uuid (grace 0 s)",
        "stop b-uuid (grace 0 s)",
    ]
    group_change = taken.changes.groups["a-uuid"]
    assert (group_change["status"], group_change["scheduling_at"], group_change["evict"]) == (
        "SCHEDULING",
        later,
        False,
    )
    for name in ("lead", "b"):
        found = taken.changes.tasks[f"{name}-uuid"]
        assert (found["status"], found["retry_id"], found["exit_code"], found["node"]) == (
            "SCHEDULING",
            1,
            None,
            None,
        )
        why = (
            "Preempted by x-1 (queue p reclaimed its guarantee). Exit Action: RESCHEDULE the "
            "task for exit code 3006."
        )
        assert found["message"] == f"Attempt 0 stopped: {why}"
        ended = next(a for a in taken.changes.attempts if a.task_uuid == f"{name}-uuid")
        assert (ended.retry_id, ended.exit_code, ended.message, ended.ended_at) == (
            0,
            3006,
            why,
            later,
        )


def test_a_tasks_stop_notice_shortens_its_gangs_notice_never_lengthens_it() -> None:
    evicted = replace(
        group("a", "RUNNING", [task("lead", "RUNNING", lead=True), task("b", "RUNNING")]),
        evict=True,
        preempted_by="urgent-1 (HIGH priority in queue p)",
    )
    for manifest, seconds in zip(evicted.manifests, ("5", "90"), strict=True):
        manifest["metadata"]["annotations"] = {"corral.dev/stop-notice-seconds": seconds}
    # b asked for a signal with its notice (noticeSignal: SIGUSR2)
    evicted.manifests[1]["metadata"]["annotations"]["corral.dev/stop-notice-signal"] = "SIGUSR2"
    cluster = Cluster()
    taken = step(cluster, Controller(), workflow(evicted))
    taken.decide()
    taken.apply()
    # the pool's 30 s, shortened by lead's 5 s; b's 90 s does not lengthen it
    assert cluster.calls == ["notify lead-uuid (5 s, no signal)", "notify b-uuid (5 s, SIGUSR2)"]


def test_a_checkpoint_relayed_after_the_ticks_clock_counts_in_the_stop() -> None:
    """The runner stamps a report when it relays it, which can be after the tick took its
    ``now``: the checkpoint saved just before the ready is the one the stop counts from (held
    to the tick's clock, it was refused as in the future, and the stop cost the work since the
    gang's start: 6.15 GPU-seconds instead of 0 in a CI run)."""
    now = datetime.now(UTC) - timedelta(seconds=0.2)
    started = now - timedelta(seconds=6)
    one_gpu = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    lead = replace(task("lead", "RUNNING", lead=True), started_at=started)
    evicted = replace(
        group("a", "RUNNING", [lead]),
        manifests=[{**pod(lead.pod_name), "spec": one_gpu}],
        evict=True,
        started_at=started,
        notice_at=now - timedelta(seconds=3),
        notice_deadline=now + timedelta(seconds=17),
    )
    relayed = now + timedelta(seconds=0.1)  # after the tick's now, before it read the file
    cluster = Cluster(
        said={"lead-uuid": Acknowledgement(ready_at=relayed, checkpoint=Checkpoint(relayed, 7))}
    )
    taken = step(cluster, Controller(), workflow(evicted), now)
    taken.decide()
    (stop,) = taken.changes.eviction_stops
    assert (stop.gpus, stop.acknowledged, stop.lost_gpu_seconds) == (1, True, 0.0)
    assert taken.changes.tasks["lead-uuid"]["checkpoint_at"] == now  # no later than the tick
    assert taken.changes.tasks["lead-uuid"]["checkpoint_step"] == 7
