"""A task's reports as corral reads them (docs/checkpoints.md): every time that comes in is one
UTC has, and a checkpoint is of the run that reports it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from corral.domain.workflows.notices import (
    Checkpoint,
    checkpoint_from_json,
    checkpoint_refusal,
    read_time,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_a_time_utc_does_not_have_is_no_time() -> None:
    assert read_time("0001-01-01T00:00:00+14:00") is None
    assert read_time("9999-12-31T23:00:00-02:00") is None
    assert read_time("2026-11-28T14:00:00+02:00") == NOW
    assert read_time("2026-11-28T12:00:00") == NOW


def test_a_local_tasks_checkpoint_of_the_year_zero_is_not_one() -> None:
    assert checkpoint_from_json('{"at": "0001-01-01T00:00:00+14:00"}', NOW) is None
    assert checkpoint_from_json('{"at": "2026-11-28T11:00:00Z", "step": 3}', NOW) == Checkpoint(
        NOW - timedelta(hours=1), 3
    )


def test_a_checkpoint_is_of_this_run() -> None:
    started = NOW - timedelta(minutes=10)
    assert checkpoint_refusal(started, started, NOW) is None
    assert checkpoint_refusal(NOW, started, NOW) is None
    before = checkpoint_refusal(started - timedelta(seconds=1), started, NOW)
    assert before == (
        "is before the task started (2026-11-28T11:50:00+00:00): report a checkpoint this run "
        "of the task committed, with its time or none (now)"
    )
    after = checkpoint_refusal(NOW + timedelta(seconds=1), started, NOW)
    assert after is not None and after.startswith("is in the future")


@given(st.datetimes(timezones=st.timezones()))
def test_every_time_read_is_one_utc_has(moment: datetime) -> None:
    written = moment.isoformat()
    found = read_time(written)
    if found is not None:
        assert found.tzinfo is UTC and found == datetime.fromisoformat(written)
    else:
        assert moment.year in (1, 9999)  # UTC has no such moment
