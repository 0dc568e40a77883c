"""Local-process execution with real processes: exit codes, logs, env, stopping, and surviving
a server that dies at any moment (new executor objects, a runner never spawned or killed)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from corral.backends.embedded import local_execution
from corral.backends.embedded.local_execution import (
    BACKEND_ERROR,
    RUNNER_DIED,
    LocalProcessExecution,
)
from corral.backends.embedded.task_sandbox import UNCONFINED
from corral.backends.execution import Exit, TaskRun

NOW = datetime(2025, 1, 1, tzinfo=UTC)
DEADLINE_SECONDS = 5.0


def shell_pod(script: str, **env: str) -> dict[str, Any]:
    container = {
        "name": "task",
        "image": "x",
        "command": ["sh", "-c", script],
        "env": [{"name": "A", "value": "1"}] + [{"name": k, "value": v} for k, v in env.items()],
    }
    return {"metadata": {"name": "p"}, "spec": {"containers": [container]}}


def task_run(pod: dict[str, Any], uuid: str = "t1", retry_id: int = 0) -> TaskRun:
    return TaskRun(uuid, retry_id, pod, NOW)


def wait_exit(executor: LocalProcessExecution, run: TaskRun) -> Exit:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (ended := executor.poll(run, NOW)) is None:
        assert time.monotonic() < deadline, "the task did not end in time"
        time.sleep(0.02)
    return ended


def wait_for(path: Path) -> str:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.01)
    return path.read_text()


def our_processes(root: Path) -> list[int]:
    """Live processes with ``root`` in their argv (runners) or as their cwd (tasks)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd") if (entry / "cwd").exists() else ""
            if str(root).encode() in argv or cwd.startswith(str(root)):
                found.append(int(entry.name))
    return found


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[LocalProcessExecution]:
    root = tmp_path / "runs"
    yield LocalProcessExecution(root, UNCONFINED)
    deadline = time.monotonic() + 2
    while (left := our_processes(root)) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in left:  # clean up, then fail
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "processes left running"


@pytest.mark.parametrize("code", [0, 3])
def test_exit_code_logs_and_env(executor: LocalProcessExecution, code: int) -> None:
    run = task_run(shell_pod(f'echo "A=$A B=$B"; echo err >&2; exit {code}', B="two words"))
    executor.start(run)
    assert wait_exit(executor, run) == Exit(code)
    assert executor.logs(run) == "A=1 B=two words\nerr\n"


def test_a_missing_command_exits_127(executor: LocalProcessExecution) -> None:
    pod = shell_pod("")
    pod["spec"]["containers"][0]["command"] = ["no-such-program-xyz"]
    run = task_run(pod)
    executor.start(run)
    assert wait_exit(executor, run) == Exit(127)
    assert executor.logs(run) == "corral: command not found: ('no-such-program-xyz',)\n"


def test_stop_ends_a_running_task_with_143(executor: LocalProcessExecution) -> None:
    run = task_run(shell_pod("echo up; sleep 30"))
    executor.start(run)
    wait_for(executor.attempt_dir(run) / "task.log")
    assert executor.poll(run, NOW) is None
    executor.stop(run)
    assert wait_exit(executor, run) == Exit(143)
    executor.stop(run)  # again: nothing happens
    assert executor.poll(run, NOW) == Exit(143)


