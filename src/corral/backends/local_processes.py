"""Running a task's container as a local process (the embedded backend's execution mode).

The task's ``command`` + ``args`` run directly (never through a shell of ours), with the pod's
``env`` values, in a work directory of the task, output and errors into one log file. A process
gets its own session so that stopping it stops everything it started. Exit codes follow
Kubernetes: a process ended by signal N exits ``128 + N``; a command that cannot be started
exits 127 (not found) or 126 (not executable), with the reason in the log.

This executes user code as the server's user, which is only right on a one-user machine: the
backend enables it explicitly (issue 5); shared servers simulate durations instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from corral.backends.execution import task_container

#: What a task sees of the server's environment: enough to find programs, nothing else.
INHERITED = ("PATH", "LANG", "LC_ALL", "TZ")
NOT_FOUND = 127
NOT_EXECUTABLE = 126


@dataclass(frozen=True)
class ProcessSpec:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    workdir: Path
    log_path: Path


def process_spec(pod: Mapping[str, Any], workdir: Path, log_path: Path) -> ProcessSpec:
    """The process of a pod's task container (the first one that is not ``osmo-ctrl``)."""
    container = task_container(pod)
    argv = (*container.get("command", ()), *container.get("args", ()))
    env = {name: os.environ[name] for name in INHERITED if name in os.environ}
    env["HOME"] = str(workdir)
    for entry in container.get("env", ()):
        if "value" in entry:  # valueFrom (secrets, field refs) has no local meaning
            env[entry["name"]] = str(entry["value"])
    return ProcessSpec(tuple(str(part) for part in argv), env, workdir, log_path)


class LocalProcess:
    """One started task process."""

    def __init__(self, spec: ProcessSpec) -> None:
        spec.workdir.mkdir(parents=True, exist_ok=True)
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = spec.log_path.open("ab")
        self._start_failure: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        try:
            self._process = subprocess.Popen(
                spec.argv,
                env=dict(spec.env),
                cwd=spec.workdir,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except (FileNotFoundError, NotADirectoryError):
            self._fail_to_start(NOT_FOUND, f"command not found: {spec.argv[:1]}")
        except (PermissionError, OSError) as err:
            self._fail_to_start(NOT_EXECUTABLE, f"cannot run {spec.argv[:1]}: {err.strerror}")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

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
        return 128 - returncode if returncode < 0 else returncode

    def _fail_to_start(self, code: int, reason: str) -> None:
        self._log.write(f"corral: {reason}\n".encode())
        self._log.close()
        self._start_failure = code
