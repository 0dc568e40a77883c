"""Hypothesis state machine over the embedded cluster with failing trays (docs/health.md): the
real API, database and lifecycle controller on the example configs, on a clock the machine
moves. It interleaves submissions (8-tray clique gangs and single trays), task completions
(the clock), cordons, drains, tray failures, fabric faults and heals.

After every tick:

* no pod is newly bound to a tray that was unhealthy or cordoned during the tick;
* no group runs on a tray whose fault ends its work (fabric failed, NotReady past the grace
  period): the tick that sees it stops the group; a group on a drained tray is under notice
  until its deadline (docs/checkpoints.md#the-notice), and stopped by the tick that passes it;
* every ended group completed, or each of its tasks has its failure recorded (status, exit
  code, message); a requeued group is requeued whole (every task waits, on no node, at one
  attempt);
* a running clique gang shares one clique, also after a requeue;
* nothing runs twice: a tray holds at most one running task (each takes its 4 GPUs), and the
  bound pods are exactly the running tasks' pods on their trays (but for groups under notice,
  whose pods the drain unbound).
"""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from corral.domain.platform.node_health import closed_reason, drain_of, fault_reason
from corral.domain.workflows.statuses import TaskStatus
from corral.files import read_bundle_directory
from corral.services.runtime import open_runtime
from corral.web.app import create_server_app
from tests.conftest import REPO, Api
from tests.services.lifecycle_world import CLIQUE, Clock, World, simulate, task, workflow_yaml

RUNNING = ("INITIALIZING", "RUNNING")
TRAYS = 40  # the first trays by name: a few cliques, so faults meet running work


def gang_yaml(size: int, seconds: int) -> str:
    tasks = [task(f"t{i}", lead=i == 0, seconds=seconds) for i in range(size)]
    resources = {"default": {"gpu": 4, "topology": [{"key": "gpu-clique"}]}}
    return workflow_yaml([{"name": "g", "tasks": tasks}], resources=resources)


