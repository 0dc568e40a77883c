"""``pool shapes``: an ``sinfo`` for NVLink racks (docs/forecast.md#free-shapes). Per domain of
the pool's finest topology level (a clique, a rack): its trays healthy, open, idle and in all,
the largest gang of whole-node tasks the scheduler would place there now (the pool's quota and
the NVLink fabric included: ``domain/views/capacity.py``), what the nodes alone would hold, and
when it is next wholly free: now only if a gang of one task per tray that requires it would be
placed now, else when the latest forecast says its trays are next all free (not known when
the pool's quota can never hold such a gang at this priority)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from corral.domain.formats.wire_time import optional_wire_time, wire_time
from corral.domain.views.capacity import DomainCapacity, PoolCapacity, fits_words


def shapes_json(
    pool: str,
    level: str,
    capacity: PoolCapacity | None,
    whole_free: Mapping[str, tuple[datetime | None, datetime]],
    now: datetime,
) -> dict[str, Any]:
    """The answer of ``GET /api/pool/P/shapes``: the domains, and the pool's summary;
    ``whole_free``: the stored forecast's moment each domain is next wholly free (by its label
    value), and when it was computed."""
    domains = (
        []
        if capacity is None
        else [_domain(d, capacity, whole_free, now) for d in capacity.domains]
    )
    upcoming = [read for d in domains if (read := d["whole_free_at"]) is not None]
    quota = capacity.quota if capacity is not None else None
    return {
        "pool": pool,
        "at": wire_time(now),
        "level": level,
        "label": capacity.level if capacity is not None else "",
        "priority": quota.priority if quota is not None else "NORMAL",
        "quota": quota.words() if quota is not None else "",
        "largest_gang": capacity.largest_gang if capacity is not None else 0,
        "largest_physically": max((d["physical"] for d in domains), default=0),
        "next_whole_free": min(upcoming, default=None),
        "domains": domains,
    }


def _domain(
    domain: DomainCapacity,
    capacity: PoolCapacity,
    whole_free: Mapping[str, tuple[datetime | None, datetime]],
    now: datetime,
) -> dict[str, Any]:
    ceiling = capacity.quota.ceiling
    ever = ceiling is None or domain.trays * domain.task_gpus <= ceiling
    forecast = None if domain.whole_free or not ever else whole_free.get(domain.domain)
    if forecast is not None and forecast[0] is not None and forecast[0] <= now:
        forecast = None  # past its moment and still not placeable whole: not known
    return {
        "domain": domain.domain,
        "trays": domain.trays,
        "healthy": domain.healthy,
        "open": domain.open,
        "free": domain.idle,
        "gpus": domain.gpus,
        "free_gpus": domain.free_gpus,
        "task_gpus": domain.task_gpus,
        "physical": domain.physical,
        "largest_gang": domain.fits,
        "fits": fits_words(domain, capacity.quota),
        "whole_free_at": wire_time(now)
        if domain.whole_free
        else (optional_wire_time(forecast[0]) if forecast else None),
        "forecast_at": optional_wire_time(forecast[1]) if forecast else None,
    }
