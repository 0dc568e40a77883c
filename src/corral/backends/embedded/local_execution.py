"""Tasks as local processes, safe across server restarts.

The lifecycle controller calls this executor from a server that may be killed (SIGKILL) at any
moment and restarted, so the executor keeps nothing in memory: an attempt lives in
``root/<task_uuid>/<retry_id>/`` and is run by a detached runner process
(:mod:`corral.backends.embedded.task_runner`, which describes the files). Every method reads the
directory afresh, so a new executor object (after a restart) picks up where the old one was:

- ``start`` writes ``spec.json`` and spawns the runner; a second call finds the spec and stops.
- ``poll`` reads ``exit_code``; without one it asks the runner's lock whether a runner lives.
  A free lock without ``started`` means the server died before the runner got going: the runner
  is spawned again. A free lock with ``started`` means the runner died: a backend error.
- ``stop`` asks the runner (a ``stop`` file, and SIGTERM while its lock shows it alive, so a
  recycled pid is never signalled); the runner stops the task and records its exit code.

User strings only ever reach ``exec`` as the task's own argv: no shell is involved.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from corral.backends.embedded.local_processes import INHERITED, process_spec
from corral.backends.embedded.task_reports import CHECKPOINT, NOTICE, READY, write_atomic
from corral.backends.embedded.task_runner import (
    EXIT_CODE,
    LOCK,
    LOG,
    REFUSED,
    SPEC,
    STARTED,
    STOP,
    WORK,
    spec_to_json,
    try_lock,
)
from corral.backends.embedded.task_sandbox import Confinement
from corral.backends.execution import BACKEND_ERROR, LOG_TAIL_BYTES, Exit, TaskRun
from corral.domain.workflows.notices import (
    REPORT_BYTES,
    Acknowledgement,
    Notice,
    checkpoint_from_json,
    read_time,
)

RUNNER_DIED = "the task's runner process ended without an exit code"
#: What the runner keeps of the server's environment (which may hold the database's URL):
#: the task's own inherited variables, and where Python finds corral.
RUNNER_ENVIRONMENT = (*INHERITED, "PYTHONPATH")
#: The runner forks into the background at once; its first process exits within this.
_SPAWN_TIMEOUT = 10.0
_TICK = 0.02


class LocalProcessExecution:
    """Runs each attempt's task container as a local process, under ``root``, confined as
    ``confinement`` says (``task_sandbox``)."""

    keeps_logs = True

    def __init__(
        self, root: Path, confinement: Confinement, stop_wait_seconds: float = 2.0
    ) -> None:
        self.root = root
        self.confinement = confinement
        #: How long ``stop`` waits for the exit code (a task may take its grace period).
        self.stop_wait_seconds = stop_wait_seconds

    def attempt_dir(self, run: TaskRun) -> Path:
        """``root/<task_uuid>/<retry_id>``; a uuid that could leave ``root`` is refused."""
        if run.task_uuid in ("", ".", "..") or "/" in run.task_uuid or "\0" in run.task_uuid:
            raise ValueError(f"not a task uuid: {run.task_uuid!r}")
        return self.root / run.task_uuid / str(int(run.retry_id))

    def start(self, run: TaskRun) -> None:
        attempt = self.attempt_dir(run)
        if (attempt / SPEC).exists():
            return  # started before (the runner, if it never came up, is respawned by poll)
        _make_private_dir(self.root)
        _make_private_dir(attempt.parent)
        _make_private_dir(attempt)
        spec = process_spec(run.pod, attempt / WORK, attempt / LOG, self.confinement)
        write_atomic(attempt / SPEC, spec_to_json(spec))
        if self.confinement.refusal is not None:  # ends at once, with the reason
            write_atomic(attempt / REFUSED, self.confinement.refusal)
            write_atomic(attempt / EXIT_CODE, f"{BACKEND_ERROR}\n")
            return
        spawn_runner(attempt)

    def next_check(self, run: TaskRun) -> datetime | None:
        del run  # only polling tells
        return None

    def poll(self, run: TaskRun, now: datetime) -> Exit | None:
        """The exit, or None while the attempt runs, and also before ``start`` was called."""
        del now
        attempt = self.attempt_dir(run)
        if not (attempt / SPEC).exists():
            return None
        ended = _exit_of(attempt)
        if ended is not None:
            return ended
        lock = try_lock(attempt / LOCK)
        if lock is None:
            return None  # a runner holds the lock: running
        try:  # no runner can start or end while we hold the lock
            ended = _exit_of(attempt)
            started = (attempt / STARTED).exists()
        finally:
            os.close(lock)
        if ended is not None:
            return ended  # the runner finished between our two looks
        if started:
            return Exit(BACKEND_ERROR, RUNNER_DIED)
        spawn_runner(attempt)  # the server died between writing the spec and spawning
        return None

    def stop(self, run: TaskRun, grace_seconds: float | None = None) -> None:
        attempt = self.attempt_dir(run)
        if not (attempt / SPEC).exists() or (attempt / EXIT_CODE).exists():
            return
        # A runner not yet running reads this before starting the task, so stop never misses.
        write_atomic(attempt / STOP, "" if grace_seconds is None else f"{grace_seconds:g}\n")
        _signal_runner(attempt)
        if grace_seconds is not None:
            return  # the runner gives the task its grace period; poll sees the end
        deadline = time.monotonic() + self.stop_wait_seconds
        while not (attempt / EXIT_CODE).exists() and time.monotonic() < deadline:
            if not _runner_alive(attempt):
                return  # no runner (died, or not spawned yet): poll tells what happened
            time.sleep(_TICK)

    def notify(self, run: TaskRun, notice: Notice) -> None:
        """Write the notice for the runner, which delivers it to the task with its signal."""
        attempt = self.attempt_dir(run)
        if not (attempt / SPEC).exists() or (attempt / EXIT_CODE).exists():
            return
        if not (attempt / NOTICE).exists():
            write_atomic(attempt / NOTICE, notice.to_json())

    def acknowledgement(self, run: TaskRun) -> Acknowledgement | None:
        """What the runner relayed of the task's reports."""
        attempt = self.attempt_dir(run)
        ready = _read(attempt / READY)
        checkpoint = _read(attempt / CHECKPOINT)
        if ready is None and checkpoint is None:
            return None
        now = datetime.now(UTC)
        return Acknowledgement(
            read_time(ready.strip()) if ready is not None else None,
            checkpoint_from_json(checkpoint, now) if checkpoint is not None else None,
        )

    def logs(self, run: TaskRun) -> str:
        """The task's output so far: the last ``LOG_TAIL_BYTES`` of it, with a note if cut."""
        path = self.attempt_dir(run) / LOG
        try:
            with path.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(0, size - LOG_TAIL_BYTES))
                tail = log.read(LOG_TAIL_BYTES)
        except FileNotFoundError:
            return ""
        text = tail.decode("utf-8", errors="replace")
        if size <= LOG_TAIL_BYTES:
            return text
        return f"corral: log truncated, showing the last {LOG_TAIL_BYTES} of {size} bytes\n{text}"


