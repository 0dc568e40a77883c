"""Where the control plane's CPU goes, by process and by function: ``py-spy record`` attached
to each server (and, with ``--subprocesses``, its sandbox workers and controller process) for
one phase of ``control_plane.py --profile DIR``, and its collapsed stacks summed up.

py-spy samples the threads that are not idle ``RATE`` times a second; samples that end where a
thread waits (:data:`WAITING`) are left out, and the rest are given as shares: where the CPU
time of the phase went, by process kind and by function.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

RATE = 100
_PROCESS = re.compile(r'^process \d+:"(?P<command>[^"]*)"')
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^():]+)(?::\d+)?\)$")


class Recorder:
    """``py-spy record`` on each of ``pids`` and their subprocesses until :meth:`stop`."""

    def __init__(self, directory: Path, name: str, pids: Sequence[int]) -> None:
        beside = Path(sys.executable).parent / "py-spy"  # in this virtual environment
        found = str(beside) if beside.exists() else shutil.which("py-spy")
        if found is None:
            raise RuntimeError("--profile needs py-spy (pip install py-spy)")
        directory.mkdir(parents=True, exist_ok=True)
        self.outputs = [directory / f"{name}-{pid}.txt" for pid in pids]
        self._processes = [
            subprocess.Popen(
                [
                    found,
                    "record",
                    "--pid",
                    str(pid),
                    "--subprocesses",
                    "--nonblocking",
                    "--rate",
                    str(RATE),
                    "--format",
                    "raw",
                    "--output",
                    str(output),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for pid, output in zip(pids, self.outputs, strict=True)
        ]

    def stop(self) -> list[Path]:
        """Stop recording (py-spy writes its file on SIGINT); the files written."""
        for process in self._processes:
            process.send_signal(signal.SIGINT)
        for process in self._processes:
            process.wait(timeout=60)
        return [output for output in self.outputs if output.exists()]


#: Where a thread waits, not works: samples ending here are left out (a worker's own frame
#: is its read of the next call; ``_holding``'s is the SQLite writers' lock).
WAITING = frozenset(
    {
        "threading.Condition.wait",
        "threading.Event.wait",
        "selectors.EpollSelector.select",
        "time.sleep",
        "corral.services.workers.sandbox_worker.main",
        "corral.store.database._holding",
    }
)


@dataclass
class Profile:
    """CPU samples by process kind, and by (process kind, function) for own and total time."""

    by_process: Counter[str] = field(default_factory=Counter)
    own: Counter[tuple[str, str]] = field(default_factory=Counter)
    total: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def samples(self) -> int:
        return sum(self.by_process.values())

    def add(self, line: str) -> None:
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            return
        frames = stack.split(";")
        # a subprocess's frames follow its own "process" frame, nested in its parent's
        last = max(i for i, frame in enumerate(frames) if _PROCESS.match(frame) or i == 0)
        functions = [function_of(frame) for frame in frames[last + 1 :]]
        if not functions or functions[-1] in WAITING:
            return
        kind = process_kind(frames[last], functions)
        count = int(count_text)
        self.by_process[kind] += count
        self.own[(kind, functions[-1])] += count
        for function in set(functions):
            self.total[(kind, function)] += count


def process_kind(frame: str, functions: Sequence[str]) -> str:
    """The server, its sandbox workers (the forecast's has a larger memory limit), or its
    controller (a process on PostgreSQL, a thread of the server on SQLite)."""
    found = _PROCESS.match(frame)
    command = found.group("command") if found else ""
    if "sandbox_worker" in command:
        return "sandbox worker"
    if "corral.services.lifecycle.process" in command or any(
        f.endswith(".run_controller") for f in functions
    ):
        return "controller"
    return "server"


def function_of(frame: str) -> str:
    """``module.function`` of a frame: corral's by its module path, others by file name."""
    found = _FRAME.match(frame.strip())
    if found is None:
        return frame.strip()
    path = found.group("file")
    marker = "corral/"
    if marker in path:
        module = path[path.rindex(marker) :].removesuffix(".py").replace("/", ".")
    else:
        module = Path(path).stem
    return f"{module}.{found.group('function')}"


def read_profiles(files: Iterable[Path]) -> Profile:
    profile = Profile()
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            profile.add(line)
    return profile


def table(profile: Profile, top: int = 12) -> list[str]:
    """Shares of the sampled CPU time: by process kind, then the functions that take most of
    it (own time; and total time of corral's own functions)."""
    share = 100 / max(profile.samples, 1)
    lines = ["| process | share of sampled CPU |", "|---|---|"]
    lines += [
        f"| {kind} | {count * share:.0f}% |" for kind, count in profile.by_process.most_common()
    ]
    lines += ["", "| process | function (own time) | share |", "|---|---|---|"]
    lines += [
        f"| {kind} | `{function}` | {count * share:.1f}% |"
        for (kind, function), count in profile.own.most_common(top)
    ]
    corral = [(key, count) for key, count in profile.total.items() if key[1].startswith("corral.")]
    corral.sort(key=lambda item: -item[1])
    lines += ["", "| process | corral function (total time) | share |", "|---|---|---|"]
    lines += [
        f"| {kind} | `{function}` | {count * share:.1f}% |"
        for (kind, function), count in corral[:top]
    ]
    return lines
