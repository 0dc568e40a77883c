"""Nodes: which pool/platform a node belongs to, and what capacity a task can use on it.

docs/resource_validation.md, with Kubernetes' toleration semantics (an ``Exists`` toleration
without a key tolerates every taint) and exact quantities (``K8_CPU`` may be ``63.75``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from corral.domain.formats.quantities import format_cores, format_quantity, parse_quantity
from corral.domain.labels import CONTROL_CONTAINER
from corral.domain.platform.node_affinity import NO_AFFINITY, NodeAffinity
from corral.domain.platform.node_health import HEALTHY, NodeHealth
from corral.errors import UserError

#: The osmo-ctrl sidecar, whose requests are taken off every node's capacity.
#: Taints with this effect only discourage scheduling, so they never keep a node out.
SOFT_EFFECT = "PreferNoSchedule"
GPU_RESOURCE = "nvidia.com/gpu"
#: More GPUs than this on one node is a reporting mistake (and would not print as a number).
MAX_GPUS = 1_000_000


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True)
class Node:
    """A node as the backend reports it; ``allocatable`` holds Kubernetes quantity strings
    under ``cpu``, ``memory``, ``ephemeral-storage`` and ``nvidia.com/gpu`` (missing = 0)."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, str]
    #: Ready, cordoned, its fabric (``node_health.py``); what may go to the node now.
    health: NodeHealth = HEALTHY


@dataclass(frozen=True)
class Resources:
    """Requested resources: cores, bytes, bytes, GPUs."""

    cpu: Decimal
    memory: Decimal
    storage: Decimal
    gpu: int = 0


@dataclass(frozen=True)
class NodeCapacity:
    """What one task may use on an otherwise empty node (the ``K8_*`` values)."""

    name: str
    cpu: Decimal
    memory: Decimal
    storage: Decimal
    gpu: int


