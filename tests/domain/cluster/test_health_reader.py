"""A cluster description's node health: corral's keys and a NodeList's fields, and errors at
FILE:LINE:COL (docs/cluster.md#node-health)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from corral.domain.cluster.description import parse_cluster
from corral.domain.platform.node_health import HEALTHY, Cordon, Fabric, NodeHealth
from corral.errors import UserError

CORRAL = """\
nodes:
  - name: n1
  - name: n5
    conditions:
      - type: Ready
        status: "False"
        reason: KubeletDown
        lastTransitionTime: "2026-11-27T11:56:00Z"
  - name: n9
    unschedulable: {by: alice, reason: PSU swap}
  - name: n10
    unschedulable: true
    fabric: {state: failed, reason: IMEX down}
  - name: n11
    fabric: degraded
"""


def test_corrals_format_reads_cordons_conditions_and_fabric() -> None:
    nodes = {node.name: node.health for node in parse_cluster(CORRAL).nodes}
    assert nodes == {
        "n1": HEALTHY,
        "n5": NodeHealth(
            ready=False,
            ready_since=datetime(2026, 11, 27, 11, 56, tzinfo=UTC),
            not_ready_reason="KubeletDown",
        ),
        "n9": NodeHealth(cordon=Cordon("alice", "PSU swap")),
        "n10": NodeHealth(cordon=Cordon(), fabric=Fabric.FAILED, fabric_reason="IMEX down"),
        "n11": NodeHealth(fabric=Fabric.DEGRADED),
    }


NODE_LIST = """\
kind: NodeList
items:
  - metadata: {name: a}
    spec: {unschedulable: true}
    status:
      conditions:
        - {type: MemoryPressure, status: "False", lastHeartbeatTime: "2026-11-27T11:00:00Z"}
        - {type: Ready, status: Unknown, reason: NodeStatusUnknown,
           message: Kubelet stopped posting node status.}
  - metadata: {name: b}
    status:
      conditions:
        - {type: Ready, status: "True"}
"""


def test_a_node_list_reads_spec_unschedulable_and_the_ready_condition() -> None:
    nodes = {node.name: node.health for node in parse_cluster(NODE_LIST).nodes}
    assert nodes == {
        "a": NodeHealth(
            ready=False,
            not_ready_reason="NodeStatusUnknown Kubelet stopped posting node status.",
            cordon=Cordon(),
        ),
        "b": HEALTHY,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "nodes:\n  - name: n1\n    fabric: broken\n",
            "cluster.yaml:3:5: nodes[0].fabric: 'broken' is not a fabric state; use healthy, "
            "degraded, failed (or a mapping with `state` and `reason`)",
        ),
        (
            "nodes:\n  - name: n1\n    unschedulable: yes please\n",
            "cluster.yaml:3:5: nodes[0].unschedulable: must be true, false or a mapping with "
            "`by` and `reason`, not a string",
        ),
        (
            "nodes:\n  - name: n1\n    conditions:\n      - {type: Ready, status: Maybe}\n",
            "cluster.yaml:4:23: nodes[0].conditions[0].status: 'Maybe' is not a condition "
            "status; use True, False, Unknown",
        ),
        (
            "nodes:\n  - name: n1\n    conditions:\n"
            "      - {type: Ready, status: 'False', lastTransitionTime: soon}\n",
            "cluster.yaml:4:40: nodes[0].conditions[0].lastTransitionTime: 'soon' is not a "
            "time; write it as 2026-11-27T10:00:00Z",
        ),
    ],
)
def test_bad_health_fields_are_named_with_line_and_column(text: str, message: str) -> None:
    with pytest.raises(UserError) as refused:
        parse_cluster(text)
    assert str(refused.value) == message
