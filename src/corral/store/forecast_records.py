"""The forecasts corral published, kept until their group starts (docs/forecast.md#accuracy),
and what each refresh cost.

Written in the transaction that publishes a forecast (``ForecastStore.replace``): a group's
forecast is recorded when first published, then again once :data:`RECORD_EVERY_S` or an eighth
of its wait so far has passed, whichever is longer (a group waiting a week has about 60
records, not 20,000). When a group no longer waits, its open records take its start; those of
a group that ended without starting are dropped. Per pool, the records of its latest
:data:`STARTS_KEPT` starts are kept: what its accuracy is over, and (the latest
``OUTCOMES``) what calibrates the next bands.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, delete, func, insert, select, update

from corral.domain.formats.wire_time import as_utc
from corral.domain.views.forecast_accuracy import (
    Outcome,
    PoolAccuracy,
    Refresh,
    accuracy_by_pool,
)
from corral.domain.views.start_forecast import GroupForecast
from corral.store.database import writing
from corral.store.tables import forecast_records, forecast_refreshes, workflow_groups
from corral.store.workflows.records import utc
from corral.store.workflows.writes import CHUNK

RECORD_EVERY_S = 600.0
STARTS_KEPT = 200
#: The latest refreshes whose cost is kept.
REFRESHES_KEPT = 100


def record_published(connection: Connection, found: Sequence[GroupForecast], at: datetime) -> None:
    """Record each group's forecast that is due, and resolve the groups no longer waiting."""
    rows = select(
        forecast_records.c.group_uuid,
        func.min(forecast_records.c.published_at),
        func.max(forecast_records.c.published_at),
    ).where(forecast_records.c.started_at.is_(None))
    open_since = {
        uuid: (as_utc(first), as_utc(last))
        for uuid, first, last in connection.execute(rows.group_by(forecast_records.c.group_uuid))
    }
    due = [f for f in found if _due(open_since.get(f.group_uuid), at)]
    if due:
        connection.execute(insert(forecast_records), [_row(forecast, at) for forecast in due])
    waiting = {forecast.group_uuid for forecast in found}
    gone = sorted(set(open_since) - waiting)
    for start in range(0, len(gone), CHUNK):
        _resolve(connection, gone[start : start + CHUNK])
    if gone:
        _prune(connection)


def _due(since: tuple[datetime, datetime] | None, at: datetime) -> bool:
    if since is None:
        return True
    first, last = since
    return (at - last).total_seconds() >= max(RECORD_EVERY_S, (at - first).total_seconds() / 8)


def _row(forecast: GroupForecast, at: datetime) -> dict[str, Any]:
    return {
        "group_uuid": forecast.group_uuid,
        "published_at": at,
        "pool": forecast.queue,
        "p10": forecast.p10,
        "p50": forecast.p50,
        "p90": forecast.p90,
        "unknown": forecast.on_timeouts,
        "started_at": None,
    }


def _resolve(connection: Connection, groups: Sequence[str]) -> None:
    """Open records of ``groups`` (no longer waiting) take the group's start after them; those
    of a group that ended, or is gone, without one are dropped. A group placed but not yet
    started keeps its records open."""
    query = select(
        workflow_groups.c.group_uuid, workflow_groups.c.started_at, workflow_groups.c.ended_at
    ).where(workflow_groups.c.group_uuid.in_(groups))
    found = {uuid: (utc(started), ended) for uuid, started, ended in connection.execute(query)}
    starts = [
        {"uuid": uuid, "start": started}
        for uuid, (started, _) in found.items()
        if started is not None
    ]
    if starts:
        records = forecast_records.c
        connection.execute(
            update(forecast_records)
            .where(
                records.group_uuid == bindparam("uuid"),
                records.started_at.is_(None),
                records.published_at <= bindparam("start"),
            )
            .values(started_at=bindparam("start")),
            starts,
        )
    pending = {uuid for uuid, (started, ended) in found.items() if started is None and not ended}
    dropped = [uuid for uuid in groups if uuid not in pending]
    connection.execute(
        delete(forecast_records).where(
            forecast_records.c.group_uuid.in_(dropped), forecast_records.c.started_at.is_(None)
        )
    )


def _prune(connection: Connection) -> None:
    """Drop the records of each pool's starts older than its latest :data:`STARTS_KEPT`."""
    records = forecast_records.c
    query = (
        select(records.pool, records.group_uuid, func.max(records.started_at))
        .where(records.started_at.is_not(None))
        .group_by(records.pool, records.group_uuid)
    )
    by_pool: dict[str, list[tuple[datetime, str]]] = defaultdict(list)
    for pool, uuid, started in connection.execute(query):
        by_pool[pool].append((started, uuid))
    old = [uuid for starts in by_pool.values() for _, uuid in sorted(starts)[:-STARTS_KEPT]]
    for start in range(0, len(old), CHUNK):
        chunk = old[start : start + CHUNK]
        connection.execute(delete(forecast_records).where(records.group_uuid.in_(chunk)))


class ForecastRecords:
    """Reads the record; the controller notes each refresh's cost."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def outcomes(self, pools: Collection[str] = (), limit: int | None = None) -> list[Outcome]:
        """The kept forecasts whose group has started, latest start first (the latest
        ``limit``)."""
        records = forecast_records.c
        query = select(forecast_records).where(records.started_at.is_not(None))
        if pools:
            query = query.where(records.pool.in_(pools))
        query = query.order_by(records.started_at.desc(), records.published_at.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return [_outcome(row) for row in rows]

    def accuracy(self, pools: Collection[str] = ()) -> list[PoolAccuracy]:
        return accuracy_by_pool(self.outcomes(pools))

    def note_refresh(self, refresh: Refresh) -> None:
        """Keep what a refresh cost (the latest :data:`REFRESHES_KEPT`)."""
        with writing(self._engine) as connection:
            connection.execute(insert(forecast_refreshes), [refresh.__dict__])
            kept = (
                select(forecast_refreshes.c.computed_at)
                .order_by(forecast_refreshes.c.computed_at.desc())
                .limit(REFRESHES_KEPT)
            )
            oldest = min(as_utc(at) for (at,) in connection.execute(kept))
            connection.execute(
                delete(forecast_refreshes).where(forecast_refreshes.c.computed_at < oldest)
            )

    def refreshes(self) -> list[Refresh]:
        """The kept refreshes, oldest first."""
        query = select(forecast_refreshes).order_by(forecast_refreshes.c.computed_at)
        with self._engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return [
            Refresh(
                as_utc(row["computed_at"]), row["groups"], row["cpu_seconds"], row["wall_seconds"]
            )
            for row in rows
        ]


def _outcome(row: Any) -> Outcome:
    return Outcome(
        pool=row["pool"],
        group=row["group_uuid"],
        published_at=as_utc(row["published_at"]),
        p10=utc(row["p10"]),
        p50=utc(row["p50"]),
        p90=utc(row["p90"]),
        unknown=row["unknown"],
        started_at=as_utc(row["started_at"]),
    )
