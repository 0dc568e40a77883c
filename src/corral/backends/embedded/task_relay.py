"""The runner's side of a local task's notice and reports (``task_reports``, docs/
checkpoints.md#local-tasks): it delivers the server's notice into the task's control
directory with the pool's signal, and relays what the task wrote there to the attempt's
directory, checked, for the server to read."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

from corral.backends.embedded.local_processes import LocalProcess
from corral.backends.embedded.task_reports import (
    CHECKPOINT,
    NOTICE,
    READY,
    deliver_notice,
    read_report,
    write_atomic,
)
from corral.domain.formats.signals import NOTICE_SIGNALS
from corral.domain.workflows.notices import (
    REPORT_BYTES,
    Notice,
    checkpoint_from_json,
    checkpoint_to_json,
)

#: How often the task's reports are looked at (a stop follows a "ready" within a second).
LOOK_SECONDS = 0.2


class Relay:
    """One running attempt's notice and reports."""

    def __init__(self, attempt: Path, process: LocalProcess) -> None:
        self.attempt = attempt
        self.process = process
        self.home = process.home_fd
        self.delivered = False
        self.ready = (attempt / READY).exists()
        self.last_checkpoint: str | None = None
        self.next_look = 0.0

    def step(self) -> None:
        """Deliver a new notice at once; look at the task's reports now and then."""
        if not self.delivered:
            self._deliver()
        if time.monotonic() < self.next_look:
            return
        self.next_look = time.monotonic() + LOOK_SECONDS
        now = datetime.now(UTC)
        # Ready is read first and relayed last: a task saves its checkpoint before it says
        # ready, and the controller, which reads ready first, must then find that checkpoint
        # (relayed after ready, a stop in between counted the work since the one before).
        ready = not self.ready and read_report(self.home, READY) is not None
        text = read_report(self.home, CHECKPOINT)
        if text is not None and text != self.last_checkpoint:
            self.last_checkpoint = text
            found = checkpoint_from_json(text, now)
            if found is not None:
                _write(self.attempt / CHECKPOINT, checkpoint_to_json(found))
        if ready:
            _write(self.attempt / READY, f"{now.isoformat()}\n")
            self.ready = True

    def close(self) -> None:
        os.close(self.home)

    def _deliver(self) -> None:
        try:
            text = (self.attempt / NOTICE).read_text(encoding="utf-8")[:REPORT_BYTES]
        except FileNotFoundError:
            return
        notice = Notice.from_json(text)
        if notice is None:
            return  # being written: the next step reads it whole
        self.delivered = True
        deliver_notice(self.home, text)
        if notice.signal in NOTICE_SIGNALS:
            self.process.signal(getattr(signal, notice.signal))


def _write(path: Path, text: str) -> None:
    with contextlib.suppress(OSError):
        write_atomic(path, text)
