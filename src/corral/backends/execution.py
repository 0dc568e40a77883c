"""How a backend runs a task once its pod is bound: the TaskExecutor port, what it is given
(:class:`TaskRun`) and what it answers (:class:`Exit`). The embedded backend's executors are in
``backends/embedded/`` (simulated, and local processes).

Executors keep no state in memory: what they need survives in the database (``started_at``)
or on disk, so a restarted server picks up tasks that were running before it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from corral.domain.labels import CONTROL_CONTAINER
from corral.domain.workflows.notices import Acknowledgement, Notice

DURATION_ENV = "CORRAL_SIMULATED_DURATION"
EXIT_CODE_ENV = "CORRAL_SIMULATED_EXIT_CODE"
#: OSMO's exit code for a failure of the backend rather than of the task.
BACKEND_ERROR = 3001
#: ``logs`` returns at most the end of a task's log, this long.
LOG_TAIL_BYTES = 1 << 20


@dataclass(frozen=True)
class TaskRun:
    """One attempt of one task: its pod and when it started."""

    task_uuid: str
    retry_id: int
    pod: Mapping[str, Any]
    started_at: datetime


@dataclass(frozen=True)
class Exit:
    code: int
    message: str = ""


class TaskExecutor(Protocol):
    #: Whether ``logs`` still answers once the attempt ended and its objects were deleted.
    #: When not (a Kubernetes pod takes its log with it), the lifecycle keeps the log itself.
    keeps_logs: bool

    def start(self, run: TaskRun) -> None:
        """Start the attempt; starting one that was started before does nothing."""

    def poll(self, run: TaskRun, now: datetime) -> Exit | None:
        """How the attempt ended, or None while it runs."""

    def next_check(self, run: TaskRun) -> datetime | None:
        """The earliest moment ``poll`` may answer differently, when the executor knows it (a
        simulated task's end): the controller polls then, not every tick. None: poll the
        attempt every tick."""

    def stop(self, run: TaskRun, grace_seconds: float | None = None) -> None:
        """End the attempt (cancel, timeout, a failed sibling, an eviction); idempotent. With
        ``grace_seconds`` the task gets that long to stop after its SIGTERM, and the call
        does not wait for it."""

    def logs(self, run: TaskRun) -> str:
        """What the attempt printed so far."""

    def notify(self, run: TaskRun, notice: Notice) -> None:
        """Tell the attempt its stop is coming (docs/checkpoints.md#the-notice); idempotent."""

    def acknowledgement(self, run: TaskRun) -> Acknowledgement | None:
        """What the attempt said through the executor (ready to stop, a checkpoint); None when
        nothing, or when it can say it only through the API."""


def log_tail(data: bytes) -> str:
    """The last ``LOG_TAIL_BYTES`` of a log as text, with a note line when it was cut."""
    if len(data) <= LOG_TAIL_BYTES:
        return data.decode("utf-8", errors="replace")
    tail = data[-LOG_TAIL_BYTES:].decode("utf-8", errors="replace")
    return f"corral: log truncated, showing the last {LOG_TAIL_BYTES} of {len(data)} bytes\n{tail}"


def task_container(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod's task container: the first one that is not the ``osmo-ctrl`` sidecar."""
    containers = pod["spec"]["containers"]
    return next((c for c in containers if c.get("name") != CONTROL_CONTAINER), containers[0])


def container_env(pod: Mapping[str, Any]) -> dict[str, str]:
    """The literal env values of the task container (``valueFrom`` has no local meaning)."""
    return {
        entry["name"]: str(entry["value"])
        for entry in task_container(pod).get("env", ())
        if "value" in entry
    }
