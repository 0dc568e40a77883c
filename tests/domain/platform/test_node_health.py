"""A node's health says whether a new pod may go there, and why not (docs/health.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from corral.domain.platform.node_health import HEALTHY, Cordon, Fabric, NodeHealth, closed_reason

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def test_a_healthy_node_is_open() -> None:
    assert closed_reason(HEALTHY, NOW) is None
    assert closed_reason(NodeHealth(fabric=Fabric.DEGRADED), NOW) is None


def test_not_ready_says_for_how_long_and_why() -> None:
    health = NodeHealth(
        ready=False, ready_since=NOW - timedelta(minutes=4), not_ready_reason="KubeletDown"
    )
    assert closed_reason(health, NOW) == "NotReady for 4 min (KubeletDown)"
    # Without a clock (a reason kept with a waiting group), since when.
    since = (NOW - timedelta(minutes=4)).strftime("%Y-%m-%d %H:%M")
    assert closed_reason(health) == f"NotReady since {since} UTC (KubeletDown)"
    recent = NodeHealth(ready=False, ready_since=NOW - timedelta(seconds=20))
    assert closed_reason(recent, NOW) == "NotReady for under a minute"


def test_a_cordon_names_who_and_why() -> None:
    assert closed_reason(NodeHealth(cordon=Cordon("alice", "PSU swap"))) == (
        "cordoned by alice: 'PSU swap'"
    )
    assert closed_reason(NodeHealth(cordon=Cordon())) == "cordoned"


def test_not_ready_comes_before_a_cordon_and_a_failed_fabric() -> None:
    everything = NodeHealth(ready=False, cordon=Cordon("bob"), fabric=Fabric.FAILED)
    assert closed_reason(everything) == "NotReady"
    fabric = NodeHealth(fabric=Fabric.FAILED, fabric_reason="IMEX down")
    assert closed_reason(fabric) == "NVLink fabric failed (IMEX down)"
