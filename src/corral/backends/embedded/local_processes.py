"""Running a task's container as a local process (the embedded backend's execution mode).

The task's ``command`` + ``args`` run directly (never through a shell of ours), with the pod's
``env`` values, in a home of its own, output and errors into one log file. A process gets its
own session so that stopping it stops everything it started. Exit codes follow Kubernetes: a
process ended by signal N exits ``128 + N``; a command that cannot be started exits 127 (not
found) or 126 (not executable), with the reason in the log.

How the process is confined (another user, Landlock) is in ``task_sandbox``: the spec says it,
this module applies it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from corral.backends.embedded import landlock
from corral.backends.embedded.task_reports import CONTROL_ENV, make_control_dir, open_home
from corral.backends.embedded.task_sandbox import UNCONFINED, Confinement
from corral.backends.execution import task_container

#: What a task sees of the server's environment: enough to find programs, nothing else.
INHERITED = ("PATH", "LANG", "LC_ALL", "TZ")
NOT_FOUND = 127
NOT_EXECUTABLE = 126


#: Devices every program may use, also under Landlock.
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


@dataclass(frozen=True)
class ProcessSpec:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    #: The task's home and working directory: this one (the server's user runs the task), or
    #: None for a fresh one in the temporary directory (another user runs it).
    workdir: Path | None
    log_path: Path
    confinement: Confinement = UNCONFINED
    #: The pod's ``hostNetwork``: keep the host's network instead of one of its own
    #: (``task_network``).
    host_network: bool = False


def process_spec(
    pod: Mapping[str, Any],
    workdir: Path,
    log_path: Path,
    confinement: Confinement = UNCONFINED,
) -> ProcessSpec:
    """The process of a pod's task container (the first one that is not ``osmo-ctrl``); a task
    run as another user gets a fresh home instead of ``workdir``."""
    container = task_container(pod)
    argv = (*container.get("command", ()), *container.get("args", ()))
    env = {name: os.environ[name] for name in INHERITED if name in os.environ}
    for entry in container.get("env", ()):
        if "value" in entry:  # valueFrom (secrets, field refs) has no local meaning
            env[entry["name"]] = str(entry["value"])
    home = None if confinement.user is not None else workdir
    host_network = pod.get("spec", {}).get("hostNetwork") is True
    argv_text = tuple(str(part) for part in argv)
    return ProcessSpec(argv_text, env, home, log_path, confinement, host_network)


class LocalProcess:
    """One started task process."""

    def __init__(self, spec: ProcessSpec) -> None:
        confinement = spec.confinement
        self.home = _make_home(spec)
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = spec.log_path.open("ab")
        self._start_failure: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        user = confinement.user
        control = make_control_dir(self.home, (user.uid, user.gid) if user else None)
        #: Opened before the task starts, which could then replace its home by a link.
        self.home_fd = open_home(self.home)
        env = {
            **spec.env,
            "HOME": str(self.home),
            "TMPDIR": str(self.home),
            CONTROL_ENV: str(control),
        }
        try:
            self._process = subprocess.Popen(
                spec.argv,
                env=env,
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                user=user.uid if user else None,
                group=user.gid if user else None,
                extra_groups=[] if user else None,
                preexec_fn=_sandbox(confinement, self.home),
            )
        except (FileNotFoundError, NotADirectoryError):
            self._fail_to_start(NOT_FOUND, f"command not found: {spec.argv[:1]}")
        except (PermissionError, OSError) as err:
            self._fail_to_start(NOT_EXECUTABLE, f"cannot run {spec.argv[:1]}: {err.strerror}")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def signal(self, sent: signal.Signals) -> None:
        """Send ``sent`` to the task's whole session (a notice)."""
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, sent)

    def poll(self) -> int | None:
        """The exit code once the process ended, else None."""
        if self._process is None:
            return self._start_failure
        return self._finished(self._process.poll())

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds; the exit code, or None if it still runs."""
        if self._process is None:
            return self._start_failure
        try:
            return self._finished(self._process.wait(timeout))
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_seconds: float = 5.0) -> int:
        """SIGTERM the whole session, SIGKILL it after ``grace_seconds``; the exit code."""
        if self._process is None:
            return self._start_failure or 0
        for sent, wait in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, sent)
            code = self.wait(wait)
            if code is not None:
                return code
        raise AssertionError("a killed process always ends")  # pragma: no cover

    def _finished(self, returncode: int | None) -> int | None:
        if returncode is None:
            return None
        self._log.close()
        self._remove_temporary_home()
        return 128 - returncode if returncode < 0 else returncode

    def _remove_temporary_home(self) -> None:
        if self._temporary and self.home.exists():
            shutil.rmtree(self.home, ignore_errors=True)  # never follows the task's symlinks

    def _fail_to_start(self, code: int, reason: str) -> None:
        self._log.write(f"corral: {reason}\n".encode())
        self._log.close()
        self._remove_temporary_home()
        self._start_failure = code

    @property
    def _temporary(self) -> bool:
        return self.home.name.startswith(_TEMPORARY_HOME)


_TEMPORARY_HOME = "corral-task-"


def _make_home(spec: ProcessSpec) -> Path:
    """The task's home: the spec's directory, or a fresh private one owned by the task user."""
    user = spec.confinement.user
    if spec.workdir is not None:
        spec.workdir.mkdir(parents=True, exist_ok=True)
        return spec.workdir
    home = Path(tempfile.mkdtemp(prefix=_TEMPORARY_HOME))  # 0700, a name nobody can guess
    if user is not None:
        os.chown(home, user.uid, user.gid)
    return home


def _sandbox(confinement: Confinement, home: Path) -> Callable[[], None] | None:
    """What the child runs just before ``exec`` (after switching user): Landlock, if asked.
    The rules are worked out here, in the runner, where listing ``/`` is allowed."""
    if not confinement.landlock:
        return None
    readable = landlock.readable_roots([Path(p) for p in (*confinement.private, str(home))])
    writable = [home, *(Path(device) for device in _DEVICES)]

    def restrict() -> None:
        landlock.restrict(read=readable, write=writable)

    return restrict
