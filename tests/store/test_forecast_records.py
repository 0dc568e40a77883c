"""The record of published forecasts (``store/forecast_records.py``), on both databases: what
is recorded when, which start each record takes, what is dropped and what is kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, insert, update

from corral.domain.views.forecast_accuracy import PoolAccuracy, Refresh
from corral.domain.views.start_forecast import GroupForecast
from corral.store.forecast_records import REFRESHES_KEPT, STARTS_KEPT
from corral.store.forecasts import ForecastStore
from corral.store.tables import workflow_groups
from tests.store.rows import insert_workflow

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def minutes(n: float) -> datetime:
    return NOW + timedelta(minutes=n)


def groups(engine: Engine, names: list[str]) -> None:
    """Waiting groups of one workflow."""
    with engine.begin() as connection:
        insert_workflow(connection, NOW)
        rows = [
            {
                "group_uuid": name,
                "workflow_id": "w-1",
                "position": n,
                "name": name,
                "status": "SCHEDULING",
                "upstream": [],
                "resource_kinds": [],
                "manifests": [],
            }
            for n, name in enumerate(names)
        ]
        connection.execute(insert(workflow_groups), rows)


def set_group(engine: Engine, name: str, **values: object) -> None:
    with engine.begin() as connection:
        where = workflow_groups.c.group_uuid == name
        connection.execute(update(workflow_groups).where(where).values(**values))


def forecast(name: str, at: datetime, median_min: float, pool: str = "p") -> GroupForecast:
    """A band from half to twice the median wait."""
    return GroupForecast(
        group_uuid=name,
        workflow_id="w-1",
        computed_at=at,
        p10=at + timedelta(minutes=median_min / 2),
        p50=at + timedelta(minutes=median_min),
        p90=at + timedelta(minutes=median_min * 2),
        queue=pool,
        queue_position=1,
        position=1,
    )


def test_a_group_is_recorded_first_then_every_ten_minutes_or_an_eighth_of_its_wait(
    engine: Engine,
) -> None:
    store = ForecastStore(engine)
    groups(engine, ["a"])
    # Each refresh 5 minutes after the last, for 3 hours: recorded at 0, 10, 20, ... 80 min;
    # past 80 min an eighth of the wait so far is longer than 10 minutes.
    for n in range(0, 181, 5):
        store.replace([forecast("a", minutes(n), 30)], computed_at=minutes(n))
    set_group(engine, "a", status="RUNNING", started_at=minutes(181))
    store.replace([], computed_at=minutes(182))
    published = sorted(o.published_at for o in store.records.outcomes())
    assert [int((at - NOW).total_seconds() // 60) for at in published] == [
        *range(0, 81, 10),
        95,
        110,
        130,
        150,
        175,
    ]


def test_records_take_the_start_that_followed_them(engine: Engine) -> None:
    store = ForecastStore(engine)
    groups(engine, ["on-time", "late", "canceled", "placed"])
    names = ["on-time", "late", "canceled", "placed"]
    store.replace([forecast(n, NOW, 30) for n in names], computed_at=NOW)
    set_group(engine, "on-time", status="RUNNING", started_at=minutes(20))
    set_group(engine, "late", status="RUNNING", started_at=minutes(90))
    set_group(engine, "canceled", status="FAILED_CANCELED", ended_at=minutes(5))
    set_group(engine, "placed", status="PROCESSING")  # bound, its tasks not started yet
    store.replace([], computed_at=minutes(91))
    found = {o.group: o for o in store.records.outcomes()}
    assert sorted(found) == ["late", "on-time"]
    assert found["on-time"].held and found["on-time"].error == 10 / 20
    assert not found["late"].held and found["late"].error == 60 / 90
    set_group(engine, "placed", status="RUNNING", started_at=minutes(95))
    store.replace([], computed_at=minutes(96))
    assert [o.group for o in store.records.outcomes()] == ["placed", "late", "on-time"]
    assert store.records.accuracy() == [PoolAccuracy("p", 3, 3, 1 / 3, 60 / 90)]


def test_each_pool_keeps_the_records_of_its_latest_starts(engine: Engine) -> None:
    store = ForecastStore(engine)
    names = [f"g{n:03d}" for n in range(STARTS_KEPT + 5)]
    groups(engine, [*names, "other"])
    found = [forecast(n, NOW, 30) for n in names] + [forecast("other", NOW, 30, pool="q")]
    store.replace(found, computed_at=NOW)
    for n, name in enumerate(names):
        set_group(engine, name, status="RUNNING", started_at=minutes(1 + n / 100))
    set_group(engine, "other", status="RUNNING", started_at=minutes(20))
    store.replace([], computed_at=minutes(21))
    kept = store.records.outcomes()
    assert len(kept) == STARTS_KEPT + 1
    assert {o.group for o in kept if o.pool == "p"} == set(names[5:])  # the 5 oldest dropped
    assert [a.pool for a in store.records.accuracy()] == ["p", "q"]
    assert store.records.accuracy(["q"]) == [PoolAccuracy("q", 1, 1, 1.0, 0.5)]


def test_the_latest_refreshes_are_kept_with_their_cost(engine: Engine) -> None:
    records = ForecastStore(engine).records
    for n in range(REFRESHES_KEPT + 3):
        records.note_refresh(Refresh(minutes(n), 10, 6.0, 7.5))
    kept = records.refreshes()
    assert len(kept) == REFRESHES_KEPT
    assert kept[0] == Refresh(minutes(3), 10, 6.0, 7.5)
    assert kept[-1].computed_at == minutes(REFRESHES_KEPT + 2)
