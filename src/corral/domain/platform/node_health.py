"""A node's health: whether it is Ready, cordoned, and whether its NVLink fabric works
(docs/health.md).

This module owns the answer to "may a new pod go to this node, and why not"
(:func:`closed_reason`). The scheduler's snapshot asks it for every node, so capacity that is
NotReady, cordoned or cut off from its fabric is never free for new work. Pods already bound
there keep what they hold until they end. Run-time taints are the node's own taints
(``nodes.py``), which a pod's tolerations answer as Kubernetes does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum


class Fabric(Enum):
    """The health of a tray's NVLink fabric (its IMEX domain)."""

    HEALTHY = "healthy"
    #: Some links are down: the tray runs, but a multi-node NVLink gang may fail at NCCL init.
    DEGRADED = "degraded"
    #: The tray is cut off from its fabric.
    FAILED = "failed"


@dataclass(frozen=True)
class Cordon:
    """``spec.unschedulable``: who cordoned the node and why, when known."""

    by: str = ""
    reason: str = ""


@dataclass(frozen=True)
class NodeHealth:
    ready: bool = True
    #: When the node's Ready condition last changed (None: not known).
    ready_since: datetime | None = None
    #: Why the node is not Ready, as its condition says.
    not_ready_reason: str = ""
    cordon: Cordon | None = None
    fabric: Fabric = Fabric.HEALTHY
    fabric_reason: str = ""


HEALTHY = NodeHealth()


def closed_reason(health: NodeHealth, now: datetime | None = None) -> str | None:
    """Why no new pod may go to a node of this health; None when one may.

    A failed fabric closes the tray to every new pod: corral cannot tell which of them needs
    NVLink. A degraded fabric leaves it open (docs/health.md)."""
    if not health.ready:
        return "NotReady" + _since(health.ready_since, now) + _why(health.not_ready_reason)
    if health.cordon is not None:
        by = f" by {health.cordon.by}" if health.cordon.by else ""
        reason = f": {health.cordon.reason!r}" if health.cordon.reason else ""
        return f"cordoned{by}{reason}"
    if health.fabric is Fabric.FAILED:
        return "NVLink fabric failed" + _why(health.fabric_reason)
    return None


def _since(since: datetime | None, now: datetime | None) -> str:
    if since is None or now is None or now < since:
        return ""
    minutes = int((now - since).total_seconds() // 60)
    return f" for {minutes} min" if minutes else " for under a minute"


def _why(reason: str) -> str:
    return f" ({reason})" if reason else ""
