"""Resource amounts as integers at Kubernetes' own precision, and pod requests from manifests.

Kubernetes keeps CPU in millicores and memory/storage in whole bytes (it rounds finer requests
up), so corral does the same: exact integers make fit tests cheap and never drift when the same
amount is bound and released many times. Requests round up and capacities round down, so a
placement is never optimistic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from corral.domain.formats.quantities import parse_quantity

GPU = "nvidia.com/gpu"
CPU = "cpu"
MEMORY = "memory"
STORAGE = "ephemeral-storage"
PODS = "pods"
SCHEDULED_RESOURCES = (GPU, CPU, MEMORY, STORAGE)
#: What a node that does not state its ``pods`` allocatable may hold: no limit.
UNLIMITED_PODS = 1 << 40

#: Extended resources (``nvidia.com/mig-1g.10gb``, ``rdma/ib``, ``hugepages-2Mi``): name ->
#: amount, sorted by name; empty for almost every pod.
Extended = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Demand:
    """GPUs, millicores, bytes of memory, bytes of ephemeral storage, pods, and any other
    resource a pod requests (whole units; a node without it has none)."""

    gpu: int = 0
    cpu: int = 0
    memory: int = 0
    storage: int = 0
    pods: int = 0
    extended: Extended = ()

    def __add__(self, other: Demand) -> Demand:
        return Demand(
            self.gpu + other.gpu,
            self.cpu + other.cpu,
            self.memory + other.memory,
            self.storage + other.storage,
            self.pods + other.pods,
            _combine(self.extended, other.extended, sum) if other.extended else self.extended,
        )

    def max(self, other: Demand) -> Demand:
        return Demand(
            max(self.gpu, other.gpu),
            max(self.cpu, other.cpu),
            max(self.memory, other.memory),
            max(self.storage, other.storage),
            max(self.pods, other.pods),
            _combine(self.extended, other.extended, max) if other.extended else self.extended,
        )


def _combine(left: Extended, right: Extended, how: Any) -> Extended:
    names = {name for name, _ in left} | {name for name, _ in right}
    first, second = dict(left), dict(right)
    return tuple((name, how((first.get(name, 0), second.get(name, 0)))) for name in sorted(names))


def _scale(resource: str) -> int:
    return 1000 if resource == CPU else 1


@lru_cache(maxsize=4096)
def _amount(text: str, resource: str, round_up: bool) -> int:
    value = parse_quantity(text) * _scale(resource)
    if value < 0:
        raise ValueError(f"{resource} {text!r} is negative")
    return math.ceil(value) if round_up else math.floor(value)


def amount(value: Any, resource: str, *, round_up: bool) -> int:
    """``value`` (a quantity string or number) in the resource's integer unit."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise ValueError(f"{resource} {value!r} is not a Kubernetes quantity")
    return _amount(str(value), resource, round_up)


def capacity(allocatable: Mapping[str, Any]) -> Demand:
    """A node's allocatable resources (missing = 0, but ``pods``: no limit), rounded down."""
    values = {
        resource: amount(allocatable.get(resource, "0"), resource, round_up=False)
        for resource in SCHEDULED_RESOURCES
    }
    pods = allocatable.get(PODS)
    extended = tuple(
        sorted(
            (str(name), amount(value, str(name), round_up=False))
            for name, value in allocatable.items()
            if _is_extended(str(name))
        )
    )
    return Demand(
        values[GPU],
        values[CPU],
        values[MEMORY],
        values[STORAGE],
        UNLIMITED_PODS if pods is None else amount(pods, PODS, round_up=False),
        extended,
    )


def _is_extended(resource: str) -> bool:
    return resource not in SCHEDULED_RESOURCES and resource != PODS


def _container_demand(container: Mapping[str, Any]) -> Demand:
    """A container's requests; a resource with only a limit requests its limit (Kubernetes)."""
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    values = {}
    for resource in SCHEDULED_RESOURCES:
        value = requests.get(resource)
        if value is None:
            value = limits.get(resource, 0)
        values[resource] = amount(value, resource, round_up=True)
    names = sorted({str(name) for name in (*requests, *limits) if _is_extended(str(name))})
    extended = tuple(
        (name, amount(requests.get(name, limits.get(name)), name, round_up=True)) for name in names
    )
    return Demand(values[GPU], values[CPU], values[MEMORY], values[STORAGE], 0, extended)


def pod_demand(pod_spec: Mapping[str, Any]) -> Demand:
    """What a pod needs on its node: the sum of its containers, or its largest init container
    when that is bigger (init containers run one at a time, before the others), and one of
    the node's ``pods``."""
    total = Demand(pods=1)
    for container in _containers(pod_spec, "containers"):
        total = total + _container_demand(container)
    for container in _containers(pod_spec, "initContainers"):
        total = total.max(_container_demand(container))
    return total


def _containers(pod_spec: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    containers = pod_spec.get(key) or []
    if not isinstance(containers, list):
        raise ValueError(f"spec.{key} must be a list")
    return containers


def describe(demand: Demand) -> str:
    """``4 GPUs``, ``1 GPU`` or, for CPU-only pods, ``2 CPUs``, as a user would say it."""
    if demand.gpu:
        return f"{demand.gpu} GPU" + ("s" if demand.gpu != 1 else "")
    cores = Decimal(demand.cpu) / 1000
    text = format(cores.normalize(), "f")
    return f"{text} CPU" + ("" if cores == 1 else "s")