class FailingTrays(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._directory = tempfile.TemporaryDirectory()
        runtime = open_runtime(f"sqlite:///{Path(self._directory.name) / 'corral.db'}")
        token = runtime.tokens.create(name="admin", username="admin", roles=["osmo-admin"])
        api = Api(
            TestClient(create_server_app(runtime), raise_server_exceptions=False), token, runtime
        )
        bundle, _ = read_bundle_directory(REPO / "examples" / "configs")
        assert api.call("POST", "/api/configs/apply", json={"bundle": bundle})[0] == 200
        simulate(api)
        clock = Clock()
        runtime.node_admin.clock = clock
        self.world = World(api, clock, runtime.lifecycle(clock))
        self.trays = sorted(self.world.gb200_nodes())[:TRAYS]
        self.workflows: list[str] = []
        self.gangs: set[str] = set()
        #: (task uuid, retry id) -> the tray the attempt was bound to, when first seen.
        self.attempts: dict[tuple[str, int], str] = {}

    def teardown(self) -> None:
        self.world.runtime.engine.dispose()
        self._directory.cleanup()

    # -- rules --------------------------------------------------------------------------

    @rule(size=st.sampled_from([1, 1, 4, 8]), seconds=st.sampled_from([20, 200, 900]))
    def submit(self, size: int, seconds: int) -> None:
        text = (
            gang_yaml(size, seconds)
            if size > 1
            else workflow_yaml([{"name": "g", "tasks": [task("solo", seconds=seconds)]}])
        )
        workflow_id = self.world.submit(text)
        self.workflows.append(workflow_id)
        if size > 1:
            self.gangs.add(workflow_id)
        self.tick(1)  # placed
        self.tick(1)  # started

    @precondition(lambda self: bool(self._busy()))
    @rule(data=st.data(), fabric=st.booleans(), action=st.sampled_from(["fail", "drain"]))
    def fault_under_running_work(self, data: st.DataObject, fabric: bool, action: str) -> None:
        tray = str(data.draw(st.sampled_from(self._busy())))
        self._call(tray, action, {"reason": "test", "fabric": fabric} if action == "fail" else {})

    @rule(data=st.data(), action=st.sampled_from(["cordon", "uncordon", "drain", "heal"]))
    def change(self, data: st.DataObject, action: str) -> None:
        body: dict[str, Any] = {"reason": "test"}
        if action == "drain":
            body["grace_seconds"] = data.draw(st.sampled_from([0, 30]))
        self._call(self._tray(data), action, body)

    @rule(data=st.data(), fabric=st.booleans())
    def fail(self, data: st.DataObject, fabric: bool) -> None:
        self._call(self._tray(data), "fail", {"reason": "test", "fabric": fabric})

    @rule(seconds=st.sampled_from([1, 10, 60, 301]))
    def tick(self, seconds: int) -> None:
        health = {node.name: node.health for node in self.world.runtime.node_admin.nodes()}
        now = self.world.clock.now
        report = self.world.controller.tick()
        if report.placed_groups:
            event("groups placed")
        self._check_new_bindings(health)
        self._check_nothing_on_bad_trays(health, now)
        self.world.clock.advance(seconds)

    @precondition(lambda self: bool(self.workflows))
    @rule()
    def heal_everything_and_finish(self) -> None:
        """Every tray healthy again: every workflow ends (nothing waits forever)."""
        for node in self.world.runtime.node_admin.nodes():
            if node.health.cordon is not None:
                self._call(node.name, "uncordon", {})
            if closed_reason(node.health) is not None or node.health.fabric.value != "healthy":
                self._call(node.name, "heal", {})
        self.world.finish(*self.workflows, step=60.0)

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def ended_groups_say_why_and_requeued_ones_are_whole(self) -> None:
        for workflow_id in self.workflows:
            for group in self.world.workflow(workflow_id).groups:
                status = TaskStatus(group.status)
                if status.group_finished and status is not TaskStatus.COMPLETED:
                    for member in group.tasks:
                        if member.status == "COMPLETED":
                            continue
                        assert TaskStatus(member.status).group_finished, member
                        assert member.message, member  # its failure, in words
                if status is TaskStatus.SCHEDULING and group.tasks[0].retry_id:
                    event(f"requeued after {group.tasks[0].exit_code}")
                if status.group_finished and status is not TaskStatus.COMPLETED:
                    event(f"ended {group.tasks[0].status} {group.tasks[0].exit_code}")
                if status is TaskStatus.SCHEDULING:
                    assert {t.status for t in group.tasks} == {"SCHEDULING"}, group
                    assert {t.node for t in group.tasks} == {None}, group
                    assert len({t.retry_id for t in group.tasks}) == 1, group

    @invariant()
    def clique_gangs_share_one_clique(self) -> None:
        for workflow_id in self.gangs:
            group = self.world.workflow(workflow_id).groups[0]
            if group.status in RUNNING:
                nodes = {t.node for t in group.tasks}
                assert None not in nodes, group
                assert len({self.world.node_labels(n)[CLIQUE] for n in nodes}) == 1  # type: ignore[arg-type]

    @invariant()
    def nothing_runs_twice(self) -> None:
        running: dict[str, str] = {}  # pod -> tray
        for workflow_id in self.workflows:
            for group in self.world.workflow(workflow_id).groups:
                if group.evict and group.notice_deadline is not None:
                    continue  # stopping: its pods are unbound, its trays taken by nothing
                for member in group.tasks:
                    if member.status in RUNNING and group.status in RUNNING:
                        assert member.node is not None, member
                        running[member.pod_name] = member.node
        assert len(set(running.values())) == len(running), running  # one 4-GPU task per tray
        bound = {
            pod.name: pod.node
            for pod in self.world.runtime.objects.bound_pods()
            if pod.labels.get("osmo.group_uuid")
        }
        assert bound == running

    # -- helpers ------------------------------------------------------------------------

    def _busy(self) -> list[str]:
        return sorted(
            {
                t.node
                for workflow_id in self.workflows
                for g in self.world.workflow(workflow_id).groups
                for t in g.tasks
                if t.node is not None and t.status in RUNNING
            }
        )

    def _tray(self, data: st.DataObject) -> str:
        return str(
            data.draw(st.sampled_from(self._busy() or self.trays) | st.sampled_from(self.trays))
        )

    def _call(self, tray: str, action: str, body: dict[str, Any]) -> None:
        status, answer = self.world.api.call("POST", f"/api/nodes/{tray}/{action}", json=body)
        assert status == 200, answer

    def _check_new_bindings(self, health: dict[str, Any]) -> None:
        for workflow_id in self.workflows:
            for group in self.world.workflow(workflow_id).groups:
                for member in group.tasks:
                    key = (member.uuid, member.retry_id)
                    if member.node is None or key in self.attempts:
                        continue
                    self.attempts[key] = member.node
                    assert closed_reason(health[member.node]) is None, (member, health[member.node])

    def _check_nothing_on_bad_trays(self, health: dict[str, Any], now: datetime) -> None:
        for workflow_id in self.workflows:
            for group in self.world.workflow(workflow_id).groups:
                if group.status not in RUNNING:
                    continue
                for member in group.tasks:
                    state = health[member.node]  # type: ignore[index]
                    assert fault_reason(state, now) is None, (member, state)
                    if drain_of(state) is not None:
                        event("a drained group is under notice")
                        deadline = group.notice_deadline
                        assert deadline is not None and now < deadline, (member, group)


FailingTrays.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_failing_trays = FailingTrays.TestCase
