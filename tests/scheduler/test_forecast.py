"""The start-time forecast (``scheduler/forecast.py``): the embedded scheduler run forward over
sampled runtimes. Exact answers on small clusters, and invariants (hypothesis): p10 <= p50 <=
p90, the same seed gives the same answer, and a group never starts before an alike group ahead
of it in its queue."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain.platform.node_health import NodeHealth
from corral.scheduler import Queue
from corral.scheduler.forecast import (
    ClusterNow,
    QueuedGroup,
    RunningGang,
    forecast,
    outlook,
)
from corral.scheduler.records import BoundPodOnNode
from corral.scheduler.runtimes import Runtimes, history_runtimes
from tests.scheduler.helpers import node, pod, pod_group

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
QUEUES = [Queue("q")]


def gang(key: str, pods: int, gpu: int, age: int, runtimes: Runtimes) -> QueuedGroup:
    members = [{"apiVersion": "v1", **pod(f"{key}-{i}", gpu=gpu)} for i in range(pods)]
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", **pod_group(pods)}
    return QueuedGroup(key, (group, *members), (), "NORMAL", (age,), runtimes)


def running(key: str, nodes: list[str], gpu: int, since: float, runtimes: Runtimes) -> RunningGang:
    pods = tuple(
        BoundPodOnNode(f"{key}-{i}", name, key, {}, pod(f"{key}-{i}", gpu=gpu)["spec"])
        for i, name in enumerate(nodes)
    )
    return RunningGang(key, pods, NOW - timedelta(seconds=since), runtimes)


def around(moment: datetime | None, seconds: float, within: float = 0.2) -> bool:
    """``moment`` is ``seconds`` from now, give or take ``within`` of it: a drawn runtime is
    spread about 10% around the past run it comes from (``runtimes.SPREAD``)."""
    if moment is None:
        return False
    return abs((moment - NOW).total_seconds() - seconds) <= within * seconds


def cluster(
    nodes: int, waiting: list[QueuedGroup], busy: list[RunningGang] | None = None
) -> ClusterNow:
    return ClusterNow([node(f"n{i}") for i in range(nodes)], QUEUES, busy or [], waiting, NOW)


def test_an_empty_queue_on_a_free_cluster_starts_now() -> None:
    found = forecast(cluster(2, [gang("a", 2, 8, 0, Runtimes((60.0,), 3600))]))
    assert found["a"].p10 == found["a"].p50 == found["a"].p90 == NOW
    assert (found["a"].queue, found["a"].queue_position, found["a"].position) == ("q", 1, 1)
    assert found["a"].waits_on is None
    assert not found["a"].on_timeouts  # it waits on nothing: its start is certain


CLIQUE = "nvidia.com/gpu.clique"


def test_a_domain_is_whole_free_when_its_last_gang_ends_before_the_queue_takes_it() -> None:
    """c0 (n0, n1) holds two gangs ending after 100 s and 700 s; c1 (n2) is free now; the
    waiting group takes n2, so c1 is free now but never again within the runs."""
    nodes = [node(f"n{i}", labels={CLIQUE: "c0" if i < 2 else "c1"}) for i in range(3)]
    busy = [
        running("short", ["n0"], 8, since=0, runtimes=Runtimes((100.0,) * 3, 3600)),
        running("long", ["n1"], 8, since=0, runtimes=Runtimes((700.0,) * 3, 3600)),
    ]
    waiting = [gang("w", 1, 8, 0, Runtimes((5000.0,) * 3, 9000))]
    now = ClusterNow(nodes, QUEUES, busy, waiting, NOW, domain_labels=(CLIQUE,))
    found = outlook(now, runs=4)
    assert found.whole_free[(CLIQUE, "c1")] == NOW
    assert around(found.whole_free[(CLIQUE, "c0")], 700)  # when "long" ends
    assert found.groups["w"].p50 == NOW


def test_a_domain_with_a_closed_node_counts_its_open_nodes_only() -> None:
    closed = NodeHealth(ready=False, not_ready_reason="KubeletDown")
    nodes = [node("n0", labels={CLIQUE: "c0"}), node("n1", labels={CLIQUE: "c0"})]
    nodes[1] = dataclasses.replace(nodes[1], health=closed)
    busy = [running("b", ["n1"], 8, since=0, runtimes=Runtimes((60.0,) * 3, 600))]
    found = outlook(ClusterNow(nodes, QUEUES, busy, [], NOW, domain_labels=(CLIQUE,)))
    assert found.whole_free == {(CLIQUE, "c0"): NOW}


def test_a_group_starts_when_the_gang_it_waits_on_ends() -> None:
    busy = running("big", ["n0", "n1"], 8, since=100, runtimes=Runtimes((600.0,), 3600))
    found = forecast(cluster(2, [gang("a", 2, 8, 0, Runtimes((60.0,), 3600))], [busy]))
    a = found["a"]
    assert around(a.p50, 500)  # ran 100 s of its 600
    assert a.p10 is not None and a.p90 is not None and a.p10 < a.p50 < a.p90  # runs vary
    assert a.waits_on == "big" and not a.on_timeouts


def test_a_gang_that_outlived_its_history_ends_after_a_tail_not_at_its_timeout() -> None:
    """The new user's case: past runs of 600 s, this one has run 900 s. Before, every run
    ended it at its exec timeout: a band of zero width, 45 min away."""
    busy = running("big", ["n0"], 8, since=900, runtimes=Runtimes((600.0,), 3600))
    a = forecast(cluster(1, [gang("a", 1, 8, 0, Runtimes((), 3600))], [busy]), runs=40)["a"]
    timeout = NOW + timedelta(seconds=3600 - 900)
    assert a.p10 is not None and a.p50 is not None and a.p90 is not None
    assert NOW < a.p10 < a.p50 < a.p90 <= timeout
    assert a.p50 < NOW + timedelta(seconds=900)  # the fitted tail: well before its timeout
    assert not a.on_timeouts


def test_work_with_no_past_runs_is_unknown_and_bounded_by_its_timeout() -> None:
    busy = running("big", ["n0"], 8, since=900, runtimes=Runtimes((), 3600))
    a = forecast(cluster(1, [gang("a", 1, 8, 0, Runtimes((), 3600))], [busy]))["a"]
    assert a.p50 == a.p90 == NOW + timedelta(seconds=3600 - 900)  # the bound
    assert a.waits_on == "big" and a.on_timeouts  # said as "unknown", not as a band


def in_queue(gang: RunningGang, queue: str) -> RunningGang:
    """``gang`` as the controller hands it over: its pods labelled with its queue."""
    labelled = {"kai.scheduler/queue": queue}
    pods = tuple(dataclasses.replace(pod, labels=labelled) for pod in gang.pods)
    return dataclasses.replace(gang, pods=pods)


def test_a_group_behind_unknown_work_past_the_horizon_is_unknown_too() -> None:
    """Two gangs of no past runs, each bounded by a 5-day timeout: the first waiting group is
    bounded, the second starts in no run. It is not "not within 7 days" (a certainty the
    forecast does not have) but "unknown", waiting on the unknown work of its own queue that
    has run longest."""
    days5 = 5 * 86400.0
    elsewhere = in_queue(running("older", ["n1"], 8, since=600, runtimes=Runtimes((), days5)), "r")
    busy = in_queue(running("big", ["n0"], 8, since=60, runtimes=Runtimes((), days5)), "q")
    unknown = Runtimes((), days5)
    waiting = [gang("next", 1, 8, 0, unknown), gang("after", 1, 8, 1, unknown)]
    scene = ClusterNow([node("n0")], [Queue("q"), Queue("r")], [busy, elsewhere], waiting, NOW)
    found = forecast(scene, runs=3)
    assert found["next"].p90 == NOW + timedelta(seconds=days5 - 60) and found["next"].on_timeouts
    after = found["after"]
    assert (after.p50, after.p90, after.waits_on, after.on_timeouts) == (None, None, "big", True)


def test_groups_of_one_queue_start_in_turn_and_the_second_waits_on_the_first() -> None:
    runtimes = Runtimes((300.0,), 3600)
    found = forecast(
        cluster(1, [gang("first", 1, 8, 0, runtimes), gang("second", 1, 8, 1, runtimes)])
    )
    assert found["first"].p50 == NOW
    assert around(found["second"].p50, 300)
    assert found["second"].waits_on == "first"
    assert [found[k].queue_position for k in ("first", "second")] == [1, 2]


def test_sampled_runtimes_spread_the_band() -> None:
    busy = running("big", ["n0"], 8, since=0, runtimes=Runtimes((100.0, 200.0, 900.0), 3600))
    own = Runtimes((60.0, 70.0, 80.0), 3600)
    found = forecast(cluster(1, [gang("a", 1, 8, 0, own)], [busy]), runs=60)
    assert not found["a"].on_timeouts
    assert around(found["a"].p10, 100)
    assert around(found["a"].p90, 900)


def test_a_group_that_never_fits_has_no_start_within_the_horizon() -> None:
    found = forecast(cluster(1, [gang("huge", 2, 8, 0, Runtimes((60.0,), 3600))]), runs=3)
    assert (found["huge"].p10, found["huge"].p50, found["huge"].p90) == (None, None, None)


def test_history_falls_back_to_the_pool_then_to_the_timeout() -> None:
    wider = ((1, 2, 3), (1, 2, 3, 7))
    assert history_runtimes([10, 20, 30], [1, 2, 3], 600, cluster=[7, 1, 2, 3]) == Runtimes(
        (10, 20, 30), 600, wider
    )
    assert history_runtimes([10], [1, 2, 3], 600) == Runtimes((1, 2, 3), 600, ((1, 2, 3), ()))
    assert history_runtimes([10], [1], 600) == Runtimes((10,), 600, ((1,), ()))
    assert all(Runtimes((10.0,), 5).draw(random.Random(n)) <= 5 for n in range(50))  # bounded


@st.composite
def scenes(draw: Any) -> ClusterNow:
    nodes = draw(st.integers(1, 4))
    samples = st.lists(st.floats(10, 5000, allow_nan=False), max_size=4).map(tuple)
    timeout = draw(st.floats(100, 10000, allow_nan=False))
    waiting = [
        gang(
            f"w{i}",
            draw(st.integers(1, nodes)),
            draw(st.sampled_from([1, 4, 8])),
            i,
            Runtimes(draw(samples), timeout),
        )
        for i in range(draw(st.integers(0, 6)))
    ]
    busy = [
        running(
            f"r{i}",
            [f"n{i}"],
            draw(st.sampled_from([4, 8])),
            draw(st.floats(0, 3000)),
            Runtimes(draw(samples), timeout),
        )
        for i in range(draw(st.integers(0, nodes)))
    ]
    return cluster(nodes, waiting, busy)


@settings(max_examples=60, deadline=None)
@given(scene=scenes(), seed=st.integers(0, 10))
def test_bands_are_ordered_deterministic_and_alike_groups_keep_their_turn(
    scene: ClusterNow, seed: int
) -> None:
    found = forecast(scene, seed=seed, runs=8)
    assert found == forecast(scene, seed=seed, runs=8)
    later = NOW + timedelta(days=365)
    for result in found.values():
        p10, p50, p90 = (t or later for t in (result.p10, result.p50, result.p90))
        assert NOW <= p10 <= p50 <= p90
    # An alike group (same size and GPUs) ahead in the queue starts no later, run by run.
    for run in range(3):
        one = forecast(scene, seed=seed + run, runs=1)
        for earlier in scene.waiting:
            for behind in scene.waiting:
                if earlier.age < behind.age and _shape(earlier) == _shape(behind):
                    assert (one[earlier.key].p50 or later) <= (one[behind.key].p50 or later)


def _shape(group: QueuedGroup) -> tuple[int, int]:
    """(pods, GPUs per pod)."""
    return len(group.manifests) - 1, _gpus(group)


def _gpus(group: QueuedGroup) -> int:
    spec = group.manifests[1]["spec"]
    return int(spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])


def test_expected_arrivals_of_higher_priority_jump_ahead() -> None:
    busy = running("big", ["n0"], 8, since=0, runtimes=Runtimes((600.0,), 3600))
    waiting = gang("normal", 1, 8, 0, Runtimes((600.0,), 3600))
    urgent = QueuedGroup("urgent", waiting.manifests, (), "HIGH", (NOW,), Runtimes((600.0,), 3600))
    scene = cluster(1, [waiting], [busy])
    assert around(forecast(scene)["normal"].p50, 600)
    with_arrival = ClusterNow(
        scene.nodes, scene.queues, scene.running, scene.waiting, NOW, arrivals=[(60.0, urgent)]
    )
    found = forecast(with_arrival)
    assert around(found["normal"].p50, 1200)  # after the HIGH arrival's run
    assert set(found) == {"normal"}  # arrivals are not forecast themselves
