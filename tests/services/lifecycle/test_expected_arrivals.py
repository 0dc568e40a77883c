"""What a forecast expects to arrive: the last hour's new waiting groups, replayed twice
ahead at the same offsets (``services/lifecycle/expected_arrivals.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from corral.scheduler.forecast import (
    QueuedGroup,
)
from corral.scheduler.runtimes import Runtimes
from corral.services.lifecycle import expected_arrivals
from corral.services.lifecycle.expected_arrivals import RecentArrivals

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def group(key: str) -> QueuedGroup:
    return QueuedGroup(key, (), (), "NORMAL", (NOW,), Runtimes((), 60.0))


def test_groups_seen_in_the_last_hour_are_replayed_twice_ahead() -> None:
    recent = RecentArrivals()
    recent.note([group("old")], NOW - timedelta(minutes=70))
    recent.note([group("a"), group("old")], NOW - timedelta(minutes=50))
    recent.note([group("a"), group("b")], NOW)  # a was seen before: its first sighting counts
    found = [(after, g.key) for after, g in recent.expected(NOW)]
    assert found == [(600.0, "a"), (3600.0, "b"), (4200.0, "a"), (7200.0, "b")]


def test_at_most_the_newest_groups_are_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expected_arrivals, "MOST", 2)
    recent = RecentArrivals()
    for i in range(4):
        recent.note([group(f"g{i}")], NOW + timedelta(seconds=i))
    assert [g.key for _, g in recent.expected(NOW)] == ["g2", "g3", "g2", "g3"]
