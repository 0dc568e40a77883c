"""The queue view (docs/forecast.md#the-queue): admission order from the forecast, groups not
forecast yet after, and groups the caller may not read as opaque entries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from corral.domain.formats.wire_time import wire_time
from corral.domain.views.queue import queue_entries, start_text
from corral.domain.views.start_forecast import GroupForecast
from tests.domain.views.test_explain_workflow import group, task, workflow

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def forecast_for(uuid: str, position: int) -> GroupForecast:
    return GroupForecast(uuid, "w", NOW, NOW, NOW, NOW, "p", position, position)


def test_order_and_opaque_entries() -> None:
    mine = workflow(
        "PENDING", group("a", "SCHEDULING", [task("t", "SCHEDULING")], scheduling_at=NOW)
    )
    theirs = workflow(
        "PENDING",
        group("b", "SCHEDULING", [task("t", "SCHEDULING")], scheduling_at=NOW),
        workflow_id="theirs-1",
        submitted_by="bob",
    )
    late = workflow(
        "PENDING",
        group("c", "SCHEDULING", [task("t", "SCHEDULING")], scheduling_at=NOW),
        workflow_id="late-1",
    )
    forecasts = {"b-uuid": forecast_for("b-uuid", 1), "a-uuid": forecast_for("a-uuid", 2)}
    found = queue_entries(
        [mine, theirs, late], forecasts, lambda w: w.submitted_by != "bob", NOW + timedelta(60)
    )
    assert found[0] == {"position": 1, "hidden": True}
    assert [(e["position"], e.get("group")) for e in found] == [(1, None), (2, "a"), (None, "c")]
    only_bob = queue_entries(
        [mine, theirs], forecasts, lambda w: w.submitted_by != "bob", NOW, users=["bob"]
    )
    assert only_bob == []  # an opaque entry would say that bob waits


def entry(p10: float, p50: float, p90: float | None, age: float, timeouts: bool = False) -> dict:
    def at(minutes: float) -> str:
        return wire_time(NOW + timedelta(minutes=minutes))

    return {
        "p10": at(p10),
        "p50": at(p50),
        "p90": None if p90 is None else at(p90),
        "forecast_at": at(-age),
        "on_timeouts": timeouts,
    }


def test_the_start_reads_from_now_with_its_band_age_or_unknown() -> None:
    assert start_text(entry(25, 40, 90, age=1), NOW) == "~40 min (25 min - 1 h 30 min)"
    assert start_text(entry(-5, 40, None, age=1), NOW) == "~40 min (now - over 7 d)"
    assert start_text(entry(25, 40, 90, age=5, timeouts=True), NOW) == (
        "unknown (at the latest 1 h 30 min), 5 min old"
    )
    assert start_text({"forecast_at": None}, NOW) == "-"