def spawn_runner(attempt: Path) -> None:
    """Start the attempt's runner, detached from the server (own session, no inherited fds)."""
    argv = [sys.executable, "-P", "-m", "corral.backends.embedded.task_runner", str(attempt)]
    runner = subprocess.Popen(
        argv,
        env={name: os.environ[name] for name in RUNNER_ENVIRONMENT if name in os.environ},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        start_new_session=True,
        cwd="/",
    )
    # The first process only forks the runner proper; on a very slow machine that outlasts
    # the timeout, the runner still comes up (and poll respawns it if it did not).
    with contextlib.suppress(subprocess.TimeoutExpired):
        runner.wait(_SPAWN_TIMEOUT)


def _runner_alive(attempt: Path) -> bool:
    """Whether a runner holds the attempt's lock (probing it for an instant)."""
    lock = try_lock(attempt / LOCK)
    if lock is None:
        return True
    os.close(lock)
    return False


def _signal_runner(attempt: Path) -> None:
    """SIGTERM the runner, if its lock shows it alive (so the pid is not a recycled one)."""
    try:
        pid = int((attempt / STARTED).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return  # not started: the stop file is enough
    if not _runner_alive(attempt):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


def _read(path: Path) -> str | None:
    """A file the runner wrote (bounded: the runner checked it, the bound is a seat belt)."""
    try:
        with path.open(encoding="utf-8") as found:
            return found.read(REPORT_BYTES)
    except FileNotFoundError:
        return None


def _exit_of(attempt: Path) -> Exit | None:
    try:
        text = (attempt / EXIT_CODE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        code = int(text)
    except ValueError:
        return Exit(BACKEND_ERROR, f"unreadable exit code {text!r}")
    try:
        return Exit(code, (attempt / REFUSED).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Exit(code)


def _make_private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
