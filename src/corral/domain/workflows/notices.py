"""A stop's notice and what a task answers (docs/checkpoints.md): its committed checkpoints
and that it is ready to stop. Plain values, read from JSON a task or a runner wrote: every
reader is bounded and refuses what is not of the right shape."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from corral.domain.formats.wire_time import in_utc

#: The most bytes of a task's report that are read (a checkpoint's JSON, a ready file).
REPORT_BYTES = 4096
#: The longest description a checkpoint keeps.
DESCRIPTION_CHARS = 1000
#: The largest step a checkpoint keeps: within what a JSON number holds exactly.
LARGEST_STEP = 2**53


def stop_message(preempted_by: str | None) -> str:
    """Why an evicted gang stops, as its tasks and its notice say it."""
    return f"Preempted by {preempted_by}." if preempted_by else "Preempted."


@dataclass(frozen=True)
class Checkpoint:
    """A committed checkpoint: when, and optionally at which step, with what description."""

    at: datetime
    step: int | None = None
    description: str | None = None


@dataclass(frozen=True)
class Notice:
    """A stop is coming: by ``deadline`` at the latest, for ``reason``; ``signal`` is sent to
    a local task with it ("" for none)."""

    given_at: datetime
    deadline: datetime
    reason: str
    signal: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "given_at": self.given_at.isoformat(),
                "deadline": self.deadline.isoformat(),
                "seconds": round((self.deadline - self.given_at).total_seconds(), 3),
                "reason": self.reason,
                "signal": self.signal,
            }
        )

    @staticmethod
    def from_json(text: str) -> Notice | None:
        """The notice, or None if ``text`` is not one."""
        data = _object(text)
        if data is None:
            return None
        given, deadline = read_time(data.get("given_at")), read_time(data.get("deadline"))
        reason, signal = data.get("reason"), data.get("signal", "")
        if given is None or deadline is None or not isinstance(reason, str):
            return None
        return Notice(given, deadline, reason, signal if isinstance(signal, str) else "")


@dataclass(frozen=True)
class Acknowledgement:
    """What an attempt said: when it was ready to stop (None: not yet), and its latest
    checkpoint (None: none reported this way)."""

    ready_at: datetime | None = None
    checkpoint: Checkpoint | None = None


def checkpoint_from_json(text: str, now: datetime) -> Checkpoint | None:
    """A task's checkpoint report ``{"at"?, "step"?, "description"?}`` (``at`` defaults to
    ``now``; a time in the future becomes ``now``), or None if it is not one."""
    data = _object(text) if text.strip() else {}
    if data is None:
        return None
    at = read_time(data.get("at")) if "at" in data else now
    step, description = data.get("step"), data.get("description")
    if at is None or (step is not None and not _is_step(step)):
        return None
    if description is not None and not isinstance(description, str):
        return None
    return Checkpoint(min(at, now), step, description[:DESCRIPTION_CHARS] if description else None)


def checkpoint_to_json(checkpoint: Checkpoint) -> str:
    return json.dumps(
        {
            "at": checkpoint.at.isoformat(),
            "step": checkpoint.step,
            "description": checkpoint.description,
        }
    )


def _is_step(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= LARGEST_STEP


def _object(text: str) -> dict[str, Any] | None:
    if len(text) > REPORT_BYTES:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def read_time(value: Any) -> datetime | None:
    """An ISO 8601 time in UTC (UTC when it has no zone), or None if ``value`` is not one, or
    names a moment UTC does not have (``formats/wire_time.in_utc``)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        return in_utc(datetime.fromisoformat(value))
    except ValueError:
        return None


def checkpoint_refusal(at: datetime, started_at: datetime | None, now: datetime) -> str | None:
    """Why a running task's checkpoint committed ``at`` cannot be, or None: a checkpoint is
    committed while the task runs, so not before it started and not after ``now``. Every
    checkpoint time that comes in, from the API or a task's control directory, is held to
    this before it is stored."""
    if at > now:
        return (
            f"is in the future (the server's time is {now.isoformat()}): report a checkpoint "
            "once it is committed, with its time or none (now)"
        )
    if started_at is not None and at < started_at:
        return (
            f"is before the task started ({started_at.isoformat()}): report a checkpoint this "
            "run of the task committed, with its time or none (now)"
        )
    return None
