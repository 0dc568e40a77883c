"""The quick start, for real: ``corral server --demo`` runs a submitted workflow's tasks as local
processes, and the CLI shows where they ran, what they printed and how they ended."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

from tests.cli.results import succeeded
from tests.conftest import LiveServer


def query(server: LiveServer, workflow_id: str) -> dict[str, object]:
    found = json.loads(succeeded(server.cli("workflow", "query", workflow_id, "--format", "json")))
    assert isinstance(found, dict)
    return found


def wait_for_end(server: LiveServer, workflow_id: str, timeout_s: float = 60) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = query(server, workflow_id)
        if found["status"] not in ("PENDING", "RUNNING"):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.3)


def test_a_two_group_workflow_runs_as_local_processes(
    live_server: LiveServer, tmp_path: Path
) -> None:
    spec = tmp_path / "hello.yaml"
    spec.write_text(
        "workflow:\n"
        "  name: hello\n"
        "  groups:\n"
        "  - name: first\n"
        "    tasks:\n"
        "    - {name: greet, image: busybox, command: [sh, -c, 'echo hello from $WHO'],"
        " environment: {WHO: corral}}\n"
        "  - name: second\n"
        "    tasks:\n"
        "    - {name: fail, image: busybox, command: [sh, -c, 'echo oops >&2; exit 4'],"
        " inputs: [{task: greet}]}\n"
    )
    submitted = succeeded(live_server.cli("workflow", "submit", str(spec), "--pool", "default"))
    assert "hello-1" in submitted

    found = wait_for_end(live_server, "hello-1")
    assert found["status"] == "FAILED"
    groups = {g["name"]: g for g in found["groups"]}  # type: ignore[attr-defined]
    assert (groups["first"]["status"], groups["second"]["status"]) == ("COMPLETED", "FAILED")
    (greet,) = groups["first"]["tasks"]
    (fail,) = groups["second"]["tasks"]
    assert (greet["status"], greet["exit_code"], fail["exit_code"]) == ("COMPLETED", 0, 4)
    assert greet["node"] and fail["node"]

    assert succeeded(live_server.cli("workflow", "logs", "hello-1", "--task", "greet")) == (
        "hello from corral\n"
    )
    assert succeeded(live_server.cli("workflow", "logs", "hello-1")) == (
        "==> greet (retry 0) <==\nhello from corral\n\n==> fail (retry 0) <==\noops\n"
    )
    assert succeeded(live_server.cli("workflow", "explain", "hello-1")) == (
        "Workflow ID : hello-1\n"
        "Status      : FAILED (ended FAILED)\n\n"
        "first [COMPLETED]: completed: greet exited 0\n"
        "second [FAILED]: failed: fail exited 4\n"
    )

    # Restart (issue 13): a new workflow runs the group that failed; its input comes from the
    # completed group of hello-1, which is not run again.
    assert succeeded(live_server.cli("workflow", "restart", "hello-1")) == (
        "Workflow restart successful.\n"
        "Workflow ID        - hello-2\n"
        "Restarted from     - hello-1\n"
        f"Workflow Overview  - {live_server.url}/ui/workflows/hello-2\n"
    )
    again = wait_for_end(live_server, "hello-2")
    assert [g["name"] for g in again["groups"]] == ["second"]  # type: ignore[attr-defined]
    assert again["restarted_from"] == "hello-1"
    assert "task: hello-1:greet" in str(again["spec"])
    assert succeeded(live_server.cli("workflow", "logs", "hello-2", "--task", "fail")) == "oops\n"


def test_localpath_files_are_sent_with_the_workflow(
    live_server: LiveServer, tmp_path: Path
) -> None:
    (tmp_path / "train.cfg").write_text("lr = 0.1\n")
    (tmp_path / "weights.bin").write_bytes(bytes(range(256)))
    spec = tmp_path / "files.yaml"
    spec.write_text(
        "workflow:\n"
        "  name: files\n"
        "  tasks:\n"
        "  - name: show\n"
        "    image: busybox\n"
        "    command: [sh, -c, 'cat /cfg/train.cfg']\n"
        "    files:\n"
        "    - {path: /cfg/train.cfg, localpath: train.cfg}\n"
        "    - {path: /cfg/weights.bin, localpath: weights.bin}\n"
    )
    found = json.loads(
        succeeded(
            live_server.cli(
                "workflow",
                "submit",
                str(spec),
                "--pool",
                "robotics-inference",  # a simulated backend: its pods mount the files
                "--dry-run",
                "--format",
                "json",
            )
        )
    )
    [secret] = [m for m in found["groups"][0]["manifests"] if m["kind"] == "Secret"]
    local = live_server.cli("workflow", "submit", str(spec), "--pool", "default")
    assert local.returncode != 0  # its local processes have no pod to mount them in
    assert (
        "Task show has files (/cfg/train.cfg ...), which pool default cannot place: its "
        "backend default runs tasks as local processes on the server's machine"
    ) in local.stderr
    assert sorted(base64.b64decode(v) for v in secret["data"].values()) == sorted(
        [b"lr = 0.1\n", bytes(range(256))]
    )
    (tmp_path / "train.cfg").unlink()
    missing = live_server.cli("workflow", "submit", str(spec), "--pool", "robotics-inference")
    assert missing.returncode != 0
    assert "The file/path train.cfg does not exist!" in missing.stderr
