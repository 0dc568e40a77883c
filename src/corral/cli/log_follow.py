"""``corral workflow logs ID --follow``: the tasks' logs as they grow, until the workflow ends.

The server answers a task's log whole (its last MiB), so each poll prints what follows the text
seen before. With several tasks, each line is prefixed with its task's name, as
``docker compose logs -f`` does; a line is printed once it is complete. A task that starts a new
attempt (a retry) is announced, and its log starts over.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import quote

from corral.cli.client import Client
from corral.cli.output import fail
from corral.domain.workflows.statuses import WorkflowStatus

POLL_SECONDS = 1.0
#: How much of the text seen before is looked for in the next answer, to find where it left off.
ANCHOR_CHARACTERS = 1024


@dataclass
class TaskLog:
    retry: int = -1
    seen: str = ""
    partial: str = ""  # the start of a line not yet complete (prefixed output only)


def added_text(before: str, now: str) -> tuple[str, bool]:
    """What ``now`` adds to ``before``, and whether text between them was lost (the log grew
    by more than the server's tail between two polls)."""
    if now.startswith(before):
        return now[len(before) :], False
    anchor = before[-ANCHOR_CHARACTERS:]
    at = now.rfind(anchor) if anchor else -1
    if at >= 0:
        return now[at + len(anchor) :], False
    return now, True


def finished(status: str) -> bool:
    return status == WorkflowStatus.COMPLETED or status.startswith(WorkflowStatus.FAILED)


class LogFollower:
    def __init__(
        self,
        client: Client,
        workflow_id: str,
        task: str | None,
        out: TextIO = sys.stdout,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.path = f"/api/workflow/{quote(workflow_id, safe='')}"
        self.task = task
        self.out = out
        self.sleep = sleep
        self.logs: dict[str, TaskLog] = {}

    def run(self, poll_seconds: float = POLL_SECONDS) -> None:
        """Print as the logs grow; return once the workflow ended and its logs are out."""
        while True:
            found = self.client.get(self.path)
            tasks = [task for group in found["groups"] for task in group["tasks"]]
            self._poll(self._followed(tasks))
            if finished(str(found["status"])):
                self._flush()
                return
            self.sleep(poll_seconds)

    def _followed(self, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.task is None:
            return tasks
        chosen = [task for task in tasks if task["name"] == self.task]
        if not chosen:
            names = ", ".join(task["name"] for task in tasks)
            fail(f"the workflow has no task {self.task}; its tasks: {names}")
        return chosen

    def _poll(self, tasks: list[dict[str, Any]]) -> None:
        width = max((len(task["name"]) for task in tasks), default=0)
        for task in tasks:
            if task.get("start_time") is None:
                continue
            name, state = task["name"], self.logs.setdefault(task["name"], TaskLog())
            text = self.client.get_text(f"{self.path}/logs", task_name=name)
            if state.retry not in (-1, task["retry_id"]):
                self._note(name, width, f"retry {task['retry_id']} started")
                state.seen, state.partial = "", ""
            state.retry = task["retry_id"]
            added, lost = added_text(state.seen, text)
            if lost:
                self._note(name, width, "part of the log went by between two looks")
            state.seen = text
            self._emit(name, width, state, added)

    def _emit(self, name: str, width: int, state: TaskLog, text: str) -> None:
        if self.task is not None:
            self.out.write(text)
            self.out.flush()
            return
        lines = (state.partial + text).split("\n")
        state.partial = lines.pop()
        for line in lines:
            self.out.write(f"{name.ljust(width)} | {line}\n")
        self.out.flush()

    def _flush(self) -> None:
        width = max((len(name) for name in self.logs), default=0)
        for name, state in self.logs.items():
            if state.partial:
                self.out.write(f"{name.ljust(width)} | {state.partial}\n")
                state.partial = ""
        self.out.flush()

    def _note(self, name: str, width: int, what: str) -> None:
        prefix = f"{name.ljust(width)} | " if self.task is None else ""
        self.out.write(f"{prefix}corral: {what}\n")
