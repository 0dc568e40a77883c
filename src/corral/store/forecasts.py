"""The latest start-time forecasts (``forecasts``) and when each topology domain is next wholly
free (``domain_forecasts``): written whole by the controller after it forecasts, read by
explain, the queue and pool shapes (docs/forecast.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, insert, select

from corral.domain.formats.wire_time import as_utc
from corral.domain.views.start_forecast import GroupForecast
from corral.store.database import writing
from corral.store.forecast_records import ForecastRecords, record_published
from corral.store.tables import domain_forecasts, forecasts
from corral.store.workflows.records import utc


class ForecastStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        #: The forecasts published, and how good they were.
        self.records = ForecastRecords(engine)

    def replace(
        self,
        found: Sequence[GroupForecast],
        whole_free: Mapping[tuple[str, str], datetime | None] | None = None,
        computed_at: datetime | None = None,
    ) -> None:
        """Every waiting group's forecast is ``found``, and each domain's next wholly free
        moment ``whole_free`` (computed at ``computed_at``): the others are gone. With
        ``computed_at``, ``found`` is also recorded as published then
        (``store/forecast_records.py``)."""
        domains = [
            {"label": label, "value": value, "computed_at": computed_at, "free_at": free_at}
            for (label, value), free_at in (whole_free or {}).items()
            if len(label) <= LABEL_MAX and len(value) <= VALUE_MAX  # Kubernetes' own bounds
        ]
        with writing(self._engine) as connection:
            connection.execute(delete(forecasts))
            connection.execute(delete(domain_forecasts))
            if found:
                connection.execute(insert(forecasts), [asdict(f) for f in found])
            if domains and computed_at is not None:
                connection.execute(insert(domain_forecasts), domains)
            if computed_at is not None:
                record_published(connection, found, computed_at)

    def whole_free(self, label: str) -> dict[str, tuple[datetime | None, datetime]]:
        """Per value of the node label: when its domain is next wholly free (None: not within
        the horizon), and when that was computed."""
        query = select(domain_forecasts).where(domain_forecasts.c.label == label)
        with self._engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return {row["value"]: (utc(row["free_at"]), as_utc(row["computed_at"])) for row in rows}

    def every(self) -> dict[str, GroupForecast]:
        """Every stored forecast, by group uuid."""
        with self._engine.connect() as connection:
            rows = connection.execute(select(forecasts)).mappings().all()
        return {row["group_uuid"]: _record(dict(row)) for row in rows}

    def of_workflow(self, workflow_id: str) -> dict[str, GroupForecast]:
        """By group uuid."""
        query = select(forecasts).where(forecasts.c.workflow_id == workflow_id)
        with self._engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return {row["group_uuid"]: _record(dict(row)) for row in rows}


#: The longest node label key and value Kubernetes allows.
LABEL_MAX, VALUE_MAX = 317, 63


def _record(values: dict[str, Any]) -> GroupForecast:
    for key in ("computed_at", "p10", "p50", "p90", "waits_on_since"):
        values[key] = utc(values[key])
    return GroupForecast(**values)
