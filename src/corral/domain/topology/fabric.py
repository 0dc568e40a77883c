"""Which topology level holds a pool's NVLink domains, and whether a gang that must share one
may use a domain whose fabric is degraded (docs/health.md#degraded-domains)."""

from __future__ import annotations

from dataclasses import dataclass

from corral.domain.configs.models import Pool

#: GPU Feature Discovery's label of a node's NVLink clique (its NVL72 rack's IMEX domain).
GFD_CLIQUE_LABEL = "nvidia.com/gpu.clique"


@dataclass(frozen=True)
class FabricRule:
    #: The node label of the pool's NVLink level (None: the pool has none).
    nvlink_label: str | None = None
    #: A gang may use an NVLink domain with a faulty tray, on its open trays.
    partial_domains: bool = False


NO_FABRIC_RULE = FabricRule()


def fabric_rule(pool: Pool) -> FabricRule:
    labels = {entry.key: entry.label for entry in pool.topology_keys}
    chosen = pool.fabric.nvlink_key
    if chosen:
        label: str | None = labels[chosen]
    else:
        label = GFD_CLIQUE_LABEL if GFD_CLIQUE_LABEL in labels.values() else None
    return FabricRule(label, pool.fabric.partial_domains)
