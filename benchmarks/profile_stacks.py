"""Where the control plane's CPU goes, by process and by function: ``py-spy record`` attached
to each server (and, with ``--subprocesses``, its sandbox workers and controller process) for
one phase of ``control_plane.py --profile DIR``, and its collapsed stacks summed up.

py-spy samples only threads that are running (not idle), ``RATE`` times a second, so samples /
``RATE`` approximates CPU seconds per process kind and per function.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
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
        found = shutil.which("py-spy")
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


@dataclass
class Profile:
    """CPU samples by process kind, and by (process kind, function) for own and total time."""

    by_process: Counter[str] = field(default_factory=Counter)
    own: Counter[tuple[str, str]] = field(default_factory=Counter)
    total: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, line: str) -> None:
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            return
        count = int(count_text)
        frames = stack.split(";")
        kind = process_kind(frames[0])
        functions = [f for f in (function_of(frame) for frame in frames[1:]) if f]
        if not functions:
            return
        self.by_process[kind] += count
        self.own[(kind, functions[-1])] += count
        for function in set(functions):
            self.total[(kind, function)] += count


def process_kind(frame: str) -> str:
    found = _PROCESS.match(frame)
    command = found.group("command") if found else ""
    if "corral.services.lifecycle.process" in command:
        return "controller"
    if "sandbox_worker" in command:
        return "sandbox worker"
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


def table(profile: Profile, workflows: int, top: int = 12) -> list[str]:
    """CPU ms per workflow by process kind, then the functions that take most of it (own
    time, and total time of corral's own functions)."""
    per = 1000 / RATE / max(workflows, 1)
    lines = ["| process | CPU ms per workflow (sampled) |", "|---|---|"]
    lines += [f"| {kind} | {count * per:.2f} |" for kind, count in profile.by_process.most_common()]
    lines += ["", "| process | function (own time) | ms per workflow |", "|---|---|---|"]
    lines += [
        f"| {kind} | `{function}` | {count * per:.2f} |"
        for (kind, function), count in profile.own.most_common(top)
    ]
    corral = [(key, count) for key, count in profile.total.items() if key[1].startswith("corral.")]
    corral.sort(key=lambda item: -item[1])
    lines += ["", "| process | corral function (total time) | ms per workflow |", "|---|---|---|"]
    lines += [
        f"| {kind} | `{function}` | {count * per:.2f} |" for (kind, function), count in corral[:top]
    ]
    return lines
