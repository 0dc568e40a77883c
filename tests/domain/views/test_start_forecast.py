"""A waiting group's forecast in words (docs/forecast.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from corral.domain.views.start_forecast import GroupForecast, forecast_text

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def forecast(**fields: object) -> GroupForecast:
    values: dict[str, object] = {
        "group_uuid": "g",
        "workflow_id": "wf-3",
        "computed_at": NOW,
        "p10": NOW + timedelta(minutes=25),
        "p50": NOW + timedelta(minutes=40),
        "p90": NOW + timedelta(minutes=90),
        "queue": "nvl72",
        "queue_position": 3,
        "position": 3,
        **fields,
    }
    return GroupForecast(**values)  # type: ignore[arg-type]


def test_the_band_and_what_it_waits_on() -> None:
    assert forecast_text(forecast(waits_on="wf-1"), NOW) == (
        "position 3 in queue nvl72; starts in ~40 min (80%: 25 min - 1 h 30 min), "
        "most likely after wf-1 ends"
    )


def test_positions_beyond_its_queue_and_age_are_said() -> None:
    old = forecast(position=7, computed_at=NOW - timedelta(minutes=5))
    assert forecast_text(old, NOW) == (
        "position 3 in queue nvl72 (7 in all); starts in ~40 min (80%: 25 min - 1 h 30 min) "
        "(forecast 5 min old)"
    )


def test_waiting_on_work_with_no_past_runs_is_unknown_with_its_bound() -> None:
    """No band of zero width at the exec timeout: "unknown", and the timeout as a bound."""
    unknown = forecast(
        waits_on="big-train-2",
        waits_on_since=NOW - timedelta(minutes=3),
        on_timeouts=True,
        p90=NOW + timedelta(days=6, hours=23, minutes=30),
    )
    assert forecast_text(unknown, NOW) == (
        "position 3 in queue nvl72; unknown: waits on big-train-2 (running 3 min, no past "
        "runs); at the latest in 6 d 23 h (its exec timeout)"
    )
    beyond = forecast(waits_on="big-train-2", on_timeouts=True, p50=None, p90=None)
    assert forecast_text(beyond, NOW).endswith("(no past runs); no bound within 7 days")


def test_now_and_never_within_the_horizon() -> None:
    assert forecast_text(forecast(p10=NOW, p50=NOW), NOW).endswith("; starts at the next pass")
    never = forecast(p10=None, p50=None, p90=None)
    assert forecast_text(never, NOW).endswith("; not forecast to start within 7 days")
    far = forecast(p90=None, p50=NOW + timedelta(days=2, hours=3))
    assert "starts in ~2 d 3 h (80%: 25 min - over 7 days)" in forecast_text(far, NOW)
