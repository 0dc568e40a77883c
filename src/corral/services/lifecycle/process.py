"""Where the lifecycle controller runs: a child process of ``corral server``.

In a thread it shared the server's GIL with every request thread: under load, the leader's
ticks got a sixth of a core and fell seconds behind the submissions
(docs/lifecycle.md#the-controller-process). On SQLite the writers of the two processes queue on
a file lock (``store.database.writing``).

The server sends the child its settings as one JSON line on the child's standard input (the
database URL may hold a password: never on a command line) and keeps the pipe open. The child
stops when the pipe closes (the server stopped), and on Linux is killed with the server
(``PR_SET_PDEATHSIG``), as a thread of it would be: a ``kill -9`` of the server stops its
controller at once. A child that dies on its own is started again.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from corral.services.auth.sessions import load_session_key
from corral.services.auth.task_tokens import TaskTokens
from corral.services.lifecycle.controller import LifecycleController
from corral.services.lifecycle.forecasting import TICKS_BETWEEN
from corral.services.lifecycle.leadership import Leadership
from corral.services.workers.gc_settings import collection_clock, tune_gc
from corral.services.workers.server_logs import LogLevel, configure_logging
from corral.store.lease import LostLease

if TYPE_CHECKING:  # the runtime is opened in the child process: imported where it runs
    from corral.services.runtime import Runtime

log = structlog.get_logger("corral.controller")
#: The ticks' own lines, as the controller writes them.
tick_log = structlog.get_logger("corral.lifecycle")

#: Seconds between a child's unexpected exit and its restart.
RESTART_DELAY_SECONDS = 1.0
#: Seconds a stopping child gets to finish its tick and give the lease up.
STOP_TIMEOUT_SECONDS = 10.0
_PR_SET_PDEATHSIG = 1
#: Environment variable naming the server's process to the child.
SERVER_PID = "CORRAL_SERVER_PID"
#: The controller process's command line runs this module (``python -m``).
MODULE = "corral.services.lifecycle.process"


def run_controller(
    controller: LifecycleController,
    leadership: Leadership,
    tick_seconds: float,
    stop: threading.Event,
) -> None:
    """Hold or watch the lease in a thread and tick while it is held, until ``stop``; then
    stop ticking before the lease is given up."""
    lease = threading.Thread(target=leadership.run, args=(stop,), name="corral-lease", daemon=True)
    lease.start()
    try:
        run_until_stopped(controller, tick_seconds, stop)
    finally:
        stop.set()
        lease.join(timeout=STOP_TIMEOUT_SECONDS)


@dataclass(frozen=True)
class ControllerSettings:
    """What the child needs to open the server's database and cluster."""

    database_url: str
    cluster_file: str | None
    work_dir: str
    data_dir: str
    tick_seconds: float
    lease_seconds: float
    #: The server's name in the lease row: the server reports itself leader when it is there.
    holder: str
    log_level: str


class ControllerProcess:
    """The server's side of the child: starts it, starts it again if it dies, stops it."""

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings
        self._stopping = threading.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._watcher = threading.Thread(target=self._watch, name="corral-controller", daemon=True)

    def start(self) -> None:
        with self._lock:
            self._process = self._spawn()
        self._watcher.start()

    def stop(self) -> None:
        """Close the child's pipe (it finishes its tick and gives the lease up), then wait."""
        with self._lock:
            self._stopping.set()
            process = self._process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):  # the child is gone already
                process.stdin.close()
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self._watcher.join(timeout=STOP_TIMEOUT_SECONDS)

    def _spawn(self) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, "-m", MODULE],
            stdin=subprocess.PIPE,
            env={**os.environ, SERVER_PID: str(os.getpid())},
        )
        assert process.stdin is not None
        with contextlib.suppress(OSError):  # a child that died at once is started again
            process.stdin.write(json.dumps(dataclasses.asdict(self.settings)).encode() + b"\n")
            process.stdin.flush()
        return process

    def _watch(self) -> None:
        while True:
            with self._lock:
                process = self._process
            assert process is not None
            code = process.wait()
            if self._stopping.is_set():
                return
            log.error("the controller process exited; starting it again", exit_code=code)
            if self._stopping.wait(RESTART_DELAY_SECONDS):
                return
            with self._lock:  # not once stop() has begun: it waits for the child it saw
                if self._stopping.is_set():
                    return
                self._process = self._spawn()


# -- the child --------------------------------------------------------------------------------


def run_until_stopped(
    controller: LifecycleController, interval: float, stop: threading.Event
) -> None:
    """Tick every ``interval`` seconds until ``stop`` is set (the server's background thread),
    while this server holds the controller lease (if it takes part in one).

    A failing tick is logged and retried on the next one: the database holds the truth, so
    nothing is lost by trying again."""
    while not stop.is_set():
        leadership = controller.leadership
        if leadership is None or leadership.held():
            _tick_once(controller)
        stop.wait(interval)


def _tick_once(controller: LifecycleController) -> None:
    started = time.perf_counter()
    collecting = collection_clock()
    collected_before = collecting.seconds
    try:
        with controller.counting() as queries:
            report = controller.tick()
            report.queries = queries()
    except LostLease as err:
        tick_log.warning("controller stopped: the lease moved on", reason=str(err))
    except Exception:
        tick_log.exception("lifecycle tick failed; retrying")
    else:
        report.seconds = time.perf_counter() - started
        report.gc_seconds = collecting.seconds - collected_before
        tick_log.debug("controller tick", **report.log_fields())
        for workflow_id in report.finished_workflows:
            tick_log.info("workflow finished", workflow_id=workflow_id)


def _die_with_parent(parent: int) -> None:
    """Be killed when the server dies (Linux); exit at once if it died already."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _stop_when_closed(stop: threading.Event) -> None:
    """Set ``stop`` when the server closes the pipe (or dies, where no signal does it)."""
    sys.stdin.buffer.read()
    stop.set()


def controller_of(runtime: Runtime, tick_seconds: float, data_dir: Path) -> LifecycleController:
    """The server's controller: it keeps forecasts fresh, at most every
    :data:`TICKS_BETWEEN` ticks, and gives each task its own token, signed with the key of the
    server's sessions (from the environment or ``data_dir``)."""
    return runtime.lifecycle(
        forecast_every=TICKS_BETWEEN * tick_seconds,
        task_tokens=TaskTokens(load_session_key(data_dir)),
    )


def main() -> int:
    _die_with_parent(int(os.environ[SERVER_PID]))
    # Ctrl-C reaches every process of the terminal: the server stops this one (closing the pipe)
    # once its requests are done.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    settings = ControllerSettings(**json.loads(sys.stdin.buffer.readline()))
    from corral.services.runtime import open_runtime, read_cluster
    from corral.services.workers.hardening import protect_server_process

    configure_logging(LogLevel(settings.log_level))
    tune_gc()
    protect_server_process()
    cluster = read_cluster(Path(settings.cluster_file)) if settings.cluster_file else None
    runtime = open_runtime(
        settings.database_url,
        cluster=cluster,
        work_dir=Path(settings.work_dir),
        private=[Path(settings.data_dir)],
    )
    leadership = runtime.join_leadership(settings.lease_seconds, settings.holder)
    stop = threading.Event()
    threading.Thread(target=_stop_when_closed, args=(stop,), daemon=True).start()
    try:
        run_controller(
            controller_of(runtime, settings.tick_seconds, Path(settings.data_dir)),
            leadership,
            settings.tick_seconds,
            stop,
        )
    finally:
        runtime.backends.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
