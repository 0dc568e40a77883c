"""OSMO's ``ResourcesEntry``: one node as ``GET /api/resources`` and ``/api/resources/{node}``
describe it to OSMO's CLI (docs/resources.md#the-wire-format).

OSMO's CLI reads ``exposed_fields`` (``node``, ``pool/platform``), ``resource_type``,
``allocatable_fields`` and ``usage_fields`` (memory and storage as quantities with a unit: it
takes a bare number for bytes), ``pool_platform_labels`` and ``config_fields``. corral's own
view of the node (:meth:`NodeResources.as_json`, :func:`node_info_json`) stands beside them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.domain.configs.models import Pool
from corral.domain.platform.nodes import Node
from corral.domain.views.resource_listing import RESOURCES, Amounts, PoolLayout

#: The resources OSMO states in GiB; the others are counts.
_IN_GIB = frozenset({"storage", "memory"})


def quantities(amounts: Amounts) -> dict[str, int | str]:
    """Amounts as OSMO's quantities: ``"850Gi"`` for memory and storage, counts as numbers."""
    return {
        name: f"{getattr(amounts, name)}Gi" if name in _IN_GIB else getattr(amounts, name)
        for name in RESOURCES
    }


def osmo_entry(
    node: Node,
    node_type: str,
    placements: Sequence[tuple[str, str]],
    amounts: tuple[Amounts, Amounts],
    pools: Mapping[str, Pool],
    layout: PoolLayout,
    backend: str,
) -> dict[str, Any]:
    """The node's ``ResourcesEntry`` under ``placements`` (its (pool, platform) rows);
    ``amounts`` is (capacity, used) in the table's units."""
    capacity, used = amounts
    by_pool: dict[str, list[str]] = {}
    for pool, platform in placements:
        by_pool.setdefault(pool, []).append(platform)
    allocatable = quantities(capacity)
    return {
        "hostname": node.name,
        "backend": backend,
        "resource_type": node_type,
        "exposed_fields": {
            "node": node.name,
            "pool/platform": [f"{pool}/{platform}" for pool, platform in placements],
            **capacity.as_json(),
        },
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints],
        "allocatable_fields": allocatable,
        "usage_fields": quantities(used),
        "non_workflow_usage_fields": {},
        "platform_allocatable_fields": {
            pool: dict.fromkeys(platforms, allocatable) for pool, platforms in by_pool.items()
        },
        "pool_platform_labels": by_pool,
        "config_fields": {
            pool: {
                platform: platform_settings(pools[pool], platform, layout) for platform in platforms
            }
            for pool, platforms in by_pool.items()
        },
        "label_fields": dict(node.labels),
    }


def platform_settings(pool: Pool, platform: str, layout: PoolLayout) -> dict[str, Any]:
    """What a task on the platform may do: OSMO's ``config_fields`` of one platform."""
    settings = pool.platforms[platform]
    return {
        "host_network": settings.host_network_allowed,
        "privileged": settings.privileged_allowed,
        "default_mounts": list(layout.default_mounts[pool.name][platform]),
        "allowed_mounts": list(settings.allowed_mounts),
    }
