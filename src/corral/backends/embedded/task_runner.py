"""The runner of one local task attempt:
``python -m corral.backends.embedded.task_runner ATTEMPT_DIR``.

The server must survive being killed at any moment, so it neither parents nor remembers the
task processes. Instead each attempt gets a small detached runner that outlives the server and
keeps the attempt's whole state in its directory:

``spec.json``
    what to run (argv, env, work directory, log file), written by the server before spawning.
``lock``
    ``flock``-ed by the runner for its whole life; the kernel releases it when the runner
    dies, however it dies, so "lock held" means "a runner is alive".
``started``
    the runner's pid, written once it owns the attempt; it also claims the attempt: a later
    runner that finds it never runs the task again (at most one run per attempt).
``stop``
    written by the server to ask for a stop; read before the task starts, and SIGTERM does
    the same while it runs.
``exit_code``
    the Kubernetes-style exit code, written (atomically) before the lock is released.
``home``
    the task's home and working directory (in the temporary directory when the task runs as
    another user, removed when it ends).
``refused``
    why the task may not run here: written by the server instead of spawning a runner (it
    cannot be confined as the backend asks), or by the runner (no network namespace of the
    task's own could be made); ``exit_code`` then says 3001.

The runner forks once and lets its first process exit, so it is reparented away from the
server (no zombies there) and runs in a session of its own.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from corral.backends.embedded import task_network
from corral.backends.embedded.local_processes import LocalProcess, ProcessSpec
from corral.backends.embedded.task_relay import Relay
from corral.backends.embedded.task_reports import write_atomic
from corral.backends.embedded.task_sandbox import Confinement, TaskUser
from corral.backends.execution import BACKEND_ERROR

SPEC = "spec.json"
LOCK = "lock"
STARTED = "started"
STOP = "stop"
EXIT_CODE = "exit_code"
HOME = "home"
#: Why the attempt was not run at all (the machine cannot confine it as asked).
REFUSED = "refused"
LOG = "task.log"
WORK = "work"

#: How long a stopped task gets between SIGTERM and SIGKILL.
STOP_GRACE_SECONDS = 5.0
#: How long a runner retries the lock: the server probes it for an instant now and then.
CLAIM_SECONDS = 0.5
_TICK = 0.05
STOPPED = 128 + signal.SIGTERM


def try_lock(path: Path) -> int | None:
    """An fd holding the exclusive flock on ``path`` (close it to release), or None if taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def spec_to_json(spec: ProcessSpec) -> str:
    confinement = spec.confinement
    user = confinement.user
    return json.dumps(
        {
            "argv": list(spec.argv),
            "env": dict(spec.env),
            "workdir": None if spec.workdir is None else str(spec.workdir),
            "log_path": str(spec.log_path),
            "user": None if user is None else [user.uid, user.gid, user.name],
            "landlock": confinement.landlock,
            "private": list(confinement.private),
            "host_network": spec.host_network,
        }
    )


def spec_from_json(text: str) -> ProcessSpec:
    data = json.loads(text)
    user = data.get("user")
    confinement = Confinement(
        user=None if user is None else TaskUser(int(user[0]), int(user[1]), str(user[2])),
        landlock=bool(data.get("landlock", False)),
        private=tuple(data.get("private", ())),
    )
    workdir = data.get("workdir")
    return ProcessSpec(
        tuple(data["argv"]),
        dict(data["env"]),
        None if workdir is None else Path(workdir),
        Path(data["log_path"]),
        confinement,
        bool(data.get("host_network", False)),
    )


class _Stopping:
    """Set by SIGTERM; the run loop acts on it (a handler must not wait for processes)."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        del signum, frame
        self.requested = True


def _claim(attempt: Path) -> int | None:
    """The lock fd if this runner owns the attempt, else None (another runner does)."""
    deadline = time.monotonic() + CLAIM_SECONDS
    while (fd := try_lock(attempt / LOCK)) is None:
        if time.monotonic() > deadline:
            return None
        time.sleep(_TICK / 5)
    return fd


def _run(spec: ProcessSpec, attempt: Path, stopping: _Stopping) -> int:
    """Run the task to its end (or until asked to stop); its exit code."""
    if stopping.requested or (attempt / STOP).exists():
        _note(spec, "stopped before the task started")
        return STOPPED
    if not spec.host_network:
        try:
            task_network.isolate()
        except task_network.NetworkIsolationError as err:
            write_atomic(attempt / REFUSED, _no_network_namespace(err))
            return BACKEND_ERROR
    process = LocalProcess(spec)
    write_atomic(attempt / HOME, f"{process.home}\n")
    relay = Relay(attempt, process)
    try:
        while (code := process.wait(_TICK)) is None:
            if stopping.requested or (attempt / STOP).exists():
                return process.stop(_grace(attempt))
            relay.step()
        return code
    finally:
        relay.close()


def _no_network_namespace(err: OSError) -> str:
    return (
        f"this machine cannot give the task a network namespace of its own ({err.strerror}), "
        "and without one it could reach every service on the host's loopback. Run the server "
        "as root or where unprivileged user namespaces are allowed, or, if this platform's "
        "tasks may reach the host's services, set hostNetwork: true in the task (the platform "
        "needs host_network_allowed) (docs/lifecycle.md#what-a-task-can-reach)."
    )


def _grace(attempt: Path) -> float:
    """The seconds the stop file gives the task (an eviction's grace period), or the default."""
    try:
        return max(0.0, float((attempt / STOP).read_text(encoding="utf-8").strip()))
    except (FileNotFoundError, ValueError):
        return STOP_GRACE_SECONDS


def _note(spec: ProcessSpec, text: str) -> None:
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    with spec.log_path.open("a", encoding="utf-8") as log:
        log.write(f"corral: {text}\n")


def run_attempt(attempt: Path) -> None:
    """Own the attempt, run it once, record its exit code; do nothing if another runner owns
    it, or if it already ran or started (a runner that died is reported, not replaced)."""
    lock = _claim(attempt)
    if lock is None:
        return
    try:
        if (attempt / EXIT_CODE).exists() or (attempt / STARTED).exists():
            return
        spec = spec_from_json((attempt / SPEC).read_text(encoding="utf-8"))
        stopping = _Stopping()  # before ``started``: the server signals only after reading it
        write_atomic(attempt / STARTED, f"{os.getpid()}\n")
        try:
            code = _run(spec, attempt, stopping)
        except Exception as err:  # left without exit code: the server reports a backend error
            _note(spec, f"runner error: {err!r}")
            raise
        write_atomic(attempt / EXIT_CODE, f"{code}\n")
    finally:
        os.close(lock)  # the lock is held until the exit code is on disk


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m corral.backends.embedded.task_runner ATTEMPT_DIR", file=sys.stderr)
        return 2
    if os.fork() > 0:
        os._exit(0)  # the spawner waits for this; the child lives on, parented by init
    run_attempt(Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
