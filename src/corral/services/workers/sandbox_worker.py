"""The worker side of the sandbox (``python -m corral.services.workers.sandbox_worker
MEMORY_BYTES``): warm up, cap the address space, then answer one call after another under its
CPU limits (``sandbox.py`` starts workers and talks to them)."""

from __future__ import annotations

import functools
import math
import os
import pickle
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import partial
from types import FrameType
from typing import Any

from corral.domain.jinja.rendering import RenderTooSlow, install_render_guard
from corral.errors import CorralError
from corral.services.workers.gc_settings import keep_out_of_collections, tune_gc
from corral.services.workers.sandbox import (
    FRAME_LENGTH,
    READY,
    WORKER_NICENESS,
    KeepArgument,
    UseArgument,
    function_name,
)


@functools.cache
def functions() -> dict[str, Callable[..., Any]]:
    """The functions a worker runs, by :func:`function_name` (imported in the worker only)."""
    from corral.domain.platform.render import render_pool
    from corral.domain.platform.template_checks import new_pool_problems
    from corral.domain.workflows.spec_parser import parse_workflow_spec
    from corral.domain.workflows.template import render_jinja
    from corral.scheduler.feasibility import plan_checked
    from corral.scheduler.forecast import outlook

    callable_here = (
        outlook,
        render_jinja,
        parse_workflow_spec,
        plan_checked,
        render_pool,
        new_pool_problems,
    )
    return {function_name(function): function for function in callable_here}


def _warm_up() -> None:
    """Load what calls would load lazily, before the address space is capped."""
    from corral.domain.schemas.objects import manifest_problems
    from corral.domain.topology import podgroup

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "warm"}, "spec": {}}
    manifest_problems(pod)
    manifest_problems({"apiVersion": podgroup.API_VERSION, "kind": podgroup.KIND})


def _address_space() -> int:
    """Bytes of address space this process uses now (Linux; elsewhere 0 and no cap)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def _cap_cpu(seconds: int) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = math.ceil(usage.ru_utime + usage.ru_stime)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + seconds
    if hard != resource.RLIM_INFINITY and soft >= hard:
        raise RuntimeError("the worker used up its CPU time")  # never: recycled long before
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


@contextmanager
def _cpu_deadline(seconds: float) -> Iterator[None]:
    """Interrupt what runs inside after ``seconds`` of CPU time (SIGVTALRM)."""

    def expired(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        raise RenderTooSlow(seconds)

    previous = signal.signal(signal.SIGVTALRM, expired)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def _exit_with_parent() -> None:
    """Exit as soon as the server that started this worker is gone, also in the middle of a
    call (a forecast may compute for minutes; its end of the pipe is only read between calls).
    A thread, not ``PR_SET_PDEATHSIG``: that fires when the parent's *thread* ends, and workers
    are started from request and forecast threads that come and go."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


#: How often a worker checks that its server still lives.
_PARENT_POLL_SECONDS = 0.5


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return float(usage.ru_utime + usage.ru_stime)


def _answer(function: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", functions()[function](*args, **kwargs)
    except CorralError as err:
        return "error", err
    except MemoryError:
        return "memory", None
    except Exception as err:  # a bug: sent back as it is when it can be pickled
        try:
            pickle.dumps(err)
        except Exception:
            return "crash", repr(err)
        return "crash", err


def _resolve(args: tuple[Any, ...], kept: dict[int, Any]) -> tuple[Any, ...]:
    """The arguments with every kept value in place (and new ones kept)."""
    resolved = []
    for arg in args:
        if isinstance(arg, KeepArgument):
            kept[arg.slot] = arg.value
            arg = arg.value
            keep_out_of_collections()  # configs and nodes, read by every later call
        elif isinstance(arg, UseArgument):
            arg = kept[arg.slot]
        resolved.append(arg)
    return tuple(resolved)


def main(argv: list[str]) -> int:
    memory_bytes = int(argv[1])
    kept: dict[int, Any] = {}
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the protocol
    protocol_in = sys.stdin.buffer
    _exit_with_parent()  # before the address space is capped: a thread needs its stack
    _warm_up()
    functions()
    tune_gc()
    keep_out_of_collections()
    os.nice(WORKER_NICENESS)
    used = _address_space()
    if used:
        resource.setrlimit(resource.RLIMIT_AS, (used + memory_bytes, used + memory_bytes))
    protocol_out.write(FRAME_LENGTH.pack(len(READY)) + READY)
    protocol_out.flush()
    while True:
        header = protocol_in.read(FRAME_LENGTH.size)
        if len(header) < FRAME_LENGTH.size:
            return 0
        (length,) = FRAME_LENGTH.unpack(header)
        function, args, kwargs, cpu_seconds, render_seconds = pickle.loads(protocol_in.read(length))
        args = _resolve(args, kept)
        _cap_cpu(int(cpu_seconds))
        guard = partial(_cpu_deadline, render_seconds) if render_seconds else nullcontext
        install_render_guard(guard)
        kind, value = _answer(function, args, kwargs)
        answer = pickle.dumps((kind, value, _cpu_used()))
        protocol_out.write(FRAME_LENGTH.pack(len(answer)) + answer)
        protocol_out.flush()
        if kind == "memory":
            return 1  # a fresh worker is started for the next call


if __name__ == "__main__":
    sys.exit(main(sys.argv))
