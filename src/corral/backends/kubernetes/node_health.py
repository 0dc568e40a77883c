"""A Kubernetes Node's health (docs/health.md#on-kubernetes): ``spec.unschedulable`` (with who and
why when corral cordoned it), the ``Ready`` condition, the backend's ``node_conditions`` rules
(OSMO's config), and the IMEX status the NVIDIA DRA driver writes on each ComputeDomain.

A ComputeDomain lists each of its nodes with ``status`` Ready or NotReady (its IMEX daemon). A
domain still NotReady :data:`COMPUTE_DOMAIN_GRACE` after it was made never became Ready: its
NotReady nodes' fabric counts as failed, so no new NVLink gang is placed there and what runs
there ends (docs/health.md#running-work).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from corral.domain.platform.node_health import Cordon, Fabric, NodeHealth

#: Annotations corral writes on a Node it cordons or drains: who, why, a drain's grace.
CORDONED_BY = "corral.dev/cordoned-by"
CORDON_REASON = "corral.dev/cordon-reason"
DRAIN_GRACE = "corral.dev/drain-grace-seconds"
COMPUTE_DOMAIN = ("resource.nvidia.com/v1beta1", "ComputeDomain")
#: How long a ComputeDomain may stay NotReady after it is made (its IMEX daemons starting).
COMPUTE_DOMAIN_GRACE = timedelta(minutes=5)


def node_health(
    item: Mapping[str, Any], rules: Mapping[str, str], imex_failures: Mapping[str, str]
) -> NodeHealth:
    """The health of Node ``item``. ``rules``: condition type -> the statuses (``|``-separated)
    a healthy node has; ``imex_failures``: node name -> why its fabric failed."""
    metadata = item.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    conditions = [
        c for c in (item.get("status") or {}).get("conditions") or [] if isinstance(c, dict)
    ]
    ready, since, why = _ready(conditions, rules)
    failure = imex_failures.get(str(metadata.get("name")))
    return NodeHealth(
        ready=ready,
        ready_since=since,
        not_ready_reason=why,
        cordon=_cordon(item.get("spec") or {}, annotations),
        fabric=Fabric.FAILED if failure else Fabric.HEALTHY,
        fabric_reason=failure or "",
    )


def imex_failures(
    domains: Iterable[Mapping[str, Any]], now: datetime, grace: timedelta = COMPUTE_DOMAIN_GRACE
) -> dict[str, str]:
    """Node -> why its fabric failed, from the ComputeDomains still NotReady ``grace`` after
    they were made."""
    failed: dict[str, str] = {}
    for domain in domains:
        status = domain.get("status") or {}
        made = _time((domain.get("metadata") or {}).get("creationTimestamp"))
        if status.get("status") == "Ready" or made is None or now - made < grace:
            continue
        name = f"{domain['metadata'].get('namespace', '')}/{domain['metadata'].get('name', '')}"
        for node in status.get("nodes") or []:
            if isinstance(node, dict) and node.get("status", "NotReady") != "Ready":
                failed.setdefault(
                    str(node.get("name")), f"ComputeDomain {name}: IMEX daemon NotReady"
                )
    return failed


def cordon_patch(cordon: Cordon | None) -> dict[str, Any]:
    """The merge patch that cordons (or drains) a Node, or uncordons it (``kubectl cordon``
    sets the same field; the annotations say who and why)."""
    annotations: dict[str, str | None] = {CORDONED_BY: None, CORDON_REASON: None, DRAIN_GRACE: None}
    if cordon is not None:
        annotations[CORDONED_BY] = cordon.by
        annotations[CORDON_REASON] = cordon.reason
        if cordon.drain_grace_s is not None:
            annotations[DRAIN_GRACE] = f"{cordon.drain_grace_s:g}"
    return {
        "metadata": {"annotations": annotations},
        "spec": {"unschedulable": True if cordon is not None else None},
    }


def _cordon(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> Cordon | None:
    if not spec.get("unschedulable"):
        return None
    grace = annotations.get(DRAIN_GRACE)
    try:
        drain = float(grace) if grace is not None else None
    except ValueError:
        drain = None
    return Cordon(
        str(annotations.get(CORDONED_BY) or ""), str(annotations.get(CORDON_REASON) or ""), drain
    )


def _ready(
    conditions: list[dict[str, Any]], rules: Mapping[str, str]
) -> tuple[bool, datetime | None, str]:
    """Not Ready when the Ready condition is not True, or a rule's condition has a status the
    rule does not allow (the first such, by condition order)."""
    for condition in conditions:
        kind, status = condition.get("type"), str(condition.get("status"))
        wanted = "True" if kind == "Ready" else rules.get(str(kind))
        if wanted is None or status in wanted.split("|"):
            continue
        why = " ".join(str(condition.get(key) or "") for key in ("reason", "message")).strip()
        if kind != "Ready":
            why = f"condition {kind} is {status} (node_conditions wants {wanted})" + (
                f": {why}" if why else ""
            )
        return False, _time(condition.get("lastTransitionTime")), why
    return True, None, ""


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        found = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return found if found.tzinfo else found.replace(tzinfo=UTC)
