"""What a pod and its PodGroup, as the API server reports them, mean for a task: where it runs,
how it ended, and why a group still waits (KAI's unschedulable reasons,
docs/osmo-reference.md#kais-topology-and-gang-semantics).

Pure functions over the objects' dictionaries, so every mapping is testable without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.backends.execution import Exit
from corral.domain.labels import CONTROL_CONTAINER

#: The pod failed without its task container ending (evicted, node lost, deleted): the task
#: never reported a code of its own.
POD_FAILED_CODE = 3002
POD_DELETED_CODE = 3003


def node_of(pod: Mapping[str, Any]) -> str | None:
    """The node the scheduler bound ``pod`` to, if any."""
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def pod_exit(pod: Mapping[str, Any]) -> Exit | None:
    """How the pod's task ended, or None while it has not."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    terminated = _task_container_termination(status)
    if terminated is not None and phase in ("Succeeded", "Failed"):
        code = int(terminated.get("exitCode", 0))
        reason = str(terminated.get("reason") or "")
        message = str(terminated.get("message") or "")
        detail = ": ".join(part for part in (reason, message) if part and reason != "Completed")
        return Exit(code, detail)
    if phase == "Failed":
        why = ": ".join(str(p) for p in (status.get("reason"), status.get("message")) if p)
        return Exit(
            POD_FAILED_CODE, f"The pod failed before its task ended ({why or 'no reason'})."
        )
    return None


def deleted_exit() -> Exit:
    return Exit(POD_DELETED_CODE, "The pod was deleted outside corral before its task ended.")


def _task_container_termination(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for container in status.get("containerStatuses") or []:
        if container.get("name") == CONTROL_CONTAINER:
            continue
        terminated = (container.get("state") or {}).get("terminated")
        if terminated is not None:
            return dict(terminated)
    return None


def pending_reason(
    pod_group: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why the group is not scheduled yet, in the scheduler's words: the PodGroup's newest
    scheduling condition (KAI), else the first pod's ``PodScheduled=False`` message."""
    conditions = ((pod_group or {}).get("status") or {}).get("schedulingConditions") or []
    if conditions:
        newest = max(conditions, key=lambda c: str(c.get("lastTransitionTime") or ""))
        reasons = [str(r.get("message") or r.get("reason")) for r in newest.get("reasons") or []]
        text = "; ".join(r for r in reasons if r) or str(newest.get("message") or "")
        if text:
            return text
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                message = condition.get("message") or condition.get("reason")
                if message:
                    return str(message)
    return None
