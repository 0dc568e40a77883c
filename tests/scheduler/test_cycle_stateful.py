"""Hypothesis state machine over the embedded scheduler's policy (``scheduler/cache.py`` and
``cycle.py``):
queues with guarantees and maximums on shared nodes, HIGH/NORMAL/LOW gangs with and without a
required clique, passes that preempt and reclaim, finishing gangs and a clock with a minimum
runtime.

After every pass:

* no queue is above its maximum, and no queue runs more HIGH and NORMAL GPUs than its guarantee;
* no gang is partly bound or partly evicted: a bound gang holds every member, an evicted one
  holds nothing, and the snapshot's free capacity equals capacity minus what bound gangs hold;
* a required clique holds: all pods of a bound gang share one clique, also after preemption;
* preemption never evicts work of equal or higher priority, nor work younger than its minimum
  runtime, and reclaims only from a queue that was borrowing;
* victims are chosen by the work they would lose once gangs report checkpoints: the chosen
  set's lost GPU-seconds are never more than those of any other victim set the search placed
  the preemptor with, and equal what its victims lose (GPUs x seconds since the later of their
  start and last checkpoint);
* a queue under its guarantee gets GPUs back within one pass: probed on a copy of the state, a
  HIGH/NORMAL gang of one-GPU pods without topology that its queue's guarantee and maximum
  allow is placed in one pass whenever the free GPUs, plus what borrowing queues hold in
  unprotected LOW gangs (up to what each borrows), plus its own queue's unprotected LOW gangs,
  would hold it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from corral.domain.platform.nodes import Node
from corral.scheduler import Queue
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting
from corral.scheduler.fair_share import PRIORITY_RANK
from corral.scheduler.records import Preemption

T0 = datetime(2026, 11, 26, tzinfo=UTC)
CLIQUE = "clique"
QUEUES = {
    "a": Queue("a", gpu_guarantee=16, gpu_maximum=32, weight=1),
    "b": Queue("b", gpu_guarantee=8, gpu_maximum=None, weight=2),
    "c": Queue("c", gpu_guarantee=None, gpu_maximum=24, weight=1),
}
MIN_RUNTIME = {"b": timedelta(seconds=5)}


def _cluster() -> list[Node]:
    """Three cliques of two 4-GPU trays and two 8-GPU trays: 72 GPUs, shared by every queue."""
    nodes = []
    for clique in range(3):
        for index, gpus in enumerate((4, 4, 8, 8)):
            nodes.append(
                Node(
                    f"c{clique}-n{index}",
                    {CLIQUE: f"c{clique}"},
                    (),
                    {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
                )
            )
    return nodes


@dataclass(frozen=True)
class Gang:
    key: str
    queue: str
    priority: str
    pods: int
    gpus: int  # per pod
    clique: bool

    @property
    def total(self) -> int:
        return self.pods * self.gpus

    def manifests(self) -> list[dict[str, Any]]:
        spec: dict[str, Any] = {"minMember": self.pods, "queue": self.queue}
        if self.clique:
            spec["topologyConstraint"] = {"topology": "t", "requiredTopologyLevel": CLIQUE}
        labels = {"kai.scheduler/queue": self.queue, "osmo.priority": self.priority.lower()}
        pods = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{self.key}-{i}", "labels": labels},
                "spec": {
                    "containers": [
                        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": self.gpus}}}
                    ]
                },
            }
            for i in range(self.pods)
        ]
        group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup"}
        return [{**group, "metadata": {"name": self.key}, "spec": spec}, *pods]


gangs = st.builds(
    lambda queue, priority, pods, gpus, clique: (queue, priority, pods, gpus, clique),
    st.sampled_from(sorted(QUEUES)),
    st.sampled_from(["HIGH", "NORMAL", "LOW", "LOW"]),
    st.integers(1, 4),
    st.sampled_from([1, 2, 4, 8]),
    st.booleans(),
)


class Policy(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.nodes = _cluster()
        self.placements = SchedulerCache(
            self.nodes, list(QUEUES.values()), [], min_runtime=MIN_RUNTIME
        )
        self.now = T0
        self.serial = 0
        self.gangs: dict[str, Gang] = {}
        self.bound: dict[str, dict[str, str]] = {}  # gang -> pod -> node
        self.bound_at: dict[str, datetime] = {}
        self.checkpointed: dict[str, datetime] = {}

    @rule(batch=st.lists(gangs, min_size=1, max_size=5))
    def submit(self, batch: list[tuple[str, str, int, int, bool]]) -> None:
        for queue, priority, pods, gpus, clique in batch:
            self.serial += 1
            found = Gang(f"g{self.serial}", queue, priority, pods, gpus, clique)
            self.gangs[found.key] = found
            self.placements.add(
                found.key,
                found.manifests(),
                levels=(CLIQUE,) if clique else (),
                priority=priority,
                age=(self.serial,),
            )

    @rule(seconds=st.sampled_from([0, 1, 3, 6]))
    def schedule(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)
        used_before = dict(self.placements.usage.used)
        result = place_waiting(self.placements, self.now)
        # what each queue could borrow at most during the pass (its placements may come first)
        used_at_most = dict(used_before)
        for placed in result.placed:
            gang = self.gangs[placed.group.key]
            used_at_most[gang.queue] += gang.total
        evicted = {e.group for e in result.evicted}
        self._check_lost_work(result.preemptions)
        taken_by_queue: dict[str, int] = {}
        for eviction in result.evicted:
            event("reclaimed" if eviction.reclaimed else "preempted")
            victim = self.gangs[eviction.group]
            preemptor = self.gangs[eviction.by]
            assert eviction.group in self.bound, "only gangs bound before the pass are evicted"
            assert PRIORITY_RANK[victim.priority] > PRIORITY_RANK[preemptor.priority]
            assert self.now - self.bound_at[victim.key] >= MIN_RUNTIME.get(
                victim.queue, timedelta(0)
            )
            if eviction.reclaimed:
                assert victim.queue != preemptor.queue
                guarantee = QUEUES[victim.queue].gpu_guarantee
                assert guarantee is not None  # a queue without one never borrows
                taken = taken_by_queue.get(victim.queue, 0)
                assert used_at_most[victim.queue] - taken > guarantee, "it was not borrowing"
                taken_by_queue[victim.queue] = taken + victim.total
            else:
                assert victim.queue == preemptor.queue
            del self.bound[victim.key]
            self.checkpointed.pop(victim.key, None)
        for placed in result.placed:
            assert placed.group.key not in evicted
            self.bound[placed.group.key] = placed.placement.nodes()
            self.bound_at[placed.group.key] = self.now
            self._check_gang(self.gangs[placed.group.key], placed.placement.nodes())

    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        if len(self.bound) < 4:
            return  # gangs mostly wait on a busy cluster: keep it busy
        key = data.draw(st.sampled_from(sorted(self.bound)))
        assert self.placements.release(key)
        del self.bound[key]
        self.checkpointed.pop(key, None)

    @rule(data=st.data(), ago=st.sampled_from([0, 1, 2, 5]))
    def report_a_checkpoint(self, data: st.DataObject, ago: int) -> None:
        """A running gang commits a checkpoint ``ago`` seconds ago (not before its start)."""
        if not self.bound:
            return
        key = data.draw(st.sampled_from(sorted(self.bound)))
        at = max(self.now - timedelta(seconds=ago), self.bound_at[key])
        self.placements.checkpoint(key, at)
        self.checkpointed[key] = max(at, self.checkpointed.get(key, at))

    @rule(queue=st.sampled_from(sorted(QUEUES)), pods=st.integers(1, 12))
    def probe_the_guarantee(self, queue: str, pods: int) -> None:
        """On a copy: only a new NORMAL gang of one-GPU pods waits; one pass places it when
        what may be freed for it would hold it."""
        usage = self.placements.usage
        if usage.refusal(queue, pods):
            event("probe held back by its queue")
            return  # its queue's guarantee or maximum holds it back, not the cluster
        copied = copy.deepcopy(self.placements)
        for key in list(copied.waiting):
            copied.drop(key)
        probe = Gang("probe", queue, "NORMAL", pods, 1, clique=False)
        copied.add("probe", probe.manifests(), levels=(), priority="NORMAL", age=(0,))
        room = sum(copied.snapshot(()).free_gpu) + self._may_be_freed_for(queue)
        result = place_waiting(copied, self.now)
        event(
            f"probe {'placed' if result.placed else 'waits'}, room {'>=' if room >= pods else '<'}"
        )
        if room >= pods:
            assert [p.group.key for p in result.placed] == ["probe"], (room, result)

    def _may_be_freed_for(self, queue: str) -> int:
        """GPUs of unprotected LOW gangs of ``queue``, plus, per other queue, of its unprotected
        LOW gangs up to what it borrows."""
        usage = self.placements.usage
        own = 0
        others: dict[str, int] = {}
        for key in self.bound:
            gang = self.gangs[key]
            young = self.now - self.bound_at[key] < MIN_RUNTIME.get(gang.queue, timedelta(0))
            if gang.priority != "LOW" or young:
                continue
            if gang.queue == queue:
                own += gang.total
            else:
                others[gang.queue] = others.get(gang.queue, 0) + gang.total
        return own + sum(min(total, usage.borrowed(q)) for q, total in others.items())

    # -- checks -----------------------------------------------------------------------------

    def _check_lost_work(self, preemptions: list[tuple[str, Preemption]]) -> None:
        for _, chosen in preemptions:
            expected = 0.0
            if self.checkpointed:  # nothing is weighed until a gang reports a checkpoint
                for victim in chosen.victims:
                    mark = max(self.bound_at[victim.key], self.checkpointed.get(victim.key, T0))
                    expected += victim.gpus * (self.now - mark).total_seconds()
            assert chosen.lost_gpu_seconds == expected
            assert all(chosen.lost_gpu_seconds <= other for other in chosen.alternatives)
            event("preemption weighed lost work" if self.checkpointed else "nothing weighed")
            if chosen.alternatives:
                event("preemption chose among placed victim sets")

    def _check_gang(self, gang: Gang, nodes: dict[str, str]) -> None:
        assert sorted(nodes) == [f"{gang.key}-{i}" for i in range(gang.pods)]
        if gang.clique:
            assert len({node.split("-")[0] for node in nodes.values()}) == 1

    @invariant()
    def queues_keep_their_limits(self) -> None:
        usage = self.placements.usage
        for name, queue in QUEUES.items():
            used = sum(self.gangs[k].total for k in self.bound if self.gangs[k].queue == name)
            deserved = sum(
                self.gangs[k].total
                for k in self.bound
                if self.gangs[k].queue == name and self.gangs[k].priority != "LOW"
            )
            assert usage.used[name] == used and usage.deserved[name] == deserved
            if queue.gpu_maximum is not None:
                assert used <= queue.gpu_maximum
            if queue.gpu_guarantee is not None:
                assert deserved <= queue.gpu_guarantee

    @invariant()
    def capacity_is_what_bound_gangs_leave(self) -> None:
        taken = {node.name: 0 for node in self.nodes}
        for key, nodes in self.bound.items():
            for node in nodes.values():
                taken[node] += self.gangs[key].gpus
        snapshot = self.placements.snapshot(())
        for i, node in enumerate(self.nodes):
            assert (
                snapshot.free_gpu[i] == int(node.allocatable["nvidia.com/gpu"]) - taken[node.name]
            )
        clique = self.placements.snapshot((CLIQUE,))
        assert clique.free_gpu == snapshot.free_gpu


Policy.TestCase.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)
TestPolicy = Policy.TestCase
