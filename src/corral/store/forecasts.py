"""The latest start-time forecasts (``forecasts``): written whole by the controller after it
forecasts, read by explain (docs/forecast.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sqlalchemy import Engine, delete, insert, select

from corral.domain.views.start_forecast import GroupForecast
from corral.store.database import writing
from corral.store.tables import forecasts
from corral.store.workflows.records import utc


class ForecastStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def replace(self, found: Sequence[GroupForecast]) -> None:
        """Every waiting group's forecast is ``found``: the others are gone."""
        with writing(self._engine) as connection:
            connection.execute(delete(forecasts))
            if found:
                connection.execute(insert(forecasts), [asdict(f) for f in found])

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


def _record(values: dict[str, Any]) -> GroupForecast:
    for key in ("computed_at", "p10", "p50", "p90"):
        values[key] = utc(values[key])
    return GroupForecast(**values)