# ------------------------------------------------------------------------------- membership


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Whether ``toleration`` (a pod-spec toleration) tolerates ``taint``, as Kubernetes does."""
    if not isinstance(toleration, Mapping):
        raise UserError(
            f"a toleration must be an object with key, operator, value and effect, "
            f"not {toleration!r}; fix the pod template"
        )
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        # no key: tolerate everything (docs/osmo-reference.md#osmo-defects-corral-fixes)
        return not key or key == taint.key
    if operator == "Equal":
        return key == taint.key and (toleration.get("value") or "") == taint.value
    raise UserError(
        f"toleration operator {operator!r} is not supported; use Exists or Equal "
        "in the pod template's tolerations"
    )


def belongs_to(
    node: Node,
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]],
    affinity: NodeAffinity = NO_AFFINITY,
) -> bool:
    """Whether a pod with this nodeSelector, these tolerations and this node affinity may run
    on ``node``.

    Every selector label must be on the node with the same value (an empty selector matches
    every node, labelled or not), the required node affinity must match the node, and every
    taint other than ``PreferNoSchedule`` must be tolerated.
    """
    if any(node.labels.get(key) != value for key, value in node_selector.items()):
        return False
    if not affinity.allows(node.name, node.labels):
        return False
    return all(
        taint.effect == SOFT_EFFECT or any(tolerates(t, taint) for t in tolerations)
        for taint in node.taints
    )


# ---------------------------------------------------------------------------------- capacity

#: Assumed osmo-ctrl requests when the template gives none (OSMO's ``ResourceLimitations``).
DEFAULT_CONTROL = Resources(
    cpu=parse_quantity("250m"), memory=parse_quantity("1Gi"), storage=parse_quantity("3Gi")
)
#: Values for keys missing inside a ``requests`` that is given (docs/resource_validation.md).
_MISSING_REQUEST = {"cpu": "0", "memory": "0", "ephemeral-storage": "1Gi"}


def control_requests(pod_template: Mapping[str, Any]) -> Resources:
    """The requests of the ``osmo-ctrl`` container of a rendered pod template.

    OSMO's defaults apply when there is no such container or it has no requests; other
    request keys (claims, GPUs) are ignored.
    """
    found = _control_container(pod_template)
    if found is None:
        return DEFAULT_CONTROL
    index, container = found
    where = f"spec.containers[{index}].resources"
    resources = _mapping_or_none(container.get("resources"), where)
    requests = (
        _mapping_or_none(resources.get("requests"), f"{where}.requests") if resources else None
    )
    if requests is None:
        return DEFAULT_CONTROL
    values = {
        key: _request(_or(requests.get(key), default), f"{where}.requests.{key}")
        for key, default in _MISSING_REQUEST.items()
    }
    return Resources(
        cpu=values["cpu"], memory=values["memory"], storage=values["ephemeral-storage"]
    )


def _control_container(pod_template: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
    if not isinstance(pod_template, Mapping):
        raise UserError(f"a pod template must be an object, not {pod_template!r}")
    spec = _mapping_or_none(pod_template.get("spec"), "spec")
    containers = spec.get("containers") if spec else None
    if containers is None:
        return None
    if not isinstance(containers, list):
        raise UserError(f"spec.containers of the pod template must be a list, not {containers!r}")
    for index, container in enumerate(containers):
        if isinstance(container, Mapping) and container.get("name") == CONTROL_CONTAINER:
            return index, container
    return None


def _or(value: Any, default: str) -> Any:
    return default if value is None else value


def _mapping_or_none(value: Any, where: str) -> Mapping[str, Any] | None:
    if value is None or isinstance(value, Mapping):
        return value
    raise UserError(f"{where} of the pod template must be an object, not {value!r}")


def _request(value: Any, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise UserError(
            f"{where}: {value!r} is not a Kubernetes quantity; write a string such as "
            "'250m' or '1Gi' in the osmo-ctrl container of the pod template"
        )
    try:
        quantity = parse_quantity(str(value))
    except ValueError as err:
        raise UserError(
            f"{where}: {err}; fix the osmo-ctrl container of the pod template"
        ) from None
    if quantity < 0:
        raise UserError(f"{where}: {value!r} is negative; a request must be 0 or more")
    return quantity


def validation_capacity(node: Node, control: Resources) -> NodeCapacity:
    """The node's allocatable resources minus the control container's requests, at least 0.

    GPUs are not reduced: the control container uses none.
    """
    gpu = _allocatable(node, GPU_RESOURCE)
    if gpu != gpu.to_integral_value() or gpu > MAX_GPUS:
        raise UserError(
            f"node {node.name}: allocatable {GPU_RESOURCE} {node.allocatable[GPU_RESOURCE]!r} "
            f"is not a whole number of GPUs up to {MAX_GPUS}; check the node's device plugin"
        )
    return NodeCapacity(
        name=node.name,
        cpu=max(Decimal(0), _allocatable(node, "cpu") - control.cpu),
        memory=max(Decimal(0), _allocatable(node, "memory") - control.memory),
        storage=max(Decimal(0), _allocatable(node, "ephemeral-storage") - control.storage),
        gpu=max(0, int(gpu)),
    )


def _allocatable(node: Node, resource: str) -> Decimal:
    value: Any = node.allocatable.get(resource, "0")
    try:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"{value!r} is not a quantity")
        return parse_quantity(str(value))
    except ValueError as err:
        raise UserError(
            f"node {node.name}: allocatable {resource} is not a Kubernetes quantity ({err}); "
            "check what the backend reports for this node"
        ) from None


def node_variables(capacity: NodeCapacity) -> dict[str, str]:
    """The ``K8_*`` template variables of a node, for node resource-validation rules."""
    return {
        "K8_CPU": format_cores(capacity.cpu),
        "K8_GPU": str(capacity.gpu),
        "K8_MEMORY": format_quantity(capacity.memory),
        "K8_STORAGE": format_quantity(capacity.storage),
    }
