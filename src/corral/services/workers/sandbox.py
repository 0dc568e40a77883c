"""Templates render in worker processes, bounded in CPU time, memory and wall time.

Workflow files, pod templates, group templates and resource rules are Jinja written by users
and admins. Jinja's sandbox stops unsafe attribute access, but not
``{% for i in range(100000) %}{% for j in range(100000) %}``, nor a string doubled thirty times;
a Python thread cannot be stopped from outside, and a process cannot cap one thread's memory.
So, as OSMO does with its sandbox pool, every function that renders templates runs in a worker
process (``python -m corral.services.workers.sandbox_worker``, never a shell):

- **memory**: the worker imports and warms everything it needs, then caps its address space at
  what it uses plus the limit (``RLIMIT_AS``): a template that needs more gets MemoryError, and
  the worker is replaced;
- **CPU time**: before each call the worker sets ``RLIMIT_CPU`` to the CPU time it has used
  plus the limit; the kernel kills it (SIGXCPU) when a call overruns;
- **wall time**: the server stops waiting, kills the worker (SIGKILL) and starts another;
- **priority**: workers run at a higher niceness than the server (:data:`WORKER_NICENESS`).

Workers are kept between calls (starting Python and importing corral takes a few hundred
milliseconds; a call takes about one), ``size`` of them, and calls wait for a free one. A call
names its function by reference (``sandbox.run(..., render_pool, state, pool)``), so that
readers and mypy see which function runs with which arguments; only its name travels, and only
the functions in ``sandbox_worker.functions`` can be called.
Arguments and results travel as pickles over the worker's stdin and stdout; exceptions that
are user errors come back as they were raised. An argument passed through :func:`kept` (the
configs, a cluster's nodes) is sent to a worker once and named in later calls: pickling 5,000
nodes for every submission cost more than planning it.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any, ParamSpec, TypeVar, cast

from corral.domain.configs.workflow_models import WorkflowConfig
from corral.errors import UserError

#: Workers kept per server process (OSMO's default sandbox pool has 2).
POOL_SIZE = 2
#: CPU seconds one call may take in all: a backstop, as every value it renders has its own
#: limit and the rest of the work grows with the size of the (bounded) request.
CALL_CPU_SECONDS = 30
#: The least memory a call may use beyond what the worker itself holds, whatever the WORKFLOW
#: config says (its default, as OSMO's, is 100 MiB).
MIN_MEMORY = 32 * 2**20
#: A worker that has used this much CPU time in all is replaced after its call (RLIMIT_CPU
#: counts the whole process; this keeps the arithmetic far from any overflow and clears caches).
_RECYCLE_CPU_SECONDS = 3600
FRAME_LENGTH = struct.Struct("!Q")
READY = b"ready"
#: How long a new worker may take to import and warm up.
_START_SECONDS = 60.0
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

#: Arguments a worker keeps between calls (:class:`Kept`), the oldest replaced first.
_KEPT_SLOTS = 4
#: A call's wall-time limit may grow up to this many times while its worker is starved of CPU
#: (:class:`_Deadline`).
WALL_STRETCH = 6
#: Workers run this much nicer than the server: when the machine is busy, rendering new
#: submissions yields the CPU to the API and the lifecycle controller, so that work already
#: admitted keeps being placed (a backlog of placements otherwise grew for as long as the
#: clients kept submitting), and a hostile template slows only other submissions.
WORKER_NICENESS = 10


@dataclass(frozen=True)
class Limits:
    """What one call may use: CPU seconds, wall seconds, memory beyond the worker's own, and
    CPU seconds for each template value it renders (None: no limit per value)."""

    cpu_seconds: int = 2
    wall_seconds: float = 5.0
    memory_bytes: int = 256 * 2**20
    render_seconds: float | None = None


def workflow_limits(workflow_config: WorkflowConfig) -> Limits:
    """The WORKFLOW config's ``user_workflow_limits`` for rendering pool templates: each value
    may take ``jinja_sandbox_max_time`` of CPU time (as OSMO's sandbox), the renders of one
    call together at most :data:`CALL_CPU_SECONDS`, in ``jinja_sandbox_memory_limit``."""
    max_time, memory = _user_limits(workflow_config)
    return Limits(
        cpu_seconds=CALL_CPU_SECONDS,
        wall_seconds=2.0 * CALL_CPU_SECONDS,
        memory_bytes=memory,
        render_seconds=max_time,
    )


def workflow_jinja_limits(workflow_config: WorkflowConfig) -> Limits:
    """The same settings for a workflow file's Jinja, rendered as one text: its CPU time
    rounded up plus a second of slack, wall time max(5 s, 4 x that time), the same memory."""
    max_time, memory = _user_limits(workflow_config)
    return Limits(
        cpu_seconds=math.ceil(max_time) + 1,
        wall_seconds=max(5.0, 4 * max_time),
        memory_bytes=memory,
    )


def _user_limits(workflow_config: WorkflowConfig) -> tuple[float, int]:
    """``jinja_sandbox_max_time`` (seconds) and ``jinja_sandbox_memory_limit`` (bytes, at least
    :data:`MIN_MEMORY`) of the WORKFLOW config's ``user_workflow_limits``."""
    limits = workflow_config.user_workflow_limits
    return limits.jinja_sandbox_max_time, max(limits.jinja_sandbox_memory_limit, MIN_MEMORY)


@dataclass(frozen=True, eq=False)
class Kept:
    """An argument a worker keeps once it has it: the same object (by identity) is then
    named instead of pickled again. For values that are read-only and used by many calls."""

    value: Any


def kept(value: T) -> T:
    """``value``, to be kept by the worker once it has it (:class:`Kept`). Typed as the value
    itself: the worker hands the function the value, so that is what mypy checks."""
    return cast(T, Kept(value))


def function_name(function: Callable[..., Any]) -> str:
    """How a call names its function to a worker: module and qualified name."""
    return f"{function.__module__}:{function.__qualname__}"


@dataclass(frozen=True)
class KeepArgument:
    """Worker side: keep ``value`` in ``slot`` and use it."""

    slot: int
    value: Any


@dataclass(frozen=True)
class UseArgument:
    """Worker side: use what ``slot`` holds."""

    slot: int


class SandboxPool:
    """Worker processes that run ``sandbox_worker.functions`` under :class:`Limits`."""

    def __init__(self, size: int = POOL_SIZE) -> None:
        #: At most this many workers run at once (the WORKFLOW config may change it).
        self.size = size
        self._idle: list[_Worker] = []
        self._running = 0
        self._changed = threading.Condition()
        self._closed = False

    def call(
        self,
        limits: Limits,
        what: str,
        function: Callable[P, R],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """``function(*args, **kwargs)`` in a worker (one of ``sandbox_worker.functions``);
        ``what`` names the work in errors ("Jinja rendering of the workflow")."""
        worker = self._take(limits.memory_bytes)
        try:
            found: R = worker.call(function_name(function), args, kwargs, limits, what)
            return found
        finally:
            self._give_back(worker)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()

    def _take(self, memory_bytes: int) -> _Worker:
        with self._changed:
            while not self._closed and not self._idle and self._running >= self.size:
                self._changed.wait()
            if self._closed:
                raise RuntimeError("the sandbox pool is closed")
            self._running += 1
            found = self._idle.pop() if self._idle else None
        if found is not None and found.usable(memory_bytes):
            return found
        if found is not None:
            found.kill()
        try:
            return _Worker(memory_bytes)
        except BaseException:
            with self._changed:
                self._running -= 1
                self._changed.notify()
            raise

    def _give_back(self, worker: _Worker) -> None:
        with self._changed:
            self._running -= 1
            if worker.alive() and not self._closed:
                self._idle.append(worker)
            else:
                worker.kill()
            self._changed.notify()


_default: SandboxPool | None = None
_default_lock = threading.Lock()


def default_pool() -> SandboxPool:
    """The server process's pool, started on first use and stopped at exit."""
    global _default
    with _default_lock:
        if _default is None:
            _default = SandboxPool()
            atexit.register(_default.close)
        return _default


def run(
    workflow_config: WorkflowConfig,
    what: str,
    function: Callable[P, R],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> R:
    """``function(*args, **kwargs)`` in the server's pool, with the WORKFLOW config's limits
    and worker count; ``what`` names the work in errors."""
    pool = default_pool()
    pool.size = workflow_config.user_workflow_limits.jinja_sandbox_workers
    limits = workflow_limits(workflow_config)
    return pool.call(limits, what, function, *args, **kwargs)


# ---------------------------------------------------------------------------------- parent


class _Worker:
    def __init__(self, memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        self.process = subprocess.Popen(
            [sys.executable, "-m", "corral.services.workers.sandbox_worker", str(memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self.cpu_used = 0.0
        assert self.process.stdout is not None
        #: Made once: a selector per message read cost three system calls more.
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        #: Per slot of the worker: the object it holds (referenced here, so that no other
        #: object can take its identity while the slot names it) and the call that last used it.
        self._slots: list[Any] = []
        self._last_use: list[int] = []
        self._calls = 0
        try:  # the worker says it is ready once it has imported and warmed up
            ready = self._read(_Deadline(_START_SECONDS))
        except TimeoutError:
            ready = None
        if ready != READY:
            self.kill()
            raise RuntimeError("a sandbox worker did not start")
        self.cpu_used = _process_cpu(self.process.pid) or 0.0  # its imports and warm-up

    def usable(self, memory_bytes: int) -> bool:
        return (
            self.alive()
            and memory_bytes == self.memory_bytes
            and self.cpu_used < _RECYCLE_CPU_SECONDS
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        self._selector.close()
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()

    def _read(self, deadline: _Deadline) -> bytes | None:
        """The worker's next length-prefixed message, or None if it exited; TimeoutError past
        ``deadline``."""
        assert self.process.stdout is not None
        stream = self.process.stdout
        header = _read_exactly(stream, FRAME_LENGTH.size, deadline, self._selector)
        if header is None:
            return None
        (length,) = FRAME_LENGTH.unpack(header)
        return _read_exactly(stream, length, deadline, self._selector)

    def call(
        self,
        function: str,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        limits: Limits,
        what: str,
    ) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        sent = tuple(self._send(arg) for arg in args)
        request = pickle.dumps(
            (function, sent, dict(kwargs), limits.cpu_seconds, limits.render_seconds)
        )
        deadline = _Deadline(
            limits.wall_seconds, self.process.pid, limits.cpu_seconds, cpu_at_start=self.cpu_used
        )
        try:
            self.process.stdin.write(FRAME_LENGTH.pack(len(request)) + request)
            self.process.stdin.flush()
            answer = self._read(deadline)
        except BrokenPipeError:
            answer = None
        except TimeoutError:
            self.kill()
            message = f"{what} took longer than {limits.wall_seconds:g} s; {_SIMPLIFY}"
            raise UserError(message) from None
        if answer is None:
            raise self._died(limits, what)
        kind, value, cpu_used = pickle.loads(answer)
        self.cpu_used = cpu_used
        if kind == "ok":
            return value
        if kind == "memory":
            self.kill()
            raise UserError(f"{what} needed more than {_mib(limits.memory_bytes)}; {_SIMPLIFY}")
        if isinstance(value, BaseException):
            raise value
        raise RuntimeError(f"{what} failed in the sandbox worker: {value}")

    def _send(self, arg: Any) -> Any:
        """What to pickle for ``arg``: a :class:`Kept` value as a slot the worker holds, or
        with the slot to keep it in (the oldest one)."""
        if not isinstance(arg, Kept):
            return arg
        self._calls += 1
        for slot, held in enumerate(self._slots):
            if held is arg.value:
                self._last_use[slot] = self._calls
                return UseArgument(slot)
        if len(self._slots) < _KEPT_SLOTS:
            self._slots.append(None)
            self._last_use.append(0)
        slot = min(range(len(self._slots)), key=self._last_use.__getitem__)
        self._slots[slot], self._last_use[slot] = arg.value, self._calls
        return KeepArgument(slot, arg.value)

    def _died(self, limits: Limits, what: str) -> UserError:
        code = self.process.wait()
        if code == -signal.SIGXCPU:
            return UserError(
                f"{what} took longer than {limits.cpu_seconds} s of CPU time; {_SIMPLIFY}"
            )
        return UserError(
            f"{what} failed (the renderer exited with code {code}, probably over its limit "
            f"of {_mib(limits.memory_bytes)} of memory); {_SIMPLIFY}"
        )


_SIMPLIFY = "simplify the template"


def _mib(size: int) -> str:
    return f"{size // 2**20} MiB"


class _Deadline:
    """A call's wall-time limit. Stretched, up to :data:`WALL_STRETCH` times, while the worker
    computes slower than it would alone (less CPU time than 90% of the time that passed) and has
    not used up its CPU limit (plus the second ``RLIMIT_CPU`` may round it up by): a busy
    machine starves the (nicer) workers, and then the CPU limit, not the machine's load, should
    decide whether a template took too long."""

    def __init__(
        self,
        seconds: float,
        pid: int | None = None,
        cpu_limit: float = 0.0,
        *,
        cpu_at_start: float | None = None,
    ) -> None:
        self.started = time.monotonic()
        self.end = self.started + seconds
        self.hard_end = self.started + seconds * (WALL_STRETCH if pid is not None else 1)
        self.pid = pid
        self.cpu_limit = cpu_limit
        if cpu_at_start is None and pid is not None:
            cpu_at_start = _process_cpu(pid)
        #: The worker's CPU time when the call began: as it said at the end of its last call
        #: (reading /proc for it at every call was half of the server's own work in a call).
        self.cpu_at_start = cpu_at_start

    def left(self) -> float:
        now = time.monotonic()
        if now < self.end:
            return self.end - now
        if now < self.hard_end and self._starved(now):
            self.end = min(self.hard_end, now + 1.0)
            return self.end - now
        return 0.0

    def _starved(self, now: float) -> bool:
        if self.pid is None or self.cpu_at_start is None:
            return False
        cpu = _process_cpu(self.pid)
        if cpu is None:
            return False
        used = cpu - self.cpu_at_start
        return used < self.cpu_limit + 1 and used < 0.9 * (now - self.started)


def _process_cpu(pid: int) -> float | None:
    """CPU seconds process ``pid`` used so far (Linux ``/proc``; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _read_exactly(
    stream: IO[bytes], size: int, deadline: _Deadline, selector: selectors.BaseSelector
) -> bytes | None:
    """``size`` bytes of ``stream`` (registered with ``selector``), or None at end of file;
    TimeoutError past ``deadline``."""
    chunks: list[bytes] = []
    missing = size
    while missing:
        left = deadline.left()
        if left <= 0 or not selector.select(left):
            if deadline.left() > 0:
                continue  # stretched: the worker is starved, not stuck
            raise TimeoutError
        chunk = os.read(stream.fileno(), min(missing, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
