"""Why a group's objects may not be created on a backend (``step.py`` fails the group with
these): RBAC rules corral's service account lacks, PriorityClasses the cluster lacks, and
errors of the cluster, retried while transient."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from corral.backends.port import BackendError, Rule, extra_rbac_rules_yaml
from corral.domain.topology import podgroup

log = structlog.get_logger("corral.lifecycle")

#: Ticks in a row a transient error may stop a group's objects from being created before the
#: group fails (a restart starts counting again).
MAX_CREATE_ATTEMPTS = 5


def creation_failure(failures: dict[str, int], group_uuid: str, err: BackendError) -> str | None:
    """Count a failure to create a group's objects (``failures``: per group, in a row); None
    while a transient error may be retried on the next ticks, else the message the group
    fails with."""
    attempts = failures.get(group_uuid, 0) + 1
    failures[group_uuid] = attempts
    log.warning(
        "creating a group's objects failed",
        group_uuid=group_uuid,
        attempt=attempts,
        transient=err.transient,
        error=err.message,
    )
    if err.transient and attempts < MAX_CREATE_ATTEMPTS:
        return None
    tries = f" after {attempts} attempts" if err.transient else ""
    return f"The cluster refused the group's objects{tries}: {err.message}"


def permission_message(backend: str, namespace: str, missing: Sequence[Rule]) -> str:
    """The error for missing RBAC permissions, with the rules to add
    (docs/osmo-reference.md#osmos-rbac-rules-for-extra-kinds)."""
    kinds = ", ".join(
        f"{'/'.join(r.api_groups) or 'core'} {'/'.join(r.resources)}" for r in missing
    )
    return (
        f"corral's service account on backend {backend} may not create, delete, list and "
        f"patch {kinds} in namespace {namespace}. Add these rules to its Role "
        f"(extraRBACRules; see docs/deploy.md#permissions):\n"
        f"{extra_rbac_rules_yaml(missing)}"
    )


def priority_class_message(backend: str, missing: Sequence[str]) -> str:
    """The error for PriorityClasses the cluster lacks (KAI would ignore the priority)."""
    names = ", ".join(missing)
    return (
        f"PriorityClass {names} does not exist on backend {backend}: KAI would schedule the "
        "group without its priority. Create corral's PriorityClasses: kubectl apply -f "
        "deploy/kubernetes/base/priorityclasses.yaml (docs/deploy.md#priority-classes)."
    )


def priority_classes(manifests: Sequence[Mapping[str, Any]]) -> list[str]:
    """The PriorityClasses the group's PodGroup and Pods name."""
    names = [
        str(manifest.get("spec", {}).get("priorityClassName") or "")
        for manifest in manifests
        if manifest["kind"] in (podgroup.KIND, "Pod")
    ]
    return sorted({name for name in names if name})
