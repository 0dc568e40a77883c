"""The simulated executor: a task "runs" for a set duration and exits with a set code, for
what-if runs of large clusters. Nothing runs; ``poll`` compares the clock with ``started_at``."""

from __future__ import annotations

from datetime import datetime, timedelta

from corral.backends.execution import (
    DURATION_ENV,
    EXIT_CODE_ENV,
    Exit,
    TaskRun,
    container_env,
    task_container,
)
from corral.domain.formats.durations import parse_duration
from corral.domain.workflows.notices import Acknowledgement, Notice


class SimulatedExecution:
    """Tasks that take ``duration`` (or their ``CORRAL_SIMULATED_DURATION``) and exit 0 (or
    their ``CORRAL_SIMULATED_EXIT_CODE``), for what-if runs of large clusters."""

    keeps_logs = True

    def __init__(self, duration: timedelta) -> None:
        self.duration = duration

    def start(self, run: TaskRun) -> None:
        del run  # nothing runs: poll compares the clock with started_at

    def poll(self, run: TaskRun, now: datetime) -> Exit | None:
        duration, code = self._plan(run)
        if now - run.started_at < duration:
            return None
        return Exit(code)

    def next_check(self, run: TaskRun) -> datetime | None:
        return run.started_at + self._plan(run)[0]

    def stop(self, run: TaskRun, grace_seconds: float | None = None) -> None:
        del run, grace_seconds

    def notify(self, run: TaskRun, notice: Notice) -> None:
        del run, notice  # a simulated task runs on to its end or its stop

    def acknowledgement(self, run: TaskRun) -> Acknowledgement | None:
        del run
        return None

    def logs(self, run: TaskRun) -> str:
        duration, code = self._plan(run)
        argv = [
            *task_container(run.pod).get("command", ()),
            *task_container(run.pod).get("args", ()),
        ]
        return (
            f"corral: simulated task (retry {run.retry_id}) started at "
            f"{run.started_at.isoformat()}: {' '.join(str(a) for a in argv)}\n"
            f"corral: runs for {duration.total_seconds():g}s, then exits with code {code}\n"
        )

    def _plan(self, run: TaskRun) -> tuple[timedelta, int]:
        env = container_env(run.pod)
        duration = self.duration
        code = 0
        # The spec was validated at submission; a bad value here falls back to the default.
        try:
            if DURATION_ENV in env:
                duration = _duration(env[DURATION_ENV])
            if EXIT_CODE_ENV in env:
                code = int(env[EXIT_CODE_ENV])
        except ValueError:
            pass
        return duration, code


def _duration(text: str) -> timedelta:
    """Seconds (``"2.5"``) or an OSMO duration (``"10s"``, ``"PT1M"``)."""
    try:
        return timedelta(seconds=float(text))
    except ValueError:
        return parse_duration(text)
