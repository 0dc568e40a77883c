"""Tasks as local processes, restart-safe (placeholder until the runner lands)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from corral.backends.execution import Exit, TaskRun


class LocalProcessExecution:
    def __init__(self, root: Path) -> None:
        self.root = root

    def start(self, run: TaskRun) -> None:
        raise NotImplementedError

    def poll(self, run: TaskRun, now: datetime) -> Exit | None:
        raise NotImplementedError

    def stop(self, run: TaskRun) -> None:
        raise NotImplementedError

    def logs(self, run: TaskRun) -> str:
        raise NotImplementedError
