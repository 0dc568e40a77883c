"""Tasks as real local processes: command, args, env, logs, exit codes, stopping."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from corral.backends.embedded.local_processes import LocalProcess, process_spec


def pod(command: list[str], args: list[str] | None = None, **env: str) -> dict[str, Any]:
    user = {
        "name": "main",
        "image": "busybox",
        "command": command,
        "args": args or [],
        "env": [{"name": k, "value": v} for k, v in env.items()]
        + [{"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
    }
    return {"spec": {"containers": [{"name": "osmo-ctrl", "image": "ctrl"}, user]}}


def start(tmp_path: Path, manifest: dict[str, Any]) -> tuple[LocalProcess, Path]:
    log = tmp_path / "logs" / "main.log"
    return LocalProcess(process_spec(manifest, tmp_path / "work", log)), log


def test_runs_command_and_args_with_the_pod_env_and_captures_the_log(tmp_path: Path) -> None:
    script = 'echo "rank=$RANK home=$HOME secret=${FROM_SECRET-unset}"; echo oops >&2; exit 3'
    process, log = start(tmp_path, pod(["sh", "-c"], [script], RANK="2"))
    assert process.wait(10) == 3
    assert log.read_text() == f"rank=2 home={tmp_path / 'work'} secret=unset\noops\n"


def test_a_missing_command_exits_127_with_the_reason_in_the_log(tmp_path: Path) -> None:
    process, log = start(tmp_path, pod(["no-such-program-xyz"]))
    assert process.poll() == 127
    assert log.read_text() == "corral: command not found: ('no-such-program-xyz',)\n"


def test_stop_ends_the_process_and_its_children_with_128_plus_the_signal(tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    script = f"(sleep 30; touch {marker}) & sleep 30"
    process, _ = start(tmp_path, pod(["sh", "-c", script]))
    assert process.wait(0.2) is None
    started = time.monotonic()
    assert process.stop(grace_seconds=2) == 128 + 15
    assert time.monotonic() - started < 5
    time.sleep(0.2)
    assert not marker.exists()


def test_a_process_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    process, _ = start(tmp_path, pod(["sh", "-c", "trap '' TERM; sleep 30"]))
    time.sleep(0.2)
    assert process.stop(grace_seconds=0.5) == 128 + 9
