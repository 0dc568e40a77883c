"""``GET /api/pool/P/shapes`` and ``corral pool shapes``: the free shape of each finest
topology domain of a pool, from the capacity model (``services/capacity_model.py``) and the
stored forecast (``domain/views/pool_shapes.py``, docs/forecast.md#free-shapes)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from corral.domain.configs.snapshot import Configs
from corral.domain.views.pool_shapes import shapes_json
from corral.services.capacity import ClusterCapacity, cluster_of
from corral.services.capacity_model import pool_capacity
from corral.store.forecasts import ForecastStore


def pool_shapes(
    configs: Configs,
    clusters: Sequence[ClusterCapacity],
    forecasts: ForecastStore,
    pool: str,
    now: datetime,
    priority: str = "NORMAL",
) -> dict[str, Any]:
    """The shapes answer of ``pool`` (a configured pool the caller may use) for work of
    ``priority``."""
    keys = configs.pool(pool).topology_keys
    level = keys[-1].key if keys else ""
    cluster = cluster_of(clusters, pool)
    capacity = None if cluster is None else pool_capacity(configs, cluster, pool, priority=priority)
    whole_free = forecasts.whole_free(keys[-1].label) if keys else {}
    return shapes_json(pool, level, capacity, whole_free, now)