def test_starting_twice_runs_the_command_once(
    executor: LocalProcessExecution, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    run = task_run(shell_pod(f"echo once >> {ran}; sleep 0.2"))
    executor.start(run)
    executor.start(run)
    LocalProcessExecution(executor.root, UNCONFINED).start(run)
    assert wait_exit(executor, run) == Exit(0)
    assert ran.read_text() == "once\n"


def test_a_new_executor_on_the_same_root_follows_a_running_task(
    executor: LocalProcessExecution, tmp_path: Path
) -> None:
    run = task_run(shell_pod("sleep 0.3; echo done; exit 4"))
    executor.start(run)
    assert executor.poll(run, NOW) is None
    restarted = LocalProcessExecution(executor.root, UNCONFINED)
    assert restarted.poll(run, NOW) is None
    assert wait_exit(restarted, run) == Exit(4)
    assert restarted.logs(run) == "done\n"


def test_a_runner_never_spawned_is_spawned_by_poll(
    executor: LocalProcessExecution, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = tmp_path / "ran"
    run = task_run(shell_pod(f"echo once >> {ran}"))
    with monkeypatch.context() as server_dies:  # killed after writing the spec
        server_dies.setattr(local_execution, "spawn_runner", lambda attempt: None)
        executor.start(run)
    assert (executor.attempt_dir(run) / "spec.json").exists()
    restarted = LocalProcessExecution(executor.root, UNCONFINED)
    assert wait_exit(restarted, run) == Exit(0)
    assert ran.read_text() == "once\n"


def test_stop_before_the_runner_came_up_means_the_task_never_runs(
    executor: LocalProcessExecution, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = tmp_path / "ran"
    run = task_run(shell_pod(f"touch {ran}"))
    with monkeypatch.context() as server_dies:
        server_dies.setattr(local_execution, "spawn_runner", lambda attempt: None)
        executor.start(run)
    executor.stop(run)
    assert wait_exit(executor, run) == Exit(143)
    assert not ran.exists()
    assert executor.logs(run) == "corral: stopped before the task started\n"


def test_a_killed_runner_is_a_backend_error(
    executor: LocalProcessExecution, tmp_path: Path
) -> None:
    task_pid = tmp_path / "task-pid"
    run = task_run(shell_pod(f"echo $$ > {task_pid}; exec sleep 30"))
    executor.start(run)
    runner = int(wait_for(executor.attempt_dir(run) / "started"))
    task = int(wait_for(task_pid))
    os.kill(runner, signal.SIGKILL)
    os.killpg(task, signal.SIGKILL)
    assert wait_exit(executor, run) == Exit(BACKEND_ERROR, RUNNER_DIED)
    executor.stop(run)  # nothing to stop, and no stranger signalled
    assert executor.poll(run, NOW) == Exit(BACKEND_ERROR, RUNNER_DIED)


def test_stop_after_the_end_changes_nothing(executor: LocalProcessExecution) -> None:
    run = task_run(shell_pod("echo hi"))
    executor.start(run)
    assert wait_exit(executor, run) == Exit(0)
    executor.stop(run)
    assert executor.poll(run, NOW) == Exit(0)
    assert not (executor.attempt_dir(run) / "stop").exists()


def test_before_start_poll_waits_and_stop_and_logs_do_nothing(
    executor: LocalProcessExecution,
) -> None:
    run = task_run(shell_pod("exit 0"))
    assert executor.poll(run, NOW) is None
    executor.stop(run)
    assert executor.logs(run) == ""
    assert not executor.root.exists()


def test_attempts_are_private_directories_with_the_spec(executor: LocalProcessExecution) -> None:
    run = task_run(shell_pod("exit 0"), uuid="abc", retry_id=2)
    executor.start(run)
    assert wait_exit(executor, run) == Exit(0)
    attempt = executor.root / "abc" / "2"
    assert executor.attempt_dir(run) == attempt
    assert attempt.stat().st_mode & 0o777 == 0o700
    assert (executor.root / "abc").stat().st_mode & 0o777 == 0o700
    spec = json.loads((attempt / "spec.json").read_text())
    assert spec["argv"] == ["sh", "-c", "exit 0"]
    assert spec["env"]["A"] == "1"
    assert spec["workdir"] == str(attempt / "work")


@pytest.mark.parametrize("uuid", ["", ".", "..", "../x", "a/b"])
def test_a_task_uuid_cannot_leave_the_root(executor: LocalProcessExecution, uuid: str) -> None:
    with pytest.raises(ValueError):
        executor.start(task_run(shell_pod("exit 0"), uuid=uuid))


def test_logs_show_the_last_mebibyte(executor: LocalProcessExecution) -> None:
    size = (1 << 20) + 10
    run = task_run(shell_pod(f"head -c {size} /dev/zero | tr '\\0' x"))
    executor.start(run)
    assert wait_exit(executor, run) == Exit(0)
    first, rest = executor.logs(run).split("\n", 1)
    assert first == f"corral: log truncated, showing the last {1 << 20} of {size} bytes"
    assert rest == "x" * (1 << 20)


@pytest.mark.parametrize(
    "runner", ["corral.backends.embedded.task_runner", "corral.backends.task_runner"]
)
def test_the_task_runner_starts_without_the_config_models(runner: str) -> None:
    """The controller waits for each runner's first process, which forks only once its
    imports are done: pydantic, jsonschema and the config models (about 0.4 s of imports)
    made local tasks start two a second. The runner's old name imports no more."""
    code = (
        f"import sys, {runner}; "
        "print(sorted(m for m in ('pydantic', 'jsonschema', 'jinja2', 'yaml', "
        "'corral.domain.configs.models') if m in sys.modules))"
    )
    found = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True
    )
    assert found.stdout == "[]\n"


def test_the_runner_answers_by_its_old_name() -> None:
    """``python -m corral.backends.task_runner`` still runs the runner (it moved to
    ``backends/embedded/``): without an attempt directory it prints its usage and exits 2."""
    found = subprocess.run(
        [sys.executable, "-P", "-m", "corral.backends.task_runner"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (found.returncode, found.stderr) == (
        2,
        "usage: python -m corral.backends.embedded.task_runner ATTEMPT_DIR\n",
    )
