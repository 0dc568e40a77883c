"""A node's health: whether it is Ready, cordoned, and whether its NVLink fabric works
(docs/health.md).

This module owns the answer to "may a new pod go to this node, and why not"
(:func:`closed_reason`). The scheduler's snapshot asks it for every node, so capacity that is
NotReady, cordoned or cut off from its fabric is never free for new work. Pods already bound
there keep what they hold until they end. Run-time taints are the node's own taints
(``nodes.py``), which a pod's tolerations answer as Kubernetes does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any


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
    #: Set by a drain: what runs on the node is stopped, whole gangs, within this grace
    #: period (seconds), as a preemption would stop it.
    drain_grace_s: float | None = None


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

#: How long a node may be NotReady before the work on it ends: Kubernetes' default
#: ``tolerationSeconds`` for ``node.kubernetes.io/not-ready:NoExecute``.
NOT_READY_GRACE = timedelta(minutes=5)


def closed_reason(health: NodeHealth, now: datetime | None = None) -> str | None:
    """Why no new pod may go to a node of this health; None when one may.

    A failed fabric closes the tray to every new pod: corral cannot tell which of them needs
    NVLink. A degraded fabric leaves it open (docs/health.md)."""
    if not health.ready:
        return "NotReady" + _since(health.ready_since, now) + _why(health.not_ready_reason)
    if health.cordon is not None:
        by = f" by {health.cordon.by}" if health.cordon.by else ""
        reason = f": {health.cordon.reason!r}" if health.cordon.reason else ""
        verb = "drained" if health.cordon.drain_grace_s is not None else "cordoned"
        return f"{verb}{by}{reason}"
    if health.fabric is Fabric.FAILED:
        return "NVLink fabric failed" + _why(health.fabric_reason)
    return None


def fault_reason(health: NodeHealth, now: datetime) -> str | None:
    """Why the work running on a node of this health must end now; None while it may go on.

    A failed fabric ends it at once (a gang's NCCL calls fail); a NotReady node once it has
    been NotReady for :data:`NOT_READY_GRACE` (a kubelet that comes back keeps its pods)."""
    if health.fabric is Fabric.FAILED:
        return "NVLink fabric failed" + _why(health.fabric_reason)
    if health.ready:
        return None
    since = health.ready_since
    if since is not None and now - since < NOT_READY_GRACE:
        return None
    return "NotReady" + _since(since, now) + _why(health.not_ready_reason)


def faulty(health: NodeHealth) -> bool:
    """Whether a tray weakens its NVLink domain: NotReady, or its fabric not healthy
    (docs/health.md#degraded-domains)."""
    return not health.ready or health.fabric is not Fabric.HEALTHY


def faulty_reason(health: NodeHealth, now: datetime | None = None) -> str:
    """Why a faulty tray weakens its NVLink domain (its fabric first, then NotReady)."""
    if health.fabric is not Fabric.HEALTHY:
        return f"NVLink fabric {health.fabric.value}" + _why(health.fabric_reason)
    return "NotReady" + _since(health.ready_since, now) + _why(health.not_ready_reason)


def drain_of(health: NodeHealth) -> Cordon | None:
    """The drain the node is under, if any."""
    cordon = health.cordon
    return cordon if cordon is not None and cordon.drain_grace_s is not None else None


def health_json(health: NodeHealth) -> dict[str, Any]:
    """``health`` as stored and answered (docs/health.md#the-audit)."""
    return {
        "ready": health.ready,
        "ready_since": health.ready_since.isoformat() if health.ready_since else None,
        "not_ready_reason": health.not_ready_reason,
        "cordoned": health.cordon is not None,
        "cordoned_by": health.cordon.by if health.cordon else "",
        "cordon_reason": health.cordon.reason if health.cordon else "",
        "drain_grace_s": health.cordon.drain_grace_s if health.cordon else None,
        "fabric": health.fabric.value,
        "fabric_reason": health.fabric_reason,
    }


def health_from_json(value: Mapping[str, Any]) -> NodeHealth:
    """The health :func:`health_json` wrote."""
    since = value.get("ready_since")
    return NodeHealth(
        ready=bool(value["ready"]),
        ready_since=datetime.fromisoformat(since) if since else None,
        not_ready_reason=str(value.get("not_ready_reason") or ""),
        cordon=(
            Cordon(
                str(value.get("cordoned_by") or ""),
                str(value.get("cordon_reason") or ""),
                _seconds(value.get("drain_grace_s")),
            )
            if value.get("cordoned")
            else None
        ),
        fabric=Fabric(value.get("fabric") or Fabric.HEALTHY.value),
        fabric_reason=str(value.get("fabric_reason") or ""),
    )


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def _since(since: datetime | None, now: datetime | None) -> str:
    """How long, when the clock is at hand; else since when (a reason kept for later)."""
    if since is None:
        return ""
    if now is None:
        return f" since {since.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    if now < since:
        return ""
    minutes = int((now - since).total_seconds() // 60)
    return f" for {minutes} min" if minutes else " for under a minute"


def _why(reason: str) -> str:
    return f" ({reason})" if reason else ""
