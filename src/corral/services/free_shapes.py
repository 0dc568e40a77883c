"""``GET /api/pool/P/shapes`` and ``corral pool shapes``: the free shape of each finest
topology domain of a pool, from its cluster's nodes and pods and the stored forecast
(``domain/views/pool_shapes.py``, docs/forecast.md#free-shapes)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from corral.domain.configs.snapshot import Configs
from corral.domain.views.pool_shapes import NodeUse, domain_shapes, shapes_json
from corral.services.capacity import ClusterCapacity, cluster_of
from corral.services.pool_usage import layout_of, node_gpus
from corral.store.forecasts import ForecastStore


def pool_shapes(
    state: Configs,
    clusters: Sequence[ClusterCapacity],
    forecasts: ForecastStore,
    pool: str,
    now: datetime,
) -> dict[str, Any]:
    """The shapes answer of ``pool`` (a configured pool the caller may use)."""
    keys = state.pool(pool).topology_keys
    level, label = (keys[-1].key, keys[-1].label) if keys else ("", "")
    cluster = cluster_of(clusters, pool)
    if cluster is None:
        return shapes_json(pool, level, label, [], now)
    layout = layout_of(state, cluster.nodes, [pool])
    nodes = [node for node in cluster.nodes if pool in layout.pools_of(node.name)]
    used: dict[str, NodeUse] = {}
    for pod in cluster.pods:
        before = used.get(pod.node, NodeUse(0, 0))
        used[pod.node] = NodeUse(before.gpus + pod.demand.gpu, before.pods + 1)
    whole_free = forecasts.whole_free(label) if label else {}
    shapes = domain_shapes(nodes, label, node_gpus(cluster.nodes), used, whole_free, now)
    return shapes_json(pool, level, label, shapes, now)
