"""``pool shapes``: an ``sinfo`` for NVLink racks (docs/forecast.md#free-shapes). Per domain of
the pool's finest topology level (a clique, a rack): its trays (nodes) healthy, free and in all,
the largest gang of whole-node tasks that fits there now, and when the latest forecast says it is
next wholly free. Pure: the caller hands it the pool's nodes, what is bound on them and the
stored forecast."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from corral.domain.formats.wire_time import optional_wire_time, wire_time
from corral.domain.platform.node_health import closed_reason, faulty
from corral.domain.platform.nodes import Node

#: The domain of nodes that lack the level's label.
UNLABELLED = "(none)"


@dataclass(frozen=True)
class DomainShape:
    domain: str
    trays: int
    #: Ready, with a healthy NVLink fabric (cordoned trays are healthy, and not free).
    healthy: int
    #: Open to new pods and holding none.
    free: int
    gpus: int
    free_gpus: int
    #: The GPUs of a whole-node task here: the most any tray has.
    task_gpus: int
    #: How many whole-node tasks fit now: trays open with all of their GPUs free.
    largest_gang: int
    #: The forecast's median moment the domain's open trays are next all free; None: not
    #: within its horizon, or not forecast.
    whole_free_at: datetime | None
    forecast_at: datetime | None


@dataclass(frozen=True)
class NodeUse:
    """What is bound on a node: its GPUs in use and whether any pod is there."""

    gpus: int
    pods: int


def domain_shapes(
    nodes: Sequence[Node],
    label: str,
    gpus: Mapping[str, int],
    used: Mapping[str, NodeUse],
    whole_free: Mapping[str, tuple[datetime | None, datetime]],
    now: datetime,
) -> list[DomainShape]:
    """One shape per value of ``label`` among ``nodes`` (the pool's), by domain."""
    members: dict[str, list[Node]] = {}
    for node in nodes:
        members.setdefault(node.labels.get(label, UNLABELLED) if label else UNLABELLED, []).append(
            node
        )
    return [
        _shape(domain, members[domain], gpus, used, whole_free.get(domain), now)
        for domain in sorted(members)
    ]


def _shape(
    domain: str,
    nodes: Sequence[Node],
    gpus: Mapping[str, int],
    used: Mapping[str, NodeUse],
    forecast: tuple[datetime | None, datetime] | None,
    now: datetime,
) -> DomainShape:
    idle = NodeUse(0, 0)
    task_gpus = max((gpus.get(node.name, 0) for node in nodes), default=0)
    open_nodes = [node for node in nodes if closed_reason(node.health, now) is None]
    free = [node for node in open_nodes if used.get(node.name, idle).pods == 0]
    free_gpus = sum(max(gpus.get(n.name, 0) - used.get(n.name, idle).gpus, 0) for n in open_nodes)
    whole = bool(open_nodes) and len(free) == len(open_nodes)
    return DomainShape(
        domain=domain,
        trays=len(nodes),
        healthy=sum(1 for node in nodes if not faulty(node.health)),
        free=len(free),
        gpus=sum(gpus.get(node.name, 0) for node in nodes),
        free_gpus=free_gpus,
        task_gpus=task_gpus,
        largest_gang=sum(1 for node in free if task_gpus and gpus.get(node.name, 0) == task_gpus),
        whole_free_at=now if whole else (forecast[0] if forecast else None),
        forecast_at=None if whole or forecast is None else forecast[1],
    )


def shapes_json(
    pool: str, level: str, label: str, shapes: Sequence[DomainShape], now: datetime
) -> dict[str, Any]:
    """The answer of ``GET /api/pool/P/shapes``: the domains, and the pool's summary."""
    upcoming = [s.whole_free_at for s in shapes if s.whole_free_at is not None]
    return {
        "pool": pool,
        "at": wire_time(now),
        "level": level,
        "label": label,
        "largest_gang": max((s.largest_gang for s in shapes), default=0),
        "next_whole_free": optional_wire_time(min(upcoming, default=None)),
        "domains": [
            {
                "domain": s.domain,
                "trays": s.trays,
                "healthy": s.healthy,
                "free": s.free,
                "gpus": s.gpus,
                "free_gpus": s.free_gpus,
                "task_gpus": s.task_gpus,
                "largest_gang": s.largest_gang,
                "whole_free_at": optional_wire_time(s.whole_free_at),
                "forecast_at": optional_wire_time(s.forecast_at),
            }
            for s in shapes
        ],
    }
