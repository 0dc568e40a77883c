"""The runner relays a local task's reports so that the server never sees it ready without the
checkpoint it saved before saying so (docs/checkpoints.md#local-tasks)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from corral.backends.embedded import task_relay
from corral.backends.embedded.task_reports import CHECKPOINT, READY


class _Task:
    """The part of a LocalProcess a relay uses: the task's home, open."""

    def __init__(self, home: Path) -> None:
        self.home_fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)

    def signal(self, signum: int) -> None:
        raise AssertionError("no notice in this test")


def test_a_checkpoint_saved_before_ready_is_relayed_before_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, attempt = tmp_path / "home", tmp_path / "attempt"
    (home / ".corral").mkdir(parents=True)
    attempt.mkdir()
    (home / ".corral" / CHECKPOINT).write_text(json.dumps({"step": 7}))
    (home / ".corral" / READY).write_text("")
    written: list[str] = []
    real = task_relay._write

    def recorded(path: Path, text: str) -> Any:
        written.append(path.name)
        return real(path, text)

    monkeypatch.setattr(task_relay, "_write", recorded)
    relay = task_relay.Relay(attempt, _Task(home))  # type: ignore[arg-type]
    relay.step()
    relay.close()
    assert written == [CHECKPOINT, READY]
    assert json.loads((attempt / CHECKPOINT).read_text())["step"] == 7
