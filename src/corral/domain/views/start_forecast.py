"""A waiting group's start-time forecast as stored and as a user reads it (docs/forecast.md):
"position 3 in queue nvl72 (5 in all); starts in ~40 min (80%: 25 min - 1 h 30 min), most
likely after wf-12 ends"."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

#: A forecast older than this says its age.
STALE_SECONDS = 120.0


@dataclass(frozen=True)
class GroupForecast:
    group_uuid: str
    workflow_id: str
    computed_at: datetime
    #: p10, p50, p90 start times (None: not within the forecast's horizon).
    p10: datetime | None
    p50: datetime | None
    p90: datetime | None
    queue: str
    queue_position: int
    position: int
    #: The workflow whose group's end it waits on most often.
    waits_on: str | None = None
    #: The work it waits on has no past runs: its start is unknown, its exec timeout a bound.
    on_timeouts: bool = False
    #: The topology domain it most likely starts in.
    lands_in: str | None = None
    #: Since when the work it waits on has run (its start, or its wait's if not started).
    waits_on_since: datetime | None = None


def forecast_text(forecast: GroupForecast, now: datetime) -> str:
    """The forecast in one clause, as explain shows it."""
    where = f"position {forecast.queue_position} in queue {forecast.queue}"
    if forecast.position != forecast.queue_position:
        where += f" ({forecast.position} in all)"
    if forecast.on_timeouts and forecast.waits_on:
        return f"{where}; {_unknown(forecast, now)}" + _age_note(forecast, now)
    if forecast.p50 is None:
        when = "not forecast to start within 7 days"
    elif forecast.p50 <= now:
        when = "starts at the next pass"
    else:
        band = f"{_until(now, forecast.p10)} - {_until(now, forecast.p90)}"
        when = f"starts in ~{_until(now, forecast.p50)} (80%: {band})"
    likely = [f"in {forecast.lands_in}"] if forecast.lands_in else []
    if forecast.waits_on:
        likely.append(f"after {forecast.waits_on} ends")
    after = f", most likely {' '.join(likely)}" if likely else ""
    return f"{where}; {when}{after}" + _age_note(forecast, now)


def _unknown(forecast: GroupForecast, now: datetime) -> str:
    """No band: what it waits on ran never before, so only that work's exec timeout bounds
    its end (docs/forecast.md#unknown)."""
    running = ""
    if forecast.waits_on_since is not None:
        running = f"running {_until(forecast.waits_on_since, now)}, "
    said = f"unknown: waits on {forecast.waits_on} ({running}no past runs)"
    if forecast.p90 is None:
        return f"{said}; no bound within 7 days"
    return f"{said}; at the latest in {_until(now, forecast.p90)} (its exec timeout)"


def _age_note(forecast: GroupForecast, now: datetime) -> str:
    age = (now - forecast.computed_at).total_seconds()
    return f" (forecast {duration_text(age)} old)" if age > STALE_SECONDS else ""


def _until(now: datetime, moment: datetime | None) -> str:
    if moment is None:
        return "over 7 days"
    return duration_text(max((moment - now).total_seconds(), 0.0))


def duration_text(seconds: float) -> str:
    """``40 min``, ``1 h 30 min``, ``2 d 3 h``; under a minute: ``under a minute``."""
    minutes = int(seconds // 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"
