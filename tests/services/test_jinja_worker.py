"""Rendering in a limited subprocess: results, errors with their line, and runaway templates."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from corral.domain.workflows.template import JinjaError, render_jinja, render_workflow
from corral.errors import UserError
from corral.services.workers import sandbox
from corral.services.workers.jinja_worker import render_in_subprocess
from corral.services.workers.sandbox import (
    WALL_STRETCH,
    WORKER_NICENESS,
    Limits,
    SandboxPool,
    _Deadline,
)

BURN = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


def test_renders() -> None:
    assert render_in_subprocess("a {{ x }} {{ y | upper }}\n", {"x": 1, "y": "b"}) == "a 1 B\n"


def test_runaway_template_is_stopped_by_the_cpu_limit() -> None:
    started = time.monotonic()
    with pytest.raises(UserError) as caught:
        render_in_subprocess(BURN, {})
    assert time.monotonic() - started < 5 * WALL_STRETCH + 1  # stretched on a busy machine
    assert caught.value.message == (
        "Jinja rendering of the workflow took longer than 2 s of CPU time; simplify the template"
    )


def test_runaway_template_is_stopped_by_the_wall_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(UserError) as caught:
        render_in_subprocess(BURN, {}, timeout_seconds=1, cpu_seconds=30)
    # Stretched on a busy machine, plus starting the worker; far below the 30 s CPU limit.
    assert time.monotonic() - started < 1 * WALL_STRETCH + 4
    assert caught.value.message == (
        "Jinja rendering of the workflow took longer than 1 s; simplify the template"
    )


def test_undefined_variable_names_the_variable_and_line() -> None:
    with pytest.raises(JinjaError) as caught:
        render_in_subprocess("a\n{{ missing }}", {})
    assert caught.value.line == 2
    assert caught.value.variable == "missing"
    message = "workflow:\n  name: w\n  image: {{ missing }}\n"
    with pytest.raises(UserError) as located:
        render_workflow(message, renderer=render_in_subprocess, source="wf.yaml")
    assert located.value.message == (
        'wf.yaml:3:13: variable "missing" is undefined; give it a value with --set '
        "missing=VALUE, or under default-values: in the workflow file."
    )


def test_unsafe_attribute_access_is_a_user_error() -> None:
    with pytest.raises(UserError) as caught:
        render_workflow("workflow:\n  name: {{ ''.__class__ }}\n", renderer=render_in_subprocess)
    assert caught.value.message == (
        "workflow.yaml:2:1: Jinja Template Error: access to attribute '__class__' of 'str' "
        "object is unsafe; fix the template."
    )


def test_memory_hungry_template_is_a_user_error() -> None:
    hungry = "{% set x = ['y' * 100000] * 100000 %}{{ x | join }}"
    with pytest.raises(UserError) as caught:
        render_in_subprocess(hungry, {}, memory_bytes=256 * 2**20)
    assert "simplify the template" in caught.value.message


def test_a_worker_runs_only_the_functions_it_lists() -> None:
    """A call names its function by reference; the worker looks the name up in its own list,
    so nothing else (here ``os.getcwd``) runs there."""
    pool = SandboxPool(size=1)
    try:
        with pytest.raises(KeyError, match=r"posix:getcwd"):
            pool.call(Limits(), "t", os.getcwd)
        assert pool.call(Limits(), "t", render_jinja, "{{ 6 * 7 }}", {}) == "42"
    finally:
        pool.close()


def test_workers_run_nicer_than_the_server() -> None:
    """Under full load, rendering yields the CPU to the API and the controller."""
    pool = SandboxPool(size=1)
    try:
        assert pool.call(Limits(), "t", render_jinja, "{{ x }}", {"x": 1}) == "1"
        (worker,) = pool._idle
        expected = min(os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS, 19)
        assert os.getpriority(os.PRIO_PROCESS, worker.process.pid) == expected
    finally:
        pool.close()


def test_the_wall_time_stretches_for_a_starved_worker_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that used less CPU time than half the time passed (a busy machine starves it)
    gets up to WALL_STRETCH times its wall time; one that computes does not."""
    clock = {"now": 100.0}
    cpu = {"starved": 0.0, "busy": 0.0}
    monkeypatch.setattr(sandbox.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(sandbox, "_process_cpu", lambda pid: cpu["starved" if pid == 1 else "busy"])
    starved = _Deadline(1.0, 1, cpu_limit=5)
    busy = _Deadline(1.0, 2, cpu_limit=5)
    clock["now"], cpu["starved"], cpu["busy"] = 101.5, 0.2, 1.4
    assert busy.left() == 0
    assert starved.left() == pytest.approx(1.0)  # a second more, checked again then
    clock["now"], cpu["starved"] = 100.0 + WALL_STRETCH - 0.5, 1.0
    assert starved.left() == pytest.approx(0.5)  # never past WALL_STRETCH x 1 s
    clock["now"] = 100.0 + WALL_STRETCH
    assert starved.left() == 0
    spent = _Deadline(1.0, 1, cpu_limit=5)  # at its CPU limit (and the second of rounding)
    clock["now"], cpu["starved"] = 100.0 + WALL_STRETCH + 3, 7.0
    assert spent.left() == 0


def test_a_process_cpu_time_is_read_from_proc() -> None:
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        first = sandbox._process_cpu(spinning.pid)
        time.sleep(0.5)
        second = sandbox._process_cpu(spinning.pid)
        assert first is not None and second is not None and second > first
    finally:
        spinning.kill()
        spinning.wait()
    assert sandbox._process_cpu(spinning.pid) is None  # gone


PARENT = """
import os, sys, threading, time
from corral.domain.workflows.template import render_jinja
from corral.services.workers.sandbox import Limits, SandboxPool
pool = SandboxPool(1)
limits = Limits(cpu_seconds=60, wall_seconds=60, memory_bytes=100 * 2**20)
call = threading.Thread(
    target=pool.call, args=(limits, "burn", render_jinja, sys.argv[1], {}), daemon=True
)
call.start()
children = []
while not children:  # the worker, started by the call's thread
    time.sleep(0.05)
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        children += open(f"/proc/{os.getpid()}/task/{task}/children").read().split()
time.sleep(2)  # it has warmed up and computes the call
print(children[0], flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")
def test_a_worker_exits_when_its_server_dies_in_the_middle_of_a_call() -> None:
    """A server killed while its worker computes (a forecast may take minutes) leaves no
    worker behind: the worker sees its parent gone within a second and exits."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, BURN], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    assert _alive(worker)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
